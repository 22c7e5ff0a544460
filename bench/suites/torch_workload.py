"""Your PyTorch model under spmd (workload torch): spmd's strategies against the same model in a plain DDP script
written by hand (same batch, precision, buckets), what timing the buckets costs a step (a Python comm hook
on every step against spmd's hooked twin on one step in phase_every, against DDP's own C++ path), spmd's step against
a plain loop in the same processes on every rank (and with CuPy's NCCL loaded before PyTorch), the plain script
inside the process spmd builds around its step, the batch sweep:
all ranks against one at each batch, the step model's predictions beside them, its advice run and measured; and the
same sweep over the examples users start from (the two MLPs and the CNN), each run verified."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ..env import ROOT
from ..records import Measure
from . import Case


def sizes(env) -> dict:
    """The model, its batch and steps, the data's rows, and the per-rank batches the sweeps compare."""
    batches = {"batches": "16,64" if env.quick else "16,64,256"}
    if env.gpus:
        return {"size": "large", "batch": 256, "steps": 20 if env.quick else 50, "rows": 16384, **batches}
    return {"size": "medium", "batch": 32, "steps": 20 if env.quick else 100, "rows": 4096, **batches}


def torch_job(env, strategy: str, s: dict, **params) -> dict:
    """The job training examples/torch/mlp.py with ``strategy`` at sizes ``s`` (its data: work/torch-SIZE.h5)."""
    features = {"medium": 844, "large": 4812}[s["size"]]
    return {
        "workload": "torch",
        "device": env.device,
        "warmup": 1,
        "repeats": 3 if env.quick else 5,
        "input": {"path": str(env.work / f"torch-{s['size']}.h5"), "dataset": "x"},
        "generate": {"shape": [s["rows"], features], "dtype": "float32", "seed": 1},
        "params": {
            "model": str(ROOT / "examples/torch/mlp.py:build"),
            "options": {"size": s["size"]},
            "labels": {"dataset": "y"},
            "batch": s["batch"],
            "steps": s["steps"],
            "strategy": strategy,
            "optimizer": {"name": "adamw", "lr": 1e-3},
            "bucket_mb": 25,
            **params,
        },
        "output": str(env.work / f"torch-out-{strategy}"),
    }


def torch_config(env, strategy: str, s: dict, **params) -> Path:
    """torch_job written as a config file (its data generated once per run of the suite)."""
    cfg = env.work / f"torch-{strategy}.yaml"
    job = torch_job(env, strategy, s, **params)
    cfg.write_text(yaml.safe_dump(job))
    if not Path(job["input"]["path"]).exists():
        env.spmd("generate", cfg, ranks=None)
    return cfg


def spmd_report(env, strategy: str, s: dict, ranks: int = 1, **params) -> dict:
    """The report.json of ``spmd run`` (``ranks`` ranks) training examples/torch/mlp.py with ``strategy``."""
    env.spmd("run", torch_config(env, strategy, s, **params), "-q", ranks=ranks)
    return env.report(env.work / f"torch-out-{strategy}")


def spmd_rate(env, strategy: str, s: dict, ranks: int = 1, **params) -> float:
    """samples/s of that run."""
    return spmd_report(env, strategy, s, ranks, **params)["metrics"]["samples_per_s"]


def ddp_sweep(env, s: dict, batches: str, name: str, *options) -> dict:
    """``spmd scale --batches`` of the ddp config on 1 rank and every rank of the launch: scaling.json's batch_sweep."""
    out = env.work / name
    cfg = torch_config(env, "ddp", s)
    env.spmd(
        "scale", cfg, "--ranks", f"1,{env.ranks}", "--batches", batches, *options, "--out", out, "-q", ranks=env.ranks
    )
    return json.loads((out / "scaling.json").read_text())["batch_sweep"]


def overhead(env) -> list[Measure]:
    s = sizes(env)
    case = f"MLP {s['size']}, batch {s['batch']}, fp32, AdamW, 1 rank"
    out = [
        _plain_measure(case, "plain DDP script", plain_ddp(env, s, None)[s["batch"]]),
        Measure(case, "spmd ddp", spmd_rate(env, "ddp", s), "training rate", "samples/s"),
    ]
    if env.gpus:
        out += [
            Measure(case, f"spmd {strategy}", spmd_rate(env, strategy, s), "training rate", "samples/s")
            for strategy in ("ddp-graph", "compile")
        ]
    return out


