"""Launching ``python -m spmd`` under a real mpiexec from the tests, with a deadline."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import LAUNCH_ENV

RANKS = 3
DEADLINE_S = 30


def mpiexec() -> list[str]:
    configured = os.environ.get("SPMD_MPIEXEC")
    if configured:
        cmd = shlex.split(configured)
        if os.path.exists(cmd[0]):  # a relative path (make's .venv/bin/mpiexec) must survive cwd=
            cmd[0] = os.path.abspath(cmd[0])
        return cmd
    beside_python = Path(sys.executable).parent / "mpiexec"
    return [str(beside_python) if beside_python.exists() else shutil.which("mpiexec")]


def spmd(*args, ranks=RANKS, cwd=None, env=None, timeout=None):
    """Run ``mpiexec -n ranks python -m spmd ARGS`` (``env``: extra variables); kill the whole
    process group on timeout."""
    cmd = [*mpiexec(), "-n", str(ranks), sys.executable, "-m", "spmd", *map(str, args)]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**LAUNCH_ENV, **(env or {})}, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout or DEADLINE_S * 2)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"spmd hung: {' '.join(cmd)}\n{out}\n{err}")
    return proc.returncode, out, err, time.monotonic() - start


def spmd_script(folder: Path, source: str, *args, ranks=RANKS, timeout=None):
    """Run a Python script (``source``) under ``mpiexec -n ranks``, like ``spmd``."""
    script = folder / "driver.py"
    script.write_text(source)
    cmd = [*mpiexec(), "-n", str(ranks), sys.executable, str(script), *map(str, args)]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=LAUNCH_ENV,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout or DEADLINE_S * 2)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"hung: {' '.join(cmd)}\n{out}\n{err}")
    return proc.returncode, out, err, time.monotonic() - start
