"""Workload registry: config name -> Workload class, and the step that completes a parsed config.

``spmd.config`` parses a config's top level and leaves ``params`` a mapping; ``resolve_params`` builds
it into the workload's own ``Params`` dataclass, checked key by key like every other key.
"""

from __future__ import annotations

from pathlib import Path

from ..config import Config, config_from_dict, load_config, with_params
from ..errors import ConfigError
from .base import Workload
from .matmul.workload import MatmulWorkload
from .reduce.workload import ReduceWorkload
from .stencil.workload import StencilWorkload
from .train.workload import TrainWorkload

REGISTRY: dict[str, type[Workload]] = {cls.name: cls for cls in (ReduceWorkload, MatmulWorkload, StencilWorkload,
                                                             TrainWorkload)}


def workload_class(name) -> type[Workload]:
    """The Workload class registered as ``name``."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ConfigError(f"workload: unknown workload {name!r} (one of: {', '.join(REGISTRY)})") from None


def params_class(name) -> type:
    """The params dataclass of workload ``name``."""
    return workload_class(name).Params


def resolve_params(cfg: Config) -> Config:
    """``cfg`` with ``params`` built into its workload's Params (ConfigError naming the key)."""
    return with_params(cfg, params_class(cfg.workload))


def load_job_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """``config.load_config`` and ``resolve_params``: a config ready to run."""
    return resolve_params(load_config(path, overrides))


def job_config_from_dict(raw: dict) -> Config:
    """``config.config_from_dict`` and ``resolve_params``: a config ready to run."""
    return resolve_params(config_from_dict(raw))
