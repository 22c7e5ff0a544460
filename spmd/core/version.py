"""spmd's version (one home: the package face, reports and ``spmd --version`` read it here)."""

__version__ = "0.1.0"
