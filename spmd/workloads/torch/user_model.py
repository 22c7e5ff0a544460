"""The user's pieces, loaded and checked: the model's build function, the loss, the input transform.

Every failure is a ConfigError naming the config key, the file and the name (exit 2), raised on the rank
that met it and agreed by the caller: a build function that raises, returns something that is not a
``torch.nn.Module``, or builds different parameters on different ranks; a loss that is not a scalar.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping
from dataclasses import asdict

from ...core.errors import ConfigError, InputError, SpmdError, brief
from ...core.memory import available_host_memory
from ..plugins import load_object, located
from .compute import state_tensors

KEEP_SHARE = 0.25  # the share of a node's free memory its ranks' kept builds may take


def user_call(key: str, spec: str, fn, *args):
    """``fn(*args)``; an exception out of the user's code is a ConfigError naming ``key``, ``spec`` and where
    in the user's code it happened."""
    try:
        return fn(*args)
    except SpmdError:
        raise
    except (Exception, SystemExit) as exc:
        raise ConfigError(f"{key}: {spec} raised {located(exc, None)}") from None


def build_model(torch, params):
    """The user's module: ``build(params)`` with the config's params as a read-only mapping, after
    ``torch.manual_seed(params.seed)`` (rank 0's parameters are broadcast to every rank afterwards). Inside
    ``reused_builds`` a copy of the last build serves a later call whose params agree on every key the build read,
    with the random state the build left (``Reuse``)."""
    build = load_object(params.model, "params.model")
    if not callable(build):
        raise ConfigError(
            f"params.model: {params.model} is a {type(build).__name__}, not a function that builds a torch.nn.Module"
        )
    given = {**asdict(params), "options": dict(params.options or {})}
    if _REUSE is not None:
        module = _REUSE.copy_for(torch, params.model, given)
        if module is not None:
            return module
    torch.manual_seed(params.seed)
    view = ReadKeys(given)
    module = user_call("params.model", params.model, build, view)
    if not isinstance(module, torch.nn.Module):
        raise ConfigError(f"params.model: {params.model} returned a {type(module).__name__}, not a torch.nn.Module")
    if not any(p.requires_grad for p in module.parameters()):
        raise ConfigError(f"params.model: {params.model} built a module with no trainable parameters")
    if _REUSE is not None:
        read = {key: given[key] for key in view.read | {"seed"} if key in given}  # the seed made it too
        _REUSE.keep(torch, params.model, read, module)
    return module


class ReadKeys(Mapping):
    """The params as the build function sees them, read-only, noting each key it reads (iterating reads them all):
    what a later build must agree on to reuse this one."""

    def __init__(self, data: dict):
        self._data = data
        self.read: set = set()

    def __getitem__(self, key):
        self.read.add(key)
        return self._data[key]

    def __contains__(self, key):
        self.read.add(key)
        return key in self._data

    def __iter__(self):
        self.read.update(self._data)
        return iter(self._data)

    def __len__(self):
        return len(self._data)


class Reuse:
    """The last build of a sweep, kept on the host as built, for the sweep's later runs of the same model: building
    GPT-2 124M takes about 2 s a run. A copy is what a fresh build would give: the same parameters and buffers, and
    the random state the build left restored (dropout's masks follow it). Only a module wholly on the host is kept,
    and only while its copy takes at most ``share`` of the host's free memory."""

    def __init__(self, share: float):
        self.share = share
        self.kept = None  # (spec, the params the build read, the module, CPU random state, CUDA random states)

    def keep(self, torch, spec: str, read: dict, module) -> None:
        self.kept = None
        tensors = state_tensors(module)
        if any(t.device.type != "cpu" for t in tensors):
            return
        if sum(t.numel() * t.element_size() for t in tensors) > self.share * available_host_memory():
            return
        try:
            pristine = copy.deepcopy(module)
        except Exception:  # a module that cannot be copied is built again each run, as without reuse
            return
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
        self.kept = (spec, copy.deepcopy(read), pristine, torch.random.get_rng_state(), cuda)

    def copy_for(self, torch, spec: str, given: dict):
        """A copy of the kept build if ``given`` agrees with it on every key it read, the random state set as that
        build left it; else None."""
        if self.kept is None:
            return None
        kept_spec, read, module, cpu_state, cuda_states = self.kept
        if kept_spec != spec or any(given.get(key) != value for key, value in read.items()):
            return None
        torch.manual_seed(given["seed"])  # a CPU build leaves CUDA's generators seeded, as here
        torch.random.set_rng_state(cpu_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)
        return copy.deepcopy(module)


_REUSE: Reuse | None = None


