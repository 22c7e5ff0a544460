"""Where each rank's repeat went, and who the others waited for (Holistic Trace Analysis' view of a run).

Per rank, each repeat's time splits into
- ``compute``: the ``compute`` phase (a workload's own local work);
- ``comm``: communication itself: in each repeat the fastest rank's ``comm`` (a collective ends for all ranks at
  about the same moment, so the rank that arrived last spent least in it: that time is the exchange);
- ``data``: data movement, ``read`` and ``h2d``;
- ``wait``: waiting for the slowest rank: the ``wait`` phase (the barrier after reads) plus the rank's ``comm``
  above the fastest rank's in that repeat (time in the collective before the last rank arrived);
- ``other``: the rest of the repeat (host work no phase times).
Where the timed parts add up to more than the repeat (workloads that time some steps and scale them to the
window, torch and train, on a noisy machine), they are scaled down to it, so shares always add up to 100%.
``overlap``: the share of communication hidden behind computation (``comm_overlapped`` over it and the exposed
``comm``) where the workload overlaps them.

The straggler is the rank that waited least while the others waited: named when, over MIN_REPEATS repeats or more,
in every repeat the interval of the median rests on, the others' mean wait exceeds SIGNIFICANT of the repeat (a 95%
interval of the median of their wait that lies above the bound), with the phase in which its own work added most
beyond the others', which must explain EXPLAINED of that wait. On a GPU that excess is what its host or its device
added, not a device span stretched by a host no slower than theirs (``capture.causes.phase_excess``); where the
hosts set a GPU step's pace, the wait it caused is the others' less what their devices would have waited for their
own hosts anyway (``_fed_ahead``), and that caused wait must itself reach SIGNIFICANT of a repeat: a host merely
behind, or slower by less than that, costs the step nothing the others' own hosts would not have. The captured steps
name one on their own only where the phases do not time every collective, where the late rank ran more kernels or
operators than the others, where the repeats' interval was too low or wide but the rank every captured step waited
for waited least and its own phase exceeded the others' by SIGNIFICANT of a repeat in every repeat (DDP hides a
peer's wait in its overlapped backward: ``timed_agree``), or, on a GPU, where its own kernels took longer by EXPLAINED
of the others' wait, or NVML saw another process on its GPU alone (``captured_straggler``).
"""

from __future__ import annotations

import statistics

from ..core.stats import BOUND, Interval, median_interval
from ..core.timing import HOST_SIDE, is_host_side
from ..core.units import fmt_seconds
from .capture.causes import MORE_KERNELS, cause, phase_excess, shared_alone

CATEGORIES = ("compute", "comm", "data", "wait", "other")
DATA_PHASES = ("read", "h2d")
OVERLAPPED = ("comm_overlapped",)
NOT_OWN = (
    "wait",
    "comm",
    "comm_overlapped",
    "h2d_overlapped",
    "total",
    "comm_exposed",
    "comm_buffers",
    "comm_syncbn",
    "step",
)
SIGNIFICANT = 0.05  # the others' wait must be at least this share of a repeat to name a straggler
MIN_WAIT_S = 1e-4  # and at least this long (below it, timer resolution and scheduling noise)
MIN_REPEATS = 3  # the fewest repeats that give the others' wait an interval (75%): fewer name no straggler
SECONDARY = 0.25  # the critical path names a rank waited for at least this share of the most waited-for one
# the straggler's own excess (its phase furthest above the others') must account for at least this share of the
# others' wait: on a GPU each host also waits for its own device in the collective, and which host waits longer
# moves with the pipeline's phase, not with a slower rank
EXPLAINED = 1 / 3
DEVICE_CAUSES = ("more work", "slower device")  # a cause a GPU's own kernels show, whatever its host did


