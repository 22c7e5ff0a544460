"""The one-function form of a workload: ``@spmd.map_reduce``.

    @spmd.map_reduce(combine="sum")            # sum | min | max | gather
    def energy_histogram(block, xp, params):
        counts, _ = xp.histogram(block, bins=params["bins"], range=(params["lo"], params["hi"]))
        return counts.astype(xp.float64)

Each repeat every rank reads its rows of ``input`` (phases read, wait, h2d), calls the function on them on
its device (compute) and combines the results over the ranks (comm: an allreduce, or an allgather for
``gather``). The function must return an array of one shape and numeric dtype on every rank: checked and
agreed at the first repeat, before the collective. The combined array is report.json's ``result.value``.

Verified by default against the same function over the whole input as one block on rank 0, with NumPy
(exact for min, max and gather, whose reference is the function over each rank's rows; for sum within
``rtol`` of the ranks' partial results' magnitude), or against ``reference(data, params)`` if given.
"""

from __future__ import annotations

import traceback
from typing import Callable

import numpy as np

from ..core import faults
from ..core import xp as xpmod
from ..core.errors import ConfigError, UserCodeError, VerificationError, brief, one_line
from ..core.memory import available_host_memory
from .base import Workload
from .rows import NUMBERS, InputRows

COMBINES = ("sum", "min", "max", "gather")
SUM_RTOL = {"float16": 1e-2, "float32": 1e-5, "float64": 1e-10}  # of the partial results' magnitude


def map_reduce(
    function: Callable | None = None,
    *,
    combine: str = "sum",
    params: type | None = None,
    reference: Callable | None = None,
    finish: Callable | None = None,
    rtol: float | None = None,
):
    """Make ``function(block, xp, params) -> array`` a workload (``workload: file.py:NAME`` in a config).

    Args:
        combine: how the ranks' results are combined: elementwise ``sum``, ``min``, ``max``, or ``gather``
            (stacked by rank).
        params: a dataclass the config's ``params`` are built into, checked like the built-ins' (default:
            the mapping as it is).
        reference: ``reference(data, params) -> array``, the combined answer for the whole input (a NumPy
            array), instead of the function over it.
        finish: ``finish(value, params) -> dict`` of derived numbers, added to report.json's ``result``.
        rtol: the tolerance of a ``sum`` against its reference (default by dtype: SUM_RTOL).

    Returns:
        ``function`` itself, unchanged, carrying the workload as ``function.__spmd_workload__``.
    """
    if combine not in COMBINES:
        raise ValueError(f"map_reduce: combine={combine!r} is not one of {', '.join(COMBINES)}")

    def wrap(fn: Callable) -> Callable:
        attrs = {
            "name": fn.__name__,
            "Params": params,
            "combine": combine,
            "rtol": rtol,
            "__doc__": fn.__doc__,
            "function": staticmethod(fn),
            "reference_fn": _static(reference),
            "finish_fn": _static(finish),
            "__module__": fn.__module__,
            "__qualname__": f"map_reduce({fn.__qualname__})",
        }
        fn.__spmd_workload__ = type(f"MapReduce_{fn.__name__}", (MapReduce,), attrs)
        return fn

    return wrap(function) if function is not None else wrap


def _static(fn):
    return staticmethod(fn) if fn is not None else None


