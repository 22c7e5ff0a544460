"""spmd: SPMD work on GPUs and CPUs under MPI, measured: why it scales or does not.

The public names for your own workloads, ``spmd.Workload`` (the class form), ``spmd.map_reduce`` (the
one-function form) and ``spmd.InputRows`` (a rank's rows of the input, read in the timed phases), are
loaded on first use: importing spmd does no MPI or GPU work; ``spmd.cli`` and ``spmd.core.runtime`` start MPI.
"""

from .core.version import __version__

__all__ = ["__version__", "Workload", "map_reduce", "InputRows"]


def __getattr__(name: str):
    """The public names, imported when first asked for (a plug-in file needs them; ``python -m spmd`` not)."""
    if name == "Workload":
        from .workloads.base import Workload

        return Workload
    if name == "map_reduce":
        from .workloads.api import map_reduce

        return map_reduce
    if name == "InputRows":
        from .workloads.rows import InputRows

        return InputRows
    raise AttributeError(f"module 'spmd' has no attribute {name!r}")
