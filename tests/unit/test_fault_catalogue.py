"""docs/reliability.md's table is rendered from the faults suite's committed records, which run the catalogue
(bench/failures/catalogue.py): the records must hold a row for every case the catalogue lists on that machine,
and none for a case it no longer lists, with the exit code the catalogue expects."""

from __future__ import annotations

import json
from pathlib import Path

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
