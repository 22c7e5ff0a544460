"""What several kinds of case share: a matmul and a training config, drivers that run spmd under a file-size
limit or twice at once, the argv of spmd jobscript, a config reading another file, and a check that nothing of a
refused write is left."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

MATMUL = {
    "workload": "matmul",
    "repeats": 1,
    "input": {"path": "A.h5", "dataset": "A"},
    "generate": {"shape": [256, 64], "dtype": "float64", "seed": 1},
    "params": {
        "b": {"path": "B.h5", "dataset": "B", "generate": {"shape": [64, 256], "dtype": "float64", "seed": 2}},
        "gather": "root",
        "save": {"path": "C.h5", "dataset": "C"},
    },
}
TRAIN = {
    "workload": "train",
    "repeats": 199,
    "input": {"path": "t.h5"},
    "generate": {"shape": [2048, 24], "seed": 1, "loc": 0.0, "scale": 1.0},
    "params": {
        "model": [24, 32, 16, 5],
        "batch": 16,
        "steps": 10,
        "eval_rows": 512,
        "checkpoint": {"path": "ckpt.h5", "every": 50},
    },
}

# spmd with every file the process writes limited to argv[1] bytes (EFBIG, what a full disk or a quota gives).
# The limit is set after mpi4py started MPI, whose shared-memory files it would refuse.
LIMITED = textwrap.dedent("""
    import resource, sys
    from mpi4py import MPI
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
    from spmd.cli.main import main
    sys.exit(main(sys.argv[2:]))
""")

# two jobs of one config at once (both save C.h5): argv = mpiexec words, then the config
TWO_JOBS = textwrap.dedent("""
    import subprocess, sys
    *mpiexec, config = sys.argv[1:]
    spmd = [sys.executable, "-m", "spmd", "run", config, "-q"]
    jobs = [subprocess.Popen([*mpiexec, "-n", "2", *spmd, "--out", f"out{i}"]) for i in range(2)]
    codes = [job.wait() for job in jobs]
    print(f"two jobs saving C.h5 at once: exit codes {codes}", file=sys.stderr)
    sys.exit(max(codes))
""")


JOBSCRIPT = ["jobscript", "{config}", "--nodes", "1,2", "--gpus-per-node", "1"]  # spmd jobscript's argv


def reads(name: str) -> dict:
    """The config change that makes a case's job read dataset ``x`` of ``name``."""
    return {"input": {"path": name, "dataset": "x"}}


def no(*names: str):
    """A case's check: none of ``names`` (glob patterns) exists anywhere in its folder afterwards."""
    return lambda work: next((f"{n} exists" for n in names if list(work.rglob(n))), None)


def spmd(work: Path, *args: str, mpiexec=(), ranks: int = 2, env: dict | None = None, check: bool = True):
    """Run spmd in the case's folder before the case (to generate its inputs, or a first run); under mpiexec
    when one is given."""
    command = [*mpiexec, *(("-n", str(ranks)) if mpiexec else ()), sys.executable, "-m", "spmd", *args]
    subprocess.run(command, cwd=work, check=check, capture_output=True, env=env)
