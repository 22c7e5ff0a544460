"""The scaling model ``T(n, S) = sum over local phases (a + (S/n) / rate) + comm(n) + gap``.

Fitted to a sweep, never assumed:
- each local phase (read, h2d, compute, ...): time against bytes per rank S/n, affine
  when three or more distinct shares were measured, proportional otherwise (a rank's reads and copies in,
  HOST_PHASES, against S/n plus its slice of an operand that does not grow with the problem, ``sliced``: matmul's
  B read in slices, B/n a rank whatever A's rows; weak scaling grows A, not B); where the sweep
  measured the same bytes per rank at two counts of ranks on a node (a weak series beside the
  strong one) and the phase slowed as the node filled, a node term too: ``+ (S/n) (k - 1) c``
  for k ranks on a node, the ranks sharing what a node has once (its memory bandwidth, page cache,
  host links; on GPUs only the host's phases, HOST_PHASES); beyond the ranks a node was measured with, a host
  phase's growth is carried on, a compute phase's held where it was (``node.node_growth``); a phase whose work
  is a step's whatever the share (a training step's optimizer, PER_STEP_PHASES): its time on the sweep's own
  problem on one rank, no seconds a byte (``fit_per_step``);
- comm: an alpha-beta model ``alpha x steps + beta x bytes on the busiest link`` (the
  terms of ``measure.collectives``) fitted to the collectives timed on each group (or to
  the workload's own comm phases), plus the comm phase's fixed overhead;
- collectives run beside the compute (a halo behind the interior, ``comm_overlapped`` timed): only what the
  compute phase does not hide is exposed (``hidden_behind``);
- gap: what a repeat costs beyond its timed phases (Python, synchronisation); on GPUs, a host floor too: a
  rank's host issues a repeat's device work in no less than ``host_floor_s``, and where the device's phases
  take less (a small share, many launches) the device idles for the rest, outside every phase.
A repeat ends when its slowest rank does, so local phases are fitted to their maximum
over ranks, and comm to its minimum: the last rank to arrive waits least, so its comm
time is the collective itself, while the others' also holds their wait for it.
"""

from __future__ import annotations

import statistics

import numpy as np

from ...measure.collectives import model_terms
from .node import cores_slowdown, local_seconds, ranks_on_a_node
from .phases import HOST_PHASES, PER_STEP_PHASES, own_problem_alone, phase_bytes
from .series import NOT_LOCAL

MAX_SHARE_BYTES = 1 << 50  # break-even search: up to 1 PiB per rank
# a phase's growth with the ranks on a node below this share of its time, at every point fitted, is noise, not a
# node's shared resource: fitted, it would be extrapolated to every rank count
NODE_TERM_MIN_SHARE = 0.05
# the local phase a collective timed as overlapped runs beside (a stencil's halo behind its interior)
BESIDE = "compute"


def fit_local(xs: list[float], ys: list[float], node_ranks: list[int] | None = None) -> dict:
    """Fit ``y = intercept + x / rate`` (seconds against bytes per rank), never negative.

    Affine when two or more distinct shares were measured (with exactly two, the line runs through the mean time at
    each), proportional otherwise. With ``node_ranks`` (the ranks on each point's busiest node), where points of the
    same share ran with different counts on a node, ``y = intercept + x / rate + x (k - 1) c``: c
    (``node_seconds_per_byte``, what each further rank on the node adds per byte) is what those points show, the
    median over such shares of the slope of their times against ``x (k - 1)``, never negative; the rest is fitted to
    the times less it. Only the points of equal bytes decide c, because a term fitted by least squares over every
    point also takes up whatever else bends the line: a small share that stays in a cache runs faster per byte,
    which reads as the node filling. The term is kept where it is at least NODE_TERM_MIN_SHARE of the phase's time
    at some point fitted.
    """
    plain = _fit_share(xs, ys)
    if node_ranks is None or not _node_term_identified(xs, node_ranks):
        return plain
    x, y, k = (np.asarray(v, float) for v in (xs, ys, node_ranks))
    if not (y > 0).all():
        return plain
    same = np.round(x, 6)
    slopes = [
        float(np.polyfit(x[same == share] * (k[same == share] - 1), y[same == share], 1)[0])
        for share in np.unique(same)
        if len(np.unique(k[same == share])) > 1
    ]
    c = max(0.0, float(np.median(slopes)))
    growth = c * x * (k - 1)
    rest = _fit_share(list(x), list(y - growth))
    fitted = rest["intercept_s"] + rest["seconds_per_byte"] * x + growth
    if c <= 0 or not (growth >= NODE_TERM_MIN_SHARE * fitted).any():
        return plain
    return {
        **rest,
        "node_seconds_per_byte": c,
        "node_ranks_measured": int(k.max()),  # beyond it: node_growth
        "fit": f"{rest['fit']} + node",
    }


