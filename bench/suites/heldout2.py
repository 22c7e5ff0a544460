"""Held-out validation of ``spmd predict``, second round: the model as frozen at FROZEN (after the carried links' base
latency and the launch part of two launches; the files of heldout.MODEL_PATHS unchanged since), on seven cases
chosen with it and before any of them was measured, none used while designing the model or in the first round
(other seeds, sizes, iterations, an MLP of another shape, other per-GPU batches and image sizes, and a model family
never used before, torchvision's ConvNeXt).

On a machine of N GPUs each case is fitted as a user with fewer GPUs would: on one GPU (``--shares 2``) where N is
2, on 1 and 2 where N is 4 or more. It is predicted for N GPUs of one node from each kind of input that user has: a
preset (``nvlink4``, what one can look up), the fitting machine's own 2-GPU link test carried to N (where the fit had
2 GPUs), and the target's link test (a minute there, named as a measurement on the target); then measured there
(``spmd scale --ranks 1,N``). Published apart from the in-sample tables and the first round (docs/validation.md)."""

from __future__ import annotations

from pathlib import Path

from ..records import Measure
from . import Case
from .heldout import array_job, cases_of, held_against, job_config, mlp_job, torch_job
from .predict import launch, save_inputs, slug

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "a1d154e6ecc9de13653f67398e9b007e301afdec"
SUITE = "heldout2"
PRESET = "preset nvlink4"
CARRIED = "the fit's 2-GPU link test, carried"
TARGETS = "the target's link test"
LINK_SIZES = ["--max-bytes", "1G", "--factor", "4"]  # 8 B to 512 MiB (x4 from 8 B stops below 1 GiB)


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured."""
    gpu = env.gpus > 0
    n = 7168 if gpu else 1792
    grid = 4096 if gpu else 1024
    convnext = str(Path(__file__).resolve().parents[1] / "models/convnext.py:build")
    both = ("strong", "weak")
    stencil = array_job(env, "stencil", [grid, grid], 47)
    stencil["params"] = {**stencil["params"], "iterations": 200 if gpu else 100}
    return {
        "reduce, seed 41, float32": (array_job(env, "reduce", [1 << 27 if gpu else 1 << 22], 41), both),
        f"matmul, {n} square": (array_job(env, "matmul", [n, n], 43), both),
        f"stencil, a {grid} grid, {stencil['params']['iterations']} iterations": (stencil, both),
        "train, an MLP of 2048-2048-2048-1024-10 at batch 1024": (_mlp(env), both),
        "gpt2, 8 x 1024 tokens, bf16": (torch_job(env, "gpt2", {"shape": [1024, 1024], "seed": 53}, batch=8), both),
        "resnet50, batch 96 of 3x192x192": (torch_job(env, "resnet50", {"shape": [1024, 3, 192, 192], "seed": 59},
                                                      batch=96), both),
        "convnext-tiny, batch 64 of 3x160x160, bf16": (
            torch_job(env, "resnet50", {"shape": [1024, 3, 160, 160], "seed": 61}, batch=64, model=convnext,
                      options={"classes": 100}), both),
    }  # fmt: skip


def _mlp(env) -> dict:
    return mlp_job(env, [16384, 2048], 67, [2048, 2048, 2048, 1024, 10], 1024)


def input_kinds(gpus: int) -> tuple[str, ...]:
    """The kinds of input a case is predicted from on a machine of ``gpus``: the carried links only where the fit
    had 2 GPUs (a machine of 4 or more)."""
    return (PRESET, CARRIED, TARGETS) if gpus >= 4 else (PRESET, TARGETS)


def predictions(cases: dict, gpus: int) -> int:
    """How many predictions the list makes on a machine of ``gpus``: each case's modes times the kinds of input."""
    return sum(len(modes) for _, modes in cases.values()) * len(input_kinds(gpus))


def link_test(env, ranks: int) -> Path:
    """``spmd bench comm --links`` over ``ranks`` GPUs of this node, once a launch (every case shares it)."""
    path = env.work / f"heldout2-links-{ranks}.json"
    if not path.exists():
        launch(env, ["bench", "comm", "--links", *LINK_SIZES, "--json", path], ranks, ({}, None))
    return path


def measured(env, name: str, job: dict, modes: tuple) -> list[Measure]:
    """One case: fitted on fewer GPUs, measured at 1 and N, predicted at N from each kind of input."""
    n = env.ranks
    cfg, mode = job_config(env, "heldout2", name, job, modes)
    fit, there = env.work / f"heldout2-{slug(name)}-fit", env.work / f"heldout2-{slug(name)}-{n}"
    fitting = ("--ranks", "1", "--shares", "2") if n < 4 else ("--ranks", "1,2")
    env.spmd("scale", cfg, *fitting, "--mode", mode, "--out", fit, "-q", ranks=1 if n < 4 else 2)
    env.spmd("scale", cfg, "--ranks", f"1,{n}", "--mode", mode, "--out", there, "-q", ranks=n)
    files = {"fit": fit / "scaling.json", "measured": there / "scaling.json", "links-target": link_test(env, n)}
    if n >= 4:
        files["links-fit"] = link_test(env, 2)
    inputs = save_inputs(env, slug(name), files, suite=SUITE)
    fitted_on = "1 GPU" if n < 4 else "1-2 GPUs"
    links = {PRESET: None, CARRIED: "links-fit", TARGETS: "links-target"}
    kinds = {
        kind: ("intra=nvlink4," if kind == PRESET else "", "fit", "measured", links[kind], fitted_on)
        for kind in input_kinds(n)
    }
    return held_against(name, n, files, inputs, kinds, FROZEN)


def cases(env) -> list[Case]:
    return cases_of(cases_list(env), measured, ("gpt2", "resnet50", "convnext"))
