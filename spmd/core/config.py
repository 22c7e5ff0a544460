"""YAML configuration -> frozen dataclasses.

Every key is checked: an unknown key, a wrong type or a bad value raises ConfigError
naming the key (``params.ddof``), so a typo never silently falls back to a default.
Paths in a config are taken relative to the working directory.

A config is data from a user: its text is read and parsed by ``safe_yaml`` (a regular file of bounded
size, no key twice, no alias bomb), and no message formats more than a few dozen characters of a value
(``errors.brief``).

This module parses the top level only and imports no workload: ``params`` stays the mapping
the YAML gave until the workload registry builds it into the workload's own dataclass
(``spmd.workloads.registry.resolve_params``), with the same checks.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .errors import ConfigError, brief
from .safe_yaml import parse_yaml, read_config_text

# The communicator backends ``comm:`` names besides ``auto`` (spmd.comm.factory builds them), in the
# order side-by-side tables list them.
COMM_BACKENDS = ("nccl", "mpi", "mpi-cuda")
MAX_OVERRIDE_BYTES = 64 << 10
MAX_INT = 2**63  # every integer of a config fits a signed 64-bit one (what NumPy, HDF5 and MPI take)
MAX_CAPTURE_STEPS = 16  # a captured step's trace is a few MB of JSON per rank on a GPU
MAX_TIMEOUT_S = 30 * 86400  # a wait of more than 30 days is no timeout (and overflows C timers)
# YAML 1.1 (PyYAML) reads 1e15 or 1.5e6 as text; YAML 1.2 and every user reads them as numbers
_NUMBER = re.compile(r"[-+]?(\d[\d_]*)?\.?\d*([eE][-+]?\d+)?")


@dataclass(frozen=True)
class InputConfig:
    """Where the data comes from: one dataset split by rows, or shard files split by file."""

    path: str | None = None
    dataset: str = "data"
    shards: tuple[str, ...] | None = None

    def __post_init__(self):
        if (self.path is None) == (self.shards is None):
            raise ConfigError("input: give exactly one of input.path or input.shards")
        if self.shards is not None and len(self.shards) == 0:
            raise ConfigError("input.shards: empty list")


@dataclass(frozen=True)
class GenerateConfig:
    """How ``spmd generate`` makes the input: seeded random data of a given shape."""

    shape: tuple[int, ...]
    dtype: Literal["float32", "float64", "int64"] = "float32"
    seed: int = 0
    # tokens: int64 sequences (rows x tokens) of ids below ``vocab`` that mostly follow a fixed successor rule
    distribution: Literal["normal", "uniform", "tokens"] = "normal"
    vocab: int | None = None
    loc: float = 1.0
    scale: float = 2.0
    chunk_rows: int | None = None
    shards: int | None = None
    # the rows of these files, repeated, instead of random numbers: the copies weak scaling makes of a
    # user's own input (spmd.io.weak); dtype, seed and the distribution do not apply
    copy_of: tuple[str, ...] | None = None

    def __post_init__(self):
        if not 1 <= len(self.shape) <= 5:  # rows, then a row's shape (an image's channels, height, width)
            raise ConfigError(f"generate.shape: 1 to 5 dimensions, got {list(self.shape)}")
        if any(n <= 0 for n in self.shape):
            raise ConfigError(f"generate.shape: sizes must be positive, got {list(self.shape)}")
        if self.chunk_rows is not None and self.chunk_rows <= 0:
            raise ConfigError("generate.chunk_rows: must be positive")
        if self.shards is not None and self.shards <= 0:
            raise ConfigError("generate.shards: must be positive")
        if self.scale <= 0:
            raise ConfigError("generate.scale: must be positive")
        if self.seed < 0:
            raise ConfigError(f"generate.seed: must be >= 0, got {self.seed}")
        tokens = self.distribution == "tokens"
        if tokens != (self.dtype == "int64") or tokens != (self.vocab is not None):
            raise ConfigError(
                "generate: distribution tokens goes with dtype int64 and a vocab (>= 2), and only it "
                f"(got distribution {self.distribution}, dtype {self.dtype}, vocab {self.vocab})"
            )
        if tokens and (self.vocab < 2 or len(self.shape) != 2):
            raise ConfigError(
                f"generate: tokens need vocab >= 2 and a shape [rows, tokens], got vocab {self.vocab}, "
                f"shape {list(self.shape)}"
            )
        largest = {"float32": 3.4e38, "float64": 1.79e308, "int64": math.inf}[self.dtype]  # beyond: infinity
        if math.isfinite(self.loc + self.scale) and not abs(self.loc) + 40 * self.scale < largest:  # (NaN: below)
            raise ConfigError(
                f"generate.loc, generate.scale: values near {self.loc:g} +- {self.scale:g} do not fit "
                f"{self.dtype} (its largest is {largest:g})"
            )
        if math.prod(self.shape) >= MAX_INT // 8:
            raise ConfigError(f"generate.shape: {list(self.shape)} has more elements than any file can hold")
        if self.copy_of is not None and not self.copy_of:
            raise ConfigError("generate.copy_of: an empty list")


@dataclass(frozen=True)
class DatasetConfig:
    """A further dataset a workload reads (matmul's ``params.b``), optionally generated."""

    path: str
    dataset: str = "data"
    generate: GenerateConfig | None = None

    def input_config(self) -> InputConfig:
        return InputConfig(path=self.path, dataset=self.dataset)


@dataclass(frozen=True)
class SaveConfig:
    """Where a workload writes its result (``params.save``): one HDF5 dataset."""

    path: str
    dataset: str = "result"


@dataclass(frozen=True)
class IoConfig:
    """How a rank reads its input (``io``): the engine, its reader threads and the size of each read."""

    engine: Literal["auto", "h5py", "direct", "kvikio", "mapped"] = "auto"
    threads: int | Literal["auto"] = "auto"  # auto: the rank's share of the node's CPUs (io.cpus)
    buffer_mb: float = 8.0

    def __post_init__(self):
        if self.threads != "auto" and not (isinstance(self.threads, int) and 1 <= self.threads <= 256):
            raise ConfigError(f"io.threads: auto, or from 1 to 256 reader threads, got {self.threads!r}")
        if not 0 < self.buffer_mb <= 4096:
            raise ConfigError(f"io.buffer_mb: more than 0 and at most 4096 (MiB per read), got {self.buffer_mb}")


@dataclass(frozen=True)
class CaptureConfig:
    """The profiler's capture (``capture``; ``--capture N``): ``steps`` more steps after the timed repeats under
    torch.profiler on every rank, kernel by kernel (report.json's kernels), each rank's trace kept (gzipped, in the
    report folder) up to ``max_mb``. Off by default: a captured step of a launch-bound model takes several times a
    plain one."""

    steps: int = 0
    max_mb: float = 32.0

    def __post_init__(self):
        if not 0 <= self.steps <= MAX_CAPTURE_STEPS:
            raise ConfigError(f"capture.steps: 0 to {MAX_CAPTURE_STEPS}, got {self.steps}")
        if not 0 <= self.max_mb <= 1024:
            raise ConfigError(f"capture.max_mb: 0 to 1024, got {self.max_mb}")


# torch's params that named the capture before it was the job's (``capture``): still read, as aliases
CAPTURE_ALIASES = {"capture_steps": "steps", "capture_max_mb": "max_mb"}


@dataclass(frozen=True)
class Config:
    """A resolved job configuration (see docs/configs.md)."""

    workload: str
    input: InputConfig
    device: Literal["auto", "gpu", "cpu"] = "auto"
    comm: Literal[("auto", *COMM_BACKENDS)] = "auto"
    warmup: int = 1
    repeats: int | Literal["auto"] | None = None  # None: 5 under spmd run, auto under spmd scale
    max_seconds: float = 30.0  # repeats: auto stops when the repeats have taken this long
    verify: Literal["auto", "attrs", "full", "none"] = "auto"  # none: plug-ins only, recorded as not checked
    allow_shared_gpu: bool = False
    output: str = "results"
    overwrite: bool = False  # may replace a save or checkpoint path that holds a file spmd did not write
    timeout_s: float = 300.0
    check_finite: bool = False
    fault: str | None = None
    generate: GenerateConfig | None = None
    io: IoConfig = field(default_factory=IoConfig)
    capture: CaptureConfig = field(default_factory=CaptureConfig)
    params: Any = field(default_factory=dict)  # a mapping until workloads.registry.resolve_params builds it

    def __post_init__(self):
        from .faults import parse_fault

        if self.warmup < 0:
            raise ConfigError(f"warmup: must be >= 0, got {self.warmup}")
        if isinstance(self.repeats, int) and self.repeats < 1:
            raise ConfigError(f"repeats: must be >= 1 or auto, got {self.repeats}")
        if not 0 < self.max_seconds <= MAX_TIMEOUT_S:
            raise ConfigError(f"max_seconds: must be a positive number of seconds, got {self.max_seconds:g}")
        if not 0 < self.timeout_s <= MAX_TIMEOUT_S:
            raise ConfigError(
                f"timeout_s: must be a positive number of seconds, got {self.timeout_s:g} (at most "
                f"{MAX_TIMEOUT_S}: 30 days)"
            )
        if self.fault is not None:
            parse_fault(self.fault)

    def to_dict(self) -> dict:
        """Plain JSON-ready dict of the resolved configuration."""
        return dataclasses.asdict(self)


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Read a YAML config, apply ``key=value`` overrides and validate the top level
    (``params`` stays a mapping: see the module's docstring).

    Raises:
        ConfigError: unreadable file, invalid YAML, unknown key, wrong type or value.
    """
    raw = parse_yaml(read_config_text(path), f"config {path}")
    if not isinstance(raw, dict):
        raise ConfigError(f"config {path}: expected a mapping of keys at the top level")
    for item in overrides:
        apply_override(raw, item)
    return config_from_dict(raw)


def config_from_dict(raw: dict) -> Config:
    """Validate a plain dict (already parsed YAML) into a Config whose ``params`` is a mapping."""
    raw = dict(raw)
    if "workload" not in raw:
        raise ConfigError("workload: missing")
    params = raw.pop("params", None) or {}
    if not isinstance(params, dict):
        raise ConfigError(f"params: expected a mapping, got {_kind(params)}")
    if raw["workload"] == "torch":
        params = _capture_aliases(raw, params)
    return dataclasses.replace(build(Config, raw, ""), params=params)


def _capture_aliases(raw: dict, params: dict) -> dict:
    """torch's ``params.capture_steps`` and ``params.capture_max_mb`` moved into ``raw``'s ``capture`` section, where
    the new name, when given too, wins (``--capture N`` over a config's old spelling); returns the params without
    them."""
    old = {k: params[k] for k in CAPTURE_ALIASES if k in params}
    if not old:
        return params
    section = raw.get("capture") or {}
    if not isinstance(section, dict):
        raise ConfigError(f"capture: expected a mapping, got {_kind(section)}")
    section = dict(section)
    for key, value in old.items():
        section.setdefault(CAPTURE_ALIASES[key], value)
    raw["capture"] = section
    return {k: v for k, v in params.items() if k not in CAPTURE_ALIASES}


def with_params(cfg: Config, params_cls: type | None) -> Config:
    """``cfg`` with its ``params`` mapping built into ``params_cls`` (checked key by key); a config
    whose params already are a ``params_cls``, or whose workload takes the mapping (None), comes back as it is."""
    if params_cls is None or isinstance(cfg.params, params_cls):
        return cfg
    return dataclasses.replace(cfg, params=build(params_cls, cfg.params, "params"))


def int_list(text: str, option: str, what: str) -> list[int]:
    """``--OPTION 1,2,4`` -> [1, 2, 4] (sorted, each once, every one >= 1); ConfigError naming ``option`` and, for a
    number below 1, ``what`` the numbers are."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigError(f"{option} {brief(text)}: expected comma-separated integers, e.g. 1,2,4") from None
    if not values or values[0] < 1:
        raise ConfigError(f"{option} {brief(text)}: {what} must be >= 1")
    return values


def apply_override(raw: dict, item: str) -> None:
    """Apply one ``dotted.key=value`` override; the value is parsed as YAML."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {brief(item)}: expected key=value")
    if len(item) > MAX_OVERRIDE_BYTES:
        raise ConfigError(f"override {brief(item)}: longer than {MAX_OVERRIDE_BYTES} characters")
    parts = key.split(".")
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {brief(item)}: {part} is not a mapping")
    node[parts[-1]] = parse_yaml(value, f"override {brief(item)}: value")


def build(cls: type, data: Any, where: str):
    """Build dataclass ``cls`` from ``data``, checking keys and types against its fields."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'config'}: expected a mapping, got {_kind(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted((k for k in data if k not in fields), key=str)
    if unknown:
        name = unknown[0] if isinstance(unknown[0], str) and len(unknown[0]) <= 60 else brief(unknown[0])
        raise ConfigError(f"unknown key {_join(where, name)} (known: {', '.join(fields)})")
    values = {}
    for name, f in fields.items():
        key = _join(where, name)
        if name in data:
            values[name] = _convert(hints[name], data[name], key)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{key}: missing")
    built = cls(**values)  # its own checks first (they name what a value means)
    for name, value in values.items():
        if hints[name] is not Any and not _finite(value):
            raise ConfigError(f"{_join(where, name)}: expected finite numbers, got {brief(value)}")
    return built


def _finite(value) -> bool:
    """No NaN or infinity in a float, or in the floats of a tuple (a NaN learning rate passes every
    comparison)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, tuple):
        return all(_finite(v) for v in value)
    return True


def _convert(hint, value, key: str):
    """Check ``value`` against type ``hint``; return it in the field's own type."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(option, value, key)
            except ConfigError as exc:
                errors.append(str(exc))
        if len(errors) == 1:
            raise ConfigError(errors[0])
        wanted = " or ".join(_describe(option) for option in options if option is not type(None))
        raise ConfigError(f"{key}: expected {wanted}, got {brief(value)}")
    if origin is Literal:
        choices = typing.get_args(hint)
        if value not in choices:
            raise ConfigError(f"{key}: {brief(value)} is not one of {', '.join(map(str, choices))}")
        return value
    if origin is tuple:
        item_type = typing.get_args(hint)[0]
        if isinstance(value, str):
            value = [value]  # one string stands for a one-item list (e.g. a glob)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {_kind(value)}")
        return tuple(_convert(item_type, v, f"{key}[{i}]") for i, v in enumerate(value))
    if dataclasses.is_dataclass(hint):
        return build(hint, value, key)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {brief(value)}")
        return value
    if hint is int:
        value = _number_text(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {brief(value)}")
        if not -MAX_INT < value < MAX_INT:
            raise ConfigError(f"{key}: {brief(value)} is out of range (at most 2^63 in size)")
        return value
    if hint is float:
        value = _number_text(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {brief(value)}")
        try:
            return float(value)
        except OverflowError:
            raise ConfigError(f"{key}: {brief(value)} is out of range") from None
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {brief(value)}")
        return value
    raise TypeError(f"config field {key}: unsupported type {hint!r}")  # a bug in spmd, not the user


def _describe(hint) -> str:
    """What a value of type ``hint`` is, in words (for a union's error)."""
    if typing.get_origin(hint) is Literal:
        return " or ".join(map(str, typing.get_args(hint)))
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(
        hint, "a mapping" if dataclasses.is_dataclass(hint) else getattr(hint, "__name__", str(hint))
    )


def _number_text(value):
    """A string that YAML 1.2 reads as a number (``1e15``, ``-2.5E-3``), as that number; anything else as it is."""
    if isinstance(value, str) and any(c.isdigit() for c in value) and _NUMBER.fullmatch(value.strip()):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _kind(value) -> str:
    return "nothing" if value is None else type(value).__name__
