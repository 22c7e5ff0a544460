"""workload torch's data: the input rows and their targets checked against each other, read and checked for what
would poison training, read whole for the reference, and generated targets for ``spmd generate``."""

from __future__ import annotations

import math

import numpy as np

from ...core.errors import ConfigError, InputError
from ...core.memory import require_memory
from ...io.generate import next_tokens
from ...io.hdf5 import dataset_info, open_h5, require_finite
from ..rows import NUMBERS
from ..training.data import teacher, teacher_labels

LABEL_DTYPES = NUMBERS
RANKS = (1, 2, 3, 4, 5)  # rows = the first axis: tables, sequences, images, volumes


def targets(p) -> int:
    """How many classes (cross_entropy, ``options.classes``, default 10) or outputs (mse, ``options.outputs``)."""
    options = p.options or {}
    return int(options.get("outputs", 1)) if p.loss == "mse" else int(options.get("classes", 10))


def label_array(y: np.ndarray, loss: str) -> np.ndarray:
    """Targets as the loss takes them: class numbers as int64, values as float32."""
    if y.dtype.kind in "iu":
        return y.astype(np.int64, copy=False)
    return y.astype(np.float32, copy=False)


def labels_path(cfg) -> str:
    return cfg.params.labels.path or cfg.input.path


def write_targets(cfg, dataset) -> dict:
    """``spmd generate``: targets for the generated rows from a fixed random teacher network on the flattened
    rows: class numbers (cross_entropy; ``options.classes``, default 10) or values (mse; ``options.outputs``);
    for generated tokens each position's next token under the rule (a language model's targets)."""
    p, g = cfg.params, cfg.generate
    if p.labels.path not in (None, cfg.input.path):
        raise ConfigError("params.labels.path: spmd generate writes the targets beside the input (leave path out)")
    if g.distribution == "tokens":  # a language model's targets: each position's next token under the rule
        if p.loss == "mse":
            raise ConfigError("generate.distribution: tokens makes next-token ids, targets a loss like mse cannot take")
        out = dataset.parent.create_dataset(p.labels.dataset, shape=dataset.shape, dtype=np.int64)
        for start in range(0, dataset.shape[0], 8192):
            out[start : start + 8192] = next_tokens(dataset[start : start + 8192], g.vocab)
        return {}
    features = math.prod(dataset.shape[1:])
    outputs = targets(p)
    weights = teacher(g.seed, features, 8, outputs)
    rows = dataset.shape[0]
    mse = p.loss == "mse"
    out = dataset.parent.create_dataset(
        p.labels.dataset, shape=(rows, outputs) if mse else (rows,), dtype=np.float32 if mse else np.int64
    )
    for start in range(0, rows, 8192):
        flat = np.asarray(dataset[start : start + 8192], np.float64).reshape(-1, features)
        if mse:
            a, c, b = weights
            out[start : start + len(flat)] = np.tanh(((flat - g.loc) / g.scale) @ a + c) @ b
        else:
            out[start : start + len(flat)] = teacher_labels(flat, weights, g.loc, g.scale)
    return {}


def check_inputs(cfg):
    """(rows, row shape, dtype, (label shape, label dtype)) of the input and its targets, which must have as many
    rows, and a dtype the loss takes (InputError naming the file and dataset otherwise)."""
    p, path, name = cfg.params, cfg.input.path, cfg.input.dataset
    rows, row_shape, dtype = dataset_info(path, name, NUMBERS, RANKS)
    where = f"{labels_path(cfg)}:{p.labels.dataset}"
    labels, label_shape, label_dtype = dataset_info(labels_path(cfg), p.labels.dataset, LABEL_DTYPES, RANKS)
    if labels != rows:
        raise InputError(
            f"{where}: {labels} rows of targets for {rows} rows of {path}:{name} (row i of both is one sample)"
        )
    if p.loss == "cross_entropy" and label_dtype.kind not in "iuf":
        raise InputError(
            f"{where}: dtype {label_dtype}: cross_entropy takes class numbers (integers) or class probabilities "
            f"(floats)"
        )
    if p.loss == "mse" and label_dtype.kind != "f":
        raise InputError(f"{where}: dtype {label_dtype}: mse takes floating-point targets")
    return rows, row_shape, dtype, (label_shape, label_dtype)


def check_rows(cfg, x: np.ndarray, y: np.ndarray, start: int) -> None:
    """A rank's rows and targets (from row ``start``) hold nothing that would poison every parameter: no NaN or
    infinity, no negative class number."""
    p = cfg.params
    if x.dtype.kind == "f":
        require_finite(x, f"{cfg.input.path}:{cfg.input.dataset}", start)
    where = f"{labels_path(cfg)}:{p.labels.dataset}"
    if y.dtype.kind == "f":
        require_finite(y, where, start)
    elif p.loss == "cross_entropy" and y.size and int(y.min()) < 0:
        row = start + int(np.argmin(y.reshape(len(y), -1).min(axis=1)))
        raise InputError(f"{where} row {row}: class {int(y.min())} is negative")


def read_all(cfg, ctx, rows: int, row_shape, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every row and target, read with h5py (the reference's copy, independent of the run's read path)."""
    path, name = cfg.input.path, cfg.input.dataset
    require_memory(
        rows * math.prod(row_shape) * dtype.itemsize,
        "host",
        ctx,
        f"the one-process reference's copy of {path}:{name} (verify: none skips it)",
    )
    with open_h5(path) as f:
        x = f[name][...]
    with open_h5(labels_path(cfg)) as f:
        y = f[cfg.params.labels.dataset][...]
    return x, label_array(y, cfg.params.loss)
