"""The per-rank breakdown and the straggler on synthetic repeats whose answer is known by construction."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spmd.report.breakdown import EXPLAINED, SIGNIFICANT, breakdown, findings, per_repeat

HOSTS = ["a", "b", "c"]


def repeats(
    rank_read: list[float],
    comm_s: float = 0.010,
    compute: float = 0.050,
    n: int = 8,
    jitter: float = 0.0,
    seed: int = 0,
) -> list[list[dict]]:
    """Per rank, n repeats of reduce's shape: read, then the barrier (wait) until the slowest read ends, compute,
    then a collective of ``comm_s`` that ends when the last rank arrives."""
    rng = np.random.default_rng(seed)
    out = [[] for _ in rank_read]
    for _ in range(n):
        reads = [r * (1 + jitter * rng.random()) for r in rank_read]
        computes = [compute * (1 + jitter * rng.random()) for _ in rank_read]
        start_comm = [max(reads) + c for c in computes]
        end = max(start_comm) + comm_s
        for rank, (read, c, sc) in enumerate(zip(reads, computes, start_comm)):
            out[rank].append(
                {"read": read, "wait": max(reads) - read, "compute": c, "comm": end - sc, "total": end + 1e-4}
            )
    return out


def test_categories_add_up_and_the_collective_is_the_fastest_ranks():
    rec = repeats([0.01, 0.01, 0.01], jitter=0.1)
    for rank_parts, rank_records in zip(per_repeat(rec), rec):
        for parts, r in zip(rank_parts, rank_records):
            assert sum(parts[c] for c in ("compute", "comm", "data", "wait", "other")) == pytest.approx(r["total"])
            assert parts["comm"] <= r["comm"] and parts["wait"] >= r["wait"]
    b = breakdown(rec, HOSTS)
    assert b["straggler"] is None  # 10% jitter: nobody waits 5% of a repeat in every repeat
    assert [r["host"] for r in b["per_rank"]] == HOSTS and all(r["overlap"] is None for r in b["per_rank"])


def test_a_slow_reader_is_named_with_its_phase_and_the_others_wait():
    b = breakdown(repeats([0.01, 0.21, 0.01], jitter=0.05), HOSTS)
    s = b["straggler"]
    assert (s["rank"], s["host"], s["phase"], s["others_wait_in"]) == (1, "b", "read", "wait")
    assert s["seconds"] == pytest.approx(0.21, rel=0.06) and s["others_seconds"] == pytest.approx(0.01, rel=0.06)
    assert s["others_wait"] == pytest.approx(0.20, rel=0.1)
    assert b["per_rank"][0]["share"]["wait"] > 0.5 > b["per_rank"][1]["share"]["wait"]
    text = findings(
        {
            "breakdown": b,
            "intervals": {"total": {"median": 0.27, "low": 0.27, "high": 0.27, "level": 0.99, "n": 8}},
            "repeat_rule": {"rule": "fixed"},
        }
    )
    assert text[0].startswith("Rank 1 on b is the straggler: its read took") and "in wait" in text[0]


@given(n=st.integers(1, 6), late=st.integers(0, 2), slow=st.floats(0.05, 0.5))
def test_a_straggler_is_named_only_from_three_repeats_or_more(n, late, slow):
    """One rank's read slower by ``slow`` s in each of ``n`` repeats: named from 3 repeats on (the fewest whose median
    has an interval, 75%); from 1 or 2 none is, and the findings say why."""
    reads = [slow + 0.01 if r == late else 0.01 for r in range(3)]
    b = breakdown(repeats(reads, n=n, jitter=0.02), HOSTS)
    if n >= 3:
        assert b["straggler"]["rank"] == late
        return
    assert b["straggler"] is None
    report = {"breakdown": b, "intervals": {"total": {"median": 0.1, "low": 0.1, "high": 0.1, "level": 0.0, "n": n}}}
    assert f"No straggler is looked for in {n} repeat(s)" in " ".join(findings(report))


def test_a_slow_computer_is_waited_for_in_the_collective():
    rec = repeats([0.01, 0.01, 0.01])
    for rank in (0, 2):  # rank 1 computes 0.1 s longer: the others wait inside comm
        for r in rec[rank]:
            r["comm"] += 0.1
            r["total"] += 0.1
    for r in rec[1]:
        r["compute"] += 0.1
        r["total"] += 0.1
    s = breakdown(rec, HOSTS)["straggler"]
    assert (s["rank"], s["phase"], s["others_wait_in"]) == (1, "compute", "comm")


@pytest.mark.parametrize("late", [0.05, 0.2, 0.6])
def test_the_repeat_without_the_straggler_is_the_clean_repeat(late):
    """Rank 1 reads ``late`` s longer every repeat: without it a repeat takes what the clean run's does."""
    clean = repeats([0.01, 0.01, 0.01], jitter=0.05, seed=3)
    slow = repeats([0.01, 0.01 + late, 0.01], jitter=0.05, seed=3)
    s = breakdown(slow, HOSTS)["straggler"]
    clean_total = float(np.median([max(r[i]["total"] for r in clean) for i in range(8)]))
    assert s["rank"] == 1 and s["repeat_without_it"] == pytest.approx(clean_total, rel=0.1)
    text = findings(
        {
            "breakdown": {"straggler": s, "per_rank": []},
            "intervals": {"total": {"median": 0.3, "low": 0.3, "high": 0.3, "level": 0.99, "n": 8}},
            "repeat_rule": {"rule": "fixed"},
        }
    )
    assert "without it a repeat would take about" in text[0]


