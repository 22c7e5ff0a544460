"""The SLURM tests need the cluster of ci/slurm/start.sh (run by .ci/run, as root). Where it did not
start, they skip with the reason start.sh recorded, and only the pieces that are absent skip."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STATE = ROOT / "ci/slurm/state.env"
sys.path.insert(0, str(ROOT / "tests/cli"))


def skip_or_fail(why: str) -> None:
    """Skip saying why; under CI (CI=true), where this SLURM is part of the test environment, fail instead."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why} (CI=true: the SLURM tests must run, not skip)", pytrace=False)
    pytest.skip(why)


def state() -> dict:
    if not STATE.exists():
        return {}
    out = {}
    for line in STATE.read_text().splitlines():
        key, _, value = line.partition("=")
        out[key] = value.strip("'")
    return out


def slurm_up() -> str | None:
    """None when a SLURM controller answers, else why not."""
    s = state()
    if "SPMD_SLURM_SKIP" in s:
        return s["SPMD_SLURM_SKIP"]
    if not shutil.which("sbatch"):
        return "no SLURM here: run `bash ci/slurm/start.sh` as root (apt installs slurm-wlm and munge)"
    if subprocess.run(["sinfo", "-h"], capture_output=True, timeout=20).returncode != 0:
        return "sinfo gets no answer from slurmctld: run `bash ci/slurm/start.sh` as root"
    return None


@pytest.fixture(scope="session")
def slurm():
    why = slurm_up()
    if why:
        skip_or_fail(f"SLURM unavailable: {why}")


@pytest.fixture(scope="session")
def two_nodes(slurm):
    s = state()
    if s.get("SPMD_SLURM_NODES") != "2":
        skip_or_fail(
            f"two SLURM nodes unavailable: {s.get('SPMD_SLURM_TWO_SKIP', 'ci/slurm/start.sh did not start them')}"
        )


@pytest.fixture(scope="session")
def namespaces():
    missing = [h for h in ("spmd-node1", "spmd-node2") if not os.path.exists(f"/run/netns/{h}")]
    if missing:
        skip_or_fail(
            f"network namespaces {missing} absent: "
            f"{state().get('SPMD_SLURM_TWO_SKIP', 'run ci/slurm/start.sh as root')}"
        )


@pytest.fixture
def shaped_link(two_nodes):
    """The link between the two nodes at SHAPED_RATE for one test (ci/slurm/shape.sh: tc's tbf on both
    bridge-side veths), unshaped again after it, pass or fail."""
    shape = ROOT / "ci/slurm/shape.sh"
    proc = subprocess.run(["bash", shape, SHAPED_RATE], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        skip_or_fail(f"the link between the nodes cannot be shaped: {proc.stderr.strip()}")
    try:
        yield SHAPED_RATE
    finally:
        subprocess.run(["bash", shape, "off"], capture_output=True, timeout=30)


SHAPED_RATE = "400mbit"  # with tests/slurm's matmul, communication about half of a two-node repeat