def plain_ddp(env, s: dict, ranks: int | None, batches: str | None = None, *options: str) -> dict[int, dict]:
    """batch -> the line bench/programs/plain_ddp.py printed (samples_per_s, the libraries it ran on), one launch
    for every batch, plainly (None) or under the launcher with ``ranks`` ranks; ``options`` (``--spmd-env``) passed
    on."""
    args = ("--size", s["size"], "--batch", batches or s["batch"], "--steps", s["steps"], "--rows", s["rows"], *options)
    done = env.program("plain_ddp.py", *args, "--device", env.device, ranks=ranks)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {line["batch"]: line for line in lines}


def overhead_all_ranks(env, runs: int) -> list[list[Measure]]:
    """spmd's ddp on every rank of the launch against the plain DDP script on as many, at each batch of the
    sweep (one launch of each a batch and run, at the launch's rank count only): what spmd's phases, verification
    and data path cost a multi-GPU step."""
    return _against_plain_all_ranks(env, runs, phases=True)


def overhead_untimed(env, runs: int) -> list[list[Measure]]:
    """The same comparison with spmd's ddp run with ``phases: false`` at each batch (no timing marks, no
    instrumented twin): beside the case above, it splits spmd's cost into what timing takes and the rest. A case
    of its own, so that each ends (and is recorded) well inside one call."""
    return _against_plain_all_ranks(env, runs, phases=False)


def launch_order(launches: list, run: int) -> list:
    """The launches of one run, rotated by the run's number: each side goes first as often as the others over the
    runs, so that a host that drifts through a call (or favours the first launch) does not favour one side."""
    k = run % len(launches)
    return launches[k:] + launches[:k]


def _launched(runs: int, launches: list) -> list[list[Measure]]:
    """Per run, the measures of ``launches`` (callables, one fresh launch each), launched in ``launch_order``; a
    run's measures keep the launches' own order."""
    per_run = []
    for run in range(runs):
        done = [None] * len(launches)
        for i in launch_order(list(range(len(launches))), run):
            done[i] = launches[i]()
        per_run.append([m for measures in done for m in measures])
    return per_run


def _against_plain_all_ranks(env, runs: int, phases: bool) -> list[list[Measure]]:
    """Per batch and run, one launch of the plain script and one ``spmd run``, each a fresh launch of its own, so
    that what a launch's placement on the host does to a host-bound step hits both alike, in alternating order."""
    s = sizes(env)
    per_run: list[list[Measure]] = [[] for _ in range(runs)]
    for batch in (int(b) for b in s["batches"].split(",")):
        case = f"MLP {s['size']}, batch {batch} per rank, fp32, AdamW, {env.ranks} ranks" + (
            "" if phases else ", phases: false"
        )

        def plain():
            return [_plain_measure(case, "plain DDP script", plain_ddp(env, s, env.ranks, str(batch))[batch])]

        def ours():
            report = spmd_report(env, "ddp", s, ranks=env.ranks, batch=batch, phases=phases)
            return [_spmd_measure(case, "spmd ddp" if phases else "spmd ddp, phases: false", report)]

        for run, measures in enumerate(_launched(runs, [plain, ours])):  # both launched before the next batch
            per_run[run] += measures
    return per_run


def plain_in_spmds_process(env, runs: int) -> list[list[Measure]]:
    """At the sweep's smallest batch, one launch each of the plain script, the plain script inside the process spmd
    builds around its step (``--spmd-env``: spmd's context and watchdog, CuPy on the GPU, spmd's communicator) and
    ``spmd run`` (their order rotated run by run): whether a whole-launch gap is the process's or spmd's step and
    what runs between its steps."""
    s = sizes(env)
    batch = int(s["batches"].split(",")[0])
    case = f"MLP {s['size']}, batch {batch} per rank, fp32, AdamW, {env.ranks} ranks, whole launches"

    def plain(*options: str, subject: str):
        return lambda: [_plain_measure(case, subject, plain_ddp(env, s, env.ranks, str(batch), *options)[batch])]

    launches = [
        plain(subject="plain DDP script"),
        plain("--spmd-env", subject="plain DDP script in spmd's process"),
        lambda: [_spmd_measure(case, "spmd ddp", spmd_report(env, "ddp", s, ranks=env.ranks, batch=batch))],
    ]
    return _launched(runs, launches)


