"""Held-out validation of ``spmd predict``, third round: the model as frozen at FROZEN (after a stencil's lone rank
listed the halos a split exchanges, a curve's smallest size priced whole, and the launch part set over the first two
rounds; the files of heldout.MODEL_PATHS unchanged since), on eight cases chosen with it and before any of them was
measured, none used while designing the model or in an earlier round (other seeds, sizes, iterations and batches, a
stencil bound by its host beside one that is not, and a model family never used before, torchvision's
EfficientNet).

Each case is predicted for the N GPUs of the machine twice over, as two users would:
- one with one GPU: fitted on it (``--shares N``), predicted from the ``nvlink4`` preset and from the target's link
  test, then measured there over NVLink (``spmd scale --ranks 1,N``);
- one with the N GPUs over NVLink who asks what the same GPUs with peer-to-peer off would do (a machine whose GPUs
  talk through the host): fitted on that 1-N sweep, predicted from the target's link test with
  ``NCCL_P2P_DISABLE=1``, then measured so.
On 4 GPUs or more the first user has 2 (fitted on 1-2, as the acceptance asks) and their own link test, carried to
the N, is a third input beside the preset and the target's (``input_kinds``); later rounds measure alike
(``measure_round``).
Published apart from the in-sample tables and the earlier rounds (docs/validation.md)."""

from __future__ import annotations

from pathlib import Path

from ..records import Measure
from . import Case
from .heldout import array_job, cases_of, held_against, job_config, mlp_job, stencil_job, torch_job
from .heldout2 import CARRIED
from .predict import launch, save_inputs, slug

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "3f0781ddddcf6fd988526cb181d81a30d8cf1da7"
SUITE = "heldout3"
PRESET = "preset nvlink4"
TARGETS = "the target's link test"
P2P_OFF = "the target's link test with peer-to-peer off (fitted with it on)"  # a target's name: no ',' nor ': '
PRESET_READS = "preset nvlink4 with the fit's host reads"  # from the seventh round on (heldout7.input_kinds)
NO_P2P = {"NCCL_P2P_DISABLE": "1"}
LINK_SIZES = ["--max-bytes", "1G", "--factor", "4"]  # 8 B to 512 MiB


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured."""
    gpu = env.gpus > 0
    n = 5120 if gpu else 1280
    efficientnet = str(Path(__file__).resolve().parents[1] / "models/efficientnet.py:build")
    both = ("strong", "weak")
    mlp = mlp_job(env, [32768, 1024], 89, [1024, 4096, 4096, 10], 2048)
    return {
        "reduce, seed 71, float64": (array_job(env, "reduce", [1 << 25 if gpu else 1 << 22], 71, "float64"), both),
        f"matmul, {n} square": (array_job(env, "matmul", [n, n], 73), both),
        **stencil_job(env, 8192 if gpu else 1024, 50 if gpu else 20, 79),
        **stencil_job(env, 2048 if gpu else 512, 400 if gpu else 40, 83),
        "train, an MLP of 1024-4096-4096-10 at batch 2048": (mlp, both),
        "gpt2, 12 x 512 tokens, bf16": (torch_job(env, "gpt2", {"shape": [1024, 512], "seed": 97}, batch=12), both),
        "resnet50, batch 128 of 3x128x128": (torch_job(env, "resnet50", {"shape": [1024, 3, 128, 128], "seed": 101},
                                                       batch=128), both),
        "efficientnet-b0, batch 96 of 3x160x160, bf16": (
            torch_job(env, "resnet50", {"shape": [1024, 3, 160, 160], "seed": 103}, batch=96, model=efficientnet,
                      options={"classes": 100}), both),
    }  # fmt: skip


INPUT_KINDS = (PRESET, TARGETS, P2P_OFF)


def input_kinds(gpus: int) -> tuple[str, ...]:
    """The kinds of input a case is predicted from on a machine of ``gpus``: on 4 or more, fitted on 1-2 GPUs, the
    fit's own 2-GPU link test carried to them too (the issue's input kind b)."""
    return (PRESET, CARRIED, TARGETS, P2P_OFF) if gpus >= 4 else INPUT_KINDS


def predictions(cases: dict, gpus: int = 2, kinds=input_kinds) -> int:
    """How many predictions the list makes on a machine of ``gpus``: each case's modes times the kinds of input."""
    return sum(len(modes) for _, modes in cases.values()) * len(kinds(gpus))


