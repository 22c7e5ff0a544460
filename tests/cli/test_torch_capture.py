"""``spmd run --capture N`` of workload torch on the CPU (gloo): every rank's captured steps read into the report,
the traces kept as spmd's own files, and a cause made on purpose on one rank named as that cause: its data phase
slowed, more work given to it, its host thread slowed (the same operators, more time between them), at 2 and 3
ranks; a rank slowed in every step is named even without a capture; and each way the capture can be refused."""

from __future__ import annotations

import gzip
import json

import pytest

pytest.importorskip("torch", reason="workload torch needs the torch extra (make test installs it)")

from helpers import torch_user_config  # noqa: E402
from mpi_job import spmd  # noqa: E402


def run(tmp_path, *args, ranks=2, fault=None, **params):
    path = torch_user_config(tmp_path, save=None, steps=8, batch=64, **params)
    env = {"SPMD_FAULT": fault} if fault else None
    rc, out, err, _ = spmd("run", path, "-o", "repeats=3", *args, ranks=ranks, cwd=tmp_path, env=env)
    report = json.loads((tmp_path / "out/report.json").read_text()) if rc == 0 else None
    return rc, report, err


@pytest.mark.parametrize(
    "ranks, fault, cause, words",
    [
        (2, "rank=1,phase=data,kind=slow,seconds=0.02", "data", "its data phase took"),
        # a host slowed 20 ms a step was named a slower device once in CI: on 2 cores the waiting rank's gloo
        # polls beside the late one's operators, slowing them by more than 5% of a short step; 60 ms stands out
        # (20 ms of more work also failed once in 32 under two CPU hogs)
        (2, "rank=1,phase=compute,kind=work,seconds=0.06", "more work", "it ran more work"),
        (2, "rank=1,phase=compute,kind=slow,seconds=0.06", "host", "between them"),
        # 3 ranks on CI's 2 cores share one: 20 ms of more work was lost in their scheduling (rank 0 named once
        # in CI, once in three under a CPU hog); 60 ms stands out (five in five under the hog)
        (3, "rank=2,phase=compute,kind=work,seconds=0.06", "more work", "(more often: aten::mm"),
    ],
)
def test_a_cause_made_on_purpose_is_named_as_that_cause(tmp_path, ranks, fault, cause, words):
    rc, report, err = run(tmp_path, "--capture", "3", ranks=ranks, fault=fault)
    assert rc == 0, err
    slow = int(fault.split(",")[0].split("=")[1])
    s = report["breakdown"]["straggler"]
    assert s is not None and s["rank"] == slow and s["cause"] == cause, s
    assert f"Rank {slow} on " in report["findings"][0] and words in report["findings"][0], report["findings"]
    k = report["kernels"]
    assert k["device"] == "cpu" and k["steps"] == 3 and len(k["per_rank"]) == ranks
    # the others waited for it in each captured allreduce: their time in gloo beyond the last arrival's
    waits = k["collectives"]["wait_us"]
    assert k["collectives"]["matched"] and waits[slow] == 0.0
    assert all(w > 10_000 for r, w in enumerate(waits) if r != slow), waits


