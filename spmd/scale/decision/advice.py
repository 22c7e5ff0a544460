"""Plain sentences from a measured sweep and its fitted model: what scaled, what did not, why."""

from __future__ import annotations

from ...core.stats import LEVEL, median_interval
from ...core.topology import MORE_CPUS
from ...core.units import fmt_bytes, fmt_seconds
from ...report.breakdown import straggler_sentence, time_shared
from ..models.node import ranks_on_a_node
from ..models.phases import HOST_PHASES
from ..models.scaling_model import predict
from ..models.series import NOT_LOCAL, OVERLAPPED

CONTENTION = 0.8  # a phase's per-rank throughput falling below 80% of the base size's
SLOWER = 1.02  # a larger group taking 2% longer than a smaller one counts as slower
LOW_EFFICIENCY = 0.9  # below this, name the phase furthest above ideal scaling
MODEL_ERROR_NOTE = 0.25
WORTH_SWITCHING = 0.05  # another communicator saving 5% of a repeat is worth naming as the one to use
READ_BOUND = 0.5  # reading is half a repeat or more: the sweep is storage-bound
AT_THE_LIMIT = 0.8  # the read runs at 80% or more of plain preads of the same bytes


def series_advice(rows: list[dict]) -> list[str]:
    """Sentences for one series (its figure rows, smallest size first)."""
    if len(rows) < 2:
        return []
    mode, base, last = rows[0]["mode"], rows[0], rows[-1]
    out = []
    if mode == "strong":
        out.append(
            f"Strong scaling {base['ranks']} -> {last['ranks']} ranks: speedup "
            f"{last['speedup']:.2f}x{_within(last, 'speedup_interval', '{:.2f}x')}, efficiency "
            f"{last['efficiency']:.0%}{_within(last, 'efficiency_interval', '{:.0%}')}."
        )
        fixed = _fixed_cost(base, last)
        if fixed:
            phase, before, after = fixed
            costs = (
                "kernel launches or file opens"
                if base.get("device") == "gpu"
                else "Python and MPI call overhead or file opens"
            )
            out.append(
                f"{phase} took {fmt_seconds(before)} at {base['ranks']} rank(s) and {fmt_seconds(after)} "
                f"at {last['ranks']}: it does not shrink with each rank's share (a fixed cost per repeat "
                f"such as {costs}, or a resource the ranks share)."
            )
    else:
        out.append(
            f"Weak scaling {base['ranks']} -> {last['ranks']} ranks: efficiency "
            f"{last['efficiency']:.0%}{_within(last, 'efficiency_interval', '{:.0%}')} (each rank's share took "
            f"{last['time'] / base['time']:.2f}x as long)."
        )
        shared = _contention(base, last)
        if shared:
            phase, before, after = shared
            rate = last["bytes_per_rank"] / 1e9
            out.append(
                f"Per rank, {phase} moved {rate / before:.3g} GB/s at {base['ranks']} rank(s) but "
                f"{rate / after:.3g} GB/s at {last['ranks']} ({before / after - 1:+.0%}): the ranks "
                f"share something that does not grow with them (memory bandwidth, a PCIe link, the "
                f"file system)."
            )
    for prev, cur in zip(rows, rows[1:]):
        if cur["time"] > prev["time"] * SLOWER and mode == "strong":
            if not _apart(prev, cur):  # the intervals overlap: the data cannot say it got slower
                out.append(
                    f"Adding ranks did not measurably change the time: {prev['ranks']} -> {cur['ranks']} ranks "
                    f"took {fmt_seconds(prev['time'])} -> {fmt_seconds(cur['time'])}, within each other's "
                    f"intervals{_intervals(prev, cur)}."
                )
                continue
            phase, delta = _grew_most(prev, cur)
            out.append(
                f"Adding ranks made the job slower: {prev['ranks']} -> {cur['ranks']} ranks took "
                f"{fmt_seconds(prev['time'])} -> {fmt_seconds(cur['time'])} "
                f"(+{cur['time'] / prev['time'] - 1:.0%}{_intervals(prev, cur)}); {phase} grew most "
                f"(+{fmt_seconds(delta)})."
            )
        elif cur.get("efficiency_interval", [cur["efficiency"]] * 2)[1] < LOW_EFFICIENCY:
            phase, delta = _furthest_from_ideal(rows[0], cur)
            out.append(
                f"At {cur['ranks']} ranks efficiency is {cur['efficiency']:.0%}: {phase} is "
                f"{fmt_seconds(delta)} above ideal scaling."
            )
    return out


