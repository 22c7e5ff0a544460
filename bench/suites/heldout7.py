"""Held-out validation of ``spmd predict``, seventh round: the model as frozen at FROZEN (after a preset target could
take the host's reads measured on the user's own machine, ``spmd bench comm --host-read`` with its ranks sharing its
GPUs, and a rank's reads and copies in were priced with its slice of an operand that does not grow with the problem,
matmul's B, each interval was given the model's own error out of sample, each side, and a host's reads measured by fewer
readers than the target puts on a host were carried to its ranks by the contention they showed where its readers are
each rank's own, the presets were given what NCCL reaches on such links as published, and a node term was given the
growth its pair of equal bytes showed, held beyond the ranks measured for a compute phase; the files of
heldout.MODEL_PATHS unchanged since), on five cases chosen before any of them was measured, none used while designing
the model or in an earlier round (other seeds, grids, iterations and sizes: two stencils whose reads go through the
host's memory, reduce, matmul, and a model family never used before, torchvision's Swin-T). The list was first frozen
with the host's reads alone, then again with the sliced operand, with the model's error in the intervals, with the
host's reads carried, with the presets' achievable figures, with the carrying kept to engines whose readers are each
rank's own, with a node term only the points of equal bytes decide and a compute phase's growth held beyond the ranks
its node was measured with, with a note where a CPU target runs more ranks a node than its sweep did, with a CPU
compute phase charged the slowdown the target's link test measured on its node's cores, on its time alone as the sweep
measured that share, with the model files split by responsibility (models/phases.py, models/node.py,
prediction/reads.py), no prediction moved, and at FROZEN with the sweep's part of an interval carrying the lines'
misfit on the lines' seconds only (on GPUs no figure moves), before any of it ran.

Each case is measured as in the third round (heldout3.measure_round) and predicted from one more kind of input
(``input_kinds``): the ``nvlink4`` preset with the host's reads that the fitting machine measured by as many ranks as
the target puts on a host, sharing its one GPU (its two, fitted on 1-2). What this round tests is that kind against the
preset alone: what a user with one GPU can measure of the host a larger machine's ranks share; and its matmul's weak
rows, whose rank reads all of A and 1/N of B; how often its measured speedups and times fall inside intervals that carry
the model's error; on 4 GPUs, the host's reads the fit's 2-GPU link test measured, carried to four ranks; and the
nvlink4 preset at NCCL's achievable figure. Its matmul is the first fitted with a share that holds only its slice of B,
as a rank of N does (params.b_share_of), and the first whose shares read with the threads a rank of N gets. Published
apart from the in-sample tables and the earlier rounds (docs/validation.md)."""

from __future__ import annotations

from pathlib import Path

from . import Case, heldout3
from .heldout import array_job, stencil_job, torch_job
from .heldout2 import CARRIED
from .heldout3 import P2P_OFF, PRESET, PRESET_READS, TARGETS, round_cases

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "5384d312b66d9ca71a576e86219993522133cf31"
SUITE = "heldout7"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured."""
    gpu = env.gpus > 0
    n = 7680 if gpu else 1664
    swin = str(Path(__file__).resolve().parents[1] / "models/swin.py:build")
    both = ("strong", "weak")
    return {
        **stencil_job(env, 12800 if gpu else 1600, 32 if gpu else 10, 211),
        **stencil_job(env, 7168 if gpu else 896, 80 if gpu else 20, 223),
        "reduce, seed 227, float32": (array_job(env, "reduce", [7 << 24 if gpu else 7 << 20], 227), both),
        f"matmul, {n} square": (array_job(env, "matmul", [n, n], 229), both),
        "swin-t, batch 64 of 3x128x128, bf16": (
            torch_job(env, "resnet50", {"shape": [1024, 3, 128, 128], "seed": 233}, batch=64, model=swin,
                      options={"classes": 100}), both),
    }  # fmt: skip


def input_kinds(gpus: int) -> tuple[str, ...]:
    """The third round's kinds of input with the preset and the fit's own host reads beside the preset alone."""
    return (PRESET, PRESET_READS, CARRIED, TARGETS, P2P_OFF) if gpus >= 4 else (PRESET, PRESET_READS, TARGETS, P2P_OFF)


def predictions(cases: dict, gpus: int = 2) -> int:
    """How many predictions the list makes on a machine of ``gpus``, from this round's kinds of input."""
    return heldout3.predictions(cases, gpus, input_kinds)


def cases(env) -> list[Case]:
    return round_cases(cases_list(env), SUITE, FROZEN, ("swin",), kinds=input_kinds)
