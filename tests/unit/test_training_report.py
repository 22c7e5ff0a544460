"""What the newcomer's torch report got wrong, each fixed and held: per-rank seconds beside shares that disagree
("wait 0.0 us (8%)"), result values pushed off screen, samples/s missing from report.html's header, and comm=mpi
printed where DDP ran on gloo."""

from __future__ import annotations

import pytest

from spmd.report.breakdown import breakdown
from spmd.report.html import _brief, summary_lines
from spmd.report.table import comm_label


def test_a_ranks_seconds_in_a_category_are_its_share_of_the_mean_repeat():
    """Wait in one repeat of ten (the median of its waits is 0, its share 8%): seconds and share now agree."""
    rank0 = [{"compute": 0.01, "wait": 0.0, "total": 0.011} for _ in range(9)] + [
        {"compute": 0.01, "wait": 0.009, "total": 0.02}
    ]
    rank1 = [{"compute": 0.0105, "wait": 0.0, "total": 0.011} for _ in range(10)]
    b = breakdown([rank0, rank1], ["a", "b"])
    for r in b["per_rank"]:
        for c in b["categories"]:
            assert r["seconds"][c] / r["total"] == pytest.approx(r["share"][c])
    assert b["per_rank"][0]["seconds"]["wait"] > 0


def test_long_result_values_are_short_cells():
    losses = [1.10227, 0.665187, 0.628122, 0.61, 0.6, 0.59, 0.58, 0.57]
    assert _brief(losses) == "[1.10227, 0.665187, 0.628122, ..., 0.57] (8 values)"
    timeline = {"marks": {f"b{i}": float(i) for i in range(40)}, "allreduce": [[1.0, 2.0]] * 30}
    assert _brief(timeline) == "{marks, allreduce} (in report.json)"
    assert len(_brief("x" * 500)) == 120


def report(**extra):
    return {
        "ranks": 2,
        "nodes": [{}],
        "device": "cpu",
        "comm": "mpi",
        "workload": "torch",
        "verified": True,
        "verification": {"reference": "one process"},
        "per_rank": [{"repeats": [{}]}],
        "spmd_version": "0",
        "created": "now",
        "result": {"backend": "gloo"},
        **extra,
    }


def test_report_html_says_samples_per_second_in_its_header():
    lines = summary_lines(report(metrics={"samples_per_s": 21811.4, "step_ms": 2.2006872}))
    assert any("samples_per_s: 21811.4" in line and "step_ms: 2.20069" in line for line in lines)


def test_the_comm_named_is_what_carried_ddps_allreduce():
    assert comm_label(report()) == "gloo (DDP's allreduce; spmd's own collectives on mpi)"
    assert comm_label(report(workload="reduce")) == "mpi"
