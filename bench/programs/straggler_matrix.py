"""The straggler fault matrix: a slow rank made on purpose wherever a training step can be slow, on models users
bring, and whether spmd names that rank and its cause; clean runs beside them, by turns in one launch.

Models (written here, as a user would): ``mlp`` (no buffers), ``bn`` (BatchNorm: DDP broadcasts its buffers before
every forward), ``gru`` (a recurrent sequence classifier), ``gpt2-tiny`` (transformers' GPT-2 from a 2-layer
config). Where the slowness sits (each as long as ``--share`` of the model's clean step, at least ``--floor`` s):
``data`` (its batch), ``before forward`` (host work), ``optimizer`` (the previous optimizer step), ``more work``
(extra operators), ``in forward`` and ``in backward`` (the model's own sleep), on rank 0 and on the last rank, with
and without ``--capture 2``; every run verified as users run. Each rank count (the first n ranks of the launch):

    mpiexec -n 3 python bench/programs/straggler_matrix.py --ranks 2,3 --data /tmp/m

``--subset gpu`` runs instead the stated GPU subset (``GPU_SUBSET``, one GPU a rank, NCCL): BatchNorm with and without
SyncBatchNorm (``bn-sync``), GPT-2 tiny, the GRU and the MLP, each slowness once or twice, and ``busy device``: another
process keeping the slow rank's GPU busy with matrix products for the whole run (a slower device made without
touching clocks; its kernels are not the rank's own, so no capture sees them as its work).

Prints one JSON line per run: model, ranks, where, the slow rank (None for a clean run), capture, the expected cause
on this device, the straggler named (rank, cause), spmd's estimate of the step without it, and each run's step with
and without the ranks' waits for each other (``own_step_s``). The estimate is held to the same launch's clean runs,
to their step and to their step less their own waits.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.usage import answer_help

answer_help(__doc__, "straggler_matrix.py [--ranks 2,3] [--data DIR] [--clean 20] [--models mlp,bn,gru,gpt2-tiny]")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from spmd.core.files import write_json_atomic  # noqa: E402
from spmd.core.runtime import Context  # noqa: E402
from spmd.job import run_job  # noqa: E402
from spmd.workloads.registry import job_config_from_dict  # noqa: E402

MODELS_PY = '''
import importlib.util
import time

import torch
from torch import nn

GPT2_EXAMPLE = "EXAMPLE"  # the path, filled in when written


class Slowed(nn.Module):
    """The user's model; on the slow rank ``seconds`` of sleep in its forward or, through a hook, its backward."""

    def __init__(self, inner, seconds, where):
        super().__init__()
        self.inner, self.seconds, self.where = inner, seconds, where

    def forward(self, x):
        out = self.inner(x)
        if self.seconds and self.training and torch.is_grad_enabled():
            if self.where == "in forward":
                time.sleep(self.seconds)
            else:
                out.register_hook(lambda grad: time.sleep(self.seconds))
        return out


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(6, 128, batch_first=True)
        self.head = nn.Linear(128, 4)

    def forward(self, x):
        return self.head(self.gru(x)[1][-1])


