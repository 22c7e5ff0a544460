"""The answer for a training job, on real models (GPT-2 124M and ResNet-50, bf16, AdamW). First, what kernel-level
capture costs a step: captured with CPU and CUDA activity as spmd captures, with CUDA alone, and the uncaptured steps
before and after a capture, by turns in one process (bench/programs/capture_cost.py). Then whether a cause made on
purpose on one rank is named as that cause from the captured kernels (a host thread sharing the interpreter, more
device work, a slow data phase; ``spmd run --capture``). Last, the batch sweep's step model, resting on the captured
NCCL kernels, against the measured speedup at every batch (``spmd scale --ranks 1,2,N --batches ... --capture``),
and a small sweep with and without ``--capture`` by turns (what capture biases, if anything)."""

from __future__ import annotations

import json

from ..records import Measure
from . import Case
from .predict import save_inputs
from .torch_models import spmd_config

FAULTS = {
    "host": "rank=1,phase=compute,kind=hog",
    "more work": "rank=1,phase=compute,kind=work,seconds=0.01",
    "data": "rank=1,phase=data,kind=slow,seconds=0.01",
}
BATCHES = {"gpt2": "8,32", "resnet50": "32,128"}
SWEEP_TIMEOUT_S = 560  # a sweep of 7 runs as users run it: the most one 10-minute device call leaves it
NAMES = {"gpt2": "GPT-2 124M, 256 tokens", "resnet50": "ResNet-50, 3x64x64"}