def link_test(env, ranks: int, p2p: bool, suite: str = SUITE, options=LINK_SIZES) -> Path:
    """``spmd bench comm --links`` over ``ranks`` GPUs of this node (peer-to-peer on or off), once a launch;
    ``options``: the test's own (its sizes, its device)."""
    path = env.work / f"{suite}-links-{ranks}{'' if p2p else '-p2p-off'}.json"
    if not path.exists():
        args = ["bench", "comm", "--links", *options, "--json", path]
        launch(env, args, ranks, ({} if p2p else NO_P2P, None))
    return path


def host_read_test(env, ranks: int, gpus: int, suite: str) -> Path:
    """``spmd bench comm --host-read`` with ``ranks`` ranks (the target's on a host) sharing the fit's ``gpus`` GPUs, as
    a user with fewer GPUs than the target measures the host's reads, once a launch."""
    path = env.work / f"{suite}-host-read-{ranks}-on-{gpus}.json"
    if not path.exists():
        visible = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, range(gpus)))}
        launch(env, ["bench", "comm", "--host-read", "--json", path], ranks, (visible, None))
    return path


def round_cases(listed: dict, suite: str, frozen: str, torch_cases: tuple[str, ...], kinds=input_kinds) -> list[Case]:
    """A round measured as this one (``measure_round``): its list as bench cases of ``suite`` frozen at ``frozen``,
    predicted from ``kinds(N)``."""
    return cases_of(listed, lambda env, *case: measure_round(env, suite, frozen, *case, kinds=kinds), torch_cases)


def measure_round(env, suite: str, frozen: str, name: str, job: dict, modes: tuple, kinds=input_kinds) -> list[Measure]:
    """One case of a round of ``suite`` frozen at ``frozen``: fitted on one GPU (on 1-2 GPUs where N is 4 or more, as
    the acceptance asks) and predicted at N over NVLink; fitted on 1-N over NVLink and predicted at N with
    peer-to-peer off; each measured there. ``kinds(N)``: the kinds of input predicted from (a round's own; the fit's
    host reads, where named, measured by N ranks sharing the fit's GPUs)."""
    n = env.ranks
    cfg, mode = job_config(env, suite, name, job, modes)
    fit, there, off = (env.work / f"{suite}-{slug(name)}-{part}" for part in ("fit", str(n), f"{n}-p2p-off"))
    fitting, fitted_on = (("--ranks", "1,2"), "1-2 GPUs") if n >= 4 else (("--ranks", "1", "--shares", str(n)), "1 GPU")
    env.spmd("scale", cfg, *fitting, "--mode", mode, "--out", fit, "-q", ranks=2 if n >= 4 else 1)
    env.spmd("scale", cfg, "--ranks", f"1,{n}", "--mode", mode, "--out", there, "-q", ranks=n)
    launch(env, ["scale", cfg, "--ranks", f"1,{n}", "--mode", mode, "--out", off, "-q"], n, (NO_P2P, None))
    files = {
        "fit": fit / "scaling.json",
        "measured": there / "scaling.json",
        "measured-p2p-off": off / "scaling.json",
        "links-target": link_test(env, n, p2p=True, suite=suite),
        "links-p2p-off": link_test(env, n, p2p=False, suite=suite),
    }
    if n >= 4:
        files["links-fit"] = link_test(env, 2, p2p=True, suite=suite)  # the fit's own machine: 2 of the GPUs
    if PRESET_READS in kinds(n):
        files["host-read-fit"] = host_read_test(env, n, 2 if n >= 4 else 1, suite)
    inputs = save_inputs(env, slug(name), files, suite=suite)
    table = {
        PRESET: ("intra=nvlink4,", "fit", "measured", None, fitted_on),
        PRESET_READS: ("intra=nvlink4,", "fit", "measured", None, fitted_on, "host-read-fit"),
        CARRIED: ("", "fit", "measured", "links-fit", fitted_on),
        TARGETS: ("", "fit", "measured", "links-target", fitted_on),
        P2P_OFF: ("", "measured", "measured-p2p-off", "links-p2p-off", f"1-{n} GPUs"),
    }
    return held_against(name, n, files, inputs, {k: table[k] for k in kinds(n)}, frozen)


def cases(env) -> list[Case]:
    return round_cases(cases_list(env), SUITE, FROZEN, ("gpt2", "resnet50", "efficientnet"))
