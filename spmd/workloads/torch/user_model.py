"""The user's pieces, loaded and checked: the model's build function, the loss, the input transform.

Every failure is a ConfigError naming the config key, the file and the name (exit 2), raised on the rank
that met it and agreed by the caller: a build function that raises, returns something that is not a
``torch.nn.Module``, or builds different parameters on different ranks; a loss that is not a scalar.
"""

from __future__ import annotations

import types
from dataclasses import asdict

from ...core.errors import ConfigError, InputError, SpmdError, brief
from ..plugins import load_object, located


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
    ``torch.manual_seed(params.seed)`` (rank 0's parameters are broadcast to every rank afterwards)."""
    build = load_object(params.model, "params.model")
    if not callable(build):
        raise ConfigError(
            f"params.model: {params.model} is a {type(build).__name__}, not a function that builds a torch.nn.Module"
        )
    torch.manual_seed(params.seed)
    view = types.MappingProxyType({**asdict(params), "options": dict(params.options or {})})
    module = user_call("params.model", params.model, build, view)
    if not isinstance(module, torch.nn.Module):
        raise ConfigError(f"params.model: {params.model} returned a {type(module).__name__}, not a torch.nn.Module")
    if not any(p.requires_grad for p in module.parameters()):
        raise ConfigError(f"params.model: {params.model} built a module with no trainable parameters")
    return module


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
