"""Held-out validation of ``spmd predict`` on CPUs, at 4 and 8 ranks: the model as frozen at FROZEN (the seventh
round's freeze; the files of heldout.MODEL_PATHS unchanged since), on four cases chosen before any of them was
measured, none used while designing the model nor in an earlier round (other seeds and sizes of reduce, matmul, a
stencil and an MLP's training, NumPy on a node's cores).

Each case is fitted as a user with a 2-rank run of their own machine would fit it, with ``spmd scale --ranks 1,2
--shares 4,8`` (the shares hold what a rank of 4 and of 8 holds, and compute and read with the threads such a rank
gets). It is then predicted for 4 and for 8 ranks of one node from two kinds of input, the fit's own 2-rank link test
carried to them (``spmd bench comm --links`` with 2 ranks, the issue's kind b) and the target's link test with as many
ranks as it has (kind c), and measured there by ``spmd scale --ranks 1,2,4,8`` in one launch of 8, every run computing
with the threads a rank of 8 gets. No preset prices host MPI inside a node, so kind a has no CPU case here. The rounds
on GPUs fit on one GPU and predict 2, where no machine of more was lent; this one predicts 4 and 8 ranks from 1-2, as
the acceptance does on GPUs, on the cores of the one-GPU machine that was. Published apart from the in-sample tables and
the GPU rounds (docs/validation.md)."""

from __future__ import annotations

from ..records import Measure
from . import Case
from .heldout import array_job, held_against, job_config, mlp_job, stencil_job
from .heldout3 import TARGETS, link_test
from .predict import save_inputs, slug

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "87b026d123e352c736ca46871444a0ccc876c174"
SUITE = "heldoutcpu"
CARRIED = "the fit's 2-rank link test, carried"  # a target's name: no ',' nor ': '
FIT_RANKS = 2
TARGET_RANKS = (4, 8)
FITTED_ON = "1-2 ranks"
LINK_OPTIONS = ("--device", "cpu", "--max-bytes", "64M", "--factor", "4")  # host MPI, 8 B to 32 MiB a rank


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured (``env.quick``:
    a smoke run's sizes, for the suite's own tests)."""
    quick = env.quick
    both = ("strong", "weak")
    n = 256 if quick else 1792
    mlp = mlp_job(env, [4096 if quick else 32768, 384], 317, [384, 768, 768, 10], 256 if quick else 1024)
    listed = {
        "reduce, seed 307, float64": (array_job(env, "reduce", [1 << 16 if quick else 1 << 24], 307, "float64"), both),
        f"matmul, {n} square, float64": (array_job(env, "matmul", [n, n], 311, "float64"), both),
        **stencil_job(env, 256 if quick else 2304, 4 if quick else 24, 313),
        "train, an MLP of 384-768-768-10 at batch 1024": (mlp, both),
    }  # fmt: skip
    return on_cpus(listed, quick)


def on_cpus(listed: dict, quick: bool) -> dict:
    """A round's jobs on NumPy on the node's cores, a GPU or not; arrays timed over a fixed count of repeats."""
    for job, _ in listed.values():
        job["device"] = "cpu"
        if job["workload"] != "train":  # train's repeats are a count of step windows: as the scaling suite sets them
            job["repeats"] = 3 if quick else 7
    return listed


def predictions(cases: dict) -> int:
    """How many predictions the list makes: each case's modes at each target's ranks from each kind of input."""
    return sum(len(modes) for _, modes in cases.values()) * len(TARGET_RANKS) * 2


def measure(env, name: str, job: dict, modes: tuple, suite: str = SUITE, frozen: str = FROZEN) -> list[Measure]:
    """One case of the round ``suite`` frozen at ``frozen``: fitted on 1-2 ranks with the shares of 4 and 8, measured
    at 1, 2, 4 and 8 in one launch, predicted at 4 and at 8 from the fit's links carried and from the target's own."""
    cfg, mode = job_config(env, suite, name, job, modes)
    fit, there = env.work / f"{suite}-{slug(name)}-fit", env.work / f"{suite}-{slug(name)}-target"
    shares = ",".join(map(str, TARGET_RANKS))
    env.spmd("scale", cfg, "--ranks", "1,2", "--shares", shares, "--mode", mode, "--out", fit, "-q", ranks=FIT_RANKS)
    ranks = ",".join(map(str, (1, FIT_RANKS, *TARGET_RANKS)))
    env.spmd("scale", cfg, "--ranks", ranks, "--mode", mode, "--out", there, "-q", ranks=max(TARGET_RANKS))
    links = {n: str(link_test(env, n, True, suite, LINK_OPTIONS)) for n in (FIT_RANKS, *TARGET_RANKS)}
    files = {
        "fit": fit / "scaling.json",
        "measured": there / "scaling.json",
        "links-fit": links[FIT_RANKS],
        **{f"links-{n}": links[n] for n in TARGET_RANKS},
    }
    inputs = save_inputs(env, slug(name), files, suite=suite)
    out = []
    for n in TARGET_RANKS:
        kinds = {
            CARRIED: ("", "fit", "measured", "links-fit", FITTED_ON),
            TARGETS: ("", "fit", "measured", f"links-{n}", FITTED_ON),
        }
        out += held_against(name, n, files, inputs, kinds, frozen)
    return out


def round_cases(listed: dict, suite: str, frozen: str) -> list[Case]:
    """A CPU round's cases: each ``listed`` case measured once a run, on a launch of 8."""
    return [
        Case(
            f"held-out {name}",
            lambda e, n=name, j=job, m=modes: measure(e, n, j, m, suite, frozen),
            needs=(f"ranks{max(TARGET_RANKS)}",),
            runs=1,
        )
        for name, (job, modes) in listed.items()
    ]


def cases(env) -> list[Case]:
    return round_cases(cases_list(env), SUITE, FROZEN)
