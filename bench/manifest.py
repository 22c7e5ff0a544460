"""What a benchmark ran on, kept beside its results: machine, CPUs, GPU model and count, driver, CUDA, NCCL, MPI
and library versions, the commit, the date and the command."""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import shlex
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from .env import ROOT, launcher


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _git(args: list[str], root: Path, env: dict | None = None, timeout: int = 60) -> str:
    return subprocess.run(
        ["git", *args], capture_output=True, text=True, timeout=timeout, cwd=root, env=env, check=True
    ).stdout.strip()


def enclosing_git_dir(root: Path = ROOT) -> str | None:
    """The git directory of a repository that ``root`` lies inside without being its top level (a commit's files
    unpacked into an ignored folder of a checkout, to run an older commit), else None: there HEAD and the status are
    the enclosing checkout's, not the files that ran."""
    try:
        top = _git(["rev-parse", "--show-toplevel"], root)
        git_dir = _git(["rev-parse", "--absolute-git-dir"], root)
    except (OSError, subprocess.SubprocessError):
        return None
    return git_dir if Path(top).resolve() != Path(root).resolve() else None


def tree_hash(root: Path = ROOT) -> str:
    """The git tree of the files as they are (tracked and untracked-not-ignored), through a throwaway index: it
    names the code that ran even where HEAD does not (the GPU machine gets a copy of the working tree whose git
    may lag behind); ``git rev-parse COMMIT^{tree}`` finds the commit it matches. Files unpacked inside another
    checkout are hashed as a tree of their own, their own .gitignore applying."""
    nested = enclosing_git_dir(root)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        if nested:
            env.update(GIT_DIR=nested, GIT_WORK_TREE=str(Path(root).resolve()))
        try:
            if not nested:
                _git(["read-tree", "HEAD"], root, env, timeout=120)
            _git(["add", "-A"], root, env, timeout=120)
            return _git(["write-tree"], root, env)
        except (OSError, subprocess.SubprocessError):
            return ""


def changed_files(root: Path = ROOT, most: int = 50) -> list[str]:
    """``git status --porcelain`` lines (tracked files changed, untracked ones not ignored): where ``tree`` is not
    HEAD's tree, the files that made the difference (the first ``most``, then how many more). Files unpacked inside
    another checkout are all a change: that checkout's HEAD is not what ran."""
    if enclosing_git_dir(root):
        return [f"?? {Path(root).resolve()}: not its repository's top level (the tree is its files alone)"]
    try:
        done = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, timeout=60, cwd=root)
    except (OSError, subprocess.TimeoutExpired):
        return []
    lines = done.stdout.rstrip("\n").splitlines()
    return lines[:most] + ([f"... {len(lines) - most} more"] if len(lines) > most else [])


def cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return match[1].strip() if match else platform.processor()


def gpus() -> list[dict]:
    """Each GPU's name, memory and driver (nvidia-smi; nothing without one)."""
    text = _run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"])
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            out.append({"name": parts[0], "memory": parts[1], "driver": parts[2]})
    return out


def versions() -> dict:
    """Versions of what the benchmarks run through (None where not installed)."""
    out = {"python": platform.python_version()}
    for name in ("numpy", "h5py", "mpi4py", "cupy", "torch", "matplotlib", "nvtx"):
        try:
            module = __import__(name)
            out[name] = getattr(module, "__version__", "?")
        except Exception:  # noqa: BLE001 - not installed, or a broken install: say none
            out[name] = None
    try:
        import cupy

        out["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        from cupy.cuda import nccl

        out["nccl"] = nccl.get_version()
    except Exception:  # noqa: BLE001
        pass
    try:
        import torch

        out["torch_cuda"] = torch.version.cuda
    except Exception:  # noqa: BLE001
        pass
    # the MPI library, from a process of its own (loading MPI here would make this process an MPI singleton)
    out["mpi"] = _run(
        [sys.executable, "-c", "from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0])"]
    ).replace("\x00", "")
    from spmd.core.version import __version__

    out["spmd"] = __version__
    return out


def machine_kind(gpu_list: list[dict], cpus: int) -> str:
    """A short name for the kind of machine: 'h200x2', 'h100x1', 'cpu-2core'."""
    if not gpu_list:
        return f"cpu-{cpus}core"
    name = gpu_list[0]["name"].lower()
    model = next(
        (m for m in ("h200", "h100", "b200", "a100", "l40s", "l4", "a10") if m in name),
        re.sub(r"[^a-z0-9]+", "-", name).strip("-"),
    )
    return f"{model}x{len(gpu_list)}"


def rank_cpus(ranks: int) -> list[int]:
    """How many CPUs each of ``ranks`` ranks started by the launcher may run on (its affinity): Open MPI's mpirun
    binds each of 1-2 ranks to one core and more to a socket, which a launch-bound step measures. [] where the
    launch fails."""
    probe = (  # gathered to rank 0 and printed once: the ranks' own lines may interleave mid-line
        "import os; from mpi4py import MPI; counts = MPI.COMM_WORLD.gather(len(os.sched_getaffinity(0)));"
        "counts and print('rank_cpus', *counts)"
    )
    lines = _run([*launcher(), "-n", str(ranks), sys.executable, "-c", probe]).splitlines()
    found = [line.split()[1:] for line in lines if line.startswith("rank_cpus ")]
    return [int(n) for n in found[0]] if found and len(found[0]) == ranks else []


def commit(paths: tuple[str, ...] = ()) -> str:
    """HEAD, with ``+changes`` where tracked files (under ``paths``, where given) differ from it, or where the files
    that ran are unpacked inside another checkout (whose HEAD they are not)."""
    dirty = bool(enclosing_git_dir() or _run(["git", "status", "--porcelain", "--untracked-files=no", "--", *paths]))
    return _run(["git", "rev-parse", "HEAD"]) + ("+changes" if dirty else "")


def write_manifest(folder: Path, facts: dict) -> None:
    """A suite's manifest.json replaced whole (a reader never sees half of one)."""
    tmp = folder / f".manifest.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(facts, indent=1) + "\n")
    os.replace(tmp, folder / "manifest.json")


def manifest(argv: list[str], ranks: int) -> dict:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpu_list = gpus()
    changes = changed_files()
    return {
        "machine_kind": machine_kind(gpu_list, cpus),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpus": cpus,  # the CPUs this process may use (taskset, a cpuset), of cpus_total
        "cpus_total": os.cpu_count(),
        "gpus": gpu_list,
        "versions": versions(),
        "launcher": shlex.join(launcher()),
        "ranks": ranks,
        "rank_cpus": rank_cpus(ranks) if hasattr(os, "sched_getaffinity") else [],  # each rank's binding
        "commit": commit(),
        "tree": tree_hash(),
        "changes": changes,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join(["python", "-m", "bench", *argv]),
        # settings that change what is measured (NCCL_P2P_DISABLE=1: all-reduce through host memory, ...)
        "environment": {
            k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "SPMD_FAULT", "CUDA_VISIBLE_DEVICES"))
        },
    }
