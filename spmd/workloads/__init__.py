"""Workload registry: config name -> Workload class."""

from __future__ import annotations

from ..errors import ConfigError
from .base import Workload
from .matmul import MatmulWorkload
from .reduce import ReduceWorkload
from .stencil import StencilWorkload
from .train import TrainWorkload

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