def _within(row: dict, key: str, fmt: str) -> str:
    """' (interval 1.80x-1.90x)' where the row has one, else ''."""
    iv = row.get(key)
    return f" (interval {fmt.format(iv[0])}-{fmt.format(iv[1])})" if iv else ""


def _apart(a: dict, b: dict) -> bool:
    """Whether two runs' time intervals do not overlap (rows without intervals: by their times)."""
    ia, ib = a.get("time_interval"), b.get("time_interval")
    if not ia or not ib:
        return True
    return ib[0] > ia[1] or ia[0] > ib[1]


def _intervals(a: dict, b: dict) -> str:
    ia, ib = a.get("time_interval"), b.get("time_interval")
    if not ia or not ib:
        return ""
    return (
        f"; intervals {fmt_seconds(ia[0]).strip()} - {fmt_seconds(ia[1]).strip()} and "
        f"{fmt_seconds(ib[0]).strip()} - {fmt_seconds(ib[1]).strip()}"
    )


def oversubscription_advice(runs: list[dict]) -> list[str]:
    """One sentence per rank count whose ranks outnumber a host's CPUs."""
    out, seen = [], set()
    for run in runs:
        place = run["placement"]
        for host in place["oversubscribed"]:
            key = (run["ranks"], host)
            if key not in seen:
                seen.add(key)
                out.append(
                    f"At {run['ranks']} ranks, host {host} runs {place['ranks_per_node'][host]} ranks on "
                    f"{place['cpus_per_node'][host]} CPUs: they compete for cores, so this size measures "
                    f"contention, not scaling (the model is fitted without it)."
                )
    return out


def binding_advice(runs: list[dict]) -> list[str]:
    """One sentence when GPU ranks ran bound to one CPU each with CPUs to spare (topology.single_cpu_gpu_ranks):
    a launch-bound step then measures its CPU's contention, at every rank count where it happened."""
    counts = sorted({run["ranks"] for run in runs if run["placement"].get("single_cpu_gpu_ranks")})
    if not counts:
        return []
    return [
        f"At {', '.join(map(str, counts))} rank(s) the launcher bound each GPU rank to one CPU while the node had CPUs"
        " to spare: each rank's host thread shared it with NCCL's proxy thread, so small or eager steps measure"
        f" that contention as well as scaling. Launch with several CPUs per rank ({MORE_CPUS})."
    ]


def storage_advice(runs: list[dict]) -> list[str]:
    """Whether the largest run is storage-bound: its read phase against N-thread preads of the same bytes,
    measured on each rank right after it (run["read_limit"])."""
    run = max((r for r in runs if r.get("read_limit") and all(r["read_limit"])), key=lambda r: r["ranks"], default=None)
    if run is None:
        return []
    timings = run["report"]["timings"]
    read, total = timings["read"]["median"], timings["total"]["median"]
    per_rank = sum(x["bytes"] for x in run["read_limit"]) / len(run["read_limit"])
    rate = per_rank / timings["read"]["max"] / 1e9 if timings["read"]["max"] > 0 else float("inf")
    limit = min(x["bytes"] / x["seconds"] for x in run["read_limit"]) / 1e9
    share = read / total if total > 0 else 0.0
    where = (
        f"At {run['ranks']} ranks each rank read {fmt_bytes(per_rank)} at {rate:.3g} GB/s (the slowest rank), "
        f"{rate / limit:.0%} of what plain preads of the same bytes on the reader's threads reached right after "
        f"({limit:.3g} GB/s); reading is {share:.0%} of a repeat."
    )
    if share < READ_BOUND:
        return [where]
    if rate >= AT_THE_LIMIT * limit:
        return [
            where + " The sweep is storage-bound: the reads run at what the file system (or page cache) gives, "
            "so more GPUs add readers of the same storage, not speed; fewer bytes or faster storage do."
        ]
    return [
        where + " The sweep is read-bound below the storage's limit: a faster engine or more reader threads "
        "(io.engine, io.threads; spmd bench io compares them) would shorten every repeat."
    ]


