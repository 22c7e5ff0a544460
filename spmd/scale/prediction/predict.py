"""``spmd predict``: a sweep's fitted model carried to a machine it did not run on (``machines.Machine``).

What stays: each local phase's fit against bytes per rank (the same device does the same work per byte), the
node term with the target's ranks a node, the comm phase's fixed overhead and a repeat's gap. What changes: the
collectives, priced on the target's links as NCCL runs them (``links.collective_seconds``). A training job
(torch, train) hides its gradients' allreduce behind backward: there the exposed part is what is left of the
target's allreduce, bucket by bucket, when backward ends (``overlap``). Each prediction's interval: ``intervals``.
"""

from __future__ import annotations

import statistics

from ...core.errors import ConfigError
from ..decision.flags import beyond_ideal
from ..models.links import collective_seconds
from ..models.node import STAND_IN_CORES, cores_seconds, measured_alone_seconds, node_beyond_seconds
from ..models.overlap import exposed as overlap_exposed
from ..models.overlap import hidden_share
from ..models.phases import phase_bytes
from ..models.scaling_model import break_even, measured, predict, scaled_ops
from ..models.step import smallest_batch
from ..sweep.analysis import node_counts, reanalyse
from .intervals import (
    LAUNCH_SPREAD,
    MODEL_SPREAD,
    link_misfit,
    local_uncertainty,
    sides,
    speedup_range,
    sweep_part,
    unseen_note,
    unseen_seconds,
    unseen_terms,
)
from .machines import Machine, preset_validation
from .reads import host_read_ceiling, node_readers, read_ceiling, shared_rate


def row_flags(speedup: float | None, ranks: int) -> list[str]:
    """A predicted row's flags: a speedup above its ranks' (a weak efficiency above 100%), the model's error and
    never a gain (decision.flags' rule, as for a measured point)."""
    flag = beyond_ideal(speedup, ranks, ranks) if speedup is not None else None
    return [flag] if flag else []


