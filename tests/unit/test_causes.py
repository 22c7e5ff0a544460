"""The straggler's cause (spmd.report.capture.causes), named from what each rank's captured steps show: real GPU runs
with a cause made on purpose on rank 1 (tests/fixtures/traces/analyses: more device work, a slow data phase, a host
thread sharing its interpreter with a spinning one), and small hand-made traces whose every number is known."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spmd.report import breakdown
from spmd.report.capture import causes, kernels

ANALYSES = Path(__file__).resolve().parents[1] / "fixtures/traces/analyses"
REPORTS = ANALYSES.parents[1] / "reports"


def straggler_of(run: str, untimed: bool = False) -> dict | None:
    """The straggler of a recorded run (``untimed``: as if its phases did not time every collective)."""
    x = json.loads((ANALYSES / f"{run}.json").read_text())
    for a in x["analyses"]:
        if a:
            a["untimed_collectives"] = untimed
    captured = causes.combine(x["analyses"], x["records"], x["steps_per_repeat"])
    return breakdown.breakdown(x["records"], ["a", "b"], captured, x["steps_per_repeat"])["straggler"]


@pytest.mark.parametrize(
    "run, cause, words",
    [
        ("resnet-r2-work", "more work", ["1552 kernels a step against 1494"]),
        ("resnet-r2-data", "data", ["its data phase took 11.1 ms a step"]),
        ("gpt2-r2-hog", "host", ["the same 1470 kernels ran as fast", "waiting for its host"]),
    ],
)
def test_a_cause_made_on_purpose_on_a_gpu_is_named_with_its_numbers(run, cause, words):
    # recorded before DDP's broadcast of the buffers was timed: ResNet-50's rank 0 waited for rank 1 there, inside
    # its forward, where the phases of these records do not see it; only the captured steps do
    s = straggler_of(run, untimed=True)
    assert s["rank"] == 1 and s["cause"] == cause, s
    sentence = breakdown.straggler_sentence(s)
    assert sentence.startswith(f"Rank 1 on b is the straggler ({cause}): ")
    for w in words:
        assert w in sentence, sentence


def test_without_a_fault_the_captured_steps_name_no_straggler_the_repeats_did_not():
    """Clean runs: GPT-2's rank 1 waited for rank 0 in one captured step, not the other; ResNet-50's rank 1 waited in
    both (rank 0's host slower under the profiler), where the timed repeats named nobody: no straggler either way."""
    assert straggler_of("gpt2-r2") is None
    assert straggler_of("resnet-r2") is None


def test_where_the_phases_miss_collectives_the_captured_steps_name_whom_every_step_waited_for():
    """SyncBatchNorm's collectives inside forward and backward, a graph replay timed as one step: the phases cannot
    see a wait there, so the captured steps name the rank the others waited for, where every step shows it."""
    assert straggler_of("gpt2-r2", untimed=True) is None
    s = straggler_of("resnet-r2", untimed=True)
    assert s["rank"] == 0 and s["cause"] == "host" and s["seen_in"] == "captured steps"


def test_collectives_are_matched_by_position_and_the_last_arrival_spent_least():
    """Three ranks, two steps of two collectives: rank 2 always arrives last (shortest kernels)."""
    steps = [
        [{"comm_kernels": [5.0, 9.0]}, {"comm_kernels": [6.0, 8.0]}],
        [{"comm_kernels": [4.0, 7.0]}, {"comm_kernels": [3.0, 9.0]}],
        [{"comm_kernels": [1.0, 2.0]}, {"comm_kernels": [1.0, 2.0]}],
    ]
    c = causes.collectives([{"per_step": s} for s in steps])
    assert c["matched"] and c["per_step"] == 2
    assert c["wait_us_per_step"] == [[11.0, 11.0], [8.0, 9.0], [0.0, 0.0]]
    assert c["transfer_us"] == 3.0
    assert [x["last_rank"] for x in c["last"]] == [2, 2]
    assert c["last"][0]["others_waited_us"] == pytest.approx((4 + 3 + 5 + 2) / 2)


def test_collectives_that_differ_between_ranks_are_said_not_matched():
    c = causes.collectives([{"per_step": [{"comm_kernels": [1.0]}]}, {"per_step": [{"comm_kernels": [1.0, 2.0]}]}])
    assert not c["matched"] and "[1, 2] collectives" in c["why"]
    assert causes.critical_path(c) == []


def _event(cat, name, ts, dur, corr=None, tid=1, stream=None):
    e = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid, "pid": 0, "args": {}}
    if corr is not None:
        e["args"]["correlation"] = corr
    if stream is not None:
        e["args"]["stream"] = stream
    return e


