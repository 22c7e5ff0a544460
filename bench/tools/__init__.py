"""Diagnostics, not benchmarks: tools that take a kernel, a step or a read apart (``python -m bench.tools.NAME``)."""
