"""torch.distributed joined once for a sweep (spmd.workloads.torch.dist.sweep_groups): each run of the sweep joins the
group made for its size and leaves it open, the block's end destroys it, and outside a sweep a job starts and
destroys its own (one process, gloo; tests/cli/test_torch_cli.py runs the groups of a 2-rank sweep)."""

from __future__ import annotations

import pytest
from mpi4py import MPI

torch = pytest.importorskip("torch", reason="workload torch needs PyTorch")

from spmd.core.runtime import Context  # noqa: E402
from spmd.workloads.torch import dist  # noqa: E402


def test_a_sweeps_runs_share_the_group_made_once_for_their_size():
    with Context(MPI.COMM_SELF) as launch, dist.sweep_groups(launch, None, 60.0, [1]):
        assert torch.distributed.is_initialized()
        made = torch.distributed.group.WORLD
        for _ in range(2):  # two runs of one rank
            with Context(MPI.COMM_SELF) as run:
                assert dist.join(run, "cpu", 60.0) == "gloo" and dist.group() is None  # all ranks: the default
                dist.close()
            assert torch.distributed.is_initialized() and torch.distributed.group.WORLD is made
    assert not torch.distributed.is_initialized() and dist.group() is None


def test_outside_a_sweep_a_job_starts_and_destroys_its_own_group():
    with Context(MPI.COMM_SELF) as run:
        assert dist.join(run, "cpu", 60.0) == "gloo" and torch.distributed.is_initialized()
        dist.close()
    assert not torch.distributed.is_initialized()


def test_a_sweep_left_by_an_exception_destroys_nothing():
    with Context(MPI.COMM_SELF) as launch:
        with pytest.raises(RuntimeError), dist.sweep_groups(launch, None, 60.0, [1]):
            raise RuntimeError("a run failed")
        assert torch.distributed.is_initialized() and dist.group() is None  # left to the failing job's end
        with Context(MPI.COMM_SELF) as run:  # a later job in the same process starts afresh
            dist.join(run, "cpu", 60.0)
            dist.close()
    assert not torch.distributed.is_initialized()
