"""What a benchmark run has to work with: the machine (GPUs, CPUs), the launcher, a scratch folder, and the ways a
case starts spmd or a program under MPI."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = Path(__file__).resolve().parent / "programs"


class CaseFailed(RuntimeError):
    """A case's command failed: the runner records it and goes on with the next case."""


def gpu_count() -> int:
    try:
        from spmd.core import xp

        return xp.gpu_count()
    except Exception:  # noqa: BLE001 - no CuPy, no driver: no GPU
        return 0


def launcher() -> list[str]:
    """The MPI launcher: SPMD_MPIEXEC as given (the GPU machine's mpirun as root), else mpiexec beside Python. A
    relative path in it (make's .venv/bin/mpiexec) is made absolute: cases launch from folders of their own."""
    configured = os.environ.get("SPMD_MPIEXEC")
    if configured:
        words = shlex.split(configured)
        if words and os.sep in words[0] and not os.path.isabs(words[0]) and os.path.exists(words[0]):
            words[0] = os.path.abspath(words[0])
        return words
    beside = Path(sys.executable).parent / "mpiexec"
    return [str(beside) if beside.exists() else (shutil.which("mpiexec") or "mpiexec")]


@dataclass
class Env:
    """A run's machine and settings.

    Attributes:
        out: the run's output folder; work: scratch (inputs, reports), removed afterwards.
        quick: small sizes (tests, a CPU smoke run); ranks: the rank count of multi-rank cases (the launch's:
            every GPU of the machine, or --ranks); gpus: GPUs visible; device: 'gpu' or 'cpu'.
    """

    out: Path
    work: Path
    quick: bool
    ranks: int
    gpus: int
    timeout: float = 300.0  # one command of a case; a hang costs this, not the whole run

    @property
    def device(self) -> str:
        return "gpu" if self.gpus else "cpu"

    def missing(self, needs: tuple[str, ...]) -> str | None:
        """Why a case with ``needs`` cannot run here (None: it can)."""
        for need in needs:
            if need == "gpu" and not self.gpus:
                return "needs a GPU"
            if need.startswith("ranks") and self.ranks < int(need[5:]):
                return f"needs {need[5:]} ranks (--ranks {self.ranks})"
            if need == "torch" and not _importable("torch"):
                return "needs PyTorch (the torch extra)"
            if need == "transformers" and not _importable("transformers"):
                return "needs transformers (pip install transformers; the test extra has it)"
            if need == "nvmath" and not _importable("nvmath"):
                return "needs nvmath-python (pip install nvmath-python)"
            if need == "slurm2" and not _two_slurm_nodes():
                return "needs the two namespaced SLURM nodes of ci/slurm/start.sh (as root) and tc"
            if need == "cuda-mpi" and not os.environ.get("SPMD_CUDA_MPI"):
                return "needs a CUDA-aware MPI (bench/cuda-mpi/build.sh, then SPMD_CUDA_MPI=1 with its mpirun)"
        return None

    def run(
        self,
        argv: list[str],
        ranks: int | None = None,
        env: dict | None = None,
        timeout: float | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess:
        """``argv`` (a Python module or script and its arguments, run by this Python) under the launcher with
        ``ranks`` ranks, or plainly when ``ranks`` is None; CaseFailed on a non-zero exit when ``check``."""
        cmd = [sys.executable, *argv]
        extra = dict(env or {})
        if ranks is not None:
            names = ["PYTHONPATH", *extra]  # Open MPI forwards only what -x names
            flags = [x for name in names for x in ("-x", name)] if _open_mpi() else []
            cmd = [*launcher(), "-n", str(ranks), *flags, *cmd]
        try:
            done = subprocess.run(
                cmd,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=timeout or self.timeout,
                env={**os.environ, "PYTHONPATH": _pythonpath(), **extra},
            )
        except subprocess.TimeoutExpired as exc:  # what it had said by then: how far it got
            said = "\n".join(_text(x) for x in (exc.stdout, exc.stderr) if x).strip()[-1500:]
            raise CaseFailed(f"{shlex.join(cmd)} timed out after {exc.timeout:g} s; its last words: {said}") from None
        if check and done.returncode:
            raise CaseFailed(f"{shlex.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-800:]}")
        return done

    def srun(
        self,
        *args,
        nodes: int,
        per_node: int,
        env: dict | None = None,
        program: str | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess:
        """``spmd ARGS`` (or bench/programs/PROGRAM ARGS) under srun on the ``pair`` partition of
        ci/slurm/start.sh (MPICH's OFI netmod, as tests/slurm runs it); CaseFailed on a non-zero exit."""
        cmd = ["srun", "--partition=pair", "-N", str(nodes), f"--ntasks-per-node={per_node}", "--mpi=pmi2"]
        cmd += ["--kill-on-bad-exit=1"]  # a rank that crashed ends the step: the others never wait for it
        what = [str(PROGRAMS / program)] if program else ["-m", "spmd"]
        cmd += ["--gpus-per-node=0", "--cpus-per-task=1", sys.executable, *what, *map(str, args)]
        extra = {"MPIR_CVAR_CH4_NETMOD": "ofi", **(env or {})}
        done = subprocess.run(
            cmd, cwd=self.work, capture_output=True, text=True, timeout=timeout or self.timeout,
            env={**os.environ, "PYTHONPATH": _pythonpath(), **extra},
        )  # fmt: skip
        if done.returncode:
            raise CaseFailed(f"{shlex.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-800:]}")
        return done

    def spmd(
        self, *args, ranks: int = 1, env: dict | None = None, check: bool = True, timeout: float | None = None
    ) -> subprocess.CompletedProcess:
        return self.run(["-m", "spmd", *map(str, args)], ranks=ranks, env=env, check=check, timeout=timeout)

    def program(
        self, name: str, *args, ranks: int | None = 1, env: dict | None = None, timeout: float | None = None
    ) -> subprocess.CompletedProcess:
        """One of bench/programs/ (a script that runs under MPI as a user's program would)."""
        return self.run([str(PROGRAMS / name), *map(str, args)], ranks=ranks, env=env, timeout=timeout)

    def report(self, folder: Path) -> dict:
        return json.loads((Path(folder) / "report.json").read_text())


def _importable(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def _two_slurm_nodes() -> bool:
    """Whether ci/slurm/start.sh started its two namespaced nodes here, and tc can shape the link between them."""
    state = ROOT / "ci/slurm/state.env"
    if not state.exists() or "SPMD_SLURM_NODES=2" not in state.read_text().split():
        return False
    return bool(shutil.which("tc") or Path("/usr/sbin/tc").exists()) and os.geteuid() == 0


def _open_mpi() -> bool:
    """Whether the launcher is Open MPI's (which forwards only the variables named with -x)."""
    try:
        text = subprocess.run([*launcher()[:1], "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Open MPI" in text or "OpenRTE" in text


def _pythonpath() -> str:
    """spmd from this checkout first (a run measures the code it sits in), then what the environment had."""
    return os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


def _text(data) -> str:
    """A timed-out command's output so far (bytes or str, as subprocess gives it)."""
    return data.decode(errors="replace") if isinstance(data, bytes) else str(data)
