"""The host as a fact, end to end: a rank's compute threads as chosen (its share of the cores, or OMP_NUM_THREADS as
given) and running, and a sweep on a busy host named as such before anything else, no suspect point leading."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="workload torch needs the torch extra (make test installs it)")

from helpers import torch_user_config as config  # noqa: E402
from mpi_job import spmd  # noqa: E402


def test_omp_num_threads_is_honoured_and_the_default_is_the_ranks_share(tmp_path):
    path = config(tmp_path)
    rc, _, err, _ = spmd("run", path, "-q", "--out", "given", cwd=tmp_path, ranks=1, env={"OMP_NUM_THREADS": "2"})
    assert rc == 0, err
    threads = json.loads((tmp_path / "given/report.json").read_text())["host"]["per_rank"][0]["threads"]
    assert threads["chosen"] == 2 and threads["how"] == "OMP_NUM_THREADS=2 as given"
    assert threads["running"]["torch"] == 2  # PyTorch's pool as given, not 1
    html = (tmp_path / "given/report.html").read_text()
    assert "host: 2 compute thread(s) a rank (OMP_NUM_THREADS=2 as given)" in html
    assert "<td>step (within compute + comm)</td>" in html and "<td>forward (within step)</td>" in html
    rc, _, err, _ = spmd("run", path, "-q", "--out", "share", cwd=tmp_path, ranks=2, env={"OMP_NUM_THREADS": ""})
    assert rc == 0, err
    report = json.loads((tmp_path / "share/report.json").read_text())
    for rank in report["host"]["per_rank"]:
        cpus = rank["load"]["node_cpus"]
        assert rank["threads"]["chosen"] == max(1, cpus // 2) == rank["threads"]["running"]["torch"]
        assert "for 2 rank(s) on the node" in rank["threads"]["how"]
    node = next(iter(report["host"]["nodes"].values()))
    assert node["ranks"] == 2 and not node["oversubscribed_threads"] and node["wall_s"] > 0


def test_a_sweep_on_a_busy_host_names_it_first_and_leads_with_no_suspect_point(tmp_path):
    """The newcomer's case: a model of their own, --batches on 2 CPU ranks while two other processes keep the cores
    busy, threads left at their default."""
    path = config(tmp_path, steps=6)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        rc, out, err, _ = spmd(
            "scale",
            path,
            "--batches",
            "8,24",
            "--compare-comm",
            "none",
            "-o",
            "repeats=3",
            cwd=tmp_path,
            ranks=2,
            timeout=600,
            env={"OMP_NUM_THREADS": ""},
        )
    finally:
        for hog in hogs:
            hog.kill()
    assert rc == 0, err
    scaling = json.loads((tmp_path / "out/scaling/scaling.json").read_text())
    decision = scaling["decision"]
    for run in scaling["runs"] + scaling["batch_runs"]:  # every run's ranks on the share of the largest run
        for rank in run["report"]["host"]["per_rank"]:
            assert rank["threads"]["chosen"] == max(1, rank["load"]["node_cpus"] // 2)
    assert decision["host"]["busy"] and decision["host"]["threads"]["per_rank"] >= 1
    assert scaling["verdict"].startswith("Verdict: busy host: other processes on ")
    assert "fix: run when the node is quiet" in scaling["verdict"]
    lead = decision["lead"]
    rows = scaling["batch_sweep"]["rows"]
    if lead is not None:
        assert not next(r for r in rows if r["batch"] == lead["batch"])["suspect"]
    else:
        assert "no trustworthy answer" in scaling["verdict"] and "on a quiet host" in scaling["verdict"]
    table = next(line for line in scaling["advice"] if line.startswith("batch sweep, samples/s"))
    for row in rows:  # no speedup above N unflagged
        if row["speedup"] > 2:
            assert row["flags"] and f"batch {row['batch']}: {row['speedup']:.2f}x" in table
            assert "BEYOND IDEAL" in table.split(f"batch {row['batch']}: ")[1].split(", batch")[0]