@contextlib.contextmanager
def reused_builds(ranks_on_node: int = 1):
    """Builds reused within the block (a sweep's runs: ``TorchWorkload.sweep_session``), each of the node's ranks
    keeping its copy within its part of ``KEEP_SHARE``; the kept one let go after."""
    global _REUSE
    outer, _REUSE = _REUSE, Reuse(KEEP_SHARE / max(1, ranks_on_node))
    try:
        yield
    finally:
        _REUSE = outer


def parameter_layout(module) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, dtype) of every parameter and buffer: what must be equal on every rank."""
    return [(name, tuple(t.shape), str(t.dtype)) for name, t in [*module.named_parameters(), *module.named_buffers()]]


def require_same_layout(ctx, layout) -> None:
    """Every rank built the same parameters as rank 0 (DDP would otherwise hang or fail deep inside); the
    first rank and tensor that differ are named."""
    layouts = ctx.comm.allgather(layout)
    for rank, mine in enumerate(layouts):
        if mine == layouts[0]:
            continue
        names0 = {n: (s, d) for n, s, d in layouts[0]}
        diff = next(((n, s, d) for n, s, d in mine if names0.get(n) != (s, d)), None)
        if diff is None:
            missing = sorted(set(names0) - {n for n, _, _ in mine})
            what = f"has no {missing[0]}" if missing else "orders its tensors differently"
        else:
            n, s, d = diff
            what = (
                f"has {n} of shape {list(s)} {d}, rank 0 {list(names0[n][0])} {names0[n][1]}"
                if n in names0
                else f"has {n}, which rank 0 does not"
            )
        raise ctx.collective_error(
            InputError,
            rank,
            f"params.model builds different parameters on different "
            f"ranks: rank {rank} {what} (a model built from the rank number cannot be "
            f"trained data-parallel)",
        )


def loss_function(torch, spec: str):
    """The loss: cross_entropy, mse, or the user's ``file.py:NAME`` (called as ``loss(output, target)``)."""
    functional = torch.nn.functional
    if spec == "cross_entropy":
        return functional.cross_entropy
    if spec == "mse":
        return functional.mse_loss
    fn = load_object(spec, "params.loss")
    if not callable(fn):
        raise ConfigError(f"params.loss: {spec} is a {type(fn).__name__}, not a callable loss(output, target)")
    return fn


def transform_function(spec: str | None):
    """The user's input transform (``file.py:NAME``: ``transform(x) -> x``, on the device), or None."""
    if spec is None:
        return None
    fn = load_object(spec, "params.transform")
    if not callable(fn):
        raise ConfigError(f"params.transform: {spec} is a {type(fn).__name__}, not a callable transform(x)")
    return fn


def require_scalar_loss(torch, loss, spec: str) -> None:
    """A loss must be one finite number per micro-batch (a per-sample vector cannot be backpropagated as is)."""
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.is_floating_point():
        shape = list(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ConfigError(
            f"params.loss: {spec} returned {brief(shape)}, not a scalar floating-point tensor "
            f"(reduce it, e.g. with .mean())"
        )


def settle_unused(ctx, unused: list[str], setting: bool | None) -> tuple[bool, list[str]]:
    """Whether DDP must look for parameters without a gradient (``find_unused_parameters``), from those each rank's
    trial step left without one (collective): none -> off unless ``params.find_unused`` says on; the same on every
    rank (a head or pooler the loss never reaches) -> on, said in the job's warnings, unless the key says false
    (ConfigError naming them); different on different ranks -> InputError naming the ranks and parameters unless
    the key says true (control flow that follows the data, which DDP trains that way). Returns (on, the names)."""
    every = ctx.comm.allgather(sorted(unused))
    differ = next((r for r, names in enumerate(every) if names != every[0]), None)
    names = sorted(set().union(*every))
    if differ is not None and setting is not True:
        only = sorted(set(every[0]) ^ set(every[differ]))
        raise ctx.collective_error(
            InputError,
            differ,
            f"params.model: the first micro-batch's forward reached other parameters on rank {differ} than on rank "
            f"0: {_listed(only)} got a gradient on one and not the other. A forward whose control flow depends on "
            f"the rank cannot be trained data-parallel (DDP would hang or fail); one that follows the data needs "
            f"params.find_unused: true",
        )
    if names and setting is False:
        raise ctx.collective_error(
            ConfigError,
            0,
            f"params.find_unused: false, but the loss reaches none of {_listed(names)}: DDP would wait for their "
            f"gradients for ever. Leave params.find_unused out (spmd turns DDP's find_unused_parameters on), or "
            f"build the model without them (or with requires_grad False)",
        )
    if names and setting is None and ctx.rank == 0:
        ctx.warnings.append(
            f"params.model: the loss reaches none of {_listed(names)}: DDP's find_unused_parameters is on (a "
            f"search of the autograd graph every step); build the model without them to save it"
        )
    return (bool(names) if setting is None else setting), names


def _listed(names: list[str], most: int = 6) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
