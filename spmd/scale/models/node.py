"""What sharing a node costs a rank's local phases, as ``scaling_model.predict`` prices them: the node term a sweep
fitted (``node_growth``), held beyond the ranks its node was measured with and carried on as the interval's top
(``node_beyond_seconds``); or, where the target's link test measured its node's cores, each CPU phase's time alone
times their slowdown (``cores_slowdown``, ``cores_seconds``). Where nothing measured that many CPU ranks on a node,
another node's cores test stands in for the target's (STAND_IN_CORES), charged the same way."""

from __future__ import annotations

from .phases import HOST_PHASES, PER_STEP_PHASES, own_problem_alone, phase_bytes


def ranks_on_a_node(model: dict, ranks: int) -> int:
    """The ranks on the busiest node when ``ranks`` ranks fill nodes like the sweep's (``node_slots``, its GPUs or
    cores a node) evenly; all on one node where the sweep did not say."""
    slots = model.get("node_slots")
    if not slots:
        return ranks
    nodes = -(-ranks // slots)
    return -(-ranks // nodes)


def local_seconds(
    model: dict, phase: str, share: float, parts: int, node_ranks: int, cores: tuple | None = None
) -> float:
    """A local phase's seconds on ``share`` bytes a rank, ``node_ranks`` ranks on its node: its fit, with its node
    term (``node_growth``). A CPU rank's own work (not HOST_PHASES) starts from its time alone (``alone_seconds``,
    the sweep's own run of that share where it ran one), where ``predict`` priced a CPU sweep
    (``model['alone_from_runs']``): times the slowdown where the target's cores test measured the node (``cores``,
    from ``cores_slowdown``), else with its node term on top."""
    f = model["local"][phase]
    if phase in HOST_PHASES or not (cores or model.get("alone_from_runs")):
        return f["intercept_s"] + phase_bytes(model, phase, share, parts) * (
            f["seconds_per_byte"] + node_growth(phase, f, node_ranks) * f.get("node_seconds_per_byte", 0.0)
        )
    alone = alone_seconds(model, phase, share, parts)
    if cores:
        return alone * cores[0]
    growth = node_growth(phase, f, node_ranks) * f.get("node_seconds_per_byte", 0.0)
    return alone + phase_bytes(model, phase, share, parts) * growth


def node_growth(phase: str, fit: dict, node_ranks: int) -> int:
    """The further ranks on a node a phase's node term charges, with ``node_ranks`` on it: all of them (k - 1), except
    that beyond the ranks the sweep measured on a node (``node_ranks_measured``) a compute phase's growth is held where
    it was. A host's reads and copies in (HOST_PHASES) were measured to keep growing with each further rank (one copy
    a rank, each taking its part of the host's memory bandwidth); a CPU rank's compute, on cores of its own, grew
    beyond what a 2-rank pair showed in some held-out cases and not in others, so no growth is assumed beyond it and
    what growing on would add is the interval's top (``node_beyond_seconds``), unless the target measured its cores
    (``cores_slowdown``, which ``local_seconds`` charges instead)."""
    measured = fit.get("node_ranks_measured") or node_ranks
    return node_ranks - 1 if phase in HOST_PHASES else min(node_ranks, measured) - 1


def alone_seconds(model: dict, phase: str, share: float, parts: int) -> float:
    """A local phase's seconds on ``share`` bytes a rank with the node to itself: where the sweep ran that share on one
    rank (its 1-rank run, or a share run of ``--shares``), what that run measured; else its fitted line. A line through
    a sweep's shares misprices a share a rank's caches hold (a CPU stencil's small shares ran several times faster a
    byte than its whole: docs/validation.md), and the share a target's rank holds is the one ``--shares`` measured."""
    point = measured_alone(model, phase, share)
    if point is not None:
        return point
    f = model["local"][phase]
    return max(0.0, f["intercept_s"] + phase_bytes(model, phase, share, parts) * f["seconds_per_byte"])


def measured_alone(model: dict, phase: str, share: float) -> float | None:
    """What the sweep measured of a local phase on ``share`` bytes on one rank (its 1-rank run or a share run), or
    None where it ran no such run. A phase whose work is a step's (PER_STEP_PHASES): what its 1-rank run of the
    sweep's own problem measured, whatever the share."""
    for point in model.get("points") or []:
        if phase not in point["phases"]:
            continue
        if own_problem_alone(point) if phase in PER_STEP_PHASES else alone_at(point, share):
            return point["phases"][phase]["measured_s"]
    return None


def alone_at(point: dict, share: float) -> bool:
    """Whether a model's point ran ``share`` bytes on one rank."""
    return point["ranks"] == 1 and abs(point["problem_bytes"] - share) <= 1e-6 * share


def cores_slowdown(model: dict, node_ranks: int) -> tuple[float, float, float] | None:
    """(slowdown, low, high): what ``node_ranks`` ranks at once on a CPU node cost each other's compute, as the
    target's link test measured it (``model['node_cores']``, ``spmd.measure.cores``: the kernels' geometric mean, the
    least and the most slowed kernel's) or, where it did not, as another node's test standing in for it did
    (STAND_IN_CORES), for counts beyond those the sweep ran on a node (``sweep_ranks``, whose own runs measured theirs)
    and up to those the test ran at once (a stand-in's, at any count), carried linearly from one rank alone; None
    elsewhere (the node term as fitted, ``node_growth``)."""
    cores = model.get("node_cores")
    if not cores or node_ranks <= cores["sweep_ranks"] or (node_ranks > cores["ranks"] and not cores.get("stand_in")):
        return None
    part = (node_ranks - 1) / (cores["ranks"] - 1)
    return tuple(1 + (cores[key] - 1) * part for key in ("slowdown", "low", "high"))


# What ranks at once cost each other's compute on a CPU node where neither the sweep nor the target's cores test
# measured that many: the medians of what spmd's own cores tests measured with 8 ranks at once, 16 launches, on the one
# 16-core node of the held-out CPU rounds 4-8 (the kernels' geometric mean, the least and the most slowed kernel's;
# their linear carry to 4 ranks, x1.28, x1.15 and x1.46, is within 0.04 of the same tests' medians at 4, x1.27, x1.11
# and x1.47: docs/results/cpu-16core, bench.tools.carried_design.cores_medians, held to those files by
# tests/unit/test_suites_heldout.py). One node's figures, charged as the target's own test would be
# (``predict.with_node_cores`` says whose they are); the node measures its own.
STAND_IN_CORES = {"ranks": 8, "slowdown": 1.65, "low": 1.35, "high": 2.08}


def cores_seconds(
    model: dict, ranks: int, problem_bytes: float, node_ranks: int | None = None, parts: int | None = None
) -> tuple[float, float]:
    """(below, above): the seconds a prediction charged by ``cores_slowdown`` may lie below and above it, its
    phases' time alone (``alone_seconds``) times the least and the most slowed kernel's slowdown; (0, 0) where none
    was charged."""
    cores = cores_slowdown(model, node_ranks or ranks_on_a_node(model, ranks))
    if not cores:
        return 0.0, 0.0
    share = problem_bytes / ranks
    alone = sum(alone_seconds(model, p, share, parts or ranks) for p in model["local"] if p not in HOST_PHASES)
    slowdown, low, high = cores
    return (slowdown - low) * alone, (high - slowdown) * alone


def measured_alone_seconds(model: dict, ranks: int, problem_bytes: float, node_ranks: int | None = None) -> float:
    """The seconds of a CPU prediction's compute priced on what the sweep measured of that very share alone
    (``measured_alone``), times the slowdown ``cores_slowdown`` charged where it did, not on its fitted line: the part
    of a prediction the line's misfit at its points does not touch (0 where none was priced so: a GPU sweep's)."""
    cores = cores_slowdown(model, node_ranks or ranks_on_a_node(model, ranks))
    if not (cores or model.get("alone_from_runs")):
        return 0.0
    share = problem_bytes / ranks
    measured = (measured_alone(model, p, share) for p in model["local"] if p not in HOST_PHASES)
    return (cores[0] if cores else 1.0) * sum(m for m in measured if m is not None)


def node_beyond_seconds(
    model: dict, ranks: int, problem_bytes: float, node_ranks: int | None = None, parts: int | None = None
) -> float:
    """What the node terms ``node_growth`` holds would add carried on linearly, at ``ranks`` ranks on
    ``problem_bytes``: the seconds a prediction may lie above it, beyond the ranks its node was measured with."""
    k = node_ranks or ranks_on_a_node(model, ranks)
    measured = cores_slowdown(model, k) is not None  # the target's cores test charged those phases: nothing held
    return sum(
        phase_bytes(model, p, problem_bytes / ranks, parts or ranks)
        * (k - 1 - node_growth(p, f, k))
        * f.get("node_seconds_per_byte", 0.0)
        for p, f in model["local"].items()
        if not (measured and p not in HOST_PHASES)
    )
