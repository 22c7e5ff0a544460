"""``params`` of the torch workload: every key, its default and its checks (docs/torch.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ...core.errors import ConfigError

LOSSES = ("cross_entropy", "mse")
STRATEGIES = ("ddp", "ddp-graph", "compile")
PRECISIONS = ("fp32", "tf32", "bf16")
MAX_VERIFY_STEPS = 8


@dataclass(frozen=True)
class LabelsConfig:
    """``params.labels``: the targets, one row per input row (``path`` defaults to ``input.path``)."""

    dataset: str = "y"
    path: str | None = None


@dataclass(frozen=True)
class OptimizerConfig:
    """``params.optimizer``: torch.optim's SGD (with momentum), Adam or AdamW."""

    name: Literal["sgd", "adam", "adamw"] = "adamw"
    lr: float = 1e-3
    momentum: float = 0.9
    betas: tuple[float, ...] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0

    def __post_init__(self):
        if self.lr <= 0 or self.eps <= 0 or not 0 <= self.momentum < 1 or self.weight_decay < 0:
            raise ConfigError("params.optimizer: lr and eps must be > 0, momentum in [0, 1), weight_decay >= 0")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ConfigError(f"params.optimizer.betas: two numbers in [0, 1), got {list(self.betas)}")


@dataclass(frozen=True)
class SaveConfig:
    """``params.save``: where rank 0 writes the trained state_dict (torch.save, atomically)."""

    path: str


@dataclass(frozen=True)
class TorchParams:
    """``params`` of ``workload: torch`` (docs/torch.md).

    ``model`` and ``loss`` (other than the built-in names) and ``transform`` are ``file.py:NAME`` or
    ``module:NAME``; ``options`` is handed to the model's build function as it is.
    """

    model: str
    labels: LabelsConfig = field(default_factory=LabelsConfig)
    loss: str = "cross_entropy"
    transform: str | None = None
    options: Any = None
    batch: int = 64
    steps: int = 20
    accumulate: int = 1
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    precision: Literal["fp32", "tf32", "bf16"] = "fp32"
    strategy: Literal["ddp", "ddp-graph", "compile"] = "ddp"
    bucket_mb: float = 25.0
    sync_batchnorm: bool = False
    data_shards: int | None = None
    phases: bool = True
    # marks (CUDA events, the comm hook's spans) on one step in this many. A marked step runs the hooked twin: on a
    # launch-bound step 1 in 8 cost about 3 points more than 1 in 32, itself within a point of no marks at all
    # (bench/programs/torch_step_cost.py)
    phase_every: int = 32
    reseed: bool | None = None  # per-micro-batch RNG seeds (None: when the model has dropout-like modules)
    # DDP's find_unused_parameters: None finds out at set-up (on when a parameter gets no gradient on every rank)
    find_unused: bool | None = None
    # verification's checked steps (schedule.py): the first verify_steps, up to verify_per_repeat more drawn at
    # random in every window of steps (warm-up and repeats) while the checks stay within verify_budget of the run's
    # wall time so far (1: every draw), and the run's last step; at each, every rank's gradient before the
    # allreduce, recomputed by the next rank, and the optimizer's update. verify_seed draws the random ones (None: a
    # seed drawn when the run starts)
    verify_steps: int = 1
    verify_per_repeat: int = 1
    verify_budget: float = 0.05
    verify_seed: int | None = None
    seed: int = 0
    save: SaveConfig | None = None

    def __post_init__(self):
        for key in ("batch", "steps", "accumulate", "phase_every"):
            if getattr(self, key) < 1:
                raise ConfigError(f"params.{key}: must be >= 1, got {getattr(self, key)}")
        if not 0 <= self.verify_steps <= MAX_VERIFY_STEPS:
            raise ConfigError(
                f"params.verify_steps: 0 to {MAX_VERIFY_STEPS}, got {self.verify_steps} (the first steps checked)"
            )
        if not 0 <= self.verify_per_repeat <= MAX_VERIFY_STEPS:
            raise ConfigError(
                f"params.verify_per_repeat: 0 to {MAX_VERIFY_STEPS}, got {self.verify_per_repeat} (checked steps "
                f"drawn in every repeat)"
            )
        if not 0 <= self.verify_budget <= 1:
            raise ConfigError(
                f"params.verify_budget: 0 to 1, got {self.verify_budget} (the share of the run's wall time the drawn "
                f"checks may take; 1: every draw)"
            )
        if self.verify_seed is not None and not 0 <= self.verify_seed < 2**63:
            raise ConfigError(f"params.verify_seed: 0 to 2**63 - 1, or leave it out, got {self.verify_seed}")
        if self.bucket_mb <= 0:
            raise ConfigError(f"params.bucket_mb: must be > 0, got {self.bucket_mb}")
        if self.data_shards is not None and self.data_shards < 1:
            raise ConfigError(f"params.data_shards: must be >= 1, got {self.data_shards}")
        if self.options is not None and not isinstance(self.options, dict):
            raise ConfigError("params.options: a mapping (handed to the model's build function), or leave it out")
        if ":" not in self.loss and self.loss not in LOSSES:
            raise ConfigError(f"params.loss: {self.loss!r} is not one of {', '.join(LOSSES)} or file.py:NAME")


def check_job(cfg, gpu: bool, corrupting: bool) -> None:
    """The job's settings the torch workload cannot run with, here, refused with a ConfigError naming the key
    (exit 2). ``gpu`` says the run is on GPUs; ``corrupting`` that an SPMD_FAULT kind=corrupt is armed."""
    p = cfg.params
    if cfg.input.path is None:
        raise ConfigError("input.shards: the torch workload reads one dataset (input.path)")
    if cfg.verify in ("attrs",):
        raise ConfigError(
            "verify: attrs: the torch workload verifies against a one-process reference (use auto or none)"
        )
    if p.strategy == "ddp-graph" and not gpu:
        raise ConfigError("params.strategy: ddp-graph captures the step in a CUDA graph: it needs device: gpu")
    if p.sync_batchnorm and not gpu:
        raise ConfigError(
            "params.sync_batchnorm: SyncBatchNorm runs on GPUs only (on the CPU, DDP keeps rank 0's "
            "BatchNorm statistics, which the reference reproduces: leave it false)"
        )
    if p.precision == "tf32" and not gpu:
        raise ConfigError("params.precision: tf32 is a GPU mode (use fp32 or bf16 on the CPU)")
    if cfg.capture.steps >= p.steps:
        raise ConfigError(
            f"capture.steps: at most params.steps - 1 ({p.steps - 1}): the captured steps and the "
            f"profiler's warm-up step run as one more window"
        )
    if corrupting and p.strategy == "ddp-graph":
        raise ConfigError("SPMD_FAULT kind=corrupt changes a gradient in eager code: use strategy ddp or compile")
