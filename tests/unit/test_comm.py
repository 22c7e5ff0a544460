import pytest

from spmd.comm.factory import BACKENDS, check_backend, resolve_backend
from spmd.comm.mpi_cuda import CudaAwareMPICommunicator, cuda_aware_mpi
from spmd.core.errors import BackendUnavailable, ConfigError
from spmd.core.libraries import loaded_libraries
from spmd.core.runtime import find_shared_devices


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
    libraries = loaded_libraries("/libmpi")
    assert libraries, "mpi4py should have mapped a libmpi"
    assert "MPIX_" in how and libraries[0].rsplit("/", 1)[-1] in how
    # The PyPI MPICH wheel (CI) is built without CUDA; it must say so, and spmd must refuse.
    if "mpich" in libraries[0].lower() or not aware:
        assert aware is False
        with pytest.raises(BackendUnavailable, match="mpi-cuda needs a CUDA-aware MPI"):
            from mpi4py import MPI

            CudaAwareMPICommunicator(MPI.COMM_SELF)


@pytest.mark.parametrize("built, at_run_time, aware", [(1, 1, True), (1, 0, False), (0, 1, False), (1, None, True)])
def test_open_mpi_is_cuda_aware_only_when_built_so_and_switched_on_at_run_time(monkeypatch, built, at_run_time, aware):
    """Open MPI 4.1's MPIX_Query_cuda_support() only says how it was built: a build with CUDA on a
    node where libcuda does not load (or under --mca opal_cuda_support 0) says 1 there, and its
    run-time switch opal_cuda_support says 0. Both must say yes (seen: tests/gpu/test_cuda_mpi.py)."""
    from spmd.comm import mpi_cuda

    libraries = {"/libmpi": ["/p/lib/libmpi.so.40"], "/libopen-pal": ["/p/lib/libopen-pal.so.40"]}
    monkeypatch.setattr(mpi_cuda, "loaded_libraries", lambda fragment: libraries[fragment])
    monkeypatch.setattr(mpi_cuda, "queries", lambda path: [(path, "MPIX_Query_cuda_support()", built)])
    monkeypatch.setattr(mpi_cuda, "run_time_switch", lambda path: at_run_time)
    got, how = mpi_cuda.cuda_aware_mpi()
    assert got is aware
    assert f"/p/lib/libmpi.so.40: MPIX_Query_cuda_support() = {built}" in how
    assert ("opal_cuda_support (at run time)" in how) is (at_run_time is not None)
    if at_run_time is not None:
        assert how.endswith(f"/p/lib/libopen-pal.so.40: opal_cuda_support (at run time) = {at_run_time}")


def test_nccl_with_shared_gpus_is_refused_by_name():
    with pytest.raises(BackendUnavailable, match="nccl cannot run several ranks on one GPU"):
        check_backend("nccl", "gpu", shared_gpu=True)
    with pytest.raises(BackendUnavailable, match="needs device: gpu"):
        check_backend("nccl", "cpu")


def test_what_a_workload_asks_of_a_backend_is_a_capability_not_its_name():
    from spmd.comm.mpi import MPICommunicator
    from spmd.comm.nccl import NCCLCommunicator

    assert NCCLCommunicator.queues_on_stream and NCCLCommunicator.capturable
    for cls in (MPICommunicator, CudaAwareMPICommunicator):
        assert not cls.queues_on_stream and not cls.capturable
    assert tuple(BACKENDS) == ("nccl", "mpi", "mpi-cuda")  # config.COMM_BACKENDS' order: tables list them so


@pytest.mark.parametrize(
    "capturable, ranks, graph, wanted",
    [(True, 2, "auto", True), (False, 2, "auto", False), (False, 1, "auto", True), (True, 2, False, False)],
)
def test_train_captures_a_step_only_on_a_capturable_communicator(capturable, ranks, graph, wanted):
    """A communicator called 'custom' that can be captured gets a graph; one that cannot, none."""
    from types import SimpleNamespace

    from spmd.workloads.train.workload import TrainParams, TrainWorkload

    workload = TrainWorkload()
    workload.params = TrainParams(graph=graph)
    workload.ctx = SimpleNamespace(device="gpu", size=ranks)
    workload.comm = SimpleNamespace(name="custom", capturable=capturable)
    assert workload._graph_wanted() is wanted
    workload.params = TrainParams(graph=True)
    if ranks > 1 and not capturable:
        with pytest.raises(ConfigError, match="a captured step can only hold NCCL calls, not comm: custom"):
            workload._graph_wanted()


def test_nccl_graph_mixing_support_is_off_unless_the_environment_says_otherwise(monkeypatch):
    """spmd never keeps graph-captured and uncaptured NCCL calls outstanding at once, so it turns NCCL's support
    for that off (it costs every captured step's replay); a value the user set stays."""
    import os

    from spmd.comm.nccl import GRAPH_MIXING, graph_mixing_setting

    monkeypatch.setenv(GRAPH_MIXING, "recorded")  # so that the test's end puts back what was there
    monkeypatch.delenv(GRAPH_MIXING)
    assert graph_mixing_setting() == "0" and os.environ[GRAPH_MIXING] == "0"
    monkeypatch.setenv(GRAPH_MIXING, "1")
    assert graph_mixing_setting() == "1" and os.environ[GRAPH_MIXING] == "1"