def fit_per_step(ys: list[float]) -> dict:
    """A phase whose work is a step's whatever a rank's share (PER_STEP_PHASES): its median time, no seconds a byte."""
    return {
        "intercept_s": float(statistics.median(ys)),
        "seconds_per_byte": 0.0,
        "rate_Bps": None,
        "fit": "per step",
        "shares": 1,
    }


def _node_term_identified(xs: list[float], node_ranks: list[int]) -> bool:
    """Whether two points measured the same bytes per rank with different counts of ranks on a node."""
    seen: dict[float, set[int]] = {}
    for x, k in zip(xs, node_ranks):
        seen.setdefault(round(float(x), 6), set()).add(int(k))
    return any(len(ks) > 1 for ks in seen.values())


def _fit_share(xs: list[float], ys: list[float]) -> dict:
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    shares = len(set(xs))
    if shares >= 2:
        a, b = np.linalg.lstsq(np.stack([np.ones_like(x), x], axis=1), y, rcond=None)[0]
        if b < 0:
            a, b = float(np.mean(y)), 0.0
        elif a < 0:
            a, b = 0.0, float(x @ y / (x @ x))
        kind = "affine"
    else:
        a, b = 0.0, float(x @ y / (x @ x)) if x @ x > 0 else 0.0
        kind = "proportional"
    return {
        "intercept_s": float(a),
        "seconds_per_byte": float(b),
        "rate_Bps": 1 / b if b > 0 else None,
        "fit": kind,
        "shares": shares,
    }


def nonnegative_lstsq(columns: list[np.ndarray], t: np.ndarray) -> list[float]:
    """Least squares ``t ~ sum(c_i x column_i)`` with every c_i >= 0, in relative error
    (each row divided by its ``t``: timings span decades, and plain least squares would let
    the largest ones decide everything). A negative coefficient is dropped (set to 0) and
    the rest refitted: an exact active-set solution for the two or three terms used here."""
    active = list(range(len(columns)))
    while active:
        a = np.stack([columns[i] / t for i in active], axis=1)
        solution = np.linalg.lstsq(a, np.ones_like(t), rcond=None)[0]
        if (solution >= 0).all():
            coefficients = [0.0] * len(columns)
            for i, c in zip(active, solution):
                coefficients[i] = float(c)
            return coefficients
        active.pop(int(np.argmin(solution)))
    return [0.0] * len(columns)


def fit_alpha_beta(points: list[tuple[float, float, float]]) -> tuple[float, float]:
    """``t = alpha x steps + beta x volume`` with alpha, beta >= 0.

    Args:
        points: (latency steps, bytes over the busiest link, seconds); one-rank points
            (no steps) carry no information and are ignored.
    """
    pts = [p for p in points if p[0] > 0 and p[2] > 0]
    if not pts:
        return 0.0, 0.0
    s, v, t = (np.asarray(c, float) for c in zip(*pts))
    alpha, beta = nonnegative_lstsq([s, v], t)
    return alpha, beta


