"""bench/cuda-mpi/build.sh refuses, before any build, what would make a wrong or failed MPI:
no CUDA toolkit, a toolkit without cuda.h, a tarball that is not the one Debian's .dsc names.
(The build itself needs CUDA and minutes of many cores: it runs on the GPU machine, see
docs/cuda-mpi.md.)"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from pathlib import Path

BUILD = Path(__file__).resolve().parents[2] / "bench" / "cuda-mpi" / "build.sh"


def sources(folder: Path, tamper: bool = False) -> Path:
    """A source folder as fetch.sh leaves it: an orig tarball and a .dsc naming its sha256."""
    src = folder / "src"
    (src / "openmpi-9.9.9").mkdir(parents=True)
    (src / "openmpi-9.9.9" / "configure").write_text("#!/bin/sh\necho configure ran >&2\nexit 9\n")
    (src / "openmpi-9.9.9" / "configure").chmod(0o755)
    orig = src / "openmpi_9.9.9.orig.tar.xz"
    with tarfile.open(orig, "w:xz") as tar:
        tar.add(src / "openmpi-9.9.9", arcname="openmpi-9.9.9")
    digest = hashlib.sha256(orig.read_bytes()).hexdigest()
    if tamper:
        digest = "0" * 64
    (src / "openmpi_9.9.9-1.dsc").write_text(
        f"Format: 3.0 (quilt)\nSource: openmpi\nChecksums-Sha256:\n {digest} {orig.stat().st_size} {orig.name}\n"
        f" {'1' * 64} 100 openmpi_9.9.9-1.debian.tar.xz\nFiles:\n 0 0 x\n"
    )
    return src


def cuda(folder: Path, header: bool = True) -> Path:
    home = folder / "cuda"
    (home / "include").mkdir(parents=True)
    if header:
        (home / "include" / "cuda.h").write_text("/* stand-in */\n")
    return home


def python3(folder: Path, script: str) -> str:
    """A folder for PATH whose python3 is ``script`` (a stand-in for the build's Python)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text(f"#!/bin/sh\n{script}\n")
    (bin_dir / "python3").chmod(0o755)
    return str(bin_dir)


def build(src: Path, prefix: Path, python: str = "exit 0", **env):
    """build.sh with only the system's tools on PATH, and a python3 that runs ``python``
    (default: one that has mpi4py's build tools, as far as the check can tell)."""
    clean = {k: v for k, v in os.environ.items() if k != "CUDA_HOME"}
    path = f"{python3(src.parent, python)}:/usr/bin:/bin"
    return subprocess.run(
        ["bash", str(BUILD), str(src), str(prefix)],
        capture_output=True,
        text=True,
        env={**clean, "PATH": path, **env},
        timeout=60,
    )


def test_without_nvcc_or_cuda_home_it_says_what_is_missing(tmp_path):
    result = build(sources(tmp_path), tmp_path / "prefix")
    assert result.returncode == 1 and "no nvcc on PATH; set CUDA_HOME" in result.stderr


def test_a_toolkit_without_cuda_h_is_refused(tmp_path):
    home = cuda(tmp_path, header=False)
    result = build(sources(tmp_path), tmp_path / "prefix", CUDA_HOME=str(home))
    assert result.returncode == 1 and f"{home}/include/cuda.h not found" in result.stderr


def test_missing_build_tools_for_mpi4py_are_named_before_open_mpi_is_built(tmp_path):
    no_site = f'exec {sys.executable} -S "$@"'  # no site-packages: neither setuptools nor Cython
    result = build(sources(tmp_path), tmp_path / "prefix", python=no_site, CUDA_HOME=str(cuda(tmp_path)))
    assert result.returncode == 1, result.stderr
    assert "build.sh: building mpi4py needs setuptools, Cython for" in result.stderr
    assert "configure ran" not in result.stderr


def test_a_tarball_that_is_not_the_one_the_dsc_names_is_never_built(tmp_path):
    result = build(sources(tmp_path, tamper=True), tmp_path / "prefix", CUDA_HOME=str(cuda(tmp_path)))
    assert result.returncode == 1 and "does not match" in result.stderr
    assert "configure ran" not in result.stderr


def test_the_matching_tarball_reaches_configure_and_its_failure_is_reported(tmp_path):
    """The checks pass on the right tarball: configure runs (a stand-in that fails), and the
    failure names the step and the log."""
    prefix = tmp_path / "prefix"
    result = build(sources(tmp_path), prefix, CUDA_HOME=str(cuda(tmp_path)))
    assert result.returncode == 1 and "configure ran" in result.stderr
    assert "build.sh: configure failed after" in result.stderr and str(prefix / "build.log") in result.stderr
    assert not (prefix / "env.sh").exists()  # env.sh marks a finished build
