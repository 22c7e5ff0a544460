"""The launch record: SLURM's view read from its environment, and the srun mistake refused."""

import pytest

from spmd.core.errors import ConfigError
from spmd.core.launch import check_launch, compare_views, slurm_record

JOB = {
    "SLURM_JOB_ID": "42",
    "SLURM_JOB_NODELIST": "gpu[01-02]",
    "SLURM_JOB_NUM_NODES": "2",
    "SLURM_NTASKS": "8",
    "SLURM_TASKS_PER_NODE": "4(x2)",
    "SLURM_JOB_PARTITION": "gpu",
    "SLURM_GPUS_ON_NODE": "4",
    "SLURM_PROCID": "5",
}


def test_the_job_is_recorded_without_per_task_variables():
    assert slurm_record(JOB) == {
        "job_id": "42",
        "nodelist": "gpu[01-02]",
        "nodes": "2",
        "ntasks": "8",
        "tasks_per_node": "4(x2)",
        "partition": "gpu",
        "gpus_on_node": "4",
    }
    assert slurm_record({"PATH": "/bin"}) is None


def test_srun_tasks_that_mpi_did_not_connect_are_refused():
    with pytest.raises(ConfigError, match="srun started 8 tasks, but MPI connected none of them"):
        check_launch(1, {**JOB, "SLURM_STEP_NUM_TASKS": "8"})
    check_launch(8, {**JOB, "SLURM_STEP_NUM_TASKS": "8"})  # connected
    check_launch(1, {**JOB, "SLURM_STEP_NUM_TASKS": "1"})  # one task of a larger allocation
    check_launch(1, {k: v for k, v in JOB.items() if k != "SLURM_PROCID"})  # the batch shell, not an srun task


def test_slurm_and_mpi_views_disagreeing_are_named():
    job = slurm_record(JOB)
    assert compare_views(2, 8, job) == []
    assert compare_views(1, 4, job) == [
        "SLURM allocated 8 tasks but MPI runs 4 ranks",
        "SLURM allocated 2 node(s) but MPI's ranks are on 1",
    ]
    assert compare_views(1, 1, None) == []