def collectives_time(comm_model: dict, ranks: int, ops: list[dict]) -> float:
    """Alpha-beta time of the collectives ``ops`` ([{'op', 'bytes' per rank, 'calls'}]) on ``ranks``."""
    total = 0.0
    for item in ops:
        steps, volume = model_terms(item["op"], ranks, item["bytes"])
        total += item.get("calls", 1) * (comm_model["alpha_s"] * steps + comm_model["beta_s_per_B"] * volume)
    return total


def scaled_ops(model: dict, ranks: int, problem_bytes: float) -> list[dict]:
    """The reference run's collectives, message bytes scaled by (share / reference share)**growth
    (an op's own ``growth`` overrides the workload's) and by (ranks / reference ranks)**ranks_power
    (an op's ``ranks_power``, default 0: e.g. -1 for slices of a fixed operand)."""
    comm = model["comm"]
    ratio = (problem_bytes / ranks) / comm["reference_share_bytes"]
    more = ranks / comm.get("reference_ranks", ranks)
    return [
        {
            **o,
            "bytes": max(
                1, int(round(o["bytes"] * ratio ** o.get("growth", comm["growth"]) * more ** o.get("ranks_power", 0.0)))
            ),
        }
        for o in comm["ops"]
    ]


def predict(
    model: dict,
    ranks: int,
    problem_bytes: float,
    node_ranks: int | None = None,
    collectives=None,
    parts: int | None = None,
) -> dict:
    """Predicted seconds per phase and ``total`` for ``ranks`` ranks on ``problem_bytes``, ``node_ranks`` of them
    on the busiest node (default: as many as the node's GPUs or cores hold, ``ranks_on_a_node``);
    ``collectives(ranks, ops)`` prices the collectives on another machine (default: the sweep's alpha-beta).
    The sliced operand is read in ``parts`` slices (by default the ranks, N for a share of N on one rank). Where the
    target measured what its node's ranks at once cost each other's compute (``cores_slowdown``), a CPU phase outside
    HOST_PHASES is its time alone times that slowdown, not its node term carried."""
    share = problem_bytes / ranks
    k = node_ranks or ranks_on_a_node(model, ranks)
    # a fitted line with a negative intercept would predict negative time for a small share: no phase takes less
    # than nothing
    cores = cores_slowdown(model, k)
    phases = {p: max(0.0, local_seconds(model, p, share, parts or ranks, k, cores)) for p in model["local"]}
    ops = scaled_ops(model, ranks, problem_bytes)
    priced = collectives(ranks, ops) if collectives else collectives_time(model["comm"], ranks, ops)
    if ranks == 1 and "one_rank_s" in model["comm"]:
        phases["comm"] = model["comm"]["one_rank_s"]
    else:
        phases["comm"] = max(0.0, model["comm"]["overhead_s"] + exposed_beside(model["comm"], priced, phases))
    gap = model["gap_s"] + max(0.0, model.get("host_floor_s", 0.0) - device_seconds(phases))
    phases["total"] = max(sum(phases.values()) + gap, sum(phases.values()))
    return phases


def exposed_beside(comm: dict, priced: float, phases: dict) -> float:
    """What of the collectives' ``priced`` seconds a repeat waits for: all of it, or where they ran beside a
    local phase (``hidden_behind``), what that phase's time does not cover. Per iteration the same work: the
    repeat's sums stand for each iteration's."""
    behind = comm.get("hidden_behind")
    return max(0.0, priced - phases.get(behind, 0.0)) if behind else priced


def device_seconds(phases: dict) -> float:
    """The seconds of a repeat's phases that its GPU runs (not the host's reads and copies in)."""
    return sum(v for p, v in phases.items() if p not in HOST_PHASES and p != "total")


# a training step's parts, timed inside its compute and comm phases (torch, train): fitted on their own (the
# step model needs backward), never summed with the phases they are part of
INNER_PHASES = ("data", "comm_buffers", "comm_syncbn", "forward", "backward", "comm_exposed", "optimizer", "step")


