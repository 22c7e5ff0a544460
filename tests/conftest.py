"""Shared test options: ``--gpu`` adds the GPU backends (and fails if there is no GPU)."""

import pytest

import helpers  # noqa: F401  (first import: snapshots the launch environment before MPI starts)


def pytest_addoption(parser):
    parser.addoption("--gpu", action="store_true",
                     help="also test on the GPU (CuPy + NCCL); error if no GPU is visible")


def pytest_configure(config):
    if config.getoption("--gpu"):
        from spmd import xp

        if xp.gpu_count() == 0:
            raise pytest.UsageError("--gpu given, but CuPy sees no GPU")


@pytest.fixture(scope="session")
def gpu(request) -> bool:
    """True when the run covers the GPU (--gpu)."""
    return request.config.getoption("--gpu")
