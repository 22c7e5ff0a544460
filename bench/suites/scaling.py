"""Scaling: ``spmd scale`` of the built-in workloads over 1, 2, 4, ... ranks of the launch, strong (the same
problem) and weak (the problem per rank), each size verified; the speedup against the ideal one (the rank
ratio), how far the fitted model's prediction was from each measured point, and, with 4 ranks or more, how far
the model fitted to the smaller counts alone was from the largest (the prediction before buying the GPUs; there
training, spmd's train and a PyTorch model under spmd's ddp, is swept too)."""

from __future__ import annotations

import json

import yaml

from ..records import Measure
from . import Case


def workload(env, name: str) -> dict:
    """The config of ``name`` at this machine's sizes: GPU-sized where there are GPUs, small enough that the
    suite's three cases of three sweeps each fit one 10-minute call on a GPU box (at 4 GiB, reduce's case alone
    ran past six minutes on 2 H200s); the kernels suite measures the large sizes against their ceilings."""
    gpu, quick = env.gpus > 0, env.quick
    data = str(env.work / f"scale-{name}.h5")
    common = {
        "device": env.device,
        "warmup": 1,
        "repeats": 3 if quick else "auto",
        "max_seconds": 10 if gpu else 20,
        "output": str(env.work / f"scale-{name}-out"),
    }
    if name == "reduce":
        rows = 1 << 20 if quick else (1 << 28 if gpu else 1 << 25)  # 1 GiB on a GPU, 128 MiB on a CPU
        return {
            **common,
            "workload": "reduce",
            "input": {"path": data, "dataset": "x"},
            "generate": {"shape": [rows], "dtype": "float32", "seed": 3},
        }
    if name == "stencil":
        n = 1024 if quick else (8192 if gpu else 2048)
        return {
            **common,
            "workload": "stencil",
            "input": {"path": data, "dataset": "field"},
            "generate": {"shape": [n, n], "dtype": "float32", "seed": 3},
            "params": {
                "kernel": [[0, 0.25, 0], [0.25, 0, 0.25], [0, 0.25, 0]],
                "boundary": "reflect",
                "iterations": 20 if quick else (100 if gpu else 50),
            },
        }
    if name == "train":  # the medium MLP, data-parallel; each repeat a window of steps
        return {
            **common,
            "repeats": 3,  # train's repeats are a count: they set how long it trains
            "workload": "train",
            "input": {"path": data, "dataset": "data"},
            "generate": {"shape": [4096 if quick else 32768, 844], "dtype": "float32", "seed": 17},
            "params": {"model": "medium", "batch": 64, "steps": 10 if quick else 50, "optimizer": "adam"},
        }
    if name == "torch":  # a user's PyTorch model (examples/torch/mlp.py) under spmd's ddp
        from .torch_workload import sizes, torch_job

        job = torch_job(env, "ddp", sizes(env))
        return {**job, **common, "repeats": job["repeats"]}  # the sweep's device, output and warm-up
    n = 1024 if quick else (8192 if gpu else 2048)
    return {
        **common,
        "workload": "matmul",
        "input": {"path": data, "dataset": "A"},
        "generate": {"shape": [n, n], "dtype": "float32", "seed": 1},
        "params": {
            "b": {
                "path": str(env.work / "scale-B.h5"),
                "dataset": "B",
                "generate": {"shape": [n, n], "dtype": "float32", "seed": 2},
            },
            "gather": "none",
            "b_source": "allgather",
        },
    }


def sweep(env, name: str) -> list[Measure]:
    from spmd.scale.sweep.analysis import held_out

    path = env.work / f"scale-{name}.yaml"
    path.write_text(yaml.safe_dump(workload(env, name)))
    out = env.work / f"scale-{name}-report"
    env.spmd("scale", path, "--mode", "both", "--out", out, "-q", ranks=env.ranks)
    scaling = json.loads((out / "scaling.json").read_text())
    errors = {(p["mode"], p["ranks"]): p["error"] for p in (scaling.get("model") or {}).get("points", [])}
    measures = []
    for mode, rows in scaling["series"].items():
        base = rows[0]["ranks"]
        for row in rows[1:]:
            case = f"{name} {mode}, {base} -> {row['ranks']} ranks"
            ideal = row["ranks"] / base
            # the phase medians (slowest rank) of both points, kept in the raw file (the first run's): they explain
            # a speedup
            phases = {
                f"{label}_s": {k: v["median"] for k, v in point.get("timings", {}).items()}
                for label, point in (("one", rows[0]), ("many", row))
            }
            measures += [
                Measure(case, "spmd", row["speedup"], "speedup", "x", params=phases),
                Measure(case, "ideal", ideal, "speedup", "x", "ceiling"),
            ]
            if (mode, row["ranks"]) in errors:
                measures.append(
                    Measure(
                        case,
                        "spmd scale's model",
                        abs(errors[mode, row["ranks"]]),
                        "error of the model's prediction",
                        "share",
                        better="lower",
                    )
                )
    for row in held_out(scaling):  # with 4 or more ranks: what 1 and 2 would have predicted for the top count
        measures.append(
            Measure(
                f"{name} {row['mode']}, {row['ranks']} ranks predicted from 1 -> {row['fit']}",
                f"spmd scale's model fitted to <= {row['fit']} ranks",
                abs(row["error"]),
                "error of the prediction",
                "share",
                better="lower",
                params={k: row[k] for k in ("measured_s", "predicted_s", "error", "worst_phase")},
            )
        )
    return measures


def cases(env) -> list[Case]:
    out = [
        Case(f"{name} strong and weak", lambda e, name=name: sweep(e, name), needs=("ranks2",))
        for name in ("reduce", "stencil", "matmul")
    ]
    # training's sweeps serve the prediction check (1 and 2 ranks' model against 4): they run from 4 ranks on
    out += [
        Case("train strong and weak", lambda e: sweep(e, "train"), needs=("ranks4",)),
        Case("torch strong and weak", lambda e: sweep(e, "torch"), needs=("ranks4", "torch")),
    ]
    return out