def test_a_gpu_step_splits_its_idle_time_by_what_ended_each_gap():
    """One step of 100 µs: kernel A [0, 10), then B launched at 30 (after A ended: 20 µs waiting for the host), C
    queued early starting 5 µs after B (launch latency), D queued early 50 µs later (other), and an NCCL kernel
    beside D on another stream."""
    ev = [
        _event("user_annotation", "ProfilerStep#1", -10, 200),
        _event("cuda_runtime", "cudaLaunchKernel", -5, 1, corr=1),
        _event("cuda_runtime", "cudaLaunchKernel", 30, 1, corr=2),
        _event("cuda_runtime", "cudaLaunchKernel", 31, 1, corr=3),
        _event("cuda_runtime", "cudaLaunchKernel", 32, 1, corr=4),
        _event("cuda_runtime", "cudaLaunchKernel", 33, 1, corr=5),
        _event("kernel", "A", 0, 10, corr=1, stream=7),
        _event("kernel", "B", 30, 10, corr=2, stream=7),
        _event("kernel", "C", 45, 5, corr=3, stream=7),
        _event("kernel", "D", 100, 20, corr=4, stream=7),
        _event("kernel", "ncclDevKernel_AllReduce", 110, 20, corr=5, stream=9),
    ]
    a = kernels.analyze({"traceEvents": ev}, gpu=True)
    s = a["per_step"][0]
    assert s["span_us"] == 130 and s["busy_us"] == 10 + 10 + 5 + 30
    assert s["idle"] == {"host": 20.0, "launch": 5.0, "other": 50.0}
    assert s["compute_us"] == 45 and s["comm_us"] == 20 and s["overlapped_comm_us"] == 10
    assert a["overlap"] == 0.5 and s["comm_kernels"] == [20.0] and s["launches"] == 5
    assert a["temporal"] == {"span_us": 130, "idle_us": 75, "compute_us": 45, "non_compute_us": 10}
    assert a["idle_by_stream"]["7"] == {"host": 20.0, "launch": 5.0, "other": 50.0}


def test_a_trace_without_steps_says_so():
    assert kernels.analyze({"traceEvents": []}, gpu=True) == {
        "steps": 0,
        "why": "the trace holds no ProfilerStep annotation",
    }


def test_the_captured_gpu_events_are_drawn_on_their_streams_from_the_first_captured_step():
    import gzip

    trace = json.loads(gzip.decompress((ANALYSES.parent / "gpt2-r2/rank0.trace.json.gz").read_bytes()))
    spans = kernels.timeline_spans(trace, gpu=True)
    tracks = {track for _, track, _, _ in spans}
    assert {"repeats", "captured: steps (host)", "captured: stream 7"} <= tracks
    steps = [s for s in spans if s[1] == "captured: steps (host)"]
    assert steps[0][2] == 0.0 and len(steps) == 2
    assert 0 < len(spans) <= kernels.MAX_SPANS and all(b >= a for _, _, a, b in spans)


def test_the_critical_path_says_whom_each_captured_step_waited_for():
    x = json.loads((ANALYSES / "resnet-r2-work.json").read_text())
    k = causes.combine(x["analyses"], x["records"], x["steps_per_repeat"])
    line = breakdown.critical_path_sentence(k)
    assert line.startswith("In the captured steps the others waited in the collectives for: rank 1 at 5 of 6 (58.2 ms")
    assert "transfer: 462.9 us a step" in line
    # rank 0 arrived last at one collective of six, the others waiting there far less than 5% of a step: arrival
    # noise, left out of the path (named, a user read it as a second straggler)
    waited = [c["others_waited_us"] for c in k["critical_path"] if c["last_rank"] == 0]
    span = min(r["median"]["span_us"] for r in k["per_rank"])
    assert waited and sum(waited) < breakdown.SIGNIFICANT * span and "rank 0" not in line
    assert breakdown.critical_path_sentence(None) is None


