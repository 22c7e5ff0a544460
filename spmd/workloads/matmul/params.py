"""The matmul workload's ``params``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...core.config import DatasetConfig, SaveConfig
from ...core.errors import ConfigError


@dataclass(frozen=True)
class MatmulParams:
    """``params`` of the matmul workload (see docs/configs.md).

    Attributes:
        b: the B matrix (path, dataset, optional generate section).
        algorithm: 'rows' (A split by rows, B everywhere) or 'summa' (2-D grid).
        b_source: rows only: every rank reads B ('read'), rank 0 reads and broadcasts it
            ('bcast'), or each rank reads 1/n of its rows and they are allgathered ('allgather').
        gather: where C ends up: 'none' (distributed), 'allgather' (every rank), 'root' (rank 0).
        tf32: let float32 GEMMs use TF32 tensor cores (GPU).
        grid: summa's [rows, cols] of ranks (default: the most nearly square).
        panel: summa's panel width (columns of A / rows of B per broadcast).
        samples: random rows of C recomputed exactly in float64 (besides every block's first
            and last).
        seed: seed of the random vectors and rows of the verification.
        save: write C (path, dataset) to HDF5, each rank its own block.
        b_share_of: b_source allgather on one rank standing for a rank of this many (``spmd scale --shares`` sets
            it): it reads and copies only its 1/b_share_of of B's rows, as such a rank does, and the rest, read once
            before the repeats, is copied in where the allgather would bring it.
    """

    b: DatasetConfig
    algorithm: Literal["rows", "summa"] = "rows"
    b_source: Literal["read", "bcast", "allgather"] = "read"
    gather: Literal["none", "allgather", "root"] = "none"
    tf32: bool = False
    grid: tuple[int, ...] | None = None
    panel: int = 4096
    samples: int = 4
    seed: int = 0
    save: SaveConfig | None = None
    b_share_of: int = 1

    def __post_init__(self):
        if self.b_share_of < 1:
            raise ConfigError(f"params.b_share_of: must be >= 1, got {self.b_share_of}")
        if self.b_share_of > 1 and (self.algorithm, self.b_source) != ("rows", "allgather"):
            raise ConfigError("params.b_share_of: stands for a rank of algorithm rows with b_source allgather")
        if self.panel < 1:
            raise ConfigError(f"params.panel: must be >= 1, got {self.panel}")
        if self.samples < 0:
            raise ConfigError(f"params.samples: must be >= 0, got {self.samples}")
        if self.algorithm == "summa" and self.b_source != "read":
            raise ConfigError(
                "params.b_source: summa reads each rank's block of B itself; b_source applies to algorithm: rows"
            )
        if self.algorithm == "rows" and self.grid is not None:
            raise ConfigError("params.grid: only algorithm: summa uses a process grid")
        if self.b.generate is not None and len(self.b.generate.shape) != 2:
            raise ConfigError("params.b.generate.shape: B is a matrix: [k, n]")