def test_one_slow_repeat_is_not_a_straggler():
    rec = repeats([0.01, 0.01, 0.01])
    rec[1][3]["read"] += 0.2  # once: the interval of the others' wait still starts near zero
    for rank in (0, 2):
        rec[rank][3]["wait"] += 0.2
    assert breakdown(rec, HOSTS)["straggler"] is None


def test_overlap_is_the_hidden_share_of_communication():
    rec = repeats([0.01, 0.01])
    for rank in rec:
        for r in rank:
            r["comm_overlapped"] = 3 * r["comm"]
    overlaps = [r["overlap"] for r in breakdown(rec, HOSTS[:2])["per_rank"]]
    assert overlaps == [pytest.approx(0.75), pytest.approx(0.75)]


def test_a_tight_run_has_no_noise_finding_and_a_wide_one_says_why():
    b = breakdown(repeats([0.01, 0.01]), HOSTS[:2])
    tight = {"median": 1.0, "low": 0.99, "high": 1.02, "level": 0.97, "n": 12}
    wide = {"median": 1.0, "low": 0.8, "high": 1.3, "level": 0.97, "n": 40}
    auto = {"rule": "auto", "bound": 0.05, "max_seconds": 30.0, "stopped": "budget"}
    assert findings({"breakdown": b, "intervals": {"total": tight}, "repeat_rule": auto}) == []
    said = findings({"breakdown": b, "intervals": {"total": wide}, "repeat_rule": auto})
    assert said[0].startswith(
        "Noisy: the time per repeat is 1 s with a 97% interval of 800 ms - 1.3 s over 40 repeats after the 30 s budget"
    )


def test_sampled_phases_that_overshoot_the_repeat_are_scaled_to_it():
    """torch scales its marked steps' phases to the window: on a noisy machine they can add up to more than the
    repeat. The shares still add up to 100% and no rank's wait exceeds its repeat."""
    rec = [[{"compute": 0.02, "comm": 0.07, "total": 0.06}] * 4, [{"compute": 0.015, "comm": 0.02, "total": 0.06}] * 4]
    b = breakdown(rec, HOSTS[:2])
    for r in b["per_rank"]:
        assert sum(r["share"].values()) == pytest.approx(1.0)
        assert all(0 <= v <= 0.06 + 1e-12 for v in r["seconds"].values())