def test_the_critical_path_names_every_rank_the_others_waited_for_a_noticeable_time():
    x = json.loads((ANALYSES / "resnet-r2-work.json").read_text())
    k = causes.combine(x["analyses"], x["records"], x["steps_per_repeat"])
    span = statistics.median(r["median"]["span_us"] for r in k["per_rank"])
    top = sum(c["others_waited_us"] for c in k["critical_path"] if c["last_rank"] == 1)

    def rank_0_waited_for(us: float) -> str | None:
        for c in k["critical_path"]:
            if c["last_rank"] == 0:
                c["others_waited_us"] = us
        return breakdown.critical_path_sentence(k)

    enough = max(breakdown.SECONDARY * top, breakdown.SIGNIFICANT * span)
    line = rank_0_waited_for(enough * 1.01)
    assert "rank 1 at 5 of 6" in line and "rank 0 at 1 of 6" in line
    # above 5% of a step, under a quarter of rank 1's: arrivals reordered behind it
    assert breakdown.SIGNIFICANT * span < breakdown.SECONDARY * top
    assert "rank 0" not in rank_0_waited_for(breakdown.SECONDARY * top * 0.99)
    for c in k["critical_path"]:  # nobody waited 5% of a step
        c["others_waited_us"] = breakdown.SIGNIFICANT * span * 0.99 / len(k["critical_path"])
    assert breakdown.critical_path_sentence(k) is None


def _captured(host_us: list[float], compute_us: float = 1000.0, gpu: bool = True) -> dict:
    """A capture of equal device work on every rank, each rank's GPU idle ``host_us`` a step for launches."""
    ranks = [
        {
            "rank": r,
            "device": "gpu" if gpu else "cpu",
            "steps": 2,
            "median": {
                "span_us": compute_us + h,
                "compute_us": compute_us,
                "kernels": 100,
                "launches": 100,
                "idle": {"host": h, "other": 0.0 if gpu else h},  # on a CPU: time between operators
            },
        }
        for r, h in enumerate(host_us)
    ]
    return {"per_rank": ranks, "collectives": {"matched": False}}


@given(
    host=st.lists(st.floats(0.0, 5e4), min_size=2, max_size=4),
    slow=st.integers(0, 3),
    step_s=st.floats(1e-3, 1.0),
    gpu=st.booleans(),
)
def test_a_host_cause_is_named_only_where_its_own_numbers_exceed_the_others(host, slow, step_s, gpu):
    """Whatever the ranks' host times: "host" is named only when the straggler's exceeds the others' median by
    CAUSE_SHARE of a step, and otherwise the sentence says the cause is not determined, with both numbers."""
    slow = slow % len(host)
    records = [[{"total": step_s, "compute": step_s}] * 3 for _ in host]
    found = causes.cause(slow, records, _captured(host, gpu=gpu), 1)
    others = statistics.median(h for r, h in enumerate(host) if r != slow)
    if found["cause"] == "host":
        assert (host[slow] - others) / 1e6 >= causes.CAUSE_SHARE * step_s
    else:
        assert found["cause"] is None and "against" in found["undetermined"]
        s = {"rank": slow, "host": "h", "phase": "compute", "seconds": 1.0, "others_seconds": 1.0, **found}
        s.update(others_wait=0.1, others_wait_interval=[0.1, 0.1], others_wait_in="comm", share_of_repeat=0.1)
        s["interval_level"] = 0.95
        sentence = breakdown.straggler_sentence(s)
        assert "(host)" not in sentence and "not determined" in sentence
        seen = {"rank": slow, "host": "h", "phase": "step", "others_wait": 0.1, "others_wait_in": "comm", **found}
        seen.update(share_of_repeat=0.1, seen_in="captured steps")  # named from the captured collectives alone
        sentence = breakdown.straggler_sentence(seen)
        assert "(host)" not in sentence and "not determined" in sentence


def test_a_recorded_gpu_run_whose_late_work_the_phases_missed_is_named_from_its_kernels():
    """ResNet-50 on 2 GPUs with 10 ms of extra matrix products a step on rank 1: its host queued them and went on, so
    the timed phases of both ranks look alike (each host waited for its own GPU in the collective); the captured
    kernels show rank 1's device doing more, so it is named from them. The clean twins still name nobody."""
    s = straggler_of("resnet-r2-work")
    assert (s["rank"], s["cause"], s["seen_in"]) == (1, "more work", "captured steps")
    assert straggler_of("gpt2-r2") is None and straggler_of("resnet-r2") is None