def test_the_capture_is_read_into_the_report_and_kept_as_spmds_own_files(tmp_path):
    rc, report, err = run(tmp_path, "--capture", "2")
    assert rc == 0, err
    k = report["kernels"]
    for r, rank in enumerate(k["per_rank"]):
        m = rank["median"]
        assert rank["rank"] == r and rank["steps"] == 2
        assert m["busy_us"] + m["idle_us"] == pytest.approx(m["span_us"], rel=0.02)
        assert m["kernels"] > 10 and rank["top"][0]["count"] >= 1
        assert rank["capture"]["kept"] and rank["capture"]["seconds_per_step"] > 0
        trace = json.loads(gzip.decompress((tmp_path / f"out/kernels/rank{r}.trace.json.gz").read_bytes()))
        assert trace["spmd_rank"] == r and "spmd_record" in trace
        assert sum(1 for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")) == 2
    assert k["capture_cost"]["captured_step_s"] > 0 and k["capture_cost"]["timed_step_s"] > 0
    # the steps are the run's own: 3 repeats of 8 steps (the checked ones among them), then 3 more (the capture's
    # warm-up and 2 captured), then verification's last checked step (after a capture, one more step)
    assert report["result"]["steps"] == 1 * 8 + 3 * 8 + 3 + 1 == report["verification"]["checked_steps"][-1] + 1
    # run again: spmd replaces its own traces
    rc, _, err = run(tmp_path, "--capture", "2")
    assert rc == 0, err


def test_without_capture_there_is_no_kernels_section_and_a_slow_rank_is_still_named(tmp_path):
    """The issue's case: rank 1 slowed in every step (SPMD_FAULT compute, per step for torch) is the straggler
    from the phases alone, its forward named."""
    rc, report, err = run(tmp_path, fault="rank=1,phase=compute,kind=slow,seconds=0.02")
    assert rc == 0, err
    assert report["kernels"] is None and not (tmp_path / "out/kernels").exists()
    s = report["breakdown"]["straggler"]
    # its 8 steps' sleeps, within what scaling the marked steps' phases to the window's wall time takes off
    assert s["rank"] == 1 and s["phase"] == "forward" and s["seconds"] > 0.9 * 8 * 0.02


def test_a_users_file_where_a_trace_would_go_is_refused_untouched(tmp_path):
    (tmp_path / "out/kernels").mkdir(parents=True)
    mine = tmp_path / "out/kernels/rank1.trace.json.gz"
    mine.write_bytes(gzip.compress(b'{"mine": true}'))
    rc, _, err = run(tmp_path, "--capture", "2")
    assert rc == 2 and "rank1.trace.json.gz" in err, err
    assert gzip.decompress(mine.read_bytes()) == b'{"mine": true}'


@pytest.mark.parametrize(
    "args, words",
    [
        (["--capture", "8"], "capture.steps: at most params.steps - 1 (7)"),
        (["--capture", "99"], "capture.steps: 0 to 16"),
        (["-o", "capture.max_mb=-1"], "capture.max_mb: 0 to 1024"),
        (["-o", "params.capture_max_mb=-1"], "capture.max_mb: 0 to 1024"),  # torch's old spelling, an alias
    ],
)
def test_a_capture_that_cannot_run_is_refused_naming_the_key(tmp_path, args, words):
    rc, _, err = run(tmp_path, *args)
    assert rc == 2 and words in err, err


def test_a_trace_over_its_size_bound_is_analysed_but_not_kept(tmp_path):
    rc, report, err = run(tmp_path, "--capture", "2", "-o", "capture.max_mb=0.001")
    assert rc == 0, err
    for rank in report["kernels"]["per_rank"]:
        assert rank["steps"] == 2 and not rank["capture"]["kept"] and rank["capture"]["trace_bytes"] > 1000
    assert not (tmp_path / "out/kernels").exists()


def test_the_chrome_trace_draws_the_captured_steps_after_the_repeats_on_the_same_clock(tmp_path):
    rc, report, err = run(tmp_path, "--capture", "2", "--trace", tmp_path / "t.json")
    assert rc == 0, err
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    for rank in (0, 1):
        mine = [e for e in spans if e["pid"] == rank]
        captured = [e for e in mine if e["name"] == "captured steps (torch.profiler)"]
        ops = [e for e in mine if tracks[(rank, e["tid"])] == "captured: host operators"]
        steps = [e for e in mine if tracks[(rank, e["tid"])] == "captured: steps (host)"]
        repeats = [e for e in mine if e["name"].startswith("repeat ")]
        assert len(captured) == 1 and len(steps) == 2 and len(ops) > 20
        last = max(e["ts"] + e["dur"] for e in repeats)
        assert captured[0]["ts"] >= last  # after the timed repeats, on the clock the ranks agreed
        assert all(captured[0]["ts"] <= e["ts"] <= captured[0]["ts"] + captured[0]["dur"] + 1 for e in ops)


def test_a_sweep_captures_after_every_timed_run_and_joins_the_captures_to_them(tmp_path):
    """``spmd scale --capture 2``: every size timed first with nothing captured, then a capture pass (no timed step
    after a capture); each run's report holds its captured steps and, rank 1 slowed, names it from its own repeats
    with the cause the capture shows."""
    path = torch_user_config(tmp_path, save=None, steps=8, batch=64)
    env = {"SPMD_FAULT": "rank=1,phase=compute,kind=slow,seconds=0.06"}
    args = ("--ranks", "1,2", "--mode", "strong", "--compare-comm", "none", "--capture", "2", "-o", "repeats=3")
    rc, out, err, _ = spmd("scale", path, *args, ranks=2, cwd=tmp_path, env=env, timeout=300)
    assert rc == 0, err
    runs = json.loads((tmp_path / "out/scaling/scaling.json").read_text())["runs"]
    assert [r["ranks"] for r in runs] == [1, 2]
    for run in runs:
        when, report = run["capture_pass"], run["report"]
        assert when["timed_runs_ended"] <= when["began"] <= when["ended"]  # after every timed run of the sweep
        k = report["kernels"]
        assert k["steps"] == 2 and all(r["steps"] == 2 for r in k["per_rank"]) and len(k["per_rank"]) == run["ranks"]
        assert k["capture_cost"]["timed_step_s"] > 0 and report["wall"]["capture"] > 0
        # the timed run itself captured nothing: its steps are its windows' and the last checked one's, no capture's
        assert report["result"]["steps"] == 1 * 8 + 3 * 8
    s = runs[1]["report"]["breakdown"]["straggler"]
    assert s["rank"] == 1 and s["cause"] == "host", s
    assert runs[1]["report"]["findings"][0].startswith("Rank 1 on "), runs[1]["report"]["findings"]
