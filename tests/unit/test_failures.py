"""docs/reliability.md's table is rendered from the faults suite's committed records, which run the catalogue
(bench/failures/): the records must hold a row for every case the catalogue lists on that machine,
and none for a case it no longer lists, with the exit code the catalogue expects."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from bench.failures import inputs
from bench.failures.case import FaultCase, run_case
from bench.failures.catalogue import every_case

RECORDS = Path(__file__).resolve().parents[2] / "docs/results/cpu-2core/faults/records.jsonl"


def recorded() -> dict[str, dict]:
    rows = [json.loads(line) for line in RECORDS.read_text().splitlines() if line.strip()]
    return {r["case"]: r["params"] for r in rows if r["suite"] == "faults" and r["params"] and "exit" in r["params"]}


def test_the_reliability_table_covers_the_catalogue_and_nothing_else():
    manifest = json.loads((RECORDS.parent / "manifest.json").read_text())
    ranks = manifest.get("ranks") or 3
    cases = {c.name: c for c in every_case(ranks, False, ["mpiexec"])}
    rows = recorded()
    assert set(cases) == set(rows), set(cases) ^ set(rows)
    for name, case in cases.items():
        code = rows[name]["exit"]
        assert (code == case.expect) if case.expect is not None else code != 0, (name, code, case.expect)


CATALOGUES = [every_case(ranks, gpu, ["mpiexec"]) for ranks in (2, 3, 4) for gpu in (False, True)]


def test_every_case_names_the_phrase_its_output_must_hold():
    """An exit code alone passes for the wrong reason (a missing file exits 2 too): each case says its cause."""
    for cases in CATALOGUES:
        for case in cases:
            assert case.says and all(p.strip() for p in case.says), case.name


def test_a_fault_on_one_rank_is_named_by_its_rank():
    for cases in CATALOGUES:
        for case in cases:
            rank = re.search(r"rank=(\d+)", case.fault or "")
            if rank:
                assert any(f"rank {rank[1]} on {{host}}" in p for p in case.says), case.name


def test_a_bad_input_is_named_by_its_file():
    files = [case for case in inputs.cases(3) if "input" in case.config]
    assert len(files) >= 10
    for case in files:
        path = case.config["input"].get("path") or case.config["input"]["shards"][-1]
        assert any(path in p for p in case.says), case.name


def test_a_case_whose_output_lacks_its_phrase_fails(tmp_path):
    """run_case holds a case to its phrases: the right exit code with another message fails."""
    (tmp_path / "x.h5").write_bytes(b"")
    driver = "import sys\nprint('spmd: error: rank 0 on h: nope.h5: no such file', file=sys.stderr)\nsys.exit(2)\n"
    case = FaultCase("exits 2 with another cause", driver=driver, ranks=0, expect=2, says=("1-D",))
    row = run_case(tmp_path, [], 1, "cpu", case)
    assert row["exit"] == 2 and not row["ok"] and "'1-D'" in row["problem"], row
    row = run_case(tmp_path, [], 1, "cpu", dataclasses.replace(case, name="its own cause", says=("no such file",)))
    assert row["ok"] and row["problem"] is None, row