def _late_device(compute_us: list[float], gpu: bool, waited_for: int, wait_us: float, kernels_n=None) -> dict:
    """A capture of two steps where the others waited ``wait_us`` a step in the collectives for ``waited_for``,
    each rank's kernels taking ``compute_us`` a step (``kernels_n`` of them)."""
    k = _captured([0.0] * len(compute_us), gpu=gpu)
    for r, c in enumerate(compute_us):
        k["per_rank"][r]["median"].update(compute_us=c, span_us=max(compute_us) + 100.0)
        k["per_rank"][r]["median"]["kernels"] = (kernels_n or [100] * len(compute_us))[r]
    waits = [0.0 if r == waited_for else wait_us for r in range(len(compute_us))]
    k["collectives"] = {"matched": True, "wait_us": waits, "wait_us_per_step": [[w, w] for w in waits]}
    k["device"] = "gpu" if gpu else "cpu"
    k["untimed_collectives"] = False
    return k


@given(size=st.integers(2, 4), late=st.integers(0, 3), extra=st.floats(0.0, 2.0), more=st.booleans(), gpu=st.booleans())
def test_the_captured_kernels_name_a_late_device_only_on_a_gpu_and_only_for_its_own_kernels(
    size, late, extra, more, gpu
):
    """Timed repeats that name nobody (every host alike) and captured steps in which the others waited for rank
    ``late``, whose kernels took ``extra`` times more than the others': named from the captured steps where that
    excess is at least CAUSE_SHARE of the step, as more work when it also ran more kernels or operators (a count the
    profiler cannot make up, on any device), else as a slower device on a GPU only (on a CPU the operators' times are
    the host's, which the repeats are trusted over)."""
    late %= size
    base = 1000.0
    compute = [base * (1 + extra) if r == late else base for r in range(size)]
    count = [110 if (r == late and more) else 100 for r in range(size)]
    kernels = _late_device(compute, gpu, late, wait_us=0.5 * base * max(extra, 0.2), kernels_n=count)
    records = [[{"total": 0.01, "compute": 0.01, "comm": 0.001}] * 6 for _ in range(size)]
    s = breakdown.breakdown(records, ["h"] * size, kernels, 1)["straggler"]
    span = max(compute) + 100.0
    if (gpu or more) and base * extra >= causes.CAUSE_SHARE * span:
        assert s["rank"] == late and s["seen_in"] == "captured steps"
        assert s["cause"] == ("more work" if more else "slower device")
    else:
        assert s is None


@given(
    size=st.integers(2, 4),
    late=st.integers(0, 3),
    queued=st.lists(st.floats(0.0, 400.0), min_size=4, max_size=4),
    host=st.floats(0.0, 400.0),
    gpu=st.booleans(),
    shared=st.booleans(),
)
def test_a_device_another_process_kept_busy_is_named_from_its_queued_idle_time(size, late, queued, host, gpu, shared):
    """The same kernels, equally long, on every rank, but rank ``late``'s GPU sat idle with its next kernel already
    queued (another process's work ran there, which its trace does not hold) while the others waited for it: named a
    slower device exactly when that idle exceeds the others' median by CAUSE_SHARE of the step and by EXPLAINED of the
    others' wait, on a GPU only (on a CPU the same field is time between operators, the host's); the evidence names
    the queued idle with both numbers. Where NVML saw another process on its GPU alone (``shared``), named a slower
    device whatever the idle."""
    late %= size
    queued = queued[:size]
    k = _late_device([1000.0] * size, gpu, late, wait_us=300.0)
    for r, q in enumerate(queued):
        k["per_rank"][r]["median"]["idle"] = {"host": host, "other": q}
    records = [[{"total": 0.01, "compute": 0.01, "comm": 0.001}] * 6 for _ in range(size)]
    s = breakdown.breakdown(records, ["h"] * size, k, 1, {late: 1} if shared else None)["straggler"]
    others = statistics.median(q for r, q in enumerate(queued) if r != late)
    excess = queued[late] - others
    if gpu and shared:
        assert (s["rank"], s["cause"], s["seen_in"]) == (late, "slower device", "captured steps")
    elif gpu and excess >= causes.CAUSE_SHARE * 1100.0 and excess >= breakdown.EXPLAINED * 300.0:
        assert (s["rank"], s["cause"], s["seen_in"]) == (late, "slower device", "captured steps")
        assert f"idle {queued[late] / 1e3:.2f} ms a step with its next kernel already queued" in s["evidence"]
        assert s["cause_seconds"] == pytest.approx((queued[late] - others) / 1e6)
    else:  # the others' wait alone names nobody where the phases time every collective
        assert s is None


