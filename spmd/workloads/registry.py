"""Workload registry: config name -> Workload class (a built-in, or a plug-in: ``spmd.workloads.plugins``),
and the step that completes a parsed config.

``spmd.core.config`` parses a config's top level and leaves ``params`` a mapping; ``resolve_params`` builds
it into the workload's own ``Params`` dataclass, checked key by key like every other key (a plug-in
without one gets the mapping).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from pathlib import Path

from ..core import waits
from ..core.config import Config, config_from_dict, load_config, with_params
from ..core.errors import ConfigError, TimedOut, brief, one_line
from .base import Workload
from .matmul.workload import MatmulWorkload
from .plugins import FORMS, is_plugin, load_plugin
from .reduce.workload import ReduceWorkload
from .stencil.workload import StencilWorkload
from .torch.workload import TorchWorkload
from .train.workload import TrainWorkload

REGISTRY: dict[str, type[Workload]] = {
    cls.name: cls for cls in (ReduceWorkload, MatmulWorkload, StencilWorkload, TrainWorkload, TorchWorkload)
}
_PLUGINS: dict[str, type[Workload]] = {}  # loaded in this process, by the config's name for them


def workload_class(name) -> type[Workload]:
    """The Workload class the config's ``workload`` names: a built-in, or a plug-in (loaded once)."""
    if is_plugin(name):
        if name not in _PLUGINS:
            _PLUGINS[name] = load_plugin(name)
        return _PLUGINS[name]
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ConfigError(
            f"workload: unknown workload {brief(name)} (one of: {', '.join(REGISTRY)}; or a plug-in, {FORMS})"
        ) from None


def params_class(name) -> type | None:
    """The params dataclass of workload ``name`` (None: a plug-in that takes the mapping as it is)."""
    return workload_class(name).Params


def resolve_params(cfg: Config) -> Config:
    """``cfg`` with ``params`` built into its workload's Params (ConfigError naming the key)."""
    if cfg.verify == "none" and not is_plugin(cfg.workload) and not workload_class(cfg.workload).MAY_SKIP_VERIFY:
        raise ConfigError(
            f"verify: none is for plug-ins and the user's own model (torch) only; the built-in "
            f"{cfg.workload} always verifies"
        )
    if cfg.capture.steps and not workload_class(cfg.workload).STEPPED:
        raise ConfigError(
            f"capture.steps: the profiler captures steps of a training workload (torch); {brief(cfg.workload)} "
            f"runs none (leave --capture out)"
        )
    return with_params(cfg, params_class(cfg.workload))


def load_job_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """``config.load_config`` and ``resolve_params``: a config ready to run. Where no watchdog runs (``spmd
    jobscript``, ``spmd generate`` without MPI), a plug-in's import is bounded by the config's ``timeout_s``
    all the same, by an alarm (TimedOut, exit 4)."""
    cfg = load_config(path, overrides)
    with _deadline(cfg.timeout_s, f"loading workload {brief(one_line(cfg.workload))}"):
        return resolve_params(cfg)


@contextlib.contextmanager
def _deadline(seconds: float, what: str):
    """Raise TimedOut in the block after ``seconds`` (SIGALRM; the main thread of a process without a watchdog
    only: elsewhere the block runs unbounded here, and the watchdog bounds it)."""
    if (
        waits.installed() is not None
        or threading.current_thread() is not threading.main_thread()
        or not hasattr(signal, "SIGALRM")
    ):
        yield
        return

    def expired(signum, frame):
        raise TimedOut(f"{what}: still running after timeout_s ({seconds:g} s): an import that never returns?")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def agree_on_config(ctx, path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """``load_job_config`` on every rank of ``ctx``, agreed. The config's top level comes first, so the user's
    code that resolving it imports (a plug-in, at import time) runs in a phase the watchdog bounds by the
    config's own ``timeout_s``: an import that never returns ends the job (exit 4) naming it."""
    from ..core.watchdog import set_timeout  # here: loading a config needs no MPI (spmd generate, jobscript)

    cfg = ctx.agree(load_config, path, overrides)
    set_timeout(cfg.timeout_s)
    waits.note_phase(f"loading workload {brief(one_line(cfg.workload))}", timed=is_plugin(cfg.workload))
    try:
        return ctx.agree(resolve_params, cfg)
    finally:
        waits.note_phase("start", timed=False)


def job_config_from_dict(raw: dict) -> Config:
    """``config.config_from_dict`` and ``resolve_params``: a config ready to run."""
    return resolve_params(config_from_dict(raw))
