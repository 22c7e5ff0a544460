import json
import os

import pytest

from spmd.core.files import write_json_atomic
from spmd.core.version import __version__
from spmd.report.summary import intervals, summarize
from spmd.report.table import format_report


def test_summary_is_min_median_max_of_rank_medians():
    records = [
        [
            {"read": 1.0, "compute": 2.0, "total": 4.0},
            {"read": 3.0, "compute": 2.0, "total": 6.0},
            {"read": 2.0, "compute": 2.0, "total": 5.0},
        ],  # rank 0: read median 2
        [{"read": 4.0, "compute": 1.0, "total": 5.0}] * 3,  # rank 1: read 4
        [{"read": 6.0, "compute": 3.0, "total": 9.0, "extra": 1.0}] * 3,  # rank 2: read 6
    ]
    timings, medians = summarize(records)
    assert list(timings)[:6] == ["read", "wait", "h2d", "compute", "comm", "total"]
    assert timings["read"] == {"min": 2.0, "median": 4.0, "max": 6.0, "imbalance": 1.5}
    assert timings["h2d"] == {"min": 0.0, "median": 0.0, "max": 0.0, "imbalance": 1.0}
    assert timings["extra"]["max"] == 1.0
    assert medians[0]["total"] == 5.0


def test_a_phases_host_side_is_kept_in_the_records_but_is_no_phase_of_the_summary():
    records = [
        [{"forward": 2.0, "host:forward": 0.5, "total": 3.0}] * 3,
        [{"forward": 1.0, "host:forward": 0.4, "total": 3.0}] * 3,
    ]
    timings, medians = summarize(records)
    assert "forward" in timings and not any(p.startswith("host:") for p in timings)
    assert all("host:forward" not in m for m in medians) and "host:forward" not in intervals(records)


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    path = tmp_path / "out" / "report.json"
    write_json_atomic(path, {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"a": object()})  # not serializable: fails before the rename
    assert json.loads(path.read_text()) == {"spmd_version": __version__, "a": 1}  # spmd's record first
    assert os.listdir(path.parent) == ["report.json"]  # no temporary left behind


def test_table_mentions_phases_and_result():
    report = {
        "workload": "reduce",
        "ranks": 2,
        "nodes": [{}],
        "device": "cpu",
        "comm": "mpi",
        "repeats": 3,
        "warmup": 1,
        "verified": True,
        "verification": {"reference": "attrs"},
        "timings": {"read": {"min": 1, "median": 1, "max": 1, "imbalance": 1}},
        "result": {"sum": 1.5, "var": [1.0, 2.0]},
    }
    text = format_report(report, "r/report.json")
    assert "verified (attrs)" in text and "read" in text and "sum" in text and "r/report.json" in text


def test_atomic_write_gives_the_usual_file_mode(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_json_atomic(tmp_path / "r.json", {"a": 1})
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777) == 0o644  # not mkstemp's 0600
    assert not list(tmp_path.glob(".*.tmp"))


def test_train_table_shows_only_phases_that_ran_with_samples_per_s_and_tidy_lines():
    """A first user found: train's table had rows of zeros for read/wait/h2d/compute, 'graph_failure = None', 'tf32  =
    False' and no samples/s."""
    zero = {"min": 0.0, "median": 0.0, "max": 0.0, "imbalance": 1.0}
    report = {
        "workload": "train",
        "ranks": 2,
        "nodes": [{}],
        "device": "cpu",
        "comm": "mpi",
        "repeats": 2,
        "warmup": 1,
        "verified": True,
        "verification": {"reference": "float64 NumPy gradient"},
        "timings": {
            "read": zero,
            "wait": zero,
            "h2d": zero,
            "compute": zero,
            "comm": {"min": 0.01, "median": 0.02, "max": 0.03, "imbalance": 1.1},
            "total": {"min": 0.1, "median": 0.11, "max": 0.12, "imbalance": 1.0},
            "forward": {"min": 0.03, "median": 0.03, "max": 0.03, "imbalance": 1.0},
        },
        "result": {"graph": False, "graph_failure": None, "tf32": False, "loss_per_window": [2.07, 1.57]},
        "metrics": {"samples_per_s": 55876.4, "step_ms": 2.29, "phase_ms_per_step": {"forward": 0.6}},
    }
    lines = format_report(report, "r/report.json").splitlines()
    phases = [line.split()[0] for line in lines[3:] if line and not line.startswith(" ") and "report:" not in line]
    assert phases == ["comm", "forward", "total"]
    assert "  samples_per_s   = 55,876" in lines and "  tf32            = False" in lines, lines
    assert not any("None" in line or "graph_failure" in line or "phase_ms_per_step" in line for line in lines)