@given(
    size=st.integers(2, 4),
    late=st.integers(0, 3),
    host=st.lists(st.floats(0.0, 400.0), min_size=4, max_size=4),
    beside=st.lists(st.integers(0, 2), min_size=4, max_size=4),
    captured=st.booleans(),
)
def test_a_gpu_another_process_used_names_a_slower_device_where_only_the_stragglers_did(
    size, late, host, beside, captured
):
    """The same kernels on every rank, the others waiting for rank ``late`` in every captured step, its device's
    idle time anything, and NVML's other processes on each rank's GPU (``beside``): a slower device, its evidence the
    other process, exactly when ``late``'s GPU had one and no other rank's did; else what the kernels say (a host
    cause needs its own excess). Without a capture, a straggler the repeats named gets the same cause from the fact."""
    late %= size
    beside = beside[:size]
    sharing = {r: n for r, n in enumerate(beside) if n}
    alone = beside[late] > 0 and not any(n for r, n in enumerate(beside) if r != late)
    if captured:
        k = _late_device([1000.0] * size, True, late, wait_us=300.0)
        for r, h in enumerate(host[:size]):
            k["per_rank"][r]["median"]["idle"] = {"host": h, "other": 0.0}
        records = [[{"total": 0.01, "compute": 0.01, "comm": 0.001}] * 6 for _ in range(size)]
        s = breakdown.breakdown(records, ["h"] * size, k, 1, sharing)["straggler"]
    else:  # rank ``late`` computes 5 ms longer a repeat, the others wait for it in the collective
        records = [
            [{"total": 0.02, "compute": 0.015 if r == late else 0.01, "comm": 0.001 if r == late else 0.006}] * 6
            for r in range(size)
        ]
        s = breakdown.breakdown(records, ["h"] * size, None, 1, sharing)["straggler"]
        assert s["rank"] == late
    if alone:
        assert (s["rank"], s["cause"]) == (late, "slower device")
        assert f"another process ran on its GPU ({beside[late]} beside its rank" in s["evidence"]
    else:
        assert s is None or s["cause"] != "slower device"


def test_a_recorded_cpu_run_whose_repeats_were_too_wide_is_named_more_work_from_its_operator_counts():
    """3 ranks on the 2 cores of the CPU machine, rank 0 given extra matrix products a step (the fault matrix's
    "more work"): in 3 of its 10 repeats the scheduler made rank 0 wait longest, so the interval of the others' wait
    reached below 5% of a repeat and the repeats named nobody. The captured steps count 157 operators a step on rank 0
    against 129: named from them."""
    r = json.loads((ANALYSES.parents[1] / "reports/cpu-3r-bn-more-work.json").read_text())
    records = [x["repeats"] for x in r["per_rank"]]
    steps = r["result"]["steps_per_repeat"]
    assert breakdown.breakdown(records, ["vm"] * 3, None, steps)["straggler"] is None  # the repeats alone
    s = breakdown.breakdown(records, ["vm"] * 3, r["kernels"], steps)["straggler"]
    assert (s["rank"], s["cause"], s["seen_in"]) == (0, "more work", "captured steps")
    assert "157 operators a step against 129" in s["evidence"]


