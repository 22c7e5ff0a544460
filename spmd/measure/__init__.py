"""Measurements: collectives as nccl-tests counts them (collectives, ``spmd bench comm`` in comm; the sweep's
probes use them too), copy speeds between GPUs and host (copies, ``spmd topo``) and read speeds against plain
preads (io, ``spmd bench io``)."""
