"""The train workload's inputs: the training set, its labels and the held-out set, checked and read."""

from __future__ import annotations

import time

import numpy as np

from ...core.errors import InputError
from ...core.memory import require_memory
from ...core.timing import enter_phase
from ...io.hdf5 import dataset_info, open_h5, require_finite
from ...io.plan import Block, block_range


def check_inputs(w) -> int:
    """Rows of the training set, its labels and held-out set checked against the model (InputError)."""
    p, path = w.params, w.cfg.input.path
    rows, row_shape, _ = dataset_info(path, w.cfg.input.dataset, w.DTYPES, (2,))
    if row_shape[0] != p.widths[0]:
        raise InputError(
            f"{path}:{w.cfg.input.dataset}: {row_shape[0]} features per row, the model "
            f"{w.layout.describe()} takes {p.widths[0]}"
        )
    labels, _, _ = dataset_info(path, p.labels, ("int32", "int64", "int16", "uint8"), (1,))
    if labels != rows:
        raise InputError(f"{path}:{p.labels}: {labels} labels for {rows} rows")
    if p.eval:
        with open_h5(path) as f:
            if p.eval not in f:
                raise InputError(f"{path}: no held-out group {p.eval!r} (set params.eval: null to train without one)")
        eval_rows, eval_shape, _ = dataset_info(path, f"{p.eval}/data", w.DTYPES, (2,))
        eval_labels, _, _ = dataset_info(path, f"{p.eval}/labels", ("int32", "int64", "int16", "uint8"), (1,))
        if eval_shape != row_shape or eval_labels != eval_rows:
            raise InputError(
                f"{path}:{p.eval}: data {eval_rows} x {eval_shape} and {eval_labels} labels do "
                f"not match the training set's rows of {row_shape[0]} features"
            )
    return rows


def read_shard(w):
    """This rank's rows of the training set (and of the held-out set), checked."""
    p, path, dtype = w.params, w.cfg.input.path, np.dtype(w.params.dtype)
    start, stop = w.sampler.local_rows
    require_memory(
        (stop - start) * (p.widths[0] * dtype.itemsize + 4),
        "host",
        w.ctx,
        f"rows {start}-{stop} of {path}:{w.cfg.input.dataset}",
    )
    enter_phase("read")
    t0 = time.perf_counter()
    with open_h5(path) as f:
        stored = f[w.cfg.input.dataset].dtype
    x = np.empty((stop - start, p.widths[0]), stored)  # by the config's io engine, then in params.dtype
    w.read_input_block((path, w.cfg.input.dataset), Block(start, stop, 0, p.widths[0]), x)
    x = x.astype(dtype, copy=False)
    with open_h5(path) as f:
        y = f[p.labels][start:stop].astype(np.int32)
        ex = ey = None
        if p.eval:
            e0, e1 = block_range(f[f"{p.eval}/labels"].shape[0], w.ctx.size, w.ctx.rank)
            ex = f[f"{p.eval}/data"][e0:e1].astype(dtype, copy=False)
            ey = f[f"{p.eval}/labels"][e0:e1].astype(np.int32)
    seconds = time.perf_counter() - t0
    classes = p.widths[-1]
    for labels, name, first in ((y, p.labels, start), (ey, f"{p.eval}/labels", e0 if p.eval else 0)):
        bad = np.flatnonzero((labels < 0) | (labels >= classes)) if labels is not None else ()
        if len(bad):
            raise InputError(
                f"{path}:{name} row {first + int(bad[0])}: label {int(labels[bad[0]])} is "
                f"outside 0..{classes - 1} (the model has {classes} classes)"
            )
    require_finite(x, f"{path}:{w.cfg.input.dataset}", start)  # always: a NaN would poison every weight
    return x, y, ex, ey, seconds