def straggler_advice(runs: list[dict]) -> list[str]:
    """One sentence per run whose ranks waited for one of them (report.json's breakdown)."""
    out = []
    for run in runs:
        s = (run["report"].get("breakdown") or {}).get("straggler")
        if s:
            shared = time_shared(run["report"].get("placement"), s["host"])
            out.append(f"At {run['ranks']} ranks ({run['mode']}): " + straggler_sentence(s, False, shared))
    return out


def interval_note(runs: list[dict]) -> str:
    """The one statement of the intervals' levels for a sweep's findings (the lines themselves say none, so no two
    lines read as differently sure): each run's median over its repeats with its order-statistics interval, at
    LEVEL where its repeats allow, else at the most they give."""
    counts = sorted({len(r["report"]["per_rank"][0]["repeats"]) for r in runs if r["report"].get("per_rank")})
    if not counts:
        return ""
    levels = ", ".join(f"{n} repeats: {median_interval(range(n)).level:.0%}" for n in counts)
    return (
        f"Intervals: every interval in these findings is a run's median over its repeats with its order-statistics "
        f"confidence interval, at {LEVEL:.0%} where the repeats allow it, else the most they give ({levels}); "
        f"a ratio's interval joins the ends of both."
    )


def suspect_advice(series: dict) -> list[str]:
    """One sentence per run whose figures a careful reader would doubt (its ``suspect`` reasons)."""
    return [
        f"Suspect: {row['mode']} at {row['ranks']} ranks ({'; '.join(row['suspect'])}): read its figures with care."
        for rows in series.values()
        for row in rows
        if row.get("suspect")
    ]