def fit_model(
    runs: list[dict],
    probe: list[dict],
    backend: str,
    growth: float,
    node_phases: tuple[str, ...] | None = None,
    inner: tuple[str, ...] = (),
    gpu: bool = False,
) -> dict | None:
    """Fit the model to a sweep.

    Args:
        runs: one dict per measured run: ranks, problem (bytes, comm ops), timings, time; optionally
            node_ranks (ranks on its busiest node) and node_slots (the GPUs or cores a node holds).
        probe: collectives timed on the sweep's groups: [{'op', 'ranks', 'bytes', 'seconds'}].
        backend: the communicator the sweep used.
        growth: the workload's COMM_GROWTH.
        node_phases: the phases that may get a node term (None: every local phase; HOST_PHASES on GPUs).
        inner: phases timed inside others (INNER_PHASES of a training job): fitted under ``inner``, not summed.
        gpu: the phases were timed on GPUs (events on the device's streams): a host floor may be fitted.

    Returns:
        The model (JSON-ready), or None when the runs cannot identify it.
    """
    runs = [r for r in runs if r["problem"].get("bytes")]
    if len({(r["ranks"], r["problem"]["bytes"]) for r in runs}) < 2:
        return None
    all_runs = runs
    fair = [r for r in runs if not r.get("oversubscribed")]  # contention is not scaling: leave it out
    if len({(r["ranks"], r["problem"]["bytes"]) for r in fair}) >= 2:
        runs = fair
    timed = [p for p in runs[0]["timings"] if p not in NOT_LOCAL and any(r["timings"][p]["max"] > 0 for r in runs)]
    phases = [p for p in timed if p not in inner]
    # a training step's allreduce hides behind backward, bucket by bucket (predict.py models it); here, a workload
    # that timed its collectives beside its compute (several ranks, an overlapped part)
    beside = not inner and BESIDE in phases and any(_overlapped(r) > 0 for r in runs if r["ranks"] > 1)
    seen = [{p: measured(r, p) for p in [*phases, "comm"]} for r in runs]  # each run's phases as the model sees them

    # the sliced operand's bytes (none where no run lists one), each run's slice added to its host phases' bytes
    held = max((r["problem"]["sliced"]["bytes"] for r in runs if r["problem"].get("sliced")), default=0.0)

    def fitted(p: str) -> dict:
        if p in PER_STEP_PHASES:  # its time alone on the sweep's own problem (every run's where none ran alone)
            return fit_per_step(
                [measured(r, p) for r in runs if own_problem_alone(r)] or [measured(r, p) for r in runs]
            )
        return fit_local(
            [phase_bytes({"sliced_bytes": held}, p, r["problem"]["bytes"] / r["ranks"], _parts(r)) for r in runs],
            [measured(r, p) for r in runs],
            [r.get("node_ranks") or r["ranks"] for r in runs] if node_phases is None or p in node_phases else None,
        )

    local = {p: fitted(p) for p in phases}
    # the collectives of a run of several ranks: a one-rank run has none to scale (a stencil's halos)
    ref = next((r for r in runs if r["problem"].get("comm")), runs[0])
    comm = {
        "backend": backend,
        "ops": ref["problem"].get("comm", []),
        "growth": growth,
        "reference_share_bytes": ref["problem"]["bytes"] / ref["ranks"],
        "reference_ranks": ref["ranks"],
    }
    if probe:  # alpha, beta from the timed collectives; overhead = what the comm phase adds
        alpha, beta = fit_alpha_beta([(*model_terms(q["op"], q["ranks"], q["bytes"]), q["seconds"]) for q in probe])
        comm.update(alpha_s=alpha, beta_s_per_B=beta, source=f"{len(probe)} collectives timed on the sweep's groups")
        if beside:
            comm["hidden_behind"] = BESIDE
        # the overhead of ranks that exchanged: one rank's comm phase is charged what it paid (below)
        shared = [(r, s) for r, s in zip(runs, seen) if r["ranks"] > 1] or list(zip(runs, seen))
        comm["overhead_s"] = max(
            0.0,
            statistics.median(
                s["comm"] - exposed_beside(comm, collectives_time(comm, r["ranks"], r["problem"].get("comm", [])), s)
                for r, s in shared
            ),
        )
    else:  # overhead, alpha and beta together from the comm phases themselves
        terms = [_terms(r["ranks"], r["problem"].get("comm", [])) for r in runs]
        t = np.array([max(measured(r, "comm"), 1e-12) for r in runs])
        overhead, alpha, beta = nonnegative_lstsq(
            [np.ones_like(t), np.array([s for s, _ in terms]), np.array([v for _, v in terms])], t
        )
        comm.update(alpha_s=alpha, beta_s_per_B=beta, overhead_s=overhead, source="the workload's comm phases")
    comm["busbw_Bps"] = 1 / comm["beta_s_per_B"] if comm["beta_s_per_B"] > 0 else None
    alone = [s["comm"] for r, s in zip(runs, seen) if r["ranks"] == 1]
    if alone:  # one rank exchanges nothing: its comm phase is what it measured, not the overhead of several
        comm["one_rank_s"] = statistics.median(alone)
    gaps = [r["time"] - sum(s.values()) for r, s in zip(runs, seen)]
    gap, floor = statistics.median(gaps), 0.0
    if gpu and not inner:  # a training step's host work is inside its timed phases, not beside them
        gap, floor = fit_host_floor(gaps, [device_seconds(s) for s in seen], [r["time"] for r in runs])
    # A model with as many parameters as the points it was fitted to meets them by construction: only
    # points beyond its parameters test it (each phase's fit has 2 at most, 3 with a node term; comm 1 with a
    # probe, else 3).
    points = len({(r["ranks"], r["problem"]["bytes"]) for r in runs})
    parameters = max([_parameters(f) for f in local.values()] + [1 if probe else 3])
    model = {
        "local": local,
        **({"sliced_bytes": held} if held else {}),
        **({"inner": {p: fitted(p) for p in timed if p in inner}} if inner else {}),
        "node_slots": max((r.get("node_slots") or 0 for r in runs), default=0) or None,
        "comm": comm,
        "gap_s": gap,
        **({"host_floor_s": floor} if floor > 0 else {}),
        "fitted_to": [[r.get("mode"), r["ranks"]] for r in runs],
        "points_fitted": points,
        "parameters": parameters,
        "validated": points > parameters,
    }
    model["points"] = [_point(model, r) for r in all_runs]
    return model


