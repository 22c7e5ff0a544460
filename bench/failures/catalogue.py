"""The catalogue of failures, one module per kind: injected faults, bad inputs, bad configs, unlucky use, a
user's files, hostile values. bench's faults suite runs every case; docs/reliability.md's table is rendered from
its records; tests/launched runs the catalogue too."""

from __future__ import annotations

from . import configs, hostile, injected, inputs, mishaps, users_files
from .case import FaultCase


def every_case(ranks: int, gpu: bool, mpiexec: list[str]) -> list[FaultCase]:
    """The whole catalogue, in docs/reliability.md's order."""
    return [
        *injected.cases(ranks, gpu),
        *inputs.cases(ranks),
        *configs.cases(),
        *mishaps.cases(mpiexec),
        *users_files.cases(mpiexec),
        *hostile.cases(),
    ]