def per_repeat(records_by_rank: list[list[dict]]) -> list[list[dict[str, float]]]:
    """For each rank, for each recorded repeat, its seconds in each category."""
    n = min(len(records) for records in records_by_rank)
    out: list[list[dict[str, float]]] = [[] for _ in records_by_rank]
    for i in range(n):
        repeat = [records[i] for records in records_by_rank]
        fastest_comm = min(r.get("comm", 0.0) for r in repeat)
        for rank, r in enumerate(repeat):
            comm = r.get("comm", 0.0)
            parts = {
                "compute": r.get("compute", 0.0),
                "comm": fastest_comm,
                "data": sum(r.get(p, 0.0) for p in DATA_PHASES),
                "wait": r.get("wait", 0.0) + comm - fastest_comm,
            }
            timed = sum(parts.values())
            if timed > r["total"] > 0:  # phases sampled on some steps and scaled (torch, train) can overshoot
                parts = {c: v * r["total"] / timed for c, v in parts.items()}
            parts["other"] = max(0.0, r["total"] - sum(parts.values()))
            parts["total"] = r["total"]
            parts["wait_in_phase"] = r.get("wait", 0.0)
            parts["overlapped"] = sum(r.get(p, 0.0) for p in OVERLAPPED)
            parts["exposed_comm"] = comm
            out[rank].append(parts)
    return out


def breakdown(
    records_by_rank: list[list[dict]],
    hosts: list[str],
    kernels: dict | None = None,
    steps: int | None = None,
    sharing: dict[int, int] | None = None,
) -> dict:
    """report.json's ``breakdown``: per rank the seconds per repeat (mean over repeats) and share of each
    category, the overlap of communication with computation where there was any, and the straggler (or None)
    with its cause (spmd.report.capture.causes). ``kernels`` are the captured steps, ``steps`` a repeat's,
    ``sharing`` the ranks whose GPU ran other processes (core.host.device_sharing)."""
    repeats = per_repeat(records_by_rank)
    ranks = []
    for rank, parts in enumerate(repeats):
        # means, so that a category's seconds over the total are its share (a median of a category that is zero in
        # most repeats would read "0 s" beside a share of 8%)
        seconds = {c: statistics.fmean(p[c] for p in parts) for c in CATEGORIES}
        total = sum(p["total"] for p in parts)
        share = {c: sum(p[c] for p in parts) / total if total > 0 else 0.0 for c in CATEGORIES}
        hidden = sum(p["overlapped"] for p in parts)
        exposed = sum(p["exposed_comm"] for p in parts)
        overlap = hidden / (hidden + exposed) if hidden > 0 else None
        ranks.append(
            {
                "rank": rank,
                "host": hosts[rank],
                "seconds": seconds,
                "share": share,
                "total": statistics.fmean(p["total"] for p in parts),
                "overlap": overlap,
            }
        )
    late = straggler(records_by_rank, repeats, hosts)
    if late is not None:
        late.update(cause(late["rank"], records_by_rank, kernels, steps, sharing))
    elif kernels:
        late = captured_straggler(records_by_rank, kernels, hosts, steps, sharing, repeats)
    return {"categories": list(CATEGORIES), "per_rank": ranks, "straggler": late}


def captured_straggler(
    records_by_rank: list[list[dict]],
    kernels: dict,
    hosts: list[str],
    steps: int | None,
    sharing=None,
    repeats: list[list[dict]] | None = None,
):
    """The straggler the timed repeats could not name, from the captured steps (None where they name none either):
    whom every captured step waited for, where the phases do not time every collective, or where the timed repeats
    agree (``timed_agree``); on a GPU, a rank whose own kernels took longer (DEVICE_CAUSES); and on any device, a
    rank that ran more kernels or operators than the others (more work), whoever the collectives say the others
    waited for. A GPU that is late keeps every host waiting on its own device inside the collective, so the
    hosts' phases look alike; the kernels' durations show it, and the profiler's uneven cost to each host (which the
    repeats are trusted over) does not lengthen them. A count of operators is no timing at all: the profiler's cost
    cannot make one up, where the repeats of ranks time-sharing cores can leave their intervals too wide to name it."""
    late = more_work_straggler(kernels, hosts) or kernel_straggler(kernels, hosts)
    if late is None:
        return None
    late.update(cause(late["rank"], records_by_rank, kernels, steps, sharing))
    if kernels.get("untimed_collectives") or late.get("cause") == "more work":
        return late
    if late.get("cause") and repeats and timed_agree(records_by_rank, repeats, late["rank"]):
        return late
    if kernels.get("device") != "gpu" or late.get("cause") not in DEVICE_CAUSES:
        return None
    # its kernels' extra time must explain the others' wait, or NVML must show another process on its GPU alone
    # (time-sliced with another process, the device waits between kernels, not inside them)
    others = [r for r in range(len(hosts)) if r != late["rank"]]
    explained = (late.get("cause_seconds") or 0.0) >= EXPLAINED * late["others_wait"]
    return late if explained or shared_alone(late["rank"], others, sharing) else None