def model_advice(
    model: dict | None, best: dict | None, even: list[dict], measured_max: int, hardware: dict | None = None
) -> list[str]:
    """Sentences from the fitted model: best rank count, break-even sizes, model error.

    ``hardware``: what the sweep's hosts hold ({'count', 'what', 'nodes'}), to label a predicted best beyond
    it as an extrapolation past the hardware present."""
    if model is None:
        return ["No model: it needs runs at two or more sizes with a known problem size."]
    out = []
    comm = model["comm"]
    bw = (
        f", bandwidth {comm['busbw_Bps'] / 1e9:.3g} GB/s"
        if comm["busbw_Bps"]
        else ", bandwidth not identified (messages too small; the probe was off)"
    )
    out.append(
        f"Comm model ({comm['backend']}): latency {fmt_seconds(comm['alpha_s'])} per step{bw}, "
        f"overhead {fmt_seconds(comm['overhead_s'])} per repeat; from {comm['source']}."
    )
    if comm.get("hidden_behind"):
        out.append(
            f"The collectives ran beside {comm['hidden_behind']} (timed as overlapped): predictions charge only what "
            f"outlasts it, so slower links cost nothing until they take longer than {comm['hidden_behind']}."
        )
    if model.get("host_floor_s"):
        out.append(
            f"Bound by the host below {fmt_seconds(model['host_floor_s'])} of GPU work a repeat: where the GPU's "
            "phases took less (a small share, many launches), it idled outside every phase, waiting for the host to "
            "issue the next launches. More ranks shrink the GPU's work, not the host's: predictions hold a repeat's "
            "GPU phases at that floor. Fewer, larger kernels or a captured CUDA graph lower it."
        )
    for phase, fit in model["local"].items():
        if fit.get("node_seconds_per_byte") and fit["seconds_per_byte"] > 0:
            out.append(
                f"{phase} slowed as the node filled: each further rank on a node adds "
                f"{fit['node_seconds_per_byte'] / fit['seconds_per_byte']:.0%} to its time per byte (the same bytes "
                f"per rank measured with more ranks on the node). The ranks share what a node has once (memory "
                f"bandwidth, page cache, host links): the predictions charge it, and fewer ranks a node, over "
                f"more nodes, would not pay it. Measured with up to {fit['node_ranks_measured']} rank(s) on a "
                + (
                    f"node, the growth is taken as linear beyond: a limit the ranks reach only with more of them on a "
                    f"node would come on top, so for more ranks a node the prediction of {phase} is a lower bound."
                    if phase in HOST_PHASES
                    else "node, the growth is held there beyond (no more ranks a node were measured): what it would "
                    "add growing on is the top of each prediction's interval."
                )
            )
    if best:
        n = best["best_ranks"]
        row = next(r for r in best["by_ranks"] if r["ranks"] == n)
        where = ""
        layout = _layout(model, n)
        if hardware and n > hardware["count"]:
            where = (
                f" (an extrapolation: only {hardware['count']} {hardware['what']} are present on "
                f"{hardware['nodes']} node(s); it assumes {layout}, each rank with its own and the same links)"
            )
        elif n > measured_max:
            where = (
                f" (extrapolated beyond the {measured_max} measured, assuming {layout}, each added rank with its own "
                f"core or GPU and the same links)"
            )
        if n == 1:
            out.append(
                f"For this problem ({fmt_bytes(best['problem_bytes'])}) one rank is predicted fastest "
                f"({fmt_seconds(row['predicted_s'])}): more ranks cost more in comm and overhead "
                f"than they save."
            )
        else:
            out.append(
                f"For this problem ({fmt_bytes(best['problem_bytes'])}) the predicted best is {n} ranks "
                f"({fmt_seconds(row['predicted_s'])}){where}."
            )
        rise = _beyond_best(model, best)
        if rise:
            out.append(rise)
    parts = []
    for e in even:
        if e["status"] == "above":
            parts.append(f"{e['ranks']} ranks above {fmt_bytes(e['bytes_per_rank'])} per rank")
        elif e["status"] == "always":
            parts.append(f"{e['ranks']} ranks at any size")
        else:
            parts.append(f"{e['ranks']} ranks never")
    if parts:
        out.append("Break-even (more ranks beat one): " + "; ".join(parts) + ".")
    worst = max((p for p in model["points"] if p["fitted"]), key=lambda p: abs(p["error"]))
    if not model.get("validated", True):
        out.append(
            f"The model is not validated: it was fitted on {model['points_fitted']} measured point(s), no "
            f"more than its {model['parameters']} parameters per phase, so it meets them by construction "
            f"(largest error {worst['error']:+.1%}); measure more rank counts, or strong and weak, to "
            f"test its predictions."
        )
        return out
    verdict = "fits" if abs(worst["error"]) <= MODEL_ERROR_NOTE else "misses"
    out.append(
        f"The model {verdict} the measurements: largest error {worst['error']:+.1%} "
        f"({worst['mode']} at {worst['ranks']} ranks)"
        + (
            "; the unmodelled wait (input imbalance) or shared resources explain such gaps."
            if verdict == "misses"
            else "."
        )
    )
    return out