def _parts(run: dict) -> int:
    """The slices a run read the sliced operand in (its ranks where it listed none)."""
    return (run["problem"].get("sliced") or {}).get("parts") or run["ranks"]


def _overlapped(run: dict) -> float:
    return (run["timings"].get("comm_overlapped") or {}).get("max", 0.0)


def fit_host_floor(gaps: list[float], device: list[float], times: list[float]) -> tuple[float, float]:
    """(gap, floor): ``gap_i ~ gap + max(0, floor - device_i)``, in least absolute deviations, where each run's
    ``gap_i`` is its time outside every phase and ``device_i`` the seconds of its phases on the GPU. A floor is
    kept only where it lifts some run's gap by NODE_TERM_MIN_SHARE of its time: below that it is noise between
    runs, not a host issuing work slower than the GPU runs it (floor 0, the gaps' median)."""
    plain = statistics.median(gaps)
    best = (sum(abs(g - plain) for g in gaps), plain, 0.0)
    # the floor that best fits passes through a pair of runs: run i's gap above run j's by i's shortfall
    for i in range(len(gaps)):
        for j in range(len(gaps)):
            floor = device[i] + gaps[i] - gaps[j]
            lift = [max(0.0, floor - d) for d in device]
            if not any(lf >= NODE_TERM_MIN_SHARE * t for lf, t in zip(lift, times)):
                continue
            base = statistics.median(g - lf for g, lf in zip(gaps, lift))
            cost = sum(abs(g - base - lf) for g, lf in zip(gaps, lift))
            if cost < best[0] - 1e-15:
                best = (cost, base, floor)
    return best[1], best[2]