@pytest.mark.parametrize("oversubscribed", [True, False])
def test_a_straggler_on_a_host_of_more_ranks_than_cpus_is_said_to_be_maybe_the_schedulers(oversubscribed):
    b = breakdown(repeats([0.01, 0.21, 0.01], jitter=0.05), ["h", "h", "h"])
    placement = {
        "oversubscribed": ["h"] if oversubscribed else [],
        "ranks_per_node": {"h": 3},
        "cpus_per_node": {"h": 2 if oversubscribed else 8},
    }
    report = {
        "breakdown": b,
        "placement": placement,
        "intervals": {"total": {"median": 0.27, "low": 0.27, "high": 0.27, "level": 0.99, "n": 8}},
        "repeat_rule": {"rule": "fixed"},
    }
    text = findings(report)[0]
    assert text.startswith("Rank 1 on h is the straggler")
    said = "Its host ran 3 ranks on 2 CPU(s), so they time-shared cores: the wait may be the scheduler's"
    assert (said in text) == oversubscribed
    assert (
        findings({**report, "placement": None})[0]
        == findings({**report, "placement": {**placement, "oversubscribed": []}})[0]
    )


@given(late=st.integers(0, 2), wait=st.floats(0.006, 0.05), explained=st.floats(0.0, 1.5))  # wait: above SIGNIFICANT
def test_a_rank_is_named_only_where_its_own_phases_explain_the_others_wait(late, wait, explained):
    """The others waited ``wait`` s a repeat in the collective for rank ``late``, whose read took ``explained`` of
    that longer than theirs (on a GPU a host's wait also holds its own device's work, so a wait can come without a
    slower rank): named exactly when its read explains EXPLAINED of the wait."""
    rec = repeats([0.01, 0.01, 0.01], comm_s=0.002)
    for rank in range(3):
        for r in rec[rank]:
            if rank == late:
                r["read"] += explained * wait
            else:
                r["comm"] += wait
            r["total"] += wait
    s = breakdown(rec, HOSTS)["straggler"]
    if explained * wait >= EXPLAINED * wait * 1.01:
        assert s is not None and s["rank"] == late and s["phase"] == "read"
    elif explained * wait < EXPLAINED * wait * 0.99:
        assert s is None


GPU_PHASES = ("data", "forward", "backward", "optimizer")


def gpu_steps(
    host: dict,
    device: dict,
    late: int,
    size: int,
    extra: dict,
    seed: int,
    n: int = 8,
    steps: int = 8,
    blocks: str | None = None,
):
    """Per rank, ``n`` repeats of a DDP step on a GPU as the torch workload records them: each phase's device span
    (CUDA events), its host side (``host:PHASE``) and the exposed allreduce. Every host issues each phase in
    ``host`` s, every device runs it in ``device`` s. Rank ``late`` adds ``extra``, seconds by phase under "host" (a
    host slower there) or "device" (more device work), or nothing (its host merely started behind the others'). A
    device that is fed late runs at its host's pace; a device fed ahead (its rank waited in the
    allreduce) shows its kernels alone; the allreduce ends when the last rank's device arrives. ``blocks``: a phase
    in which each host reads a value back from its device (a model's forward that checks a mask does), so that an
    early rank's host there waits as long as its device waits for the late one."""
    rng = np.random.default_rng(seed)
    out = [[] for _ in range(size)]
    for _ in range(n):
        j = [1 + 0.02 * rng.random() for _ in range(size)]
        h = [
            {p: host[p] * j[r] + (extra.get("host", {}).get(p, 0.0) if r == late else 0.0) for p in host}
            for r in range(size)
        ]
        g = [
            {p: device[p] * j[r] + (extra.get("device", {}).get(p, 0.0) if r == late else 0.0) for p in device}
            for r in range(size)
        ]
        # the late rank's device is fed at its host's pace (or runs its own longer work); the others' are fed ahead
        own = [sum(max(h[r][p], g[r][p]) for p in GPU_PHASES) for r in range(size)]
        step = max(own) + 2e-5  # the allreduce's transfer
        for r in range(size):
            span = {p: (max(h[r][p], g[r][p]) if r == late else g[r][p]) for p in GPU_PHASES}
            exposed = step - sum(span.values())
            rec = {p: steps * span[p] for p in GPU_PHASES}
            rec.update({f"host:{p}": steps * (h[r][p] + (exposed if p == blocks else 0.0)) for p in GPU_PHASES})
            rec.update(comm_exposed=steps * exposed, comm_buffers=0.0, comm_overlapped=0.0, step=steps * step)
            rec.update(comm=steps * exposed, compute=steps * (step - exposed), total=steps * step + 1e-4)
            out[r].append(rec)
    return out


