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
        metafunc.parametrize("backend", cases, ids=[f"{d}-{c}" for d, c in cases], scope="module", indirect=True)


@pytest.fixture(scope="module")
def backend(request, gpus_per_node):
    """(device, comm) of the case. A GPU case needs a GPU per rank: with fewer it is skipped on every rank,
    saying how many were found."""
    device, _ = request.param
    need, found = gpus_per_node
    if device == "gpu" and need > found:
        pytest.skip(f"needs {need} GPUs on a node (one per rank), found {found}")
    return request.param


@pytest.fixture(scope="session")
def gpus_per_node():
    """(GPUs a node needs: one per rank on it, GPUs it has) for the node that is shortest of them."""
    from mpi4py import MPI

    from spmd.core import xp

    node = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED)
    pairs = MPI.COMM_WORLD.allgather((node.Get_size(), xp.gpu_count()))
    node.Free()
    return max(pairs, key=lambda pair: pair[0] - pair[1])


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
    from spmd.core.runtime import Context

    device, comm_name = backend
    ctx = Context()
    ctx.bind_device(device)
    comm = open_communicator(ctx, comm_name)
    yield ctx, comm
    comm.close()
    ctx.close()
