#!/usr/bin/env python3
"""``as_node.py PER_NODE -m spmd ARGS``: spmd as a rank of an emulated node of PER_NODE ranks on one machine.

NCCL takes ranks with different NCCL_HOSTID for different hosts (its inter-node rings, trees and network
transport run between them); SPMD_HOST makes spmd group the ranks the same way (its node counts, ``--links``).
Set before NCCL or spmd starts, from the launcher's rank (Open MPI or MPICH).
"""

import os
import runpy
import sys

rank = int(os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("PMI_RANK") or 0)
node = f"emulated-node{rank // int(sys.argv[1])}"
os.environ["NCCL_HOSTID"] = os.environ["SPMD_HOST"] = node
if sys.argv[2:4] != ["-m", "spmd"]:
    sys.exit("usage: as_node.py PER_NODE -m spmd ARGS")
sys.argv = ["spmd", *sys.argv[4:]]
runpy.run_module("spmd", run_name="__main__", alter_sys=True)