def capture_cost(env, runs: int) -> list[list[Measure]]:
    """Microseconds per step of the plain loop: uncaptured (the ceiling), captured as spmd does, CUDA only, and
    uncaptured after captures."""
    per_run: list[list[Measure]] = [[] for _ in range(runs)]
    for run in range(runs):
        done = env.program("capture_cost.py", "--rounds", 3 if env.quick else 5, "--steps", 10, ranks=None)
        for line in (json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")):
            case = f"{NAMES[line['model']]}, 1 GPU: a step captured by torch.profiler"
            sides = {
                "before": ("uncaptured (before any capture)", "ceiling"),
                "cpu+cuda": ("captured, CPU and CUDA activity (spmd --capture)", "result"),
                "cuda": ("captured, CUDA activity alone", "peer"),
                "after": ("uncaptured, after captures", "result"),
            }
            per_run[run] += [
                Measure(case, sides[k][0], us, "time per step", "us", sides[k][1], better="lower")
                for k, us in line["median_us"].items()
            ]
    return per_run


def causes(env) -> list[Measure]:
    """Each cause made on rank 1 of 2: 1 when the straggler finding names rank 1 with that cause, else 0 (the
    finding kept in the record)."""
    out = []
    model = "gpt2"
    cfg = spmd_config(env, model)
    for cause, fault in FAULTS.items():
        folder = env.work / "out-gpt2"
        env.spmd(
            "run", cfg, "-q", "--capture", 2, "-o", "verify=none", "-o", f"output={folder}",
            ranks=2, env={"SPMD_FAULT": fault},
        )  # fmt: skip
        report = env.report(folder)
        s = report["breakdown"]["straggler"] or {}
        named = float(s.get("rank") == 1 and s.get("cause") == cause)
        out.append(
            Measure(
                f"{NAMES[model]}, 2 GPUs, {fault} (made on rank 1)",
                f"straggler named rank 1, cause {cause}",
                named,
                "named as made",
                "yes=1",
                params={"finding": report["findings"][0] if report["findings"] else None},
            )
        )
    return out


def batch_sweep(env, model: str) -> list[Measure]:
    """The step model's predicted speedup against the measured one at each batch; the sweep's scaling.json kept
    gzipped (``inputs/``), so that ``bench report`` decides its verdict again on any machine; the sweep's own cost
    (its wall time by part) beside the timed repeats it was for."""
    out = []
    cfg = spmd_config(env, model)
    folder = env.work / f"sweep-{model}"
    ranks = sorted({1, 2, env.ranks})
    # as users run it: the example's config (verified, its repeats), --capture 2, nothing else changed
    env.spmd(
        "scale", cfg, "--ranks", ",".join(map(str, ranks)), "--batches", BATCHES[model], "--capture", 2,
        "--out", folder, ranks=env.ranks, timeout=SWEEP_TIMEOUT_S,
    )  # fmt: skip
    scaling = json.loads((folder / "scaling.json").read_text())
    inputs = save_inputs(env, f"{model}-{env.ranks}gpus", {"scaling": folder / "scaling.json"}, suite="torch-answer")
    sweep = scaling["batch_sweep"]
    params = {
        "verdict": scaling.get("verdict"),
        "comm_source": (sweep.get("model") or {}).get("comm_source"),
        "inputs": inputs,
        "sweep": NAMES[model],
    }

    def case(batch, n=sweep["ranks"]):
        return f"{NAMES[model]}, per-GPU batch {batch}, {n} GPUs against 1 (batch sweep with capture)"

    for row in sweep["rows"]:
        out.append(Measure(case(row["batch"]), "measured", row["speedup"], "speedup", "x", params=params))
    for p in (sweep.get("model") or {}).get("points", []):
        extra = {"error": p["error"], "interval": p["measured_interval"]}
        out.append(
            Measure(case(p["batch"]), "predicted by the step model", p["predicted_speedup"], "speedup", "x",
                    "peer", params=extra)
        )  # fmt: skip
    for row in scaling["series"].get("strong", [])[1:]:
        out.append(
            Measure(f"{NAMES[model]}, strong scaling with capture", f"{row['ranks']} GPUs", row["speedup"],
                    "speedup", "x")
        )  # fmt: skip
    cost = scaling["cost"]
    where = f"{NAMES[model]}, the sweep's own cost ({', '.join(map(str, ranks))} GPUs, batches {BATCHES[model]})"
    params = {"parts_s": cost["parts_s"], "inputs": inputs, "sweep": NAMES[model]}
    out.append(
        Measure(where, "the sweep's wall time beyond its timed repeats", cost["total_s"] - cost["timed_steps_s"],
                "seconds", "s", better="lower", params=params)
    )  # fmt: skip
    out.append(
        Measure(where, "3x the timed repeats (the bound)", 3 * cost["timed_steps_s"], "seconds", "s", "ceiling",
                better="lower")
    )  # fmt: skip
    return out


def capture_pair(env, runs: int) -> list[list[Measure]]:
    """A small sweep (GPT-2 124M, ``--ranks 1,2``) with and without ``--capture 2``, by turns, which goes first
    alternating: each side's time per repeat at 1 and 2 GPUs and its 2-GPU speedup. The capture pass runs after every
    timed run, so what capture would bias shows here as a gap between the sides beyond their turns' spread."""
    cfg = spmd_config(env, "gpt2")
    per_run: list[list[Measure]] = [[] for _ in range(runs)]
    sides = [("with --capture 2", ["--capture", 2], "result"), ("without --capture", [], "peer")]
    for run in range(runs):
        for name, extra, role in sides if run % 2 == 0 else sides[::-1]:
            folder = env.work / f"capture-pair-{run}-{'with' if extra else 'without'}"
            env.spmd("scale", cfg, "--ranks", "1,2", *extra, "--out", folder, ranks=2, timeout=SWEEP_TIMEOUT_S)
            strong = json.loads((folder / "scaling.json").read_text())["series"]["strong"]
            for row in strong:
                where = f"{NAMES['gpt2']}, a sweep's timed repeat at {row['ranks']} GPU{'s' * (row['ranks'] > 1)}"
                per_run[run].append(Measure(where, name, row["time"], "time per repeat", "s", role, "lower"))
            two = next(r for r in strong if r["ranks"] == 2)
            where = f"{NAMES['gpt2']}, a sweep's 2-GPU speedup with and without capture, by turns"
            per_run[run].append(Measure(where, name, two["speedup"], "speedup", "x", role))
    return per_run


def cases(env) -> list[Case]:
    return [
        *(
            Case(
                f"batch sweep with capture, {model}",
                lambda e, m=model: batch_sweep(e, m),
                needs=("gpu", "ranks2", "torch", "transformers"),
                runs=1,
            )
            for model in BATCHES
        ),  # fmt: skip
        Case("causes made on purpose, named", causes, needs=("gpu", "ranks2", "torch", "transformers"), runs=1),
        Case("capture cost, real models", capture_cost, needs=("gpu", "torch", "transformers"), batched=True),
        Case(
            "a sweep with and without capture, by turns",
            capture_pair,
            needs=("gpu", "ranks2", "torch", "transformers"),
            batched=True,
        ),
    ]