@pytest.mark.parametrize("fault, cause", [("hog", "host"), ("data", "data")])
def test_a_recorded_gpt2_run_whose_wait_ddp_hid_is_named_where_its_own_phase_and_every_captured_step_agree(
    fault, cause
):
    """GPT-2 (124M) on 2 H200s, 3 repeats, rank 1 made slow on purpose (a host thread hogging its interpreter, 10 ms
    of data a step): rank 0 waited for it behind DDP's overlapped allreduce, in its device's backward and in a host
    blocked on a full launch queue, so its timed wait was 0 - 19 ms a repeat and the interval reached below 5% of a
    repeat. Rank 1's own phase exceeded rank 0's by more than that in each of the 3 repeats, and every captured step
    had rank 0 waiting for it: named, with its cause. The repeats alone name nobody."""
    r = json.loads(gzip.decompress((REPORTS / f"gpt2-124m-h200x2-r1-{fault}-3repeats.json.gz").read_bytes()))
    records = [x["repeats"] for x in r["per_rank"]]
    steps = r["result"]["steps_per_repeat"]
    assert breakdown.breakdown(records, ["vm"] * 2, None, steps)["straggler"] is None
    s = breakdown.breakdown(records, ["vm"] * 2, r["kernels"], steps)["straggler"]
    assert (s["rank"], s["cause"], s["seen_in"]) == (1, cause, "captured steps")


def _hidden_wait_run(size: int, late: int, excess: list[float], others_wait: list[float]):
    """Records of ``size`` ranks whose rank ``late`` spent ``excess[i]`` more than the others in its data phase in
    repeat i while the others' timed wait was ``others_wait[i]``, and captured steps in which the others waited for it
    in every step."""
    total = 0.02
    records = [
        [
            {
                "total": total,
                "compute": 0.01,
                "data": 0.0005 + (e if r == late else 0.0),
                "comm": 0.001 + (0.0 if r == late else w),
            }
            for e, w in zip(excess, others_wait)
        ]
        for r in range(size)
    ]
    return records, _late_device([1000.0] * size, True, late, wait_us=300.0)


@given(
    size=st.integers(2, 4),
    late=st.integers(0, 3),
    excess=st.lists(st.floats(0.0, 0.004), min_size=3, max_size=8),
    hidden=st.floats(1e-5, 0.0009),
)
def test_captured_steps_name_a_rank_the_repeats_hid_only_where_its_own_phase_exceeds_in_every_repeat(
    size, late, excess, hidden
):
    """Whatever the late rank's excess in each repeat: where the others' timed wait stays below 5% of a repeat
    (DDP hid it) and every captured step waited for the late rank, it is named exactly when its own phase exceeded
    the others' by 5% of a repeat in every repeat (a clean run's slower repeats come and go; a fault's stay)."""
    late %= size
    records, k = _hidden_wait_run(size, late, excess, [hidden] * len(excess))
    s = breakdown.breakdown(records, ["h"] * size, k, 1)["straggler"]
    bound = breakdown.SIGNIFICANT * 0.02
    if min(excess) >= bound:
        assert (s["rank"], s["cause"], s["seen_in"]) == (late, "data", "captured steps")
    else:
        assert s is None


@given(size=st.integers(2, 4), late=st.integers(0, 3), excess=st.floats(0.0, 0.004))
def test_captured_steps_do_not_overrule_repeats_whose_interval_judged(size, late, excess):
    """Where the others' timed wait was 8 ms a repeat in every repeat (40%: its interval above the bound), the repeats'
    own rules decide; a data phase a tenth of that wait explains none of it: nobody named, whatever the captured
    steps say."""
    late %= size
    records, k = _hidden_wait_run(size, late, [min(excess, 0.0026)] * 5, [0.008] * 5)
    assert breakdown.breakdown(records, ["h"] * size, k, 1)["straggler"] is None


@given(
    counts=st.lists(st.sampled_from([100, 101, 103, 110]), min_size=2, max_size=4),
    compute=st.lists(st.floats(500.0, 2000.0), min_size=4, max_size=4),
    waited_for=st.integers(0, 3),
    gpu=st.booleans(),
)
def test_a_rank_that_ran_more_kernels_or_operators_is_named_more_work_whoever_the_collectives_waited_for(
    counts, compute, waited_for, gpu
):
    """Timed repeats that name nobody and captured steps whose collectives waited for any rank: the rank that ran
    more than MORE_KERNELS times every other's kernels (or operators), taking SIGNIFICANT of a step longer for them
    than the longest of the others, is named more work, on a GPU or a CPU; where none did, nobody."""
    size = len(counts)
    compute = compute[:size]
    k = _late_device(compute, gpu, waited_for % size, wait_us=300.0, kernels_n=counts)
    records = [[{"total": 0.01, "compute": 0.01, "comm": 0.001}] * 6 for _ in range(size)]
    s = breakdown.breakdown(records, ["h"] * size, k, 1)["straggler"]
    top = max(range(size), key=counts.__getitem__)
    rest = [r for r in range(size) if r != top]
    span = max(compute) + 100.0
    more = counts[top] > causes.MORE_KERNELS * max(counts[r] for r in rest)
    if more and compute[top] - max(compute[r] for r in rest) >= breakdown.SIGNIFICANT * span:
        assert (s["rank"], s["cause"], s["seen_in"]) == (top, "more work", "captured steps")
    elif s is not None:  # only the rank the collectives waited for, on their own terms (kernel_straggler)
        assert s["rank"] == waited_for % size


