"""What launched this job: the MPI view (nodes and node-local ranks, from MPI itself) beside the
SLURM view (read from its environment, recorded, never used to place ranks).

Node identity is MPI's processor name and node-local ranks come from
``MPI_Comm_split_type(SHARED)`` (``Context.node_comm``): SLURM variables describe the allocation
a job asked for, not necessarily how the MPI library connected the ranks.
"""

from __future__ import annotations

import os
import sys
from collections import Counter

from .errors import ConfigError

SLURM_KEYS = (
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_GPUS_ON_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_GPUS_PER_NODE",
    "SLURM_CPUS_PER_TASK",
    "SLURM_JOB_PARTITION",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_STEP_ID",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NODEID",
)


def slurm_environment(env=None) -> dict:
    """The SLURM variables present (empty outside a SLURM job)."""
    env = os.environ if env is None else env
    return {k: env[k] for k in SLURM_KEYS if k in env}


def slurm_record(env=None) -> dict | None:
    """The job's SLURM identity for report.json: job id, nodelist, tasks per node, ... (None outside)."""
    found = slurm_environment(env)
    if "SLURM_JOB_ID" not in found:
        return None
    names = {
        "SLURM_JOB_ID": "job_id",
        "SLURM_JOB_NAME": "job_name",
        "SLURM_JOB_NODELIST": "nodelist",
        "SLURM_JOB_NUM_NODES": "nodes",
        "SLURM_NTASKS": "ntasks",
        "SLURM_TASKS_PER_NODE": "tasks_per_node",
        "SLURM_GPUS_ON_NODE": "gpus_on_node",
        "SLURM_GPUS_PER_TASK": "gpus_per_task",
        "SLURM_JOB_PARTITION": "partition",
        "SLURM_ARRAY_JOB_ID": "array_job_id",
        "SLURM_ARRAY_TASK_ID": "array_task_id",
        "SLURM_STEP_ID": "step_id",
    }
    return {names[k]: v for k, v in found.items() if k in names}


MPI_FIX = (
    "install one: pip install 'spmd[mpich]' (MPICH from PyPI, no system MPI needed), or a system MPI "
    "(e.g. apt install libopenmpi-dev openmpi-bin) and then pip install --no-binary mpi4py --force-reinstall mpi4py"
)


def mpi_missing() -> str | None:
    """Why mpi4py cannot load an MPI library here (its first line), or None when it can (and then has)."""
    try:
        from mpi4py import MPI  # noqa: F401
    except (ImportError, RuntimeError, OSError) as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no message'}"
    return None


def mpi_loaded():
    """mpi4py's MPI module if this process has started MPI with it, else None (report and jobscript never load
    it; ``spmd srun-mpi`` loads it without starting MPI)."""
    mpi = sys.modules.get("mpi4py.MPI")  # a failed import leaves nothing there
    return mpi if mpi is not None and mpi.Is_initialized() else None


def mpi_library() -> str:
    """The MPI library's first version line (Open MPI's ends in a NUL byte: dropped)."""
    from mpi4py import MPI

    return MPI.Get_library_version().replace("\x00", "").splitlines()[0].strip()


def check_launch(world_size: int, env=None) -> None:
    """Refuse the classic srun mistake: N tasks started without an MPI plugin each run alone.

    Raises:
        ConfigError: this process is one of several srun tasks but MPI sees a world of one.
    """
    env = os.environ if env is None else env
    tasks = env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS")
    if "SLURM_PROCID" in env and tasks and int(tasks) > 1 and world_size == 1:
        raise ConfigError(
            f"srun started {tasks} tasks, but MPI connected none of them (each is rank 0 of 1): "
            f"launch with srun --mpi=pmi2 (MPICH) or --mpi=pmix (Open MPI); `spmd srun-mpi` says which this "
            f"cluster's srun and this MPI call for (see jobscripts/run.sbatch)"
        )


def launch_record(ctx) -> dict:
    """The launch as report.json records it: nodes and ranks per node as MPI sees them, and the
    SLURM job (None outside one)."""
    per_node = Counter(ctx.hosts)
    return {"nodes": len(per_node), "ranks_per_node": dict(per_node), "slurm": slurm_record()}


def compare_views(mpi_nodes: int, mpi_ranks: int, slurm: dict | None) -> list[str]:
    """Where SLURM's allocation and MPI's view of the job disagree (each a warning line)."""
    if not slurm:
        return []
    out = []
    if slurm.get("ntasks") and int(slurm["ntasks"]) != mpi_ranks:
        out.append(f"SLURM allocated {slurm['ntasks']} tasks but MPI runs {mpi_ranks} ranks")
    if slurm.get("nodes") and int(slurm["nodes"]) != mpi_nodes:
        out.append(f"SLURM allocated {slurm['nodes']} node(s) but MPI's ranks are on {mpi_nodes}")
    return out