def timed_agree(records_by_rank: list[list[dict]], repeats: list[list[dict]], late: int) -> bool:
    """Whether the timed repeats point at rank ``late`` too, where the interval of the others' wait was too wide or
    too low to name it (where it was not, the repeats judged on their own: their rules stand): it waited least
    (median), and its own work, timed outside any profiler, exceeds the others' by SIGNIFICANT of a repeat in its
    furthest phase (``_slowest_phase``) in every repeat, not in their median alone. Behind DDP's overlapped
    allreduce a GPU rank's wait for a late peer sits in its device's backward and in a host blocked on a full launch
    queue, not in its timed wait, so three repeats can leave that wait's interval below the bound while the late
    rank's own phase and every captured step show it."""
    if len(repeats) < 2 or not repeats[0]:
        return False
    slow, others, their_wait, _, bound = _waits(repeats)
    if slow != late or (len(their_wait) >= MIN_REPEATS and median_interval(their_wait).low >= bound):
        return False
    phase = _slowest_phase(records_by_rank, late, others)[0]
    each = range(len(their_wait))
    least = min(phase_excess([[rank[i]] for rank in records_by_rank], late, others, phase) or 0.0 for i in each)
    return least >= bound


def _waits(repeats: list[list[dict]]) -> tuple[int, list[int], list[float], list[float], float]:
    """Who waited least (median over repeats), the others, their mean wait in each repeat, each repeat's time (its
    slowest rank's) and the bound a wait must reach to count (SIGNIFICANT of the median repeat, MIN_WAIT_S at least)."""
    size, n = len(repeats), len(repeats[0])
    slow = min(range(size), key=lambda r: statistics.median(p["wait"] for p in repeats[r]))
    others = [r for r in range(size) if r != slow]
    their_wait = [statistics.fmean(repeats[r][i]["wait"] for r in others) for i in range(n)]
    totals = [max(parts[i]["total"] for parts in repeats) for i in range(n)]
    return slow, others, their_wait, totals, max(MIN_WAIT_S, SIGNIFICANT * statistics.median(totals))


def more_work_straggler(kernels: dict | None, hosts: list[str]) -> dict | None:
    """The rank whose captured steps ran more kernels or operators than every other rank's (MORE_KERNELS times),
    taking SIGNIFICANT of a step longer for them: a step waits for its slowest rank's own work at its collectives,
    whatever order the others' arrivals took there. None where no rank did."""
    ranks = (kernels or {}).get("per_rank") or []
    if len(ranks) < 2 or not all(r.get("steps") for r in ranks):
        return None
    counts = [r["median"]["kernels"] for r in ranks]
    late = max(range(len(ranks)), key=counts.__getitem__)
    others = [r for r in range(len(ranks)) if r != late]
    span = statistics.median(r["median"]["span_us"] for r in ranks)
    extra = ranks[late]["median"]["compute_us"] - max(ranks[r]["median"]["compute_us"] for r in others)
    if counts[late] <= MORE_KERNELS * max(counts[r] for r in others) or extra < SIGNIFICANT * span:
        return None
    coll = kernels.get("collectives") or {}
    waited = statistics.fmean(coll["wait_us"][r] for r in others) if coll.get("matched") else 0.0
    return {
        "rank": late,
        "host": hosts[late],
        "phase": "step",
        "others_wait": waited / 1e6,
        "others_wait_in": "comm",
        "share_of_repeat": waited / span,
        "seen_in": "captured steps",
    }