def predict_machine(scaling: dict, machine: Machine) -> dict:
    """{'target', 'rows', 'break_even', 'notes'}: the sweep's modes at every node count of ``machine``."""
    model = scaling.get("model")
    if not model:
        raise ConfigError(
            "the sweep has no fitted model (it needs two sizes measured): nothing to predict from (on one GPU, "
            "spmd scale --ranks 1 --shares 2,4 measures the shares of the rank counts it cannot run)"
        )
    if machine.backend and machine.backend != scaling["comm"]:
        raise ConfigError(
            f"target key links: measured over {machine.backend}, the sweep ran {scaling['comm']}: measure the "
            f"target's links over {scaling['comm']} (spmd bench comm --links --backend {scaling['comm']})"
        )
    g = machine.gpus_per_node

    def collectives(ranks: int, ops: list[dict]) -> float:
        return sum(
            o.get("calls", 1) * collective_seconds(o["op"], o["bytes"], ranks, g, machine.intra, machine.inter)
            for o in ops
        )

    training = bool(scaling.get("training"))
    hide = hidden_share(scaling) if training else None
    if training:
        model = {**model, "gap_local_s": local_reference(scaling, model)}
    local_u = local_uncertainty(scaling, model)
    # the 1-rank prediction corrected to the sweep's measured 1-rank run, so rows and break-even agree
    one_scale = one_rank_scale(scaling, model, collectives, hide if training else None)
    comm_u = {"intra": link_misfit(machine.intra), "inter": link_misfit(machine.inter)}
    notes = list(machine.notes)
    notes.append(
        f"each interval: the sweep's fit, the links' misfit, a launch's spread (+-{LAUNCH_SPREAD:.0%} of the time: "
        f"90% of measured launches fell within it) and the model's own error out of sample (-{MODEL_SPREAD[0]:.0%} "
        f"to +{MODEL_SPREAD[1]:.0%} of the time, from held-out cases' measured speedups), added in quadrature; a "
        f"speedup's leaves the launch out"
    )
    host_reads, by_engine = read_ceiling(scaling, model, machine, notes)
    model = with_node_cores(scaling, model, machine, notes)
    model = priced_alone(scaling, model)
    readers = max((node_readers(run) for run in scaling["runs"]), default=0)
    rows = []
    for mode, series in scaling["series"].items():
        base = series[0]
        run = _run(scaling, mode, base["ranks"])
        share = run["report"]["problem"]["bytes"] / base["ranks"]
        for nodes in machine.nodes:
            ranks = g * nodes
            problem = share * base["ranks"] if mode == "strong" else share * ranks
            # the node term: what each further rank on a host adds; the read ceiling: a host's, shared by its ranks
            # (emulated nodes on one host: all of the launch's)
            host_ranks = machine.ranks_on_a_host(ranks)
            phases = predict(model, ranks, problem, host_ranks, collectives)
            reads = phase_bytes(model, "read", problem / ranks, ranks)  # a rank's share and its slice of B
            ceiling = shared_rate(host_reads, host_ranks) if host_reads else None
            phases = host_read_ceiling(model, phases, reads, ceiling, host_ranks, readers, by_engine)
            comm = phases["comm"]
            if training:
                phases = _training_phases(model, phases, ranks, problem, collectives, hide)
                comm = phases["comm"] + phases.get("comm_overlapped", 0.0)
            # what a fit on one rank never saw of several: a part of its own, in no phase the target times (the
            # ranks' waits and the host's issue fall between and across them), so that no phase is said to miss it
            added, below, above = unseen_seconds(scaling, model, ranks, phases["total"])
            # a compute phase's node growth held beyond the ranks its node was measured with: what carrying it on
            # would add lies above, a part of its own (a choice between two extrapolations, not a spread)
            beyond = node_beyond_seconds(model, ranks, problem, host_ranks)
            # the target's cores test (or one standing in) charged its compute phases a slowdown between its
            # kernels': their ends
            cores_below, cores_above = cores_seconds(model, ranks, problem, host_ranks)
            if added:
                phases = {**phases, "unseen": added, "total": phases["total"] + added}
                comm += added  # the ranks' waits in their exchanges: the row's comm, its links' part priced on it
            total = phases["total"]
            comm_level = comm_u["inter"] if nodes > 1 else comm_u["intra"]
            measured_s = measured_alone_seconds(model, ranks, problem, host_ranks)
            parts = {
                "sweep": sweep_part(local_u, total - comm, measured_s),
                "links": comm_level * comm,
                "launch": LAUNCH_SPREAD * total,
            }
            half_below, half_above = sides(list(parts.values()), total)
            # against the sweep's one rank: strong, the same problem; weak, samples (bytes) per second
            ratio = base["time"] / total if base["ranks"] == 1 and total > 0 else None
            speedup = None if ratio is None else (ratio if mode == "strong" else ratio * ranks)
            same_below, same_above = sides([parts["sweep"], parts["links"]], total)  # one launch: its speed cancels
            rows.append(
                {
                    "mode": mode,
                    "nodes": nodes,
                    "ranks": ranks,
                    "problem_bytes": problem,
                    "predicted_s": total,
                    "interval": [
                        max(total - half_below - below - cores_below, 0.0),
                        total + half_above + above + beyond + cores_above,
                    ],
                    "interval_parts": parts,
                    "model_below": MODEL_SPREAD[0] * total,
                    "model_above": MODEL_SPREAD[1] * total,
                    "unseen_s": added,
                    "unseen_below": below,
                    "unseen_above": above,
                    "node_beyond_s": beyond,
                    "cores_below_s": cores_below,
                    "cores_above_s": cores_above,
                    "speedup": speedup,
                    "speedup_interval": speedup_range(
                        speedup, total, same_below + below + cores_below, same_above + above + beyond + cores_above
                    ),
                    "efficiency": None if speedup is None else speedup / ranks,
                    "flags": row_flags(speedup, ranks),
                    **({"batch_per_rank": batch_of(run, ranks, mode)} if training else {}),
                    "comm_s": comm,
                    "phases": {p: v for p, v in phases.items() if p != "total"},
                }
            )
    if training and hide["runs"] == 0:
        notes.append(
            "no run of the sweep had several ranks: no overlap of the allreduce with backward was seen, none assumed"
        )
    halos = any(o.get("op") == "sendrecv" for o in (model.get("comm") or {}).get("ops") or [])
    timed = [link for link in (machine.intra, machine.inter) if link and "preset" not in link.source]
    if halos and any(not link.p2p_curve for link in timed):  # links measured before --links timed the shift
        notes.append(
            "the target's links hold no point-to-point measurement (spmd bench comm --links before it timed a ring "
            "shift): halos priced by two terms fitted to the allreduce, whose latency per ring step misses NCCL's "
            "cost per point-to-point call"
        )
    unseen = unseen_terms(scaling, model)
    if unseen and any(row["unseen_s"] for row in rows):
        notes.append(unseen_note(unseen))
    if any(link and "preset" in link.source for link in (machine.intra, machine.inter)):
        notes.append(
            "a preset's figures are looked up (what NCCL reaches on such a link, as published; no measured misfit): "
            "the interval holds no part of its own for the links, only the sweep's side, a launch's spread"
            + (", what one rank never saw" if unseen else "")
            + " and the model's own error, which held-out predictions from the presets measured"
        )
        notes += preset_validation(machine)
    return {
        "target": machine.to_dict(),
        "rows": rows,
        "break_even": agreeing(rows, break_even_rows(scaling, model, machine, collectives, hide, one_scale)),
        "overlap": hide,
        "notes": notes,
        "sweep": sweep_state(scaling),
        "assumes": assumptions(scaling, machine),
    }


