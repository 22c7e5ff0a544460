"""Training checkpoints in HDF5, written atomically (temporary name, then rename).

A checkpoint holds the parameters (``weights``, real values only, layer by layer in forward
order), the optimizer's buffers (``optimizer/<name>``), and as attributes the step, the RNG
state and what must match to continue: model widths, dtype, optimizer, global batch, data
shards. spmd's randomness is counter-based (dropout: a hash of seed, step, layer, element;
sample order: permutations seeded by seed, shard, epoch), so the RNG state is the seed and
the step.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import h5py
import numpy as np

from ...errors import ConfigError, InputError
from ...files import fsync_file
from ...io.hdf5 import open_h5

FORMAT = 1
MATCH = ("widths", "dtype", "optimizer", "global_batch", "data_shards", "seed")


def _flatten(layout, flat: np.ndarray) -> np.ndarray:
    """The real parameters of the padded flat buffer, layer 0 first (W then b)."""
    return np.concatenate([flat[s.start:s.stop] for s in layout.segments])


def _unflatten(layout, values: np.ndarray, dtype) -> np.ndarray:
    flat = np.zeros(layout.size, dtype=dtype)
    offset = 0
    for s in layout.segments:
        n = s.stop - s.start
        flat[s.start:s.stop] = values[offset:offset + n]
        offset += n
    return flat


def save_checkpoint(path: str, layout, weights: np.ndarray, state: dict, step: int, meta: dict) -> None:
    """Write a checkpoint; the previous file at ``path`` stays intact until the new one is complete."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = f"{path}.tmp"
    try:
        with h5py.File(tmp, "w") as f:
            f.create_dataset("weights", data=_flatten(layout, weights))
            for name, buf in state.items():
                f.create_dataset(f"optimizer/{name}", data=_flatten(layout, buf))
            f.attrs["format"] = FORMAT
            f.attrs["step"] = step
            f.attrs["meta"] = json.dumps(meta, sort_keys=True)
        fsync_file(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write the checkpoint ({exc})") from None


def load_checkpoint(path: str, layout, meta: dict, state_names) -> tuple[np.ndarray, dict, int]:
    """Parameters, optimizer buffers and step of a checkpoint made by a compatible run.

    Raises:
        InputError: missing or unreadable file, or not a spmd checkpoint.
        ConfigError: made by a run whose model, optimizer, batch or data order differ.
    """
    with open_h5(path) as f:
        try:
            stored = json.loads(f.attrs["meta"])
            for key in MATCH:
                if stored.get(key) != meta.get(key):
                    raise ConfigError(f"params.resume: {path} was made with {key} = {stored.get(key)}, this run "
                                      f"has {meta.get(key)}; resuming would not continue the same training")
            step = int(f.attrs["step"])
            weights = f["weights"][...]
            state = {name: f[f"optimizer/{name}"][...] for name in state_names}
        except (KeyError, ValueError, OSError) as exc:
            raise InputError(f"{path}: not a complete spmd training checkpoint ({exc})") from None
    if weights.size != layout.parameters:
        raise InputError(f"{path}: {weights.size} weights, the model has {layout.parameters}")
    dtype = np.dtype(meta["dtype"])
    return (_unflatten(layout, weights, dtype), {k: _unflatten(layout, v, dtype) for k, v in state.items()}, step)