@given(operators=st.floats(0.0, 3000.0), between=st.floats(0.0, 3000.0))
def test_on_a_cpu_a_slower_operator_or_the_time_between_them_is_named_by_which_added_more(operators, between):
    """A CPU rank whose operators took ``operators`` us a step longer than the others' and whose time between
    operators grew by ``between``: both are its host's, so the larger names the cause (a sleep before the forward
    leaves the next operators a little slower too), each only from CAUSE_SHARE of a step."""
    k = _captured([1000.0, 1000.0 + between], compute_us=10000.0, gpu=False)
    k["per_rank"][1]["median"]["compute_us"] += operators
    k["per_rank"][1]["median"]["span_us"] += operators
    records = [[{"total": 0.012, "compute": 0.012}] * 3 for _ in range(2)]
    found = causes.cause(1, records, k, 1)
    span = 11000.0 + between + operators
    if abs(operators - between) < 1e-6 and operators >= causes.CAUSE_SHARE * span:  # a tie: either
        assert found["cause"] in ("slower device", "host")
    elif operators >= causes.CAUSE_SHARE * span and operators >= between:
        assert found["cause"] == "slower device"
    elif operators >= causes.CAUSE_SHARE * span or between / 1e6 >= causes.CAUSE_SHARE * 0.012:
        assert found["cause"] == "host"
    else:
        assert found["cause"] is None


def test_a_wait_is_charged_to_the_rank_that_arrived_last_in_that_step_not_to_the_positions_usual_one():
    """Two ranks, two captured steps, one collective: rank 1 arrives 25 us late in the first step, rank 0 2 us late in
    the second (a tie in arrivals). Rank 1 is charged its 25 us (12.5 a step), rank 0 its 2 (1 a step); before, the tie
    went to rank 0 with both waits, 13.5 us a step, and a finding named rank 0 beside the straggler."""
    steps = [[{"comm_kernels": [30.0]}, {"comm_kernels": [5.0]}], [{"comm_kernels": [5.0]}, {"comm_kernels": [7.0]}]]
    c = causes.collectives([{"per_step": s} for s in steps])
    assert c["last"] == [{"collective": 0, "last_rank": 1, "others_waited_us": 12.5, "waited_for_us": [1.0, 12.5]}]
    path = causes.critical_path(c)
    assert sorted((p["last_rank"], p["others_waited_us"]) for p in path) == [(0, 1.0), (1, 12.5)]


@given(
    st.integers(2, 4).flatmap(
        lambda size: st.integers(1, 3).flatmap(
            lambda n: st.lists(
                st.lists(st.lists(st.floats(0.5, 1e4), min_size=n, max_size=n), min_size=size, max_size=size),
                min_size=1,
                max_size=4,
            )
        )
    )
)
def test_each_rank_is_charged_exactly_the_waits_of_the_steps_it_arrived_last(durations):
    """Whatever the captured steps' collective times (step -> rank -> position): at each position the critical path
    charges each rank what the others waited there in the steps it arrived last (it spent least), a step's mean; the
    charges add up to every wait at that position."""
    steps, size = len(durations), len(durations[0])
    per_rank = [[{"comm_kernels": durations[k][r]} for k in range(steps)] for r in range(size)]
    path = causes.critical_path(causes.collectives([{"per_step": s} for s in per_rank]))
    for j in range(len(durations[0][0])):
        expected = [0.0] * size
        for k in range(steps):
            d = [durations[k][r][j] for r in range(size)]
            expected[d.index(min(d))] += sum(x - min(d) for x in d) / steps
        charged = [0.0] * size
        for p in path:
            if p["collective"] == j:
                charged[p["last_rank"]] += p["others_waited_us"]
        assert charged == pytest.approx(expected)
