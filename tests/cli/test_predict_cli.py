"""``spmd predict`` started as a user starts it: a recorded sweep carried to a target into the report, a target's
links or keys refused naming the cause, and a scaling.json of an earlier schema read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINKS = ROOT / "tests/fixtures/links"
SWEEP = ROOT / "tests/fixtures/reports/gpu-kmeans-scaling.json"  # a real sweep (2 H200s)


def spmd(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "spmd", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_predict_end_to_end_into_the_report(tmp_path):
    """A recorded GPU sweep carried to 2 nodes of 2 GPUs: rows at 2 and 4 ranks, the report's section and its
    table, the comm priced higher across nodes than inside one, speedups against the sweep's one rank."""
    sweep = SWEEP
    done = spmd("predict", sweep, "--target", "gpus_per_node=2,nodes=[1,2],intra=nvlink4,inter=eth-100g,name=two boxes",
                "--out", tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    scaling = json.loads((tmp_path / "scaling.json").read_text())
    (p,) = scaling["other_machines"]
    assert p["target"]["name"] == "two boxes" and p["target"]["inter"]["busbw_Bps"] == 12.5e9
    rows = {(r["mode"], r["ranks"]): r for r in p["rows"]}
    assert {n for _, n in rows} == {2, 4}
    for r in p["rows"]:
        assert 0 < r["interval"][0] <= r["predicted_s"] <= r["interval"][1]
        assert r["predicted_s"] >= sum(v for k, v in r["phases"].items() if k != "comm_overlapped") - 1e-12
    assert "On other machines: two boxes" in (tmp_path / "scaling.md").read_text()
    assert "on two boxes" in done.stdout and "break-even at 4 ranks" in done.stdout
    assert any(n.startswith("no preset is validated yet by a held-out measurement") for n in p["notes"])
    # the original sweep stays as it was
    assert "other_machines" not in json.loads(sweep.read_text())


def test_predict_refuses_links_of_another_backend(tmp_path):
    links = json.loads((LINKS / "h100x2-p2p-off.json").read_text())
    links["backend"] = "mpi"
    (tmp_path / "links.json").write_text(json.dumps(links))
    done = spmd("predict", SWEEP, "--target", f"links={tmp_path}/links.json",
                "--out", tmp_path / "out")  # fmt: skip
    assert done.returncode == 2 and "measured over mpi" in done.stderr


def test_predict_bad_target_exits_2_naming_the_key(tmp_path):
    target = tmp_path / "t.yaml"
    target.write_text("gpus_per_node: 2\nnodes: 2\nintra: nvlink4\nlatency: 3\n")
    done = spmd("predict", SWEEP, "--target", target, "--out", tmp_path / "o")
    assert done.returncode == 2 and "unknown key 'latency'" in done.stderr


def test_predict_reads_the_previous_schema_and_refuses_an_unknown_one_naming_it(tmp_path):
    """A schema-1 scaling.json (before the decision was kept) is decided again and predicted from; schema 3 is
    refused with exit 2 naming the file and the schemas this spmd reads."""
    sweep = json.loads((SWEEP).read_text())
    assert sweep["schema"] == 1 and "decision" not in sweep
    done = spmd("predict", SWEEP, "--target", "gpus_per_node=4,nodes=1,intra=nvlink4",
                "--out", tmp_path / "old")  # fmt: skip
    assert done.returncode == 0, done.stderr
    again = json.loads((tmp_path / "old/scaling.json").read_text())
    assert again["schema"] == 3 and again["decision"]["lead"] and again["verdict"].startswith("Verdict: ")
    assert f"  the sweep: {again['verdict']}" in done.stdout.splitlines()
    (tmp_path / "new.json").write_text(json.dumps({**sweep, "schema": 4}))
    done = spmd("predict", tmp_path / "new.json", "--target", "gpus_per_node=4,nodes=1,intra=nvlink4",
                "--out", tmp_path / "o")  # fmt: skip
    assert done.returncode == 2 and "new.json: scaling schema 4; this spmd reads schema 1, 2, 3" in done.stderr
