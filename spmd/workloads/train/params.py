"""``params`` of the train workload: every key, its default and its checks (see docs/configs.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...core.errors import ConfigError
from .layout import model_widths


@dataclass(frozen=True)
class CheckpointConfig:
    """``params.checkpoint``: where rank 0 writes checkpoints, and every how many steps
    (0: only at the end and when a stop signal arrives)."""

    path: str
    every: int = 0

    def __post_init__(self):
        if self.every < 0:
            raise ConfigError(f"params.checkpoint.every: must be >= 0, got {self.every}")


@dataclass(frozen=True)
class TrainParams:
    """``params`` of the train workload (see docs/configs.md)."""

    model: str | tuple[int, ...] = "medium"
    dtype: Literal["float32", "float64"] = "float32"
    batch: int = 64
    accumulate: int = 1
    steps: int = 50
    optimizer: Literal["sgd", "adam"] = "sgd"
    lr: float = 0.05
    momentum: float = 0.9
    betas: tuple[float, ...] = (0.9, 0.999)
    eps: float = 1e-8
    dropout: float = 0.0
    seed: int = 0
    labels: str = "labels"
    eval: str | None = "eval"
    eval_rows: int = 4096
    teacher_width: int = 8
    data_shards: int | None = None
    bucket_mb: float = 25.0
    overlap: bool = True
    split_gradients: bool = False
    update_per_bucket: bool = False
    update_in_backward: bool = False
    backward_order: Literal["layers", "inputs_first"] = "layers"
    graph: bool | Literal["auto"] = "auto"
    tf32: bool = False
    precision: Literal["tf32", "bf16"] | None = None
    phases: bool = True
    target_accuracy: float | None = None
    checkpoint: CheckpointConfig | None = None
    resume: str | None = None
    resume_unverified: bool = False  # resume from a checkpoint whose run failed verification (the report says so)

    def __post_init__(self):
        model_widths(self.model)
        for key in ("batch", "accumulate", "steps", "eval_rows", "teacher_width"):
            if getattr(self, key) < 1:
                raise ConfigError(f"params.{key}: must be >= 1, got {getattr(self, key)}")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"params.dropout: must be in [0, 1), got {self.dropout}")
        if self.lr <= 0 or self.eps <= 0 or not 0 <= self.momentum < 1:
            raise ConfigError("params.lr and params.eps must be > 0, params.momentum in [0, 1)")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ConfigError(f"params.betas: two numbers in [0, 1), got {list(self.betas)}")
        if self.bucket_mb <= 0:
            raise ConfigError(f"params.bucket_mb: must be > 0, got {self.bucket_mb}")
        if self.data_shards is not None and self.data_shards < 1:
            raise ConfigError(f"params.data_shards: must be >= 1, got {self.data_shards}")
        if (self.tf32 or self.precision) and self.dtype != "float32":
            raise ConfigError(f"params.{'precision' if self.precision else 'tf32'}: applies to float32 only")
        if self.tf32 and self.precision not in (None, "tf32"):
            raise ConfigError(f"params.tf32: true and params.precision: {self.precision} disagree: give one")
        if self.target_accuracy is not None and not 0 < self.target_accuracy <= 1:
            raise ConfigError(f"params.target_accuracy: a fraction in (0, 1], got {self.target_accuracy}")
        if self.target_accuracy is not None and self.eval is None:
            raise ConfigError("params.target_accuracy: needs the held-out set (params.eval)")
        if self.checkpoint and self.checkpoint.every % self.steps:
            raise ConfigError(
                f"params.checkpoint.every: {self.checkpoint.every} is not a multiple of params.steps "
                f"({self.steps}); checkpoints are written between timed windows"
            )

    @property
    def gemm_precision(self) -> str | None:
        """None (GEMMs in dtype), "tf32" or "bf16"; params.tf32: true is the older spelling of precision: tf32."""
        return self.precision or ("tf32" if self.tf32 else None)

    @property
    def widths(self) -> tuple[int, ...]:
        return model_widths(self.model)
