"""spmd: SPMD work on GPUs and CPUs under MPI, measured: why it scales or does not.

Importing spmd does no MPI or GPU work; ``spmd.cli`` and ``spmd.runtime`` start MPI.
"""

__version__ = "0.1.0"
