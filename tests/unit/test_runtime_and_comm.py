import pytest

from spmd.comm import BACKENDS, check_backend, cuda_aware_mpi, resolve_backend
from spmd.comm.mpi_cuda import CudaAwareMPICommunicator, loaded_mpi_libraries
from spmd.errors import BackendUnavailable
from spmd.runtime import find_shared_devices


def test_shared_gpu_detection_names_both_ranks():
    assert find_shared_devices([(0, "GPU-a"), (1, "GPU-b")]) == []
    assert find_shared_devices([(4, "GPU-a"), (5, "GPU-b"), (6, "GPU-a")]) == [(4, 6, "GPU-a")]
    assert find_shared_devices([(1, "x"), (0, "x"), (2, "x")]) == [(0, 1, "x"), (0, 2, "x")]


def test_auto_backend_choice():
    assert resolve_backend("auto", "gpu") == "nccl"
    assert resolve_backend("auto", "cpu") == "mpi"
    assert resolve_backend("mpi-cuda", "gpu") == "mpi-cuda"
    assert resolve_backend("auto", "gpu", shared_gpu=True) == "mpi"  # NCCL refuses shared GPUs
    assert set(BACKENDS) == {"nccl", "mpi", "mpi-cuda"}
    with pytest.raises(BackendUnavailable):
        resolve_backend("gloo", "cpu")


def test_cuda_awareness_is_asked_of_the_loaded_library():
    aware, how = cuda_aware_mpi()
    libraries = loaded_mpi_libraries()
    assert libraries, "mpi4py should have mapped a libmpi"
    assert "MPIX_" in how and libraries[0].rsplit("/", 1)[-1] in how
    # The PyPI MPICH wheel (CI) is built without CUDA; it must say so, and spmd must refuse.
    if "mpich" in libraries[0].lower() or not aware:
        assert aware is False
        with pytest.raises(BackendUnavailable, match="mpi-cuda needs a CUDA-aware MPI"):
            from mpi4py import MPI

            CudaAwareMPICommunicator(MPI.COMM_SELF)


def test_nccl_with_shared_gpus_is_refused_by_name():
    with pytest.raises(BackendUnavailable, match="nccl cannot run several ranks on one GPU"):
        check_backend("nccl", "gpu", shared_gpu=True)
    with pytest.raises(BackendUnavailable, match="needs device: gpu"):
        check_backend("nccl", "cpu")
