"""YAML configuration -> frozen dataclasses.

Every key is checked: an unknown key, a wrong type or a bad value raises ConfigError
naming the key (``params.ddof``), so a typo never silently falls back to a default.
Paths in a config are taken relative to the working directory.

This module parses the top level only and imports no workload: ``params`` stays the mapping
the YAML gave until the workload registry builds it into the workload's own dataclass
(``spmd.workloads.registry.resolve_params``), with the same checks.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from .errors import ConfigError

# The communicator backends ``comm:`` names besides ``auto`` (spmd.comm.factory builds them), in the
# order side-by-side tables list them.
COMM_BACKENDS = ("nccl", "mpi", "mpi-cuda")


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
    dtype: Literal["float32", "float64"] = "float32"
    seed: int = 0
    distribution: Literal["normal", "uniform"] = "normal"
    loc: float = 1.0
    scale: float = 2.0
    chunk_rows: int | None = None
    shards: int | None = None

    def __post_init__(self):
        if not 1 <= len(self.shape) <= 2:
            raise ConfigError(f"generate.shape: 1 or 2 dimensions, got {list(self.shape)}")
        if any(n <= 0 for n in self.shape):
            raise ConfigError(f"generate.shape: sizes must be positive, got {list(self.shape)}")
        if self.chunk_rows is not None and self.chunk_rows <= 0:
            raise ConfigError("generate.chunk_rows: must be positive")
        if self.shards is not None and self.shards <= 0:
            raise ConfigError("generate.shards: must be positive")
        if self.scale <= 0:
            raise ConfigError("generate.scale: must be positive")


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
class Config:
    """A resolved job configuration (see docs/configs.md)."""

    workload: str
    input: InputConfig
    device: Literal["auto", "gpu", "cpu"] = "auto"
    comm: Literal[("auto", *COMM_BACKENDS)] = "auto"
    warmup: int = 1
    repeats: int = 5
    verify: Literal["auto", "attrs", "full"] = "auto"
    allow_shared_gpu: bool = False
    output: str = "results"
    timeout_s: float = 300.0
    check_finite: bool = False
    fault: str | None = None
    generate: GenerateConfig | None = None
    params: Any = field(default_factory=dict)  # a mapping until workloads.registry.resolve_params builds it

    def __post_init__(self):
        from .faults import parse_fault

        if self.warmup < 0:
            raise ConfigError(f"warmup: must be >= 0, got {self.warmup}")
        if self.repeats < 1:
            raise ConfigError(f"repeats: must be >= 1, got {self.repeats}")
        if not self.timeout_s > 0 or self.timeout_s == float("inf"):
            raise ConfigError(f"timeout_s: must be a positive number of seconds, got {self.timeout_s}")
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
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"config {path}: cannot read: {exc.strerror or exc}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config {path}: not valid YAML: {exc}") from None
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
    return dataclasses.replace(build(Config, raw, ""), params=params)


def with_params(cfg: Config, params_cls: type) -> Config:
    """``cfg`` with its ``params`` mapping built into ``params_cls`` (checked key by key); a config
    whose params already are a ``params_cls`` comes back as it is."""
    if isinstance(cfg.params, params_cls):
        return cfg
    return dataclasses.replace(cfg, params=build(params_cls, cfg.params, "params"))


def apply_override(raw: dict, item: str) -> None:
    """Apply one ``dotted.key=value`` override; the value is parsed as YAML."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {item!r}: expected key=value")
    parts = key.split(".")
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {item!r}: {part} is not a mapping")
    try:
        node[parts[-1]] = yaml.safe_load(value)
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {item!r}: value is not valid YAML: {exc}") from None


def build(cls: type, data: Any, where: str):
    """Build dataclass ``cls`` from ``data``, checking keys and types against its fields."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'config'}: expected a mapping, got {_kind(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"unknown key {_join(where, unknown[0])} (known: {', '.join(fields)})")
    values = {}
    for name, f in fields.items():
        key = _join(where, name)
        if name in data:
            values[name] = _convert(hints[name], data[name], key)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{key}: missing")
    return cls(**values)


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
        raise ConfigError(errors[0] if len(errors) == 1 else f"{key}: invalid value {value!r}")
    if origin is Literal:
        choices = typing.get_args(hint)
        if value not in choices:
            raise ConfigError(f"{key}: {value!r} is not one of {', '.join(map(str, choices))}")
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
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise TypeError(f"config field {key}: unsupported type {hint!r}")  # a bug in spmd, not the user


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _kind(value) -> str:
    return "nothing" if value is None else type(value).__name__