class MapReduce(Workload):
    """The workload ``map_reduce`` makes of a function (see the module's docstring)."""

    function: Callable
    combine = "sum"
    rtol: float | None = None
    reference_fn: Callable | None = None
    finish_fn: Callable | None = None

    def setup(self, ctx, cfg, comm):
        self.ctx, self.cfg, self.comm, self.params = ctx, cfg, comm, cfg.params
        if cfg.verify == "attrs":
            raise ctx.collective_error(
                ConfigError, 0, "verify: attrs: a plug-in stores no answers (use auto, full or none)"
            )
        self.rows = InputRows(ctx, cfg, NUMBERS)
        self.local = self.value = None

    def prepare(self):
        self.rows.poison()

    def run(self, timer):
        block = self.rows.read(timer)
        with timer.phase("compute"):
            local = self.call(self.function, self.ctx.xp, block, self.ctx.xp, self.params)
            faults.corrupt(local, f"{self.function.__qualname__}'s result")
        if self.local is None:  # the first repeat: one shape and dtype everywhere, before any collective
            self.ctx.agree(_numeric, local, self.function)
            self._same_everywhere(local)
        elif (local.shape, local.dtype) != (self.local.shape, self.local.dtype):  # before the collective, too
            raise UserCodeError(
                f"{self.function.__qualname__} returned {list(local.shape)} {local.dtype} in a later "
                f"repeat, {list(self.local.shape)} {self.local.dtype} in the first: it must return "
                f"the same shape and dtype every repeat"
            )
        self.local = local
        with timer.phase("comm"):
            if self.combine == "gather":
                self.value = self.comm.allgather(local)
            else:
                self.value = self.comm.allreduce(local, self.combine)

    @staticmethod
    def call(fn: Callable, xp, *args):
        """``fn(*args)`` as a contiguous array of ``xp``; an exception in it is a UserCodeError naming the
        function, its file and line, and the message (a bug in the plug-in, not in spmd)."""
        try:
            out = xp.asarray(fn(*args))
            return out if out.flags.c_contiguous else xp.ascontiguousarray(out)  # a 0-d result stays 0-d
        except (Exception, SystemExit) as exc:  # sys.exit in the function is no way to end a job: named
            raise UserCodeError(f"{fn.__qualname__}, {_where(exc, fn)}: {_what(exc)}") from None

    def _same_everywhere(self, local) -> None:
        everyone = self.ctx.comm.allgather((tuple(local.shape), local.dtype.name))
        if len(set(everyone)) > 1:
            listed = ", ".join(f"rank {r}: {list(s)} {d}" for r, (s, d) in enumerate(everyone))
            raise self.ctx.collective_error(
                ConfigError,
                next(r for r, e in enumerate(everyone) if e != everyone[0]),
                f"{self.function.__qualname__} returned arrays of different shapes or dtypes ({listed}): it must "
                f"return one shape and dtype on every rank, whatever rows the rank holds",
            )

    # -- verification ------------------------------------------------------------------

    def verify(self):
        ctx = self.ctx
        value = xpmod.to_host(self.value)
        if self.combine != "gather":  # a wrong partial min or max that another rank's hides shows only here
            ctx.agree(self._check_own)
        partials = ctx.comm.gather(np.abs(xpmod.to_host(self.local)).astype(np.float64), root=0)
        expected, how = ctx.agree(self._reference, root_only=True)
        worst = ctx.agree(self._compare, value, expected, partials, root_only=True)
        return {"reference": how, "combine": self.combine, "max_abs_error": worst}

    def _check_own(self) -> None:
        """This rank's result against the function over the rows it read, with NumPy (host copy)."""
        mine = xpmod.to_host(self.local)
        want = self.call(self.function, np, self.rows.host_rows(), np, self.params)
        try:
            self._compare(mine, want, [np.abs(mine.astype(np.float64))])
        except VerificationError as exc:
            raise VerificationError(f"this rank's own result ({self.rows.plan.describe()}): {exc}") from None

    def _reference(self) -> tuple[np.ndarray, str]:
        """Rank 0: the answer for the whole input, computed with NumPy, and how it was made."""
        p = self.params
        if self.reference_fn is not None:
            return (
                self.call(self.reference_fn, np, self.rows.whole(), p),
                f"{self.reference_fn.__qualname__} over the whole input",
            )
        if self.combine == "gather":
            blocks = [self.call(self.function, np, self.rows.rank_rows(r), np, p) for r in range(self.ctx.size)]
            return np.stack(blocks), "the function over each rank's rows, with NumPy on rank 0"
        if sum(self.rows.rank_bytes) < available_host_memory() // (2 * self.ctx.local_size):
            return (
                self.call(self.function, np, self.rows.whole(), np, p),
                "the function over the whole input as one block, with NumPy on rank 0",
            )
        parts = [self.call(self.function, np, self.rows.rank_rows(r), np, p) for r in range(self.ctx.size)]
        combined = {
            "sum": lambda s: s.astype(np.float64).sum(axis=0),
            "min": lambda s: s.min(axis=0),
            "max": lambda s: s.max(axis=0),
        }[self.combine](np.stack(parts))
        return (
            combined,
            "the function over each rank's rows (the whole input does not fit rank 0's memory), "
            "combined with NumPy (float64 for a sum) on rank 0",
        )

    def _compare(self, value: np.ndarray, expected: np.ndarray, partials: list[np.ndarray]) -> float:
        name = self.function.__qualname__
        if value.shape != expected.shape:
            raise VerificationError(
                f"{name}: the combined result has shape {list(value.shape)}, the reference {list(expected.shape)}"
            )
        err = np.abs(value.astype(np.float64) - expected.astype(np.float64))
        exact = self.combine != "sum" or value.dtype.kind in "iu"
        if not np.isfinite(value).all():  # NaN never passes, even against a NaN reference (docs/plugins.md)
            index = tuple(int(i) for i in np.argwhere(~np.isfinite(value))[0])
            raise VerificationError(
                f"{name}: result{list(index)} = {value[index].item()!r}: a result holding NaN or "
                f"infinity never passes verification ({int(np.count_nonzero(~np.isfinite(value)))}"
                f" of {value.size} element(s)); make the function return finite values"
            )
        if exact:
            bad = value != expected
            bound = "exact"
        else:
            rtol = self.rtol if self.rtol is not None else SUM_RTOL.get(value.dtype.name, 1e-10)
            tolerance = rtol * (sum(partials) + np.abs(expected.astype(np.float64))) + np.finfo(np.float64).tiny
            bad = ~np.isfinite(value) | (err > tolerance)
            bound = f"rtol {rtol:g} of the partial results' magnitude"
        if np.any(bad):
            index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape)) if bad.ndim else ()
            raise VerificationError(
                f"{name}: result{list(index)} = {value[index].item()!r}, the reference gives "
                f"{expected[index].item()!r} ({bound}); {int(np.count_nonzero(bad))} of "
                f"{bad.size} element(s) differ"
            )
        return float(err.max()) if err.size else 0.0

    def check_input_finite(self):
        self.rows.check_input_finite()

    # -- report ------------------------------------------------------------------------

    def result(self):
        value = xpmod.to_host(self.value)
        out = {"value": value.tolist(), "shape": list(value.shape), "dtype": value.dtype.name}
        if self.finish_fn is not None:
            try:
                extra = self.finish_fn(value, self.params)
            except (Exception, SystemExit) as exc:
                raise UserCodeError(
                    f"{self.finish_fn.__qualname__}, {_where(exc, self.finish_fn)}: {_what(exc)}"
                ) from None
            out.update(_plain(extra))
        return out

    def metrics(self, rank_medians):
        compute = [m.get("compute", 0.0) for m in rank_medians]
        return {
            "bytes_total": int(sum(self.rows.rank_bytes)),
            "bytes_per_rank": self.rows.rank_bytes,
            "compute_GBps_per_rank": [b / t / 1e9 if t > 0 else None for b, t in zip(self.rows.rank_bytes, compute)],
        }

    def problem(self):
        op = "allgather" if self.combine == "gather" else "allreduce"
        nbytes = int(self.local.nbytes) if self.local is not None else 0
        return {"bytes": int(sum(self.rows.rank_bytes)), "comm": [{"op": op, "bytes": nbytes}]}

    def close(self):
        if getattr(self, "rows", None) is not None:
            self.rows.close()


def _numeric(local, fn) -> None:
    """What every communicator carries: integers, float32, float64."""
    if local.dtype.kind not in "iu" and local.dtype.name not in ("float32", "float64"):
        raise ConfigError(f"{fn.__qualname__} returned {local.dtype} values: return integers, float32 or float64")


def _what(exc: BaseException) -> str:
    """'ValueError: message', or 'it called sys.exit(0)', one line and brief."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({brief(exc.code)}), which does not end a job: spmd ends it as a failure"
    return one_line(f"{type(exc).__name__}: {brief(str(exc))[1:-1]}")


def _where(exc: BaseException, fn: Callable) -> str:
    """'file.py:12': the last line of ``fn``'s file in the traceback (where the plug-in went wrong)."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if f.filename == fn.__code__.co_filename] or frames
    return f"{mine[-1].filename}:{mine[-1].lineno}" if mine else fn.__code__.co_filename


def _plain(data):
    """``finish``'s numbers as JSON has them (NumPy scalars and arrays included)."""
    if isinstance(data, dict):
        return {str(k): _plain(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_plain(v) for v in data]
    if isinstance(data, np.ndarray):
        return data.tolist()
    if isinstance(data, np.generic):
        return data.item()
    return data