def sweep_node_ranks(scaling: dict) -> int:
    """The most ranks any run of a sweep put on one node."""
    return max(
        (node_counts(r.get("placement") or {}, "cpu")["node_ranks"] or r["ranks"] for r in scaling["runs"]), default=1
    )


def priced_alone(scaling: dict, model: dict) -> dict:
    """``model`` marked, for a CPU sweep, to price each compute phase at a share the sweep ran on one rank on that run
    (``node.local_seconds``, ``model['alone_from_runs']``): a share a CPU rank's caches hold runs faster a byte than
    the lines through the larger shares say (docs/validation.md). A GPU sweep's lines price it, as validated."""
    return model if scaling.get("device") == "gpu" else {**model, "alone_from_runs": True}


def with_node_cores(scaling: dict, model: dict, machine: Machine, notes: list[str]) -> dict:
    """``model`` with what ranks at once cost each other's compute on the target's node (``node_cores``, for
    ``node.cores_slowdown``) where the sweep ran on CPUs and the target puts more ranks on a node than it did: what the
    target's link test measured of its node's cores where it ran more ranks at once than the sweep, else another
    node's test standing in for it (STAND_IN_CORES: in the held-out CPU rounds, the node's cores were these
    predictions' largest error, mostly too fast, and a sweep of fewer ranks does not tell them). A note says which."""
    if scaling.get("device") == "gpu":
        return model
    sweep_ranks = sweep_node_ranks(scaling)
    cores = machine.node_cores
    keys = ("ranks", "slowdown", "low", "high")
    if cores and cores["ranks"] > sweep_ranks:
        notes.append(
            f"the node's cores measured by the target's link test: {cores['ranks']} ranks at once slowed its kernels "
            f"x{cores['low']:.2f} to x{cores['high']:.2f} against one alone; each compute phase beyond the "
            f"{sweep_ranks} rank(s) a node the sweep ran is charged their geometric mean, x{cores['slowdown']:.2f} at "
            f"{cores['ranks']} (from one alone, linearly, at fewer), the kernels' ends in its interval"
        )
        return {**model, "node_cores": {**{k: cores[k] for k in keys}, "sweep_ranks": sweep_ranks}}
    most = max(machine.ranks_on_a_host(machine.gpus_per_node * n) for n in machine.nodes)
    if most <= sweep_ranks:
        return model
    stand_in = STAND_IN_CORES
    notes.append(
        f"{most} CPU ranks on a node where the sweep ran at most {sweep_ranks}, and the target's link test measured no "
        f"node's cores: what ranks at once cost each other there (its memory bandwidth, its caches) was not measured, "
        f"and a sweep of fewer does not tell it; each compute phase beyond {sweep_ranks} a node is charged what spmd's "
        f"cores test measured on another node, its own 16-core node of the held-out rounds "
        f"(x{stand_in['slowdown']:.2f} at {stand_in['ranks']} ranks at once, from one alone, linearly; its kernels' "
        f"ends x{stand_in['low']:.2f} to x{stand_in['high']:.2f} in the interval), not this node's; the node "
        f"measures its own: spmd bench comm --links with {most} ranks on it (its cores test, for the target's key "
        f"links), or spmd scale --ranks 1,...,{most} on it, then predict other counts of such nodes"
    )
    return {**model, "node_cores": {**stand_in, "sweep_ranks": sweep_ranks, "stand_in": True}}


def sweep_state(scaling: dict) -> dict:
    """What the sweep decided (decision.decide), carried into every prediction from it: its verdict, whether it
    answered, its suspect points and its step model's misses."""
    d = scaling.get("decision") or {}
    state = d.get("batch_model") or {}
    return {
        "verdict": scaling.get("verdict"),
        "answer": bool(d.get("answer")),
        "suspect": [
            {k: s.get(k) for k in ("mode", "ranks", "batch")} | {"reason": s["reasons"][0]}
            for s in d.get("suspect") or []
        ],
        "batch_model_misses": state.get("misses") or [],
        "host_busy": bool((d.get("host") or {}).get("busy")),
    }


