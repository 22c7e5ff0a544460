"""Shared test options: ``--gpu`` adds the GPU backends (and fails if there is no GPU);
``--cuda-mpi`` says the MPI running the tests is CUDA-aware: it adds the ``mpi-cuda`` backend
(and fails if that MPI is not). Without it, GPU tests expect ``mpi-cuda`` to be refused."""

import helpers  # noqa: F401  (first import: snapshots the launch environment before MPI starts)
import pytest
from hypothesis import settings

# no time limit on a generated example: a test asserts results, and speed lives in bench/ (a 2-core CI machine
# running MPI tests beside it takes longer than hypothesis' default 200 ms for some examples)
settings.register_profile("spmd", deadline=None)
settings.load_profile("spmd")


def pytest_addoption(parser):
    parser.addoption(
        "--gpu", action="store_true", help="also test on the GPU (CuPy + NCCL); error if no GPU is visible"
    )
    parser.addoption(
        "--cuda-mpi",
        action="store_true",
        help="the MPI is CUDA-aware (bench/cuda-mpi/build.sh): also test comm mpi-cuda on the GPU; "
        "error if that MPI is not CUDA-aware. Needs --gpu",
    )


def pytest_configure(config):
    if config.getoption("--gpu"):
        from spmd.core import xp

        if xp.gpu_count() == 0:
            raise pytest.UsageError("--gpu given, but CuPy sees no GPU")
    if config.getoption("--cuda-mpi"):
        from spmd.comm.mpi_cuda import cuda_aware_mpi

        if not config.getoption("--gpu"):
            raise pytest.UsageError("--cuda-mpi tests device buffers: give --gpu too")
        aware, how = cuda_aware_mpi()
        if not aware:
            raise pytest.UsageError(f"--cuda-mpi given, but this MPI is not CUDA-aware ({how})")


@pytest.fixture(scope="session")
def gpu(request) -> bool:
    """True when the run covers the GPU (--gpu)."""
    return request.config.getoption("--gpu")


@pytest.fixture(scope="session")
def cuda_mpi(request) -> bool:
    """True when the MPI running the tests was declared CUDA-aware (--cuda-mpi)."""
    return request.config.getoption("--cuda-mpi")