gpu_case = dict(
    host=st.fixed_dictionaries({p: st.floats(1e-4, 2e-3) for p in GPU_PHASES}),
    fed=st.floats(0.05, 0.9),  # a device's own time for a phase, as a share of its host's
    late=st.integers(0, 2),
    size=st.integers(2, 3),
    where=st.sampled_from(GPU_PHASES),
    seed=st.integers(0, 99),
)


@given(**gpu_case)
def test_a_gpu_rank_fed_late_by_a_host_no_slower_than_the_others_is_no_straggler(host, fed, late, size, where, seed):
    """Every rank's host and device alike, one host behind the others: its device runs at its host's pace while
    the others' devices, fed ahead, wait for it in the allreduce every step. Its spans are longer, its own work is
    not: no straggler (the clean GPU runs of the fault matrix named one this way)."""
    late = min(late, size - 1)
    rec = gpu_steps(host, {p: fed * host[p] for p in host}, late, size, {}, seed)
    assert breakdown(rec, HOSTS[:size])["straggler"] is None


@given(**gpu_case, behind=st.floats(0.45, 0.85))
def test_a_gpu_rank_whose_host_is_a_little_slower_than_the_others_is_no_straggler(
    host, fed, late, size, where, seed, behind
):
    """Rank ``late``'s host slower in one phase by ``behind`` of SIGNIFICANT of a step: the others' devices, fed
    ahead, wait for it in the allreduce far longer than that (their own hosts would have kept them waiting anyway),
    and its own excess explains a third of the wait it caused; but that caused wait, the step's only real loss, is
    below SIGNIFICANT of a repeat, so nobody is named (the clean GPU runs of the fault matrix, one host a little slower
    than the other's, named one this way)."""
    late = min(late, size - 1)
    added = behind * SIGNIFICANT * sum(host.values())
    rec = gpu_steps(host, {p: fed * host[p] for p in host}, late, size, {"host": {where: added}}, seed)
    assert breakdown(rec, HOSTS[:size])["straggler"] is None


@given(**gpu_case, kind=st.sampled_from(["host", "device"]), blocks=st.sampled_from([None, *GPU_PHASES]))
def test_a_gpu_rank_slower_in_its_own_host_or_device_is_named_there(host, fed, late, size, where, seed, kind, blocks):
    """The same steps with rank ``late``'s host slower in one phase, or its device given more work there, by as long
    as a step: that rank is named, in that phase, its own excess what was added; also where the others' hosts spent
    their wait in a phase that reads a value back (``blocks``: the wait is not their own host's work). Not where that
    phase is the one the late rank is slow in: there a host's wait and a host's work take the same wall time, and the
    late rank's host is no measure of the others' own work (a limit of ``_fed_ahead``)."""
    late = min(late, size - 1)
    blocks = None if blocks == where else blocks
    added = sum(host.values())
    rec = gpu_steps(host, {p: fed * host[p] for p in host}, late, size, {kind: {where: added}}, seed, blocks=blocks)
    s = breakdown(rec, HOSTS[:size])["straggler"]
    assert s is not None and s["rank"] == late and s["phase"] == where
    assert (s.get("cause") == "data") == (where == "data")  # without a capture the data phase alone says why
    clean = 8 * sum(host.values())  # a step at the hosts' pace, 8 a repeat
    assert s["repeat_without_it"] == pytest.approx(clean, rel=0.1)