def assumptions(scaling: dict, machine: Machine) -> list[str]:
    """What every row of a prediction assumes, in words: each target device computes like the sweep's, the ranks'
    layout on the target's nodes, and (training) the per-GPU batch of each row."""
    runs = scaling.get("runs") or [{}]
    report = runs[0].get("report") or {}
    devices = sorted({d for r in runs for d in ((r.get("placement") or {}).get("devices") or [])}) or [
        scaling.get("device", "?")
    ]
    units = "GPU" if scaling.get("device") == "gpu" else "rank"
    out = [
        f"each target {units} computes like the sweep's ({', '.join(devices)}): the local phases are the sweep's, "
        f"per byte",
        f"{machine.gpus_per_node} {units}(s) a node, on {', '.join(map(str, machine.nodes))} node(s)",
    ]
    batch = (report.get("result") or {}).get("batch_per_rank")
    if scaling.get("training") and batch:
        strong = "strong: the global batch of the sweep's first run kept, so per-" + units + " batch = it / ranks"
        out.append(f"weak: per-{units} batch {batch} in every row; {strong}")
    if all(r.get("ranks") == 1 for r in runs):
        shares = [r.get("share_of") for r in scaling.get("share_runs") or []]
        measured = f" (and the shares of {', '.join(map(str, shares))} ranks, on one)" if shares else ""
        out.append(
            f"the sweep ran one rank{measured}: what ranks sharing a node cost each other (memory, the host) and "
            f"how much of the collectives hides behind the work were not measured: of what ranks do to each other, "
            f"the prediction charges only what held-out cases fitted on one GPU measured (a halo call's host cost, "
            f"a training step's wait in the allreduce)"
        )
    return out


def agreeing(rows: list[dict], evens: list[dict]) -> list[dict]:
    """The break-even rows, each checked against the predicted rows that ask its question. For training those are
    the weak rows (N GPUs against one at the same per-GPU batch), for arrays the strong rows (the same problem).
    Where a row and the break-even say different things of the same size, the break-even is said not decided (they
    differ within the model's misfit), so that a prediction never contradicts itself."""
    for e in evens:
        training = "batch" in e
        for row in rows:
            if row["ranks"] != e["ranks"] or row.get("speedup") is None:
                continue
            if row["mode"] != ("weak" if training else "strong"):
                continue
            size = row.get("batch_per_rank") if training else row["problem_bytes"] / row["ranks"]
            threshold = e.get("batch") if training else e.get("bytes_per_rank")
            if size is None:
                continue
            faster = e["status"] == "always" or (e["status"] == "above" and threshold <= size)
            if (row["speedup"] < 1) == faster and abs(row["speedup"] - 1) > 1e-9:
                e.update(status="undecided", why=f"its {row['mode']} row predicts {row['speedup']:.2f}x")
    return evens


def batch_of(run: dict, ranks: int, mode: str) -> int | None:
    """A training row's per-GPU batch: the sweep's per-rank batch (weak), or its global batch shared (strong)."""
    result = run["report"].get("result") or {}
    if mode == "weak":
        return result.get("batch_per_rank")
    return (result.get("global_batch") or 0) // ranks or None


def read_sweep(path) -> dict:
    """A scaling.json as a prediction takes it: checked, and its stored runs analysed again by this spmd, so that
    the model a prediction stands on is the one fitted today, whichever version wrote the file."""
    from ...report.schema import check_scaling, read_json

    return reanalyse(check_scaling(read_json(path, "a scaling.json"), path))


def _run(scaling: dict, mode: str, ranks: int) -> dict:
    return next(r for r in scaling["runs"] if r["mode"] == mode and r["ranks"] == ranks)


def one_rank_scale(scaling: dict, model: dict, collectives, hide: dict | None) -> float:
    """The sweep's measured 1-rank time over the model's prediction of it (1 where the sweep had no 1-rank run):
    the break-even's 1-rank side scaled by it, as each row's speedup divides by the measured run."""
    series = scaling["series"].get("strong") or scaling["series"].get("weak") or []
    base = series[0] if series else None
    if not base or base["ranks"] != 1 or not base.get("problem_bytes"):
        return 1.0
    one = predict(model, 1, base["problem_bytes"], 1, collectives)
    if hide is not None:
        one = _training_phases(model, one, 1, base["problem_bytes"], collectives, hide)
    return base["time"] / one["total"] if one["total"] > 0 else 1.0


