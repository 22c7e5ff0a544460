"""Measurements: collectives as nccl-tests counts them (``bench comm``, the scale probe) and copy speeds
between GPUs and host (``topo``)."""