def kernel_straggler(kernels: dict | None, hosts: list[str]) -> dict | None:
    """The rank the others waited for inside the captured steps' collectives: the others' median wait a step at
    least SIGNIFICANT of the step. Asked only where the timed phases do not time every collective (``kernels``'
    ``untimed_collectives``: SyncBatchNorm's, a graph replay's): elsewhere the repeats' intervals decide, and two or
    three profiled steps, each rank's host slowed unevenly by the profiler, do not overrule them."""
    coll = (kernels or {}).get("collectives") or {}
    if not coll.get("matched"):
        return None
    waits = coll["wait_us"]
    slow = min(range(len(waits)), key=waits.__getitem__)
    others = [w for r, w in enumerate(waits) if r != slow]
    spans = [x["median"]["span_us"] for x in kernels["per_rank"] if x.get("steps")]
    if not spans:
        return None
    bound = max(MIN_WAIT_S * 1e6, SIGNIFICANT * statistics.median(spans))
    per_step = coll["wait_us_per_step"]
    steps = range(len(per_step[0]))
    # in every captured step, not in their median alone: a few steps give no interval
    if min(statistics.fmean(per_step[r][k] for r in range(len(waits)) if r != slow) for k in steps) < bound:
        return None
    return {
        "rank": slow,
        "host": hosts[slow],
        "phase": "step",
        "others_wait": statistics.fmean(others) / 1e6,
        "others_wait_in": "comm",
        "share_of_repeat": statistics.fmean(others) / statistics.median(spans),
        "seen_in": "captured steps",
    }


def straggler(records_by_rank: list[list[dict]], repeats: list[list[dict]], hosts: list[str]) -> dict | None:
    """The rank the others waited for, when the intervals say they did (see the module's docstring)."""
    if len(repeats) < 2 or len(repeats[0]) < MIN_REPEATS:  # one or two repeats: no interval says they waited
        return None
    slow, others, their_wait, totals, bound = _waits(repeats)
    interval = median_interval(their_wait)
    if interval.low < bound:
        return None
    phase, mine, theirs, excess = _slowest_phase(records_by_rank, slow, others)
    # on a GPU whose hosts set the pace, the others' devices would have waited for their own hosts that long anyway
    fed = statistics.fmean(_fed_ahead(records_by_rank[r], records_by_rank[slow]) for r in others)
    caused = max(0.0, interval.median - fed)
    if caused < bound:  # a host merely behind: the others' steps would have taken as long without it
        return None
    if excess < EXPLAINED * caused:  # its own phases do not explain why the others waited
        return None
    in_phase = statistics.fmean(statistics.median(p["wait_in_phase"] for p in repeats[r]) for r in others)
    where = "wait" if in_phase >= interval.median / 2 else "comm"
    return {
        "rank": slow,
        "host": hosts[slow],
        "phase": phase,
        "seconds": mine,
        "others_seconds": theirs,
        "others_wait": interval.median,
        "others_wait_caused": caused,
        "others_wait_interval": [interval.low, interval.high],
        "interval_level": interval.level,
        "others_wait_in": where,
        "share_of_repeat": interval.median / statistics.median(totals),
        # what a repeat would take without it: each repeat less what it added, the others' wait for it or, where
        # less, its own excess (on a GPU the others' wait also holds their own device's work; median over repeats)
        "repeat_without_it": statistics.median(t - min(w, excess) for t, w in zip(totals, their_wait)),
    }


