"""Unlucky or wrong use: a report command given the wrong reports, a script value that would inject a command, a
full disk, two jobs saving one path, a damaged checkpoint, Ctrl-C."""

from __future__ import annotations

import json
import time
from pathlib import Path

import h5py
import numpy as np

from .case import FaultCase
from .setups import JOBSCRIPT, LIMITED, MATMUL, TRAIN, TWO_JOBS, no, spmd


def _after(seconds):
    start = []
    return lambda work: start.append(time.monotonic()) or time.monotonic() > start[0] + seconds


def _whole_c(work):
    with h5py.File(work / "C.h5") as f:
        c = f["C"][...]
    whole = c.shape == (256, 256) and np.isfinite(c).all() and not list(work.glob(".*.tmp"))
    return None if whole else "C.h5 not whole, or a temporary file left"


def _scalings(work: Path):
    t = {"median": 1.0, "min": 1.0, "max": 1.0}
    for name, workload in (("reduce.json", "reduce"), ("matmul.json", "matmul")):
        scaling = {
            "kind": "scaling",
            "schema": 1,
            "workload": workload,
            "series": {"strong": [{"ranks": 1, "time": 1.0, "timings": {"total": t}}]},
        }
        (work / name).write_text(json.dumps(scaling))
    (work / "bad.json").write_text(json.dumps({"schema": 1, "timings": {"total": t}, "config": {}}))


def cases(mpiexec: list[str]) -> list[FaultCase]:
    def generate(work):
        spmd(work, "generate", "job.yaml", mpiexec=tuple(mpiexec))

    def damaged_checkpoint(work):
        generate(work)
        first = ("-o", "repeats=5", "-o", "params.checkpoint.every=0", "--out", "first")
        spmd(work, "run", "job.yaml", *first, mpiexec=tuple(mpiexec))
        path = work / "ckpt.h5"
        with open(path, "r+b") as f:
            f.seek(path.stat().st_size // 4)  # inside the weights, the first dataset
            f.write(bytes(200_000))

    return [
        FaultCase(
            "report compare of a reduce and a matmul report",
            argv=["report", "compare", "reduce.json", "matmul.json"],
            prepare=_scalings,
            ranks=0,
            expect=2,
            says=("reduce.json is a report of reduce, matmul.json of matmul",),
        ),
        FaultCase(
            "report merge of a malformed report.json",
            argv=["report", "merge", "bad.json", "bad.json", "--out", "m"],
            prepare=_scalings,
            ranks=0,
            expect=2,
            says=("bad.json: not a report.json of spmd run",),
            check=no("m"),
        ),
        FaultCase(
            "report render of a report.json (not a scaling.json)",
            argv=["report", "render", "bad.json"],
            prepare=_scalings,
            ranks=0,
            expect=2,
            says=("bad.json: not a report.json of spmd run",),
        ),
        FaultCase(
            "jobscript: a newline in --partition",
            argv=[*JOBSCRIPT, "--partition", "gpu\ntouch pwned"],
            ranks=0,
            expect=2,
            says=("--partition 'gpu\\ntouch pwned': a SLURM name",),
            check=no("pwned", "*.sbatch"),
        ),
        FaultCase(
            "jobscript: $(...) in the output folder",
            argv=[*JOBSCRIPT, "--out", "jobs$(touch pwned)"],
            ranks=0,
            expect=2,
            says=("an #SBATCH line cannot carry it safely",),
            check=no("pwned", "*.sbatch"),
        ),
        FaultCase(
            "a save larger than the disk allows",
            config=MATMUL,
            prepare=generate,
            driver=LIMITED,
            driver_args=["200000"],
            expect=2,
            says=("C.h5: cannot write the result",),
            check=no("C.h5", "*.tmp"),
        ),
        FaultCase(
            "two jobs saving one path at once",
            config=MATMUL,
            prepare=generate,
            driver=TWO_JOBS,
            driver_args=mpiexec,
            argv=["{config}"],
            ranks=0,
            expect=0,
            says=("exit codes [0, 0]",),
            check=_whole_c,
        ),
        FaultCase(
            "an existing file as --out",
            argv=["run", "{config}", "--out", "taken"],
            prepare=lambda w: (w / "taken").write_text("a file"),
            expect=2,
            says=("taken exists and is not a folder",),
        ),
        FaultCase(
            "the output folder on a full disk",
            driver=LIMITED,
            driver_args=["1000"],
            expect=2,
            says=("output folder out: cannot write there (File too large)",),
            check=no("*.tmp"),
        ),
        FaultCase(
            "a damaged checkpoint (200 KB zeroed)",
            prepare=damaged_checkpoint,
            config={
                **TRAIN,
                "repeats": 10,
                "generate": {**TRAIN["generate"], "shape": [2048, 844]},
                "params": {**TRAIN["params"], "model": "medium"},
            },
            argv=["run", "{config}", "-o", "params.resume=ckpt.h5", "-q"],
            ranks=2,
            expect=2,
            says=("ckpt.h5: damaged: dataset weights does not match its checksum",),
        ),
        FaultCase(
            "Ctrl-C (SIGINT to mpiexec)",
            config={"repeats": 1_000_000, "timeout_s": 60},
            interrupt=_after(4),
            expect=130,
            says=("interrupted (SIGINT)",),
        ),
        FaultCase(
            "Ctrl-C during training",
            config={**TRAIN, "timeout_s": 60},
            prepare=generate,
            interrupt=lambda w: (w / "ckpt.h5").exists(),
            expect=130,
            says=("SIGINT received: checkpoint at step", "written to ckpt.h5"),
            check=lambda w: None if (w / "ckpt.h5").exists() else "no checkpoint",
        ),
    ]
