"""What a rank's local phases work on: which of them are the host's, and the bytes each one takes."""

from __future__ import annotations

# what a GPU rank does on its node's host: the phases a node term may have on GPUs (each rank's compute has a
# GPU of its own; on CPUs every phase shares the node's memory bandwidth)
HOST_PHASES = ("read", "h2d")
# a training step's optimizer updates every parameter once a step, whatever a rank's batch: its work is the model's,
# not a share's. Timed alone on a smaller batch (a share run of ``--shares``) it found its state in the caches its
# short backward left, which a node's ranks at once do not keep: it is priced on the sweep's own problem alone
# (``own_problem_alone``)
PER_STEP_PHASES = ("optimizer",)


def sliced_bytes(problem: dict) -> float:
    """The bytes a run's rank reads and copies in of an operand that does not grow with the problem (a workload's
    ``problem()['sliced']``: the operand's bytes, read in ``parts`` slices, one a rank); 0 where there is none."""
    sliced = problem.get("sliced")
    return sliced["bytes"] / sliced["parts"] if sliced else 0.0


def phase_bytes(model: dict, phase: str, share: float, parts: int) -> float:
    """The bytes a rank's ``phase`` works on: its ``share`` of the problem and, reading and copying in
    (HOST_PHASES), its slice of the sliced operand, read in ``parts`` slices (one a rank: the ranks)."""
    return share + (model.get("sliced_bytes", 0.0) / parts if phase in HOST_PHASES else 0.0)


def own_problem_alone(run: dict) -> bool:
    """Whether a sweep's run (or a model's point) ran the sweep's own problem on one rank (its strong and weak series'
    first, not a share run of ``--shares``): what a phase of PER_STEP_PHASES is priced on."""
    return run["ranks"] == 1 and run.get("mode") != "share"