def gpt2_tiny():
    """The example's GPT-2 (examples/torch/gpt2.py) from a 2-layer config."""
    spec = importlib.util.spec_from_file_location("gpt2_example", GPT2_EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    options = dict(vocab=256, positions=32, width=64, layers=2, heads=2, dropout=0.0)
    return example.build({"options": options})


WIDTH = 512  # a clean step of some milliseconds on one CPU core: the machine's jitter a small share of it

MAKERS = {
    "mlp": lambda: nn.Sequential(
        nn.Linear(12, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, 4)
    ),
    "bn": lambda: nn.Sequential(
        nn.Linear(12, WIDTH), nn.BatchNorm1d(WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 4)
    ),
    "gru": Recurrent,
    "gpt2-tiny": gpt2_tiny,
}


def build(params):
    o = params["options"]
    slow = o.get("slow", 0.0) if torch.distributed.get_rank() == o.get("slow_rank", -1) else 0.0
    return Slowed(MAKERS[o["model"]](), slow, o.get("where"))


def loss(out, target):
    if out.dim() == 3:
        return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    return nn.functional.cross_entropy(out, target)
'''

ROOT = Path(__file__).resolve().parents[2]
DATA = {"mlp": "features", "bn": "features", "bn-sync": "features", "gru": "sequences", "gpt2-tiny": "tokens"}
# where -> (how it is made: a fault's phase and kind, or the model's own sleep; the cause expected on a CPU, where the
# host is the device: a sleep between operators is time between them, one inside backward's operators slows them)
WHERE = {
    "data": (("data", "slow"), "data"),
    "before forward": (("compute", "slow"), "host"),
    "optimizer": (("optimizer", "slow"), "host"),
    "more work": (("compute", "work"), "more work"),
    "in forward": (None, "host"),
    "in backward": (None, "slower device"),
}
# on a GPU a sleep anywhere on the host leaves the device idle waiting for launches (host); another process's kernels
# on the rank's GPU make each of its own kernels slower (slower device)
ON_GPU = {"in forward": "host", "in backward": "host", "busy device": "slower device"}
# the GPU subset: (model, where, slow rank: "first" or "last", capture); about a dozen runs, every cause at least once
GPU_SUBSET = [
    ("bn", "data", "last", True),
    ("bn", "before forward", "first", True),
    ("bn", "before forward", "last", False),
    ("bn", "in backward", "last", True),
    ("bn-sync", "before forward", "last", True),
    ("bn-sync", "in forward", "first", True),
    ("bn-sync", "more work", "last", True),
    ("gpt2-tiny", "more work", "first", True),
    ("gpt2-tiny", "optimizer", "last", True),
    ("gpt2-tiny", "busy device", "last", True),
    ("gru", "in backward", "first", True),
    ("gru", "busy device", "first", True),
    ("mlp", "in forward", "last", True),
    ("mlp", "data", "first", False),
]
GPU_MODELS = ("bn", "bn-sync", "gpt2-tiny", "gru", "mlp")
# another tenant of the GPU: bf16 matrix products back to back until it is killed, 64 queued at a time (about 15 ms of
# work): with 8 (2 ms) the GPU ran the job alone between batches, and GPT-2 tiny's host-bound step, whose few kernels
# often fell in those gaps, was slowed in some repeats and not others (a tenant that comes and goes)
OCCUPIER = """
import sys, torch
torch.cuda.set_device(int(sys.argv[1]))
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
b = a @ a
torch.cuda.synchronize()
print("busy", flush=True)
while True:
    for _ in range(64):
        b = a @ a
    torch.cuda.synchronize()
"""
STEPS, REPEATS, BATCH = 8, 10, 32


def write_data(folder: Path) -> None:
    rng = np.random.default_rng(0)
    rows = 2048
    x = rng.standard_normal((rows, 12)).astype(np.float32)
    with h5py.File(folder / "features.h5", "w") as f:
        f["x"], f["y"] = x, np.argmax(x[:, :4], axis=1).astype(np.int64)
    s = rng.standard_normal((rows, 16, 6)).astype(np.float32)
    with h5py.File(folder / "sequences.h5", "w") as f:
        f["x"], f["y"] = s, np.argmax(s[:, -1, :4], axis=1).astype(np.int64)
    t = rng.integers(0, 256, (rows, 32)).astype(np.int64)
    with h5py.File(folder / "tokens.h5", "w") as f:
        f["x"], f["y"] = t, np.roll(t, -1, axis=1)


def config(folder: Path, model: str, capture: bool, fault: str | None = None, **options):
    """The job of ``model`` (``bn-sync``: the BatchNorm model under ``params.sync_batchnorm``)."""
    return job_config_from_dict(
        {
            "workload": "torch",
            "warmup": 1,
            "repeats": REPEATS,
            "input": {"path": str(folder / f"{DATA[model]}.h5"), "dataset": "x"},
            "params": {
                "model": f"{folder / 'models.py'}:build",
                "loss": f"{folder / 'models.py'}:loss",
                "labels": {"dataset": "y"},
                "options": {"model": model.removesuffix("-sync"), **options},
                "batch": BATCH,
                "steps": STEPS,
                "optimizer": {"name": "adamw", "lr": 1e-3},
                "sync_batchnorm": model.endswith("-sync"),
            },
            "capture": {"steps": 2 if capture else 0},
            "fault": fault,
        }
    )


def run(comm, cfg) -> dict:
    ctx = Context(comm)
    try:
        return run_job(ctx, cfg).report
    finally:
        ctx.close()


def repeat_seconds(report: dict) -> float:
    """The median repeat of the run (each repeat's slowest rank)."""
    per_rank = [r["repeats"] for r in report["per_rank"]]
    return statistics.median(max(rank[i]["total"] for rank in per_rank) for i in range(len(per_rank[0])))


def own_seconds(report: dict) -> float:
    """A repeat with no rank waiting for another: the median repeat less the ranks' mean wait (report.json's
    breakdown), what spmd's estimate of the repeat without a straggler is too (the others' own time)."""
    waits = [r["seconds"]["wait"] for r in report["breakdown"]["per_rank"]]
    return repeat_seconds(report) - statistics.fmean(waits)


def expected_cause(where: str, gpu: bool) -> str:
    """The cause a slowness at ``where`` should be named with on this device."""
    return ON_GPU[where] if gpu and where in ON_GPU else WHERE[where][1]


def occupied(device: int):
    """Another process busy on GPU ``device`` (returned once its matrix products run); kill() it after the run."""
    child = subprocess.Popen([sys.executable, "-c", OCCUPIER, str(device)], stdout=subprocess.PIPE, text=True)
    if child.stdout.readline().strip() != "busy":
        child.kill()
        raise RuntimeError("the process meant to occupy the GPU did not start")
    return child


def planned(models: list[str], wheres: list[str], n: int, captures: list[bool], clean: int, subset: str) -> list:
    """The runs of one rank count, clean ones spread among the slowed ones by turns: (model, where, slow rank,
    capture), where None for a clean run."""
    if subset == "gpu":
        cases = [(m, w, 0 if r == "first" else n - 1, c) for m, w, r, c in GPU_SUBSET]
        models = list(GPU_MODELS)
    else:
        cases = [(m, w, r, c) for m in models for w in wheres for r in sorted({0, n - 1}) for c in captures]
    cleans = [(models[i % len(models)], None, None, captures[i % len(captures)]) for i in range(clean)]
    order = []
    every = max(1, len(cases) // max(1, len(cleans)))
    for i, case in enumerate(cases):
        order.append(case)
        if cleans and i % every == every - 1:
            order.append(cleans.pop())
    return order + cleans


def kept(folder: Path, name: str, report: dict) -> str:
    """``report`` written whole into ``folder`` as NAME.json: a miss's evidence, to read again where it ran on a
    machine of another kind. Returns NAME."""
    folder.mkdir(parents=True, exist_ok=True)
    name = name.replace(" ", "-")
    write_json_atomic(folder / f"{name}.json", report, overwrite=True)
    return name


def idle_barrier(comm) -> None:
    """A barrier that sleeps while it waits: a rank outside the run must not spin on a core the run needs."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(0.005)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2", help="rank counts, each the first n ranks of the launch")
    ap.add_argument("--data", default="/tmp/spmd-straggler-matrix")
    ap.add_argument("--models", default=",".join(DATA))
    ap.add_argument(
        "--where", default=",".join(WHERE), help="where the slowness sits (comma-separated; empty: clean runs only)"
    )
    ap.add_argument("--clean", type=int, default=20, help="clean runs at each rank count")
    ap.add_argument("--share", type=float, default=0.5, help="the slowness as a share of the model's clean step")
    ap.add_argument("--floor", type=float, default=0.005, help="and at least this many seconds")
    ap.add_argument("--capture", choices=("both", "no", "yes"), default="both", help="runs with --capture 2")
    ap.add_argument("--subset", choices=("all", "gpu"), default="all", help="gpu: GPU_SUBSET's runs (and its models)")
    ap.add_argument(
        "--max-seconds", type=float, default=None, help="start no run after this many seconds (the rows so far stand)"
    )
    ap.add_argument(
        "--keep", default=None, help="a folder for the report.json of each run that named a wrong rank or cause"
    )
    ap.add_argument("--keep-every", action="store_true", help="--keep every run's report (to replay a rule on them)")
    a = ap.parse_args()
    deadline = time.monotonic() + a.max_seconds if a.max_seconds else None
    world = MPI.COMM_WORLD
    folder = Path(a.data)
    folder.mkdir(parents=True, exist_ok=True)
    if world.rank == 0:
        example = repr(str(ROOT / "examples/torch/gpt2.py"))
        (folder / "models.py").write_text(MODELS_PY.replace('"EXAMPLE"', example))
        write_data(folder)
    idle_barrier(world)
    import torch

    gpu = torch.cuda.is_available()
    if a.subset == "gpu" and not gpu:
        sys.exit("straggler_matrix.py: --subset gpu runs one GPU a rank, and torch sees none here")
    device = world.Split_type(MPI.COMM_TYPE_SHARED).rank % max(1, torch.cuda.device_count())
    models = list(GPU_MODELS) if a.subset == "gpu" else a.models.split(",")
    captures = {"both": [False, True], "no": [False], "yes": [True]}[a.capture]
    for n in [int(x) for x in a.ranks.split(",")]:
        sub = world.Split(0 if world.rank < n else MPI.UNDEFINED, key=world.rank)
        if sub == MPI.COMM_NULL:
            idle_barrier(world)
            continue
        clean_step = {m: repeat_seconds(run(sub, config(folder, m, False))) / STEPS for m in models}  # warms up too
        runs = planned(models, [w for w in a.where.split(",") if w], n, captures, a.clean, a.subset)
        for done, (model, where, slow, capture) in enumerate(runs):
            late = deadline is not None and time.monotonic() > deadline
            if sub.bcast(late if sub.rank == 0 else None):  # every rank of the run stops together
                if world.rank == 0:
                    print(
                        f"straggler_matrix.py: --max-seconds passed: {len(runs) - done} run(s) not started",
                        file=sys.stderr,
                    )
                break
            seconds = max(a.share * clean_step[model], a.floor)
            tenant = None
            expected = expected_cause(where, gpu) if where else None
            if where is None:
                cfg = config(folder, model, capture)
            elif where == "busy device":  # another process, not the job, slows the device
                cfg, seconds = config(folder, model, capture), 0.0
                tenant = occupied(device) if sub.rank == slow else None
            elif WHERE[where][0] is None:  # the model's own sleep
                cfg = config(folder, model, capture, slow_rank=slow, slow=seconds, where=where)
            else:
                phase, kind = WHERE[where][0]
                fault = f"rank={slow},phase={phase},kind={kind},seconds={seconds:.4f}"
                cfg = config(folder, model, capture, fault=fault)
            try:
                report = run(sub, cfg)
            finally:
                if tenant is not None:
                    tenant.kill()
                    tenant.wait()
            s = report["breakdown"]["straggler"] or {}
            if world.rank == 0:
                row = {
                    "model": model,
                    "ranks": n,
                    "device": "gpu" if gpu else "cpu",
                    "where": where,
                    "slow_rank": slow,
                    "capture": capture,
                    "seconds": seconds if where else 0.0,
                    "clean_step_s": clean_step[model],
                    "expected_cause": expected,
                    "named_rank": s.get("rank"),
                    "cause": s.get("cause"),
                    "undetermined": bool(s) and not s.get("cause"),
                    "step_s": repeat_seconds(report) / STEPS,
                    "own_step_s": own_seconds(report) / STEPS,
                    "step_without_s": (s["repeat_without_it"] / STEPS) if s.get("repeat_without_it") else None,
                    "finding": (report["findings"] or [None])[0],
                    "verified": report["verified"],
                }
                wrong = row["named_rank"] != slow or (row["cause"] and row["cause"] != expected)
                if a.keep and (a.keep_every or wrong):
                    row["kept"] = kept(Path(a.keep), f"{n}r-{done:02d}-{model}-{where or 'clean'}", report)
                print(json.dumps(row), flush=True)
        sub.Free()
        idle_barrier(world)


if __name__ == "__main__":
    sys.exit(main())
