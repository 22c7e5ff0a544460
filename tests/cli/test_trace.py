"""Every rank seen: the Chrome trace of ``spmd run --trace`` at 3 ranks checked against report.json, a straggler
made by fault injection named in the findings, report.html re-rendered from report.json, and --nvtx."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
import yaml
from helpers import reduce_config, write_dataset
from mpi_job import RANKS, spmd

RESOLUTION_S = 2e-6  # perf_counter readings, rounded to 1 ns in the trace; each event's start and end


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trace")
    rc, out, err, _ = spmd("run", reduce_config(folder), "--trace", folder / "t.json")
    assert rc == 0, err
    report = json.loads((folder / "out/report.json").read_text())
    return folder, json.loads((folder / "t.json").read_text()), report, out


def spans(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def test_the_trace_has_one_process_per_rank_named_and_every_track_named(traced):
    _, trace, report, out = traced
    assert trace["spmd_version"] and trace["displayTimeUnit"] == "ms" and "trace: " in out
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    hosts = [r["host"] for r in report["per_rank"]]
    assert names == {r: f"rank {r} on {hosts[r]}, CPU" for r in range(RANKS)}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {(pid, tid) for pid, tid, *_ in [(e["pid"], e["tid"]) for e in spans(trace)]} <= set(threads)
    clock = trace["otherData"]["clock"]
    assert clock["offsets_s"][0] == 0.0 and len(clock["uncertainty_s"]) == RANKS
    assert all(0 < u < 0.01 for u in clock["uncertainty_s"][1:])  # ping-pongs on one host: well under 10 ms


def test_every_phase_of_every_repeat_is_there_with_the_reports_durations(traced):
    _, trace, report, _ = traced
    warmup = report["warmup"]
    seen: dict[tuple, float] = defaultdict(float)
    for e in spans(trace):
        seen[(e["pid"], e["args"]["repeat"], e["cat"])] += e["dur"] / 1e6
    for rank, entry in enumerate(report["per_rank"]):
        for i, record in enumerate(entry["repeats"]):
            for phase, seconds in record.items():
                if phase == "h2d":  # a CPU run has no device copy: no event
                    assert seconds == 0.0
                    continue
                key = (rank, warmup + i, "repeat" if phase == "total" else phase)
                assert seen[key] == pytest.approx(seconds, abs=RESOLUTION_S), key
        warm = [e for e in spans(trace) if e["pid"] == rank and e["args"]["warmup"] and e["cat"] == "repeat"]
        assert len(warm) == warmup


def test_a_repeats_phases_are_in_order_inside_it_and_collectives_overlap_across_ranks(traced):
    _, trace, report, _ = traced
    events = spans(trace)
    unc = max(trace["otherData"]["clock"]["uncertainty_s"]) * 1e6
    order = ["read", "wait", "compute", "comm"]
    for rank in range(RANKS):
        for i in range(report["warmup"] + report["repeats"]):
            mine = [e for e in events if e["pid"] == rank and e["args"]["repeat"] == i]
            outline = next(e for e in mine if e["cat"] == "repeat")
            phases = sorted((e for e in mine if e["cat"] != "repeat"), key=lambda e: e["ts"])
            assert [e["cat"] for e in phases] == order
            for a, b in zip(phases, phases[1:]):
                assert a["ts"] + a["dur"] <= b["ts"] + 1e-3
            assert (
                outline["ts"] <= phases[0]["ts"]
                and phases[-1]["ts"] + phases[-1]["dur"] <= outline["ts"] + outline["dur"] + 1e-3
            )
    for i in range(report["warmup"] + report["repeats"]):
        comm = [e for e in events if e["cat"] == "comm" and e["args"]["repeat"] == i]
        assert len(comm) == RANKS and all(e["name"].startswith("comm (allgather ") for e in comm)
        assert comm[0]["args"]["collectives"][0]["bytes"] > 0
        # a collective cannot end on any rank before the last rank entered it
        assert max(e["ts"] for e in comm) <= min(e["ts"] + e["dur"] for e in comm) + 2 * unc


def test_report_json_carries_the_breakdown_intervals_and_last_repeats(traced):
    folder, _, report, _ = traced
    assert report["repeat_rule"] == {"rule": "fixed", "repeats": 4, "bound": 0.05}
    total = report["intervals"]["total"]
    slowest = sorted(max(r["repeats"][i]["total"] for r in report["per_rank"]) for i in range(4))
    assert (total["low"], total["high"], total["n"]) == (slowest[0], slowest[-1], 4)
    assert [r["rank"] for r in report["breakdown"]["per_rank"]] == list(range(RANKS))
    for r in report["breakdown"]["per_rank"]:
        assert sum(r["share"].values()) == pytest.approx(1.0)
    assert [rep["index"] for rep in report["timeline"]["per_rank"][0]] == [2, 3, 4]  # the last 3 of 5
    assert all(len(r["warmup_repeats"]) == 1 for r in report["per_rank"])
    html = (folder / "out/report.html").read_text()
    assert 'aria-label="timeline of repeats"' in html and 'aria-label="share of a repeat per rank"' in html
    assert 'aria-label="own work per repeat per rank"' in html and "written by spmd" in html


def test_report_render_rewrites_report_html_from_report_json_alone(traced, tmp_path):
    folder, _, _, _ = traced
    rc, out, err, _ = spmd("report", "render", folder / "out/report.json", "--out", tmp_path, ranks=1)
    assert rc == 0, err
    assert (tmp_path / "report.html").read_bytes() == (folder / "out/report.html").read_bytes()


def test_a_straggler_injected_in_read_is_named_with_the_others_wait(tmp_path):
    config = reduce_config(tmp_path, repeats=5)
    rc, out, err, _ = spmd(
        "run", config, "--trace", tmp_path / "t.json", env={"SPMD_FAULT": "rank=1,phase=read,kind=slow,seconds=0.2"}
    )
    assert rc == 0, err
    assert "SPMD_FAULT: injecting slow at phase read (0.2 s each time this rank enters it)" in err
    report = json.loads((tmp_path / "out/report.json").read_text())
    s = report["breakdown"]["straggler"]
    assert (s["rank"], s["phase"], s["others_wait_in"]) == (1, "read", "wait")
    assert s["seconds"] >= 0.2 and s["others_wait"] >= 0.18
    assert report["findings"][0].startswith(
        f"Rank 1 on {report['per_rank'][1]['host']} is the straggler: its read took"
    )
    assert "finding: Rank 1 on" in out and "in wait" in out
    reads = [e for e in spans(json.loads((tmp_path / "t.json").read_text())) if e["cat"] == "read"]
    assert all(e["dur"] >= 0.2e6 for e in reads if e["pid"] == 1)
    assert all(e["dur"] < 0.2e6 for e in reads if e["pid"] != 1)
    assert "is the straggler" in (tmp_path / "out/report.html").read_text()


def test_without_a_fault_no_straggler_is_named(traced):
    _, _, report, _ = traced
    assert report["breakdown"]["straggler"] is None or report["breakdown"]["straggler"]["share_of_repeat"] >= 0.05


def test_a_trace_path_holding_a_users_file_is_refused_before_the_run(tmp_path):
    theirs = tmp_path / "t.json"
    theirs.write_text('{"traceEvents": []}\n')
    rc, _, err, _ = spmd("run", reduce_config(tmp_path), "--trace", theirs)
    assert rc == 2 and "t.json" in err and "not written by spmd" in err, err
    assert theirs.read_text() == '{"traceEvents": []}\n' and not (tmp_path / "out").exists()


def test_nvtx_on_asked_is_recorded(tmp_path):
    pytest.importorskip("nvtx", reason="the test extra brings nvtx")
    rc, _, err, _ = spmd("run", reduce_config(tmp_path), "--nvtx", ranks=1)
    assert rc == 0, err
    assert json.loads((tmp_path / "out/report.json").read_text())["nvtx"] == "on (--nvtx; no profiler attached)"


def test_slow_needs_its_seconds(tmp_path):
    rc, _, err, _ = spmd("run", reduce_config(tmp_path), env={"SPMD_FAULT": "rank=1,phase=read,kind=slow"})
    assert rc == 2 and "kind=slow needs seconds=S" in err, err


PLUGINS = '''
import itertools
import time

import spmd

_calls = itertools.count()


@spmd.map_reduce(combine="sum")
def bimodal(block, xp, params):
    """A deliberately noisy workload: every other call sleeps 40 ms longer (the same on every rank)."""
    time.sleep(0.01 if next(_calls) % 2 else 0.05)
    return xp.asarray([float(block.sum())])


@spmd.map_reduce(combine="sum")
def steady(block, xp, params):
    """A quiet workload whatever else the machine runs: 50 ms a call (a reduce of a small array is microseconds,
    which a busy CI machine's scheduling moves by more than 5%)."""
    time.sleep(0.05)
    return xp.asarray([float(block.sum())])
'''


def test_a_quiet_sweep_is_tight_under_auto_and_a_deliberately_noisy_one_is_flagged(tmp_path):
    """repeats: auto (spmd scale's default). A steady plug-in (50 ms a call) stops once its interval is within
    +-5%, unflagged. One whose repeats alternate 10 ms and 50 ms never gets there, runs to its max_seconds and is
    suspect (noisy), as the findings say."""
    (tmp_path / "plugins.py").write_text(PLUGINS)
    write_dataset(tmp_path / "x.h5", np.ones(10_000, np.float32))
    # the noisy sweep at 2 ranks only: both processes call the function equally often, so they sleep alike
    for name, workload, budget, sizes in (
        ("quiet", "plugins.py:steady", 20, "1,2"),
        ("noisy", "plugins.py:bimodal", 2, "2"),
    ):
        (tmp_path / f"{name}.yaml").write_text(
            yaml.safe_dump(
                {
                    "workload": workload,
                    "device": "cpu",
                    "input": {"path": str(tmp_path / "x.h5"), "dataset": "x"},
                    "max_seconds": budget,
                    "verify": "auto" if name == "quiet" else "none",
                    "output": str(tmp_path / name),
                }
            )
        )
        rc, out, err, _ = spmd(
            "scale",
            tmp_path / f"{name}.yaml",
            "--ranks",
            sizes,
            "--out",
            tmp_path / name,
            ranks=2,
            cwd=tmp_path,
            timeout=120,
        )
        assert rc == 0, err
        scaling = json.loads((tmp_path / name / "scaling.json").read_text())
        rules = [r["report"]["repeat_rule"] for r in scaling["runs"]]
        suspects = [r["suspect"] for r in scaling["runs"]]
        if name == "quiet":
            assert all(r["rule"] == "auto" and r["stopped"] == "tight" and r["repeats"] >= 6 for r in rules), rules
            assert suspects == [[], []] and not any("noisy" in line for line in scaling["advice"])
        else:
            assert all(r["stopped"] == "budget" for r in rules), rules
            assert all(any(s.startswith("noisy: ") and "after its 2 s budget" in s for s in run) for run in suspects), (
                suspects
            )
            # its noise among the run's reasons (a busy host, on a loaded machine, is named before it)
            (said,) = [line for line in scaling["advice"] if line.startswith("Suspect: strong at 2 ranks (")]
            assert "noisy: " in said, said
