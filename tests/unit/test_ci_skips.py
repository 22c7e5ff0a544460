"""CI cannot be green with the SLURM tests not run: under CI=true, ci/slurm/start.sh fails when SLURM does
not start, and tests/slurm fails instead of skipping; elsewhere both skip, saying why."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def start_sh_as_non_root(tmp_path):
    """ci/slurm/start.sh in a folder of its own (its state.env there), with an `id` that says uid 1000."""
    folder = tmp_path / "slurm"
    folder.mkdir()
    for name in ("start.sh", "stop.sh"):
        shutil.copy(ROOT / "ci/slurm" / name, folder / name)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n")
    (bin_dir / "id").chmod(0o755)
    return folder, {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.parametrize("ci, rc", [("true", 1), ("", 0)])
def test_start_sh_fails_under_ci_when_slurm_cannot_start(start_sh_as_non_root, ci, rc):
    folder, env = start_sh_as_non_root
    done = subprocess.run(
        ["bash", str(folder / "start.sh")], env={**env, "CI": ci}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == rc, done.stderr
    assert (
        folder / "state.env"
    ).read_text() == "SPMD_SLURM_SKIP='not root: cannot install or start slurmctld/slurmd'\n"


@pytest.mark.parametrize("ci", ["true", ""])
def test_the_slurm_tests_fail_under_ci_and_skip_elsewhere_without_slurm(tmp_path, ci):
    """Without sbatch on PATH: under CI=true the test fails naming why; elsewhere it skips with the reason."""
    env = {**os.environ, "CI": ci, "PATH": str(Path(sys.executable).parent)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "tests/slurm/test_slurm.py::test_run_sbatch_three_tasks_on_one_node",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if ci == "true":
        assert done.returncode == 1 and "CI=true: the SLURM tests must run, not skip" in done.stdout, done.stdout
    else:
        assert done.returncode == 0 and "SKIPPED" in done.stdout and "SLURM unavailable" in done.stdout, done.stdout
