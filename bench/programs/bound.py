#!/usr/bin/env python3
"""``bound.py CORES -m spmd ARGS``: spmd as a rank bound to CORES CPUs of its own, the next CORES of those the job may
use for each node-local rank (what Open MPI's ``--map-by slot:PE=CORES --bind-to core`` or SLURM's ``--cpus-per-task
=CORES --cpu-bind=cores`` give), set before Python starts a thread. From the launcher's node-local rank (Open MPI,
MPICH or SLURM); a node with too few CPUs for its ranks is refused."""

import os
import runpy
import sys

cores = int(sys.argv[1])
local = int(
    os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK") or os.environ.get("MPI_LOCALRANKID") or os.environ.get("SLURM_LOCALID")
    or 0
)  # fmt: skip
usable = sorted(os.sched_getaffinity(0))
mine = usable[local * cores : (local + 1) * cores]
if len(mine) < cores or sys.argv[2:4] != ["-m", "spmd"]:
    sys.exit(f"usage: bound.py CORES -m spmd ARGS, on a node with CORES CPUs a rank (node-local rank {local}: "
             f"{len(usable)} usable)")  # fmt: skip
os.sched_setaffinity(0, mine)
sys.argv = ["spmd", *sys.argv[4:]]
runpy.run_module("spmd", run_name="__main__", alter_sys=True)
