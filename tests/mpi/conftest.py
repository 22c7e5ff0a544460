"""Fixtures for tests run under mpiexec with --with-mpi (pytest-mpi).

Tests do every collective before asserting, so a failed assert on one rank cannot leave
another waiting in a collective.
"""

import shutil
import tempfile

import pytest


def backends(config) -> list[tuple[str, str]]:
    cases = [("cpu", "mpi")]
    if config.getoption("--gpu"):
        cases += [("gpu", "nccl"), ("gpu", "mpi")]
    if config.getoption("--cuda-mpi"):
        cases += [("gpu", "mpi-cuda")]
    return cases


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        cases = backends(metafunc.config)
        metafunc.parametrize("backend", cases, ids=[f"{d}-{c}" for d, c in cases], scope="module")


@pytest.fixture(scope="module")
def world():
    from mpi4py import MPI

    return MPI.COMM_WORLD


@pytest.fixture(scope="module")
def shared_tmp(world):
    """A folder every rank sees (rank 0 makes it, removes it at the end)."""
    path = tempfile.mkdtemp(prefix="spmd-test-") if world.rank == 0 else None
    path = world.bcast(path, root=0)
    yield path
    world.Barrier()
    if world.rank == 0:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def context(backend):
    """A Context bound to the backend's device, with its communicator open."""
    from spmd.comm.factory import open_communicator
    from spmd.runtime import Context

    device, comm_name = backend
    ctx = Context()
    ctx.bind_device(device)
    comm = open_communicator(ctx, comm_name)
    yield ctx, comm
    comm.close()
    ctx.close()