def _training_phases(model: dict, phases: dict, ranks: int, problem: float, collectives, hide: dict) -> dict:
    """A training step's phases on the target: the allreduce priced there, what of it backward does not hide
    exposed (``comm``), the rest overlapped; no fitted comm overhead (the exposed part is what is left). Each
    bucket's allreduce starts once backward hands it over, as the sweep measured it (``overlap.exposed``); where
    it did not, the part beyond phi x backward is exposed."""
    out = {p: v for p, v in phases.items() if p not in ("comm", "total")}
    ops = scaled_ops(model, ranks, problem)
    costs = [collectives(ranks, [o]) if ranks > 1 else 0.0 for o in ops]  # each bucket's, a repeat's steps
    allreduce = sum(costs)
    fit = (model.get("inner") or {}).get("backward") or model["local"].get("backward")
    backward = max(0.0, fit["intercept_s"] + fit["seconds_per_byte"] * problem / ranks) if fit else 0.0
    handed = hide.get("handed_over")
    if handed and len(handed) == len(ops) and all(o.get("calls") == ops[0].get("calls") for o in ops):
        steps = ops[0].get("calls") or 1  # one call of each bucket a step: the pipeline runs step by step
        exposed = steps * overlap_exposed(handed, [c / steps for c in costs], backward / steps)
    else:
        exposed = max(0.0, allreduce - hide["phi"] * backward)
    out["comm"] = exposed
    out["comm_overlapped"] = allreduce - exposed
    gap, reference = model["gap_s"], model.get("gap_local_s")
    if gap < 0 and reference:  # the step's phases overlap and were counted twice: as much of its local work
        gap *= sum(v for p, v in out.items() if p in model["local"]) / reference
    out["total"] = sum(v for p, v in out.items() if p != "comm_overlapped") + gap
    return out


def local_reference(scaling: dict, model: dict) -> float | None:
    """The local phases' seconds in the sweep's fitted runs (median): what a negative gap was measured beside, so
    that a smaller batch's step is not charged the whole of it (a per-GPU batch of one would take negative time)."""
    fitted = [r for r in scaling["runs"] if [r["mode"], r["ranks"]] in model.get("fitted_to", [])]
    sums = [sum(measured({"timings": r["report"]["timings"]}, p) for p in model["local"]) for r in fitted]
    return statistics.median(sums) if sums else None


def break_even_rows(
    scaling: dict, model: dict, machine: Machine, collectives, hide: dict | None, one_scale: float = 1.0
) -> list[dict]:
    """Per node count: above what a rank must hold for the target's ranks to beat one (training: the per-GPU
    batch; else bytes per rank)."""
    g = machine.gpus_per_node

    def added(ranks: int, total: float) -> float:  # as the rows add it
        return unseen_seconds(scaling, model, ranks, total)[0]

    out = []
    for nodes in machine.nodes:
        ranks = g * nodes
        if ranks < 2:
            continue
        if hide is None:
            even = break_even(model, ranks, machine.ranks_on_a_host(ranks), collectives, one_scale, added)
            out.append({"nodes": nodes, "ranks": ranks, **{k: even[k] for k in ("status", "bytes_per_rank")}})
            continue
        out.append(
            {
                "nodes": nodes,
                "ranks": ranks,
                **_batch_break_even(scaling, model, ranks, collectives, hide, one_scale, added),
            }
        )
    return out


def _batch_break_even(
    scaling: dict, model: dict, ranks: int, collectives, hide: dict, one_scale: float = 1.0, added=None
) -> dict:
    """The smallest per-GPU batch at which ``ranks`` ranks train faster (samples/s) than one, with the seconds the
    rows add to a prediction (``added``, of ranks and a total)."""
    run = scaling["runs"][0]["report"]
    per_sample = run["problem"]["bytes"] / run["ranks"] / max(1, run["result"].get("batch_per_rank") or 1)

    def faster(batch: int) -> bool:
        share = batch * per_sample
        one = predict(model, 1, share, 1, collectives)
        one = _training_phases(model, one, 1, share, collectives, hide)["total"] * one_scale
        many = predict(model, ranks, share * ranks, None, collectives)
        many = _training_phases(model, many, ranks, share * ranks, collectives, hide)["total"]
        many += added(ranks, many) if added else 0.0
        return ranks * batch / many > batch / one

    batch = smallest_batch(faster)
    if batch is None:
        return {"status": "never", "batch": None}
    return {"status": "always" if batch == 1 else "above", "batch": batch}