def _fed_ahead(records: list[dict], late: list[dict]) -> float:
    """Seconds a repeat a rank's device would have waited for its own host had no rank been late (median over
    repeats): its host's time in the phases whose host side it recorded beyond their device spans, counting in each
    phase no more host time than the late rank's host took there (a host that blocked on a collective's result, as
    a model's forward that reads a value back does, spent the wait there, not its own work). 0 where none was
    recorded (a CPU's phases are the host's)."""
    sides = [p for p in records[0] if is_host_side(p)] if records else []
    if not sides:
        return 0.0
    return statistics.median(
        max(0.0, sum(min(r[s], t.get(s, r[s])) - r.get(s.removeprefix(HOST_SIDE), 0.0) for s in sides))
        for r, t in zip(records, late)
    )


def _slowest_phase(records_by_rank, slow: int, others: list[int]) -> tuple[str, float, float, float]:
    """The straggler's own phase furthest above the other ranks' (``phase_excess``): (phase, its median, theirs, its
    own excess)."""

    def median_of(rank: int, phase: str) -> float:
        return statistics.median(r.get(phase, 0.0) for r in records_by_rank[rank])

    def theirs(phase: str) -> float:
        return statistics.median(median_of(r, phase) for r in others)

    phases = sorted({p for r in records_by_rank[slow] for p in r if not is_host_side(p)} - set(NOT_OWN))
    if "forward" in phases and "compute" in phases:  # a training step's own phases: compute is their sum
        phases.remove("compute")
    if not phases:
        mine = median_of(slow, "total")
        return "total", mine, theirs("total"), mine - theirs("total")
    excess = {p: phase_excess(records_by_rank, slow, others, p) for p in phases}
    phase = max(phases, key=excess.get)
    return phase, median_of(slow, phase), theirs(phase), excess[phase]


def findings(report: dict) -> list[str]:
    """Sentences on the run's per-rank view: the straggler, overlap, and whether the timings are tight."""
    out = []
    s = report["breakdown"]["straggler"]
    if s:
        out.append(straggler_sentence(s, shared=time_shared(report.get("placement"), s["host"])))
    total = Interval(**report["intervals"]["total"])
    if not s and len(report["breakdown"]["per_rank"]) > 1 and total.n < MIN_REPEATS:
        out.append(
            f"No straggler is looked for in {total.n} repeat(s): the others' wait has no interval below "
            f"{MIN_REPEATS} repeats (repeats: {MIN_REPEATS} or more, or auto)."
        )
    path = critical_path_sentence(report.get("kernels"))
    if path:
        out.append(path)
    overlaps = [r["overlap"] for r in report["breakdown"]["per_rank"] if r["overlap"] is not None]
    if overlaps:
        out.append(
            f"Communication overlapped computation: {min(overlaps):.0%} - {max(overlaps):.0%} of it was hidden "
            f"(per rank; the rest is exposed, in comm)."
        )
    rule = report.get("repeat_rule") or {}
    bound = rule.get("bound", BOUND)
    if total.n > 1 and not total.tight(bound, need_level=rule.get("rule") == "auto"):
        why = f" after the {rule['max_seconds']:g} s budget" if rule.get("stopped") == "budget" else ""
        fix = (
            "a quieter machine or a larger max_seconds"
            if rule.get("rule") == "auto"
            else "more repeats (repeats: auto) or a quieter machine"
        )
        out.append(
            f"Noisy: the time per repeat is {fmt_seconds(total.median).strip()} with a {total.level:.0%} "
            f"interval of {fmt_seconds(total.low).strip()} - {fmt_seconds(total.high).strip()} over "
            f"{total.n} repeats{why}, not within +-{bound:.0%} at 95%: {fix} would pin it down."
        )
    return out


def time_shared(placement: dict | None, host: str) -> tuple[int, int] | None:
    """(ranks, CPUs) of ``host`` where it ran more ranks than it has CPUs (report.json ``placement``), else None."""
    if not placement or host not in (placement.get("oversubscribed") or []):
        return None
    return placement["ranks_per_node"][host], placement["cpus_per_node"][host]


