"""``--help`` for bench's programs and tools that take positional arguments or need a GPU library to import:
``answer_help`` prints the usage and the module's docstring and exits, before the GPU libraries are imported, so
every program and tool answers ``--help`` on any machine (tests/unit/test_bench_help.py runs them all)."""

from __future__ import annotations

import sys


def answer_help(doc: str | None, usage: str) -> None:
    """Exit 0 with ``usage`` and ``doc`` when the command line asks for help; otherwise return."""
    if "-h" in sys.argv[1:] or "--help" in sys.argv[1:]:
        print(f"usage: {usage}\n\n{(doc or '').strip()}")
        sys.exit(0)
