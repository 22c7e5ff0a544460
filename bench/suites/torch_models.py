"""Real models under workload torch, with nothing hidden: GPT-2 124M (transformers, from its config) and ResNet-50
(torchvision's on a GPU), bf16 autocast, AdamW. spmd's eager step against a plain DDP loop written by hand in the
same processes, windows by turns, at one rank and at every rank of the launch; and whole launches of ``spmd run``
(verified, every rank's first gradients checked) against torchrun launching the plain loop, alternating sides, with
rank 0's own compute per step against the other ranks' (rank 0 hosts the store, the progress line and the
watchdog's collection). A CPU machine runs small configurations of both models."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import yaml

from ..env import ROOT
from ..records import Measure
from . import Case
from .torch_workload import launch_order

NAMES = {"gpt2": "GPT-2 124M, batch 8 x 256 tokens", "resnet50": "ResNet-50, batch 64 of 3x64x64"}
SMALL_NAMES = {"gpt2": "GPT-2 small config, batch 4 x 32 tokens", "resnet50": "ResNet small config, batch 8 of 3x16x16"}


def _names(env) -> dict:
    return NAMES if env.gpus else SMALL_NAMES


def step_cost(env, runs: int) -> list[list[Measure]]:
    """spmd's step against the plain loop in the same processes: one launch per run and rank count."""
    steps, windows = (5, 2) if env.quick else (20, 8)
    counts = [1] + ([env.ranks] if env.ranks > 1 else [])
    per_run: list[list[Measure]] = [[] for _ in range(runs)]
    for run in range(runs):
        for ranks in counts:
            args = ["--device", env.device, "--steps", steps, "--windows", windows, *([] if env.gpus else ["--small"])]
            done = env.program("model_step_cost.py", *args, ranks=ranks)
            for line in (json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")):
                rank_words = f"{ranks} rank{'s' * (ranks > 1)}"
                case = f"{_names(env)[line['model']]} per rank, bf16, AdamW, {rank_words}, same processes"
                params = {"per_rank_us": line["per_rank_us"], "windows_us": line["windows_us"]}
                per_run[run] += [
                    Measure(
                        case,
                        side,
                        us,
                        "time per step",
                        "us",
                        "peer" if side == "plain DDP loop" else "result",
                        better="lower",
                        params=params,
                    )
                    for side, us in line["us_per_step"].items()
                ]
    return per_run


def spmd_config(env, model: str) -> Path:
    """The example's config, its data in the bench's folder, on GPUs the full-size model (torchvision's ResNet-50)."""
    name = "gpt2" if model == "gpt2" else "resnet"
    job = yaml.safe_load((ROOT / f"examples/torch/{name}.yaml").read_text())
    job["input"]["path"] = str(env.work / f"{name}.h5")
    job["output"] = str(env.work / f"out-{name}")
    job["device"] = env.device
    job["generate"]["shape"][0] = 1024
    params = job["params"]
    params["model"] = str(ROOT / params["model"])
    if "loss" in params and ":" in params["loss"]:
        params["loss"] = str(ROOT / params["loss"])
    params.update(steps=5 if env.quick else 20, save=None)
    if model == "resnet50" and env.gpus:
        params["model"] = str(ROOT / "examples/torch/resnet.py:torchvision_resnet50")
    if not env.gpus:  # the small configurations
        from ..programs.model_step_cost import SMALL, SMALL_SHAPES

        row, batch, _ = SMALL_SHAPES[model]
        params.update(options=SMALL[model], batch=batch)
        job["generate"]["shape"] = [512, *((row,) if model == "gpt2" else row)]
        if model == "gpt2":
            job["generate"]["vocab"] = SMALL[model]["vocab"]
    job["repeats"] = 2 if env.quick else 3
    cfg = env.work / f"{name}.yaml"
    cfg.write_text(yaml.safe_dump(job))
    if not Path(job["input"]["path"]).exists():
        env.spmd("generate", cfg, ranks=None)
    return cfg


def whole_launches(env, runs: int) -> list[list[Measure]]:
    """Per model and run, one ``spmd run`` and one torchrun launch of the plain loop (order rotated run by run)."""
    per_run: list[list[Measure]] = [[] for _ in range(runs)]
    for model in ("gpt2", "resnet50"):
        cfg = spmd_config(env, model)
        case = f"{_names(env)[model]} per rank, bf16, AdamW, {env.ranks} rank{'s' * (env.ranks > 1)}, whole launches"

        def ours(cfg=cfg, case=case, model=model):
            env.spmd("run", cfg, "-q", ranks=env.ranks)
            report = env.report(env.work / f"out-{'gpt2' if model == 'gpt2' else 'resnet'}")
            assert report["verified"] and report["verification"]["gradients"]["checks"]
            compute = [r["median"]["compute"] for r in report["per_rank"]]
            params = {"per_rank_compute_s": compute, "gradients": _brief(report["verification"]["gradients"])}
            out = [
                Measure(
                    case, "spmd run", report["metrics"]["samples_per_s"], "training rate", "samples/s", params=params
                )
            ]
            if len(compute) > 1:
                others = statistics.median(compute[1:])
                out.append(
                    Measure(
                        case,
                        "rank 0's compute per step against the others'",
                        compute[0] / others,
                        "ratio",
                        "x",
                        better="lower",
                    )
                )
            return out

        def plain(case=case, model=model):
            program = str(Path(__file__).resolve().parents[1] / "programs/model_step_cost.py")
            argv = ["-m", "torch.distributed.run", "--nproc-per-node", str(env.ranks), program]
            argv += ["--device", env.device, "--plain-only", "--models", model, "--steps", "20", "--windows", "3"]
            done = env.run([*argv, *([] if env.gpus else ["--small"])], ranks=None)
            line = json.loads([x for x in done.stdout.splitlines() if x.startswith("{")][-1])
            return [
                Measure(case, "torchrun, plain DDP loop", line["samples_per_s"], "training rate", "samples/s", "peer")
            ]

        for run in range(runs):
            launches = [ours, plain]
            done = {}
            for i in launch_order(list(range(len(launches))), run):
                done[i] = launches[i]()
            per_run[run] += [m for i in range(len(launches)) for m in done[i]]
    return per_run


def _brief(g: dict) -> dict:
    return {k: g[k] for k in ("largest_error_in_bounds", "smallest_change_caught", "share_caught_at_1_percent")}


def verify_cost(env, runs: int, steps: int | None = None) -> list[list[Measure]]:
    """Verification's cost at its defaults: the examples' GPT-2 and ResNet-50 jobs verified and with verify: none, by
    turns in one launch (a turn a run), at one rank and at every rank, at ``steps`` a window (the example's 10
    otherwise); each run's whole wall time and its wall time up to the report (the same less NCCL's teardown, alike
    on both sides); and a late 1% change, caught or not. One launch a model, so a long one fits a command's time."""
    per_run: list[list[Measure]] = [[] for _ in range(runs)]
    rows = 256 if env.quick else 1024
    length = ["--steps", steps] if steps else []
    for config in (ROOT / "examples/torch/gpt2.yaml", ROOT / "examples/torch/resnet.yaml"):
        done = env.program(
            "torch_verify_cost.py", "--config", config, "--turns", runs, "--rows", rows, *length, ranks=env.ranks
        )
        for line in (json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")):
            model = "GPT-2 124M" if line["model"] == "gpt2" else "ResNet-50"
            job = f"the example's job at {steps} steps a window" if steps else "the example's job"
            case = f"{model}, {job}, {line['ranks']} rank{'s' * (line['ranks'] > 1)}, by turns in one launch"
            keys = ("checked_words", "checked_steps", "steps", "parts", "late", "check_seconds", "budget")
            keys += ("per_check_s", "verified_walls_s", "plain_walls_s", "verification_setup_s", "share_of_wall")
            params = {k: line.get(k) for k in keys}
            for run in range(runs):
                for metric, turns in (
                    ("wall time", line["turns_s"]),
                    ("wall time up to the report", line["to_report_s"]),
                ):
                    verified, plain = turns["verified"][run], turns["verify none"][run]
                    per_run[run] += [
                        Measure(case, "verified (default checks)", verified, metric, "s", "result", "lower", params),
                        Measure(case, "verify: none", plain, metric, "s", "peer", "lower"),
                    ]
    return per_run


def verify_cost_long(env, runs: int) -> list[list[Measure]]:
    """The same at five times the example's steps a window (200 steps a run, both rank counts within one command's
    time): where the drawn checks come in."""
    return verify_cost(env, runs, steps=20 if env.quick else 50)


def cases(env) -> list[Case]:
    return [
        Case(
            "verification's cost by turns, and a late change",
            verify_cost,
            needs=("torch", "transformers", "gpu"),
            batched=True,
        ),
        Case(
            "verification's cost over a longer run, by turns",
            verify_cost_long,
            needs=("torch", "transformers", "gpu"),
            batched=True,
        ),
        Case(
            "real models, the step against a plain loop, same processes",
            step_cost,
            needs=("torch", "transformers"),
            batched=True,
        ),
        Case(
            "real models, whole launches against torchrun",
            whole_launches,
            needs=("torch", "transformers"),
            batched=True,
        ),
    ]