def straggler_sentence(s: dict, level: bool = True, shared: tuple[int, int] | None = None) -> str:
    """The straggler finding: who, why (its cause with the numbers, where one was found), and what it cost.
    ``level`` puts the interval's level in the sentence (a sweep states the levels once for all its findings);
    ``shared`` is its host's ranks and CPUs where the ranks time-shared cores."""
    if s.get("cause"):
        why = f"{s['evidence']}"
    elif "seconds" in s:  # named from the timed phases
        why = (
            f"its {s['phase']} took {fmt_seconds(s['seconds']).strip()} per repeat against "
            f"{fmt_seconds(s['others_seconds']).strip()} on the other ranks (median)"
        )
    else:  # named from the captured steps' collectives alone
        why = "the others waited for it in every captured step"
    cause = f" ({s['cause']})" if s.get("cause") else ""
    if not s.get("cause") and s.get("undetermined"):  # the captured steps hold no cause beyond the others'
        why += f"; its cause is not determined by the captured steps ({s['undetermined']})"
    if s.get("seen_in") == "captured steps":
        cost = (
            f"the others waited {fmt_seconds(s['others_wait']).strip()} a step for it in the collectives of the "
            f"captured steps: {s['share_of_repeat']:.0%} of a step"
        )
    else:
        low, high = s["others_wait_interval"]
        at = f"{s['interval_level']:.0%} " if level else ""
        cost = (
            f"the others waited {fmt_seconds(s['others_wait']).strip()} per repeat for it "
            f"({at}interval {fmt_seconds(low).strip()} - "
            f"{fmt_seconds(high).strip()}), in {s['others_wait_in']}: "
            f"{s['share_of_repeat']:.0%} of a repeat"
        )
        if s.get("repeat_without_it"):
            cost += f"; without it a repeat would take about {fmt_seconds(s['repeat_without_it']).strip()}"
    sentence = f"Rank {s['rank']} on {s['host']} is the straggler{cause}: {why}; {cost}."
    if shared:  # a rank the scheduler holds back makes the others wait just as a slow one does
        sentence += (
            f" Its host ran {shared[0]} ranks on {shared[1]} CPU(s), so they time-shared cores: the wait may be "
            f"the scheduler's, not this rank's work."
        )
    return sentence


def critical_path_sentence(kernels: dict | None) -> str | None:
    """Who each captured step waited for: at how many of its collectives each rank arrived last, and what the others
    waited there (a step's critical path runs through the late rank's work up to each of those collectives); only
    the ranks the others waited for SIGNIFICANT of a step or more, and SECONDARY of the most waited-for rank's wait
    (None where none was)."""
    coll = (kernels or {}).get("collectives") or {}
    path = (kernels or {}).get("critical_path") or []
    if not coll.get("matched") or not path:
        return None
    by_rank: dict[int, list] = {}
    for c in path:
        by_rank.setdefault(c["last_rank"], []).append(c["others_waited_us"])
    # a rank the others waited for less than SIGNIFICANT of a captured step is arrival noise, not a path; so is one
    # waited for less than SECONDARY of the most waited-for rank (arrivals reordered behind one late rank)
    spans = [x["median"]["span_us"] for x in kernels["per_rank"] if x.get("steps")]
    bound = SIGNIFICANT * statistics.median(spans) if spans else 0.0
    if by_rank:
        bound = max(bound, SECONDARY * max(sum(w) for w in by_rank.values()))
    by_rank = {r: w for r, w in by_rank.items() if sum(w) >= bound}
    if not by_rank:
        return None
    parts = [
        f"rank {r} at {len(w)} of {coll['per_step']} ({fmt_seconds(sum(w) / 1e6).strip()} a step)"
        for r, w in sorted(by_rank.items(), key=lambda kv: -sum(kv[1]))
    ]
    return (
        f"In the captured steps the others waited in the collectives for: {'; '.join(parts)} (the allreduce itself, "
        f"the last arrival's transfer: {fmt_seconds(coll['transfer_us'] / 1e6).strip()} a step)."
    )
