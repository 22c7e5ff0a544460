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
    return launch(["-m", "spmd", *map(str, args)], ranks, cwd, env, timeout)


def spmd_script(folder: Path, source: str, *args, ranks=RANKS, timeout=None):
    """Run a Python script (``source``) in ``folder`` under ``mpiexec -n ranks``, like ``spmd``."""
    script = folder / "driver.py"
    script.write_text(source)
    return launch([str(script), *map(str, args)], ranks, folder, None, timeout)


def launch(python_args: list[str], ranks: int, cwd, env, timeout):
    """``mpiexec -n ranks python PYTHON_ARGS``: (exit code, stdout, stderr, seconds); a run past
    ``timeout`` is killed with its whole process group and fails the test as a hang."""
    cmd = [*mpiexec(), "-n", str(ranks), sys.executable, *python_args]
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**LAUNCH_ENV, **(env or {})},
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout or DEADLINE_S * 2)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"spmd hung: {' '.join(cmd)}\n{out}\n{err}")
    return proc.returncode, out, err, time.monotonic() - start