def _parameters(fit: dict) -> int:
    """The parameters a local phase's fit has."""
    return (2 if fit["fit"].startswith("affine") else 1) + ("node_seconds_per_byte" in fit)


def measured(run: dict, phase: str) -> float:
    """The statistic the model fits: comm's minimum over ranks, any other phase's maximum."""
    return run["timings"][phase]["min" if phase == "comm" else "max"]


def _terms(ranks: int, ops: list[dict]) -> tuple[float, float]:
    steps = volume = 0.0
    for item in ops:
        s, v = model_terms(item["op"], ranks, item["bytes"])
        calls = item.get("calls", 1)
        steps, volume = steps + calls * s, volume + calls * v
    return steps, volume


def _point(model: dict, run: dict) -> dict:
    predicted = predict(model, run["ranks"], run["problem"]["bytes"], run.get("node_ranks"), parts=_parts(run))
    return {
        "mode": run.get("mode"),
        "ranks": run["ranks"],
        "problem_bytes": run["problem"]["bytes"],
        "fitted": [run.get("mode"), run["ranks"]] in model["fitted_to"],
        "measured_s": run["time"],
        "predicted_s": predicted["total"],
        "error": (predicted["total"] - run["time"]) / run["time"],
        "phases": {
            p: {"measured_s": measured(run, p), "predicted_s": predicted[p]}
            for p in predicted
            if p != "total" and p in run["timings"]
        },
    }


def best_ranks(model: dict, problem_bytes: float, candidates: list[int]) -> dict:
    """The rank count with the smallest predicted time for ``problem_bytes``."""
    table = [{"ranks": n, "predicted_s": predict(model, n, problem_bytes)["total"]} for n in candidates]
    best = min(table, key=lambda row: row["predicted_s"])
    return {"problem_bytes": problem_bytes, "best_ranks": best["ranks"], "by_ranks": table}


def break_even(
    model: dict, ranks: int, node_ranks: int | None = None, collectives=None, one_scale: float = 1.0, added=None
) -> dict:
    """The smallest bytes per rank above which ``ranks`` ranks beat one on the same problem (``node_ranks``,
    ``collectives``: on another machine, as ``predict``; ``one_scale``: one rank's predicted time corrected to
    its measurement). ``added(ranks, total)`` gives the seconds a caller adds to a prediction, as its rows do.

    Returns:
        {'ranks', 'status': 'above' | 'always' | 'never', 'bytes_per_rank'}.
    """

    def gain(share: float) -> float:  # > 0 when n ranks are faster than one
        total = share * ranks
        one = predict(model, 1, total, 1, collectives)["total"] * one_scale
        many = predict(model, ranks, total, node_ranks, collectives)["total"]
        return one - many - (added(ranks, many) if added else 0.0)

    grid = np.logspace(0, np.log2(MAX_SHARE_BYTES), 201, base=2.0)
    wins = [gain(s) > 0 for s in grid]
    if wins[0]:
        return {"ranks": ranks, "status": "always", "bytes_per_rank": None}
    if not any(wins):
        return {"ranks": ranks, "status": "never", "bytes_per_rank": None}
    k = wins.index(True)
    lo, hi = np.log2(grid[k - 1]), np.log2(grid[k])
    for _ in range(50):  # bisect in log space
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if gain(2.0**mid) > 0 else (mid, hi)
    return {"ranks": ranks, "status": "above", "bytes_per_rank": float(2.0**hi)}
