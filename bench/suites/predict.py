"""Predicting machines spmd did not run on. A sweep on 1 and 2 GPUs (their own links, NVLink on these machines) is
fitted, then asked for N GPUs (every GPU of the launch) on links the sweep never used, and held against a sweep
measured there. The targets are the same links at N (where N > 2), GPU peer-to-peer off (``NCCL_P2P_DISABLE=1``,
through host memory, like a PCIe host bridge), and nodes of N/2 GPUs emulated on the one machine (``NCCL_HOSTID`` per
node, so NCCL runs its inter-node rings, trees and network transport; spmd grouped the same way,
bench/programs/as_node.py).
Each target's links come from ``spmd bench comm --links`` run under the same setting. Per workload, setup and
series, the record is the prediction's error at N against the measured median of the run's repeats, with the
phase furthest off, and the speedup's error against the measured sweep's own one rank (one launch: whole launches
differ in speed by up to a quarter here). The files each prediction came from (the fitted sweep, the sweep measured
on the target, its links) stay gzipped under ``inputs/`` beside the records: ``python -m bench recheck DIR`` derives
the records from them again with the model as it is now. Each run of a case fits, measures the links and the
target afresh (a launch's noise is what several runs show); a record with several runs keeps every run's check
(``params.runs``) and shows the median run's."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import yaml

from ..env import ROOT
from ..manifest import commit, write_manifest
from ..records import Measure, launch_times, median_run, read_records, rewrite_records, run_params
from . import Case
from .scaling import workload
from .torch_models import spmd_config

PROGRAM = "as_node.py"
INPUTS = "inputs"  # the suite's folder holds the files each prediction came from here


def setups(env) -> dict:
    """name -> (environment, ranks a node or None for all on one): the target's links."""
    n = env.ranks
    out = {}
    if n > 2:
        out["same links"] = ({}, None)
    if env.gpus:
        out["p2p off"] = ({"NCCL_P2P_DISABLE": "1"}, None)
        out[f"{n // 2 if n > 2 else 1} GPU(s) a node, {2 if n > 2 else n} nodes"] = ({}, max(1, n // 2))
    return out


def launch(env, args: list, ranks: int, setup: tuple) -> None:
    extra, per_node = setup
    if per_node is None:
        env.spmd(*args, ranks=ranks, env=extra)
    else:
        env.program(PROGRAM, per_node, "-m", "spmd", *args, ranks=ranks, env=extra)


def config(env, name: str):
    if name in ("gpt2", "resnet50"):
        path = spmd_config(env, name)
        job = yaml.safe_load(path.read_text())
        # timing is what is predicted, and the torch models suite verifies these models: here the one-process
        # reference, which trains every step of the launch again for every rank (GPT-2 at 32 x 1024 on 2 H200s: 35
        # s a launch at one rank, 68 at two), would take more device time than the case's own runs
        job["verify"] = "none"
        if name == "resnet50" and env.gpus:
            # 64 images of 64x64 a GPU took 27-46 ms a step for 2-3 ms of GPU work: its host's launches decided
            # the step, and whole launches' host noise (one rank: 542-918 ms a repeat) the predictions' errors.
            # 128 of ImageNet's 224x224 give the GPU the step (1141-1147 ms a repeat over three launches on 2
            # H200s)
            job["generate"]["shape"] = [1024, 3, 224, 224]
            job["params"]["batch"] = 128
        if name == "gpt2" and env.gpus:
            # the example's 8 x 256 tokens a GPU are host-bound too (35-47 ms a step for 5 ms of GPU work): 32 x 1024
            # give the GPU the step (0.2 s on one H200); the records before this line were measured at 8 x 256
            job["generate"]["shape"] = [2048, 1024]
            job["params"]["batch"] = 32
    else:
        job = workload(env, name)
        job["repeats"] = 5  # a fixed count: four sweeps a case, each point's median of five
        if name == "train" and env.gpus:
            # the medium MLP's step is tens of microseconds on a GPU, where host jitter decides a repeat's
            # time; the large one (6.9 M parameters, 28 MB of gradients a step) is compute and communication
            job["generate"]["shape"] = [16384, 4812]
            job["params"].update(model="large", batch=256, steps=20)
    path = env.work / f"predict-{name}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def links(env, name: str, setup: tuple, run: int = 0) -> str:
    path = env.work / f"links-{slug(name)}-{run}.json"
    if not path.exists():
        launch(
            env, ["bench", "comm", "--links", "--max-bytes", "256M", "--factor", "4", "--json", path], env.ranks, setup
        )
    return str(path)


def predicted(env, name: str, only: str | None = None, run: int = 0) -> list[Measure]:
    """The records of ``name`` at every setup (or the one labelled ``only``), in run ``run`` (its own fit, links
    and targets; a real model's setups, cases of their own, share run 0's fit)."""
    cfg = config(env, name)
    fit = env.work / f"predict-{name}-fit-{run}"
    # a real model's sweep in weak mode alone (a fixed per-GPU batch, as training runs): its runs take minutes
    mode = "weak" if name in ("gpt2", "resnet50") else "both"
    if not (fit / "scaling.json").exists():  # a real model's setups are cases of their own: one fit for them all
        env.spmd("scale", cfg, "--ranks", "1,2", "--mode", mode, "--out", fit, "-q", ranks=2)
    out = []
    for i, (label, setup) in enumerate(setups(env).items()):
        if only is not None and label != only:
            continue
        there = env.work / f"predict-{name}-{i}-{run}"
        launch(env, ["scale", cfg, "--ranks", f"1,{env.ranks}", "--mode", mode, "--out", there, "-q"], env.ranks, setup)
        per_node = setup[1] or env.ranks
        target = f"gpus_per_node={per_node},nodes={env.ranks // per_node},"
        target += f"host_ranks={env.ranks}," if setup[1] else ""  # emulated nodes are one host: its memory shared
        target += f"name={label}"
        files = {
            "fit": fit / "scaling.json",
            "measured": there / "scaling.json",
            "links": Path(links(env, label, setup, run)),
        }
        inputs = save_inputs(env, f"{name}-{slug(label)}{run_suffix(run)}", files)
        for c in checked(files, target):
            if c["ranks"] == env.ranks:
                case = f"{name} {c['mode']}, fitted on 1-2 GPUs, predicted at {env.ranks}: {label}"
                out.append(error_record(case, c, inputs=inputs, target=target))
    return out


SHAPED_RATE = "400mbit"  # as tests/slurm: communication about half of a two-node repeat of the matmul below


def shaped_link(env, run: int = 0) -> list[Measure]:
    """On the CPU: the two namespaced SLURM nodes of ci/slurm/start.sh, the link between them slowed to 400
    Mbit/s with tc (ci/slurm/shape.sh). A sweep on one node (1 and 2 ranks) and the shaped link's measurement
    predict the two-node runs (one rank a node) measured next: a matmul whose allgather of B is 30-70% of a
    repeat there. One BLAS thread a rank: both nodes share the machine's cores."""
    cfg = workload(env, "matmul")
    cfg.update(repeats=5, warmup=1)
    cfg["generate"]["shape"] = [2048, 1024]
    cfg["params"].update(b_source="allgather", gather="none")
    cfg["params"]["b"]["generate"]["shape"] = [1024, 1024]
    path = env.work / "shaped-matmul.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env.spmd("generate", path, ranks=None)
    single = {"OMP_NUM_THREADS": "1"}
    one, two, links = env.work / "shaped-one", env.work / "shaped-two", env.work / "shaped-links.json"
    for folder in (one, two):
        shutil.rmtree(folder, ignore_errors=True)
    links.unlink(missing_ok=True)
    env.srun("scale", path, "--ranks", "1,2", "--mode", "both", "--out", one, "-q", nodes=1, per_node=2, env=single)
    shape = str(ROOT / "ci/slurm/shape.sh")
    subprocess.run(["bash", shape, SHAPED_RATE], check=True, capture_output=True, timeout=30)
    try:
        env.srun("bench", "comm", "--links", "--backend", "mpi", "--device", "cpu", "--max-bytes", "16M",
                 "--factor", "4", "--read-bytes", "16M", "--json", links, nodes=2, per_node=1, env=single)  # fmt: skip
        env.srun("scale", path, "--ranks", "1,2", "--mode", "both", "--out", two, "-q", nodes=2, per_node=1, env=single)
    finally:
        subprocess.run(["bash", shape, "off"], capture_output=True, timeout=30)
    # the two nodes are namespaces of one machine: its cores and memory serve both ranks, as the target says
    target = f"gpus_per_node=1,nodes=2,host_ranks=2,name=2 nodes over {SHAPED_RATE}"
    measured = json.loads((two / "scaling.json").read_text())
    out = []
    files = {"fit": one / "scaling.json", "measured": two / "scaling.json", "links": links}
    inputs = save_inputs(env, f"matmul-shaped{run_suffix(run)}", files)
    for c in checked(files, target):
        if c["ranks"] != 2:
            continue
        report = next(r for r in measured["runs"] if r["mode"] == c["mode"] and r["ranks"] == 2)["report"]
        share = report["timings"]["comm"]["median"] / report["timings"]["total"]["median"]
        case = f"matmul {c['mode']}, fitted on one node, predicted at 2 nodes x 1 rank over {SHAPED_RATE} (tc)"
        out.append(error_record(case, c, comm_share=share, inputs=inputs, target=target))
    return out


CHECKED = (
    "mode",
    "ranks",
    "measured_s",
    "predicted_s",
    "error",
    "interval",
    "worst_phase",
    "worst_measured_s",
    "worst_predicted_s",
    "measured_speedup",
    "speedup_error",
    "speedup_interval",
)


def checked(files: dict, target: str) -> list[dict]:
    """The prediction of the ``fit`` sweep for ``target`` (key=value; its links the ``links`` file where ``files``
    names one, else the target's own keys: a preset; its host's reads the ``host_read`` file where ``files`` names
    one) held against the ``measured`` sweep: ``other_machines[].checked`` as ``spmd predict --measured`` writes it."""
    from spmd.scale.prediction.check import check_against, measured_runs
    from spmd.scale.prediction.machines import read_target
    from spmd.scale.prediction.predict import predict_machine, read_sweep

    scaling = read_sweep(files["fit"])
    given = "".join(f"{key}={files[key]}," for key in ("links", "host_read") if files.get(key))
    prediction = predict_machine(scaling, read_target(f"{given}{target}"))
    return check_against(prediction, measured_runs(files["measured"]))


def error_record(case: str, checked: dict, **params) -> Measure:
    """A prediction checked against a measured run (``other_machines[].checked``) as the suite's record."""
    return Measure(
        case,
        "spmd predict",
        abs(checked["error"]),
        "error of the prediction",
        "share",
        better="lower",
        params={**params, **{k: checked.get(k) for k in (*CHECKED, "phases")}},
    )


def slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def run_suffix(run: int) -> str:
    """The inputs' names of run ``run``: the first run's as a single run's, ``-run2`` on."""
    return f"-run{run + 1}" if run else ""


def with_runs(measures: list[Measure]) -> dict:
    """The params of one prediction over the runs (a measure each): every run's check and the median run's."""
    return median_run([m.params for m in measures], [m.value for m in measures])


def runs_of(measure, count: int) -> list[list[Measure]]:
    """``count`` runs of ``measure(run)``, each prediction carrying every run's check (``with_runs``)."""
    runs = [measure(run) for run in range(count)]
    by_case: dict[str, list[Measure]] = {}
    for m in (m for one in runs for m in one):
        by_case.setdefault(m.case, []).append(m)
    params = {case: with_runs(measures) for case, measures in by_case.items()}
    return [[replace(m, params=params[m.case]) for m in one] for one in runs]


def save_inputs(env, prefix: str, files: dict, suite: str = "predict") -> dict:
    """{role: path under the suite's folder}: the files a record came from (a prediction's, a sweep's scaling.json),
    gzipped beside the records."""
    folder = env.out / suite / INPUTS
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for role, path in files.items():
        name = f"{prefix}-{role}.json.gz"
        tmp = folder / f".{name}.{os.getpid()}.tmp"
        tmp.write_bytes(gzip.compress(Path(path).read_bytes(), mtime=0))
        os.replace(tmp, folder / name)
        out[role] = f"{INPUTS}/{name}"
    return out


def recheck(folder: Path) -> int:
    """The records of a predict suite's results folder derived again from their inputs with the model as it is
    now (each run's, where a record keeps several: ``params.runs``; a record without inputs stays as it was); the
    manifest names the commit that did it. Returns how many."""
    path = folder / "records.jsonl"
    records, done = read_records(path), 0
    at = commit(("spmd", "bench"))  # the model's code as it ran (records of other folders rechecked are data)
    with tempfile.TemporaryDirectory() as tmp:
        for r in records:
            runs = run_params(r)
            if not runs or not all(p.get("inputs") for p in runs):
                continue
            fresh = [rederived(folder, Path(tmp), r.case, p) for p in runs]
            r.values = [m.value for m in fresh]
            r.params = with_runs(fresh) if len(fresh) > 1 else fresh[0].params
            done += 1
    rewrite_records(path, records)
    facts = json.loads((folder / "manifest.json").read_text())
    facts.setdefault("rechecked", []).append(
        {
            "commit": at,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "records": done,
            "of": len(records),
        }
    )
    write_manifest(folder, facts)
    return done


def launch_deviations(folders: list[Path]) -> list[float]:
    """How far a whole launch's measured time lay from another launch's of the same case (|ratio - 1|, every
    ordered pair), over the records of several runs (each run its own launch) in the predict folders given: a
    prediction's time is one launch's fit held against another launch's run, and its interval carries that
    (spmd.scale.prediction.intervals.LAUNCH_SPREAD, this list's 90th percentile)."""
    out = []
    for folder in folders:
        for record in read_records(folder / "records.jsonl"):
            times = launch_times(record)
            out += [abs(a / b - 1) for a, b in itertools.permutations(times, 2)]
    return out


def rederived(folder: Path, tmp: Path, case: str, params: dict) -> Measure:
    """One run's check derived again from its inputs (``params.inputs``); the params the model does not derive
    (the target, a communication share) kept."""
    files = {}
    for role, rel in params["inputs"].items():
        files[role] = tmp / f"{role}.json"
        files[role].write_bytes(gzip.decompress((folder / rel).read_bytes()))
    (c,) = [c for c in checked(files, params["target"]) if (c["mode"], c["ranks"]) == (params["mode"], params["ranks"])]
    kept = {k: v for k, v in params.items() if k not in (*CHECKED, "phases", "runs")}
    return error_record(case, c, **kept)


def cases(env) -> list[Case]:
    out = [
        Case(
            f"{name} on other links",
            lambda e, count, name=name: runs_of(lambda run: predicted(e, name, run=run), count),
            needs=("ranks2",),
            batched=True,
        )
        for name in ("reduce", "matmul", "stencil", "train")
    ]
    # a real model's setups one case each (one fit for them all in a run, one run: minutes each): a 10-minute call
    # may not hold all three
    out += [
        Case(
            f"{name} on other links: {label}",
            lambda e, n=name, lb=label: predicted(e, n, lb),
            needs=("ranks2", "torch"),
            runs=1,
        )
        for name in ("gpt2", "resnet50")
        for label in setups(env)
    ]
    out.append(
        Case(
            "matmul over a shaped link between two SLURM nodes",
            lambda e, count: runs_of(lambda run: shaped_link(e, run), count),
            needs=("slurm2",),
            runs=3,
            batched=True,
        )
    )
    return out