def _plain_measure(case: str, subject: str, line: dict) -> Measure:
    """plain_ddp.py's rate, with the libraries it ran on and its every window."""
    params = {"libraries": line["libraries"], "window_s": line["windows_s"]}
    return Measure(case, subject, line["samples_per_s"], "training rate", "samples/s", "peer", params=params)


def _spmd_measure(case: str, subject: str, report: dict) -> Measure:
    """spmd's rate, with the NCCL and cuBLAS files it ran on and where a step's time went: a whole repeat's per
    step against the marked steps' phases (a gap between them is time outside the steps)."""
    params = {
        "libraries": report["result"]["libraries"],
        "step_ms": report["metrics"]["step_ms"],
        "phase_ms_per_step": report["metrics"]["phase_ms_per_step"],
        "data_placement": report["result"]["data_placement"],
    }
    return Measure(case, subject, report["metrics"]["samples_per_s"], "training rate", "samples/s", params=params)


def step_cost(env, runs: int) -> list[list[Measure]]:
    """spmd's eager ddp step (workload torch's Trainer) against a plain DDP loop written by hand, in the same processes
    on every rank of the launch, windows interleaved so the host's drift hits both alike: what spmd's step itself
    adds, apart from the launch. On GPUs once more with CuPy, its NCCL and spmd's own communicator loaded before
    PyTorch is imported, the order ``spmd run`` had before the torch workload loaded PyTorch first
    (``Workload.load_libraries``): PyTorch then gets the NCCL CuPy loaded under the same name. Each record names
    the libraries the processes ran on."""
    s = sizes(env)
    steps, windows = (20, 4) if env.quick else (40, 8)
    orders = (False, True) if env.gpus else (False,)
    per_run: list[list[Measure]] = [[] for _ in range(runs)]
    for run in range(runs):
        for cupy_first in orders:
            args = ["--device", env.device, "--size", s["size"], "--batch", s["batches"]]
            args += ["--steps", steps, "--windows", windows, *(["--cupy-first"] if cupy_first else [])]
            done = env.program("torch_step_cost.py", *args, ranks=env.ranks)
            for line in (json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")):
                case = f"MLP {s['size']}, batch {line['batch']} per rank, fp32, AdamW, {env.ranks} ranks"
                case += ", in the same processes" + (", CuPy and its NCCL loaded before PyTorch" if cupy_first else "")
                libraries = {"libraries": line["libraries"]}
                per_run[run] += [
                    Measure(
                        case,
                        name,
                        us,
                        "time per step",
                        "us",
                        "peer" if name == "plain DDP loop" else "result",
                        better="lower",
                        params=libraries,
                    )
                    for name, us in line["us_per_step"].items()
                ]
    return per_run


def hook_cost(env) -> list[Measure]:
    windows = ("--windows", 5, "--steps", 50) if env.quick else ("--windows", 20, "--steps", 200)
    us = json.loads(
        env.program("torch_hook_cost.py", "--device", env.device, *windows, ranks=None).stdout.splitlines()[-1]
    )
    case = "launch-bound step (16-16-10 MLP, batch 32), phases on"
    roles = {"DDP's C++ allreduce": "ceiling", "hook every step": "peer"}  # and spmd's twin on 1 step in phase_every
    return [
        Measure(case, name, value, "time per step", "us", roles.get(name, "result"), better="lower")
        for name, value in us.items()
    ]


def batch_sweep(env) -> list[Measure]:
    """``spmd scale --batches``: per per-GPU batch, the speedup of all ranks over one against the ideal, and the
    break-even batch the step model finds (the question "is N GPUs slower than 1, at which batch?"). Then the advice
    is measured: ``accumulate: 4`` at the largest batch, run, against what the step model predicted for it."""
    s = sizes(env)
    sweep = ddp_sweep(env, s, s["batches"], "torch-sweep", "-o", "repeats=3")
    return sweep_measures(env, f"MLP {s['size']}", sweep) + advice_measured(env, s, sweep)


def advice_measured(env, s: dict, sweep: dict) -> list[Measure]:
    """The step model's prediction for ``accumulate: k`` at the sweep's largest batch against a sweep that runs it."""
    from spmd.scale.models.step import ACCUMULATE, speedup

    if not sweep.get("model"):
        return []
    top, k = sweep["rows"][-1]["batch"], ACCUMULATE[-1]
    ran = ddp_sweep(env, s, str(top), "torch-sweep-accumulate", "-o", "repeats=3", "-o", f"params.accumulate={k}")
    case = f"MLP {s['size']}, {env.ranks} ranks against 1, batch {top} per rank, accumulate: {k}"
    return [
        Measure(case, "spmd ddp", ran["rows"][0]["speedup"], "speedup", "x"),
        Measure(case, "ideal", float(env.ranks), "speedup", "x", "ceiling"),
        Measure(case, "predicted by the step model", speedup(sweep["model"], top, k), "speedup", "x", "peer"),
    ]


def sweep_measures(env, model: str, sweep: dict) -> list[Measure]:
    """The batch sweep's table and its model's predictions and break-even batch, as measures (cases named by
    ``model``)."""
    measures = []
    for row in sweep["rows"]:
        case = f"{model}, {env.ranks} ranks against 1, batch {row['batch']} per rank"
        measures += [
            Measure(case, "spmd ddp", row["speedup"], "speedup", "x"),
            Measure(case, "ideal", float(env.ranks), "speedup", "x", "ceiling"),
        ]
    for point in (sweep.get("model") or {}).get("points", []):  # the advice's model against the measurement
        case = f"{model}, {env.ranks} ranks against 1, batch {point['batch']} per rank"
        measures.append(
            Measure(case, "predicted by the step model", point["predicted_speedup"], "speedup", "x", "peer")
        )
    if sweep.get("model") and sweep["model"].get("break_even_batch"):
        measures.append(
            Measure(
                f"{model}, {env.ranks} ranks against 1",
                "spmd scale's step model",
                float(sweep["model"]["break_even_batch"]),
                "break-even batch per rank",
                "samples",
                better="lower",
            )
        )
    return measures


EXAMPLES = ("mlp-medium", "mlp-large", "cnn")  # examples/torch/: the two MLPs and the CNN


def examples_sweep(env) -> list[Measure]:
    """The examples a user starts from (examples/torch/: the two MLPs, the CNN with BatchNorm and dropout)
    as shipped, through ``spmd scale --batches`` on 1 rank and every rank of the launch: each run verified against
    the one-process reference (a run that fails verification fails the case), the speedup at each per-GPU batch
    beside the step model's prediction, and its break-even batch. Data, outputs and the sweep in the scratch
    folder; no model is saved."""
    batches = "16,64" if env.quick else "16,64,256"
    measures = []
    for name in EXAMPLES:
        cfg = ROOT / "examples/torch" / f"{name}.yaml"
        where = [
            *("-o", f"input.path={env.work / f'example-{name}.h5'}"),
            *("-o", f"output={env.work / f'example-{name}'}"),
            *("-o", "params.save=null"),
        ]
        if not (env.work / f"example-{name}.h5").exists():
            env.spmd("generate", cfg, *where, ranks=None)
        out = env.work / f"example-{name}-sweep"
        env.spmd(
            "scale", cfg, *where, "--ranks", f"1,{env.ranks}", "--batches", batches, "--out", out, "-q", ranks=env.ranks
        )
        sweep = json.loads((out / "scaling.json").read_text())["batch_sweep"]
        measures += sweep_measures(env, f"example {name}", sweep)
    return measures


def cases(env) -> list[Case]:
    return [
        Case("against a plain DDP script", overhead, needs=("torch",)),
        Case("the cost of timing buckets", hook_cost, needs=("torch",)),
        Case("against a plain DDP script, all ranks", overhead_all_ranks, needs=("torch", "ranks2"), batched=True),
        Case(
            "against a plain DDP script, every rank untimed", overhead_untimed, needs=("torch", "ranks2"), batched=True
        ),
        Case(
            "against the plain script in spmd's process, all ranks",
            plain_in_spmds_process,
            needs=("torch", "ranks2"),
            batched=True,
        ),
        Case("the step against a plain loop, same processes", step_cost, needs=("torch", "ranks2"), batched=True),
        Case("batch sweep", batch_sweep, needs=("torch", "ranks2")),
        Case("examples, batch sweep", examples_sweep, needs=("torch", "ranks2")),
    ]
