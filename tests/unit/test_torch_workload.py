"""The torch workload imports PyTorch before spmd opens its own communicator: PyTorch then loads the NCCL it ships
with (a library loaded first under the same name, CuPy's, would be the one PyTorch got), and the report names the
libraries it ran on."""

from __future__ import annotations

import pytest
from mpi4py import MPI

torch = pytest.importorskip("torch", reason="workload torch needs PyTorch")

from spmd import job  # noqa: E402
from spmd.core.runtime import Context  # noqa: E402
from spmd.workloads.registry import job_config_from_dict  # noqa: E402
from spmd.workloads.torch import dist  # noqa: E402
from spmd.workloads.torch.workload import TorchWorkload  # noqa: E402


class Stop(Exception):
    pass


def test_pytorch_is_loaded_before_spmd_opens_its_communicator(tmp_path, monkeypatch):
    order = []
    load = TorchWorkload.load_libraries.__func__

    def loaded(cls, cfg):
        order.append("pytorch")
        load(cls, cfg)

    def opened(ctx, requested):
        order.append("communicator")
        raise Stop

    monkeypatch.setattr(TorchWorkload, "load_libraries", classmethod(loaded))
    monkeypatch.setattr(job, "open_communicator", opened)
    cfg = job_config_from_dict(
        {
            "workload": "torch",
            "device": "cpu",
            "input": {"path": str(tmp_path / "x.h5"), "dataset": "x"},
            "params": {"model": "examples/torch/mlp.py:build"},
        }
    )
    with Context(MPI.COMM_SELF) as ctx, pytest.raises(Stop):
        job.run_job(ctx, cfg)
    assert order == ["pytorch", "communicator"]


def test_the_libraries_are_pytorchs_version_on_a_cpu():
    assert dist.libraries(torch, gpu=False) == {"torch": torch.__version__}