def _layout(model: dict, ranks: int) -> str:
    """How ``ranks`` ranks sit on nodes in the model's predictions: 'the 8 ranks as 4 nodes of 2'."""
    per_node = ranks_on_a_node(model, ranks)
    nodes = -(-ranks // per_node)
    return f"the {ranks} ranks as {nodes} node(s) of {per_node}" if nodes > 1 else f"the {ranks} ranks on one node"


def _local_times(base: dict, cur: dict):
    """(phase, slowest rank's seconds at base, at cur) of each local phase worth 5% of cur's repeat."""
    for phase, t in cur["timings"].items():
        before = base["timings"].get(phase, {"max": 0.0})["max"]
        if phase not in NOT_LOCAL and before > 0 and t["max"] >= 0.05 * cur["time"]:
            yield phase, before, t["max"]


def _fixed_cost(base: dict, cur: dict) -> tuple[str, float, float] | None:
    """Strong scaling: the phase that shrank least, if it kept over ``CONTENTION`` of its time
    while each rank's share fell."""
    kept = [
        (after / before, phase, before, after)
        for phase, before, after in _local_times(base, cur)
        if cur["ranks"] > base["ranks"] and after > CONTENTION * before
    ]
    return max(kept)[1:] if kept else None


def _contention(base: dict, cur: dict) -> tuple[str, float, float] | None:
    """Weak scaling (same bytes per rank): the phase whose time grew most, if its throughput
    per rank fell below ``CONTENTION`` of the base size's."""
    if not cur.get("bytes_per_rank"):
        return None
    slowed = [
        (after / before, phase, before, after)
        for phase, before, after in _local_times(base, cur)
        if cur["ranks"] > base["ranks"] and before < CONTENTION * after
    ]
    return max(slowed)[1:] if slowed else None


def _beyond_best(model: dict, best: dict) -> str | None:
    """When more ranks than the best are predicted slower: by how much, and which phase grows."""
    larger = [r for r in best["by_ranks"] if r["ranks"] > best["best_ranks"]]
    if not larger:
        return None
    n, m = best["best_ranks"], larger[0]["ranks"]
    at_best = predict(model, n, best["problem_bytes"])
    at_next = predict(model, m, best["problem_bytes"])
    growth = {p: at_next[p] - at_best[p] for p in at_best if p != "total"}
    phase = max(growth, key=growth.get)
    return (
        f"Beyond {n} ranks the predicted time rises ({fmt_seconds(at_best['total'])} at {n}, "
        f"{fmt_seconds(at_next['total'])} at {m}): {phase} grows by {fmt_seconds(growth[phase])} "
        f"while each rank's work shrinks."
    )


def _grew_most(prev: dict, cur: dict) -> tuple[str, float]:
    deltas = {
        p: cur["timings"][p]["median"] - prev["timings"].get(p, {"median": 0.0})["median"]
        for p in cur["timings"]
        if p != "total" and p not in OVERLAPPED
    }
    phase = max(deltas, key=deltas.get)
    return phase, deltas[phase]


def _furthest_from_ideal(base: dict, cur: dict) -> tuple[str, float]:
    """The phase with the largest excess over ideal: strong = base time x n0/n, weak = base time."""
    scale = base["ranks"] / cur["ranks"] if cur["mode"] == "strong" else 1.0
    excess = {
        p: cur["timings"][p]["median"] - base["timings"].get(p, {"median": 0.0})["median"] * scale
        for p in cur["timings"]
        if p != "total" and p not in OVERLAPPED
    }
    phase = max(excess, key=excess.get)
    return phase, excess[phase]


def backend_advice(runs: list[dict], used: str) -> list[str]:
    """Which communicator moved this workload's own messages fastest at the measured sizes
    (``runs[i]['backends']``, timed by ``sweep.compare_backends``; ``runs[i]['time']`` is the
    run's repeat), and what switching from the one the sweep ``used`` would save."""
    rows = [(r, r["backends"]["seconds"]) for r in runs if r.get("backends") and len(r["backends"]["seconds"]) > 1]
    out = []
    winners = [min(seconds, key=seconds.get) for _, seconds in rows]
    stopped = {name for r, _ in rows for name in r["backends"].get("stopped") or {}}
    if rows and len(set(winners)) == 1:
        best = winners[0]
        sizes = [o["bytes"] for r, _ in rows for o in r["backends"]["ops"]]
        ops = sorted({o["op"] for r, _ in rows for o in r["backends"]["ops"]})
        where = "at every measured size" if len(rows) > 1 else f"at {rows[0][0]['ranks']} ranks"
        out.append(
            f"Communicator: {best} was fastest for this workload's own collectives {where} "
            f"({', '.join(ops)} of {_span(sizes, fmt_bytes)} per rank; per repeat "
            f"{_comparison(best, [s for _, s in rows], stopped)}); {_switch(rows, best, used)}"
        )
    elif rows:
        for (run, seconds), best in zip(rows, winners):
            ops = ", ".join(f"{o['op']} of {fmt_bytes(o['bytes'])}" for o in run["backends"]["ops"])
            out.append(
                f"Communicator at {run['mode']} {run['ranks']} ranks ({ops} per rank): {best} was fastest "
                f"(per repeat {_comparison(best, [seconds], stopped)}); {_switch([(run, seconds)], best, used)}"
            )
    skipped = {}
    for r in runs:
        skipped.update((r.get("backends") or {}).get("skipped", {}))
    out += [f"Communicator {name} not compared: {why}" for name, why in sorted(skipped.items())]
    return out


def _switch(rows: list[tuple[dict, dict]], best: str, used: str) -> str:
    """What the sweep's communicator cost against the fastest: worth a change from WORTH_SWITCHING
    of a repeat on."""
    if best == used:
        return f"the sweep used {used}."
    pairs = [(run, seconds[used] - seconds[best]) for run, seconds in rows if used in seconds]
    if not pairs:
        return f"the sweep used {used}."
    saved = [s for _, s in pairs]
    share = max([s / run["time"] for run, s in pairs if run.get("time")], default=0.0)
    cost = f"{_span(saved, fmt_seconds)} more per repeat ({share:.1%} of a repeat at most)"
    if share >= WORTH_SWITCHING:
        return f"the sweep used {used}, which took {cost}: set comm: {best}."
    return f"the sweep used {used}, which took {cost}: not worth a change."


def _comparison(best: str, timings: list[dict], stopped: set[str] = frozenset()) -> str:
    """'nccl 18-25 us, mpi 3.1-4x as long, ...' over the timed runs; a communicator whose timing ``stopped`` early
    (compare_backends: its ops so far already many times the fastest's) 'more than Nx as long'."""
    names = [best] + sorted({n for t in timings for n in t} - {best})
    parts = [f"{best} {_span([t[best] for t in timings], fmt_seconds)}"]
    for name in names[1:]:
        ratios = [t[name] / t[best] for t in timings if name in t and t[best] > 0]
        if name in stopped:
            parts.append(f"{name} more than {min(ratios):.3g}x as long (timed no further)")
        else:
            parts.append(f"{name} {_span(ratios, lambda x: f'{x:.3g}')}x as long")
    return ", ".join(parts)


def _span(values: list[float], fmt) -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)} to {fmt(hi)}"


COST_PARTS = {
    "inputs": "inputs",
    "warm_start": "every rank's warm start",
    "setup": "set-up",
    "warmup": "warm-up",
    "repeats": "repeats",
    "capture": "capture",
    "verify": "checks",
    "calibration": "calibration",
    "report": "reports",
    "between_runs": "between runs",
}


def cost_words(cost: dict) -> str:
    """The sweep's own cost: its wall time, the timed steps within it, and every other part."""
    parts = ", ".join(
        f"{COST_PARTS.get(name, name)} {fmt_seconds(seconds).strip()}"
        for name, seconds in cost["parts_s"].items()
        if seconds >= 0.0005
    )
    ratio = cost["beyond_timed"]
    beyond = f"; everything else took {ratio:.1f}x the timed steps" if ratio is not None else ""
    return (
        f"The sweep's own cost: {fmt_seconds(cost['total_s']).strip()} of wall time for "
        f"{fmt_seconds(cost['timed_steps_s']).strip()} of timed repeats ({parts}){beyond}."
    )
