"""Training checkpoints in HDF5, written atomically (unique temporary name, then rename), verified when read.

A checkpoint holds the parameters (``weights``, real values only, layer by layer in forward
order), the optimizer's buffers (``optimizer/<name>``), and as attributes the step, the RNG
state and what must match to continue: model widths, dtype, optimizer, global batch, data
shards. spmd's randomness is counter-based (dropout is a hash of seed, step, layer and
element; the sample order is permutations seeded by seed, shard and epoch), so the RNG state
is the seed and the step. Every dataset carries the SHA-256 of its bytes, and the attributes one of theirs: a
checkpoint damaged on disk is refused, naming what changed, instead of resuming from it.

The file is built in memory and written whole by ``files.write_bytes_atomic``: a full disk is an
error naming the path, never a half-closed HDF5 file (which crashes h5py).
"""

from __future__ import annotations

import hashlib
import io
import json

import h5py
import numpy as np

from ...core.errors import ConfigError, InputError, brief
from ...core.files import HDF5_RECORD, hdf5_record, write_bytes_atomic
from ...io.hdf5 import open_h5

FORMAT = 2  # 1: without checksums
FAILED = "verification_failed"  # set on the checkpoints of a run whose verification failed: what failed
MATCH = ("widths", "dtype", "optimizer", "global_batch", "data_shards", "seed")


def _flatten(layout, flat: np.ndarray) -> np.ndarray:
    """The real parameters of the padded flat buffer, layer 0 first (W then b): the same file whatever the
    layout's padding (a bf16 run's checkpoint resumes a float32 one)."""
    return np.concatenate(layout.real(flat))


def _unflatten(layout, values: np.ndarray, dtype) -> np.ndarray:
    flat = np.zeros(layout.size, dtype=dtype)
    offset = 0
    for view in layout.parts(flat):  # views: written in place
        view[...] = values[offset : offset + view.size].reshape(view.shape)
        offset += view.size
    return flat


def _sha256(data) -> str:
    return hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest()


def _attrs_sha256(step: int, meta: str) -> str:
    return hashlib.sha256(f"{FORMAT}\n{step}\n{meta}".encode()).hexdigest()


def save_checkpoint(
    path: str, layout, weights: np.ndarray, state: dict, step: int, meta: dict, overwrite: bool = False
) -> None:
    """Write a checkpoint; the previous file at ``path`` stays intact until the new one is complete. A file
    there that spmd did not write is refused (InputError) unless ``overwrite``."""
    try:
        image = io.BytesIO()
        with h5py.File(image, "w") as f:
            for name, buf in {"weights": weights, **{f"optimizer/{k}": v for k, v in state.items()}}.items():
                data = _flatten(layout, buf)
                f.create_dataset(name, data=data).attrs["sha256"] = _sha256(data)
            text = json.dumps(meta, sort_keys=True)
            f.attrs.update(format=FORMAT, step=step, meta=text, sha256=_attrs_sha256(step, text))
            f.attrs[HDF5_RECORD] = hdf5_record("spmd run", kind="training checkpoint")
    except OSError as exc:
        raise InputError(f"{path}: cannot write the checkpoint ({exc.strerror or exc})") from None
    write_bytes_atomic(path, image.getvalue(), overwrite, what="the checkpoint")


def mark_failed(path: str, reason: str) -> None:
    """Record in the checkpoint at ``path`` that the run which wrote it failed verification (``reason``), so a
    resume refuses it unless told otherwise (``params.resume_unverified``)."""
    with open(path, "rb") as f:
        image = io.BytesIO(f.read())
    with h5py.File(image, "r+") as f:
        f.attrs[FAILED] = reason
    write_bytes_atomic(path, image.getvalue(), what="the checkpoint")


def load_checkpoint(
    path: str, layout, meta: dict, state_names, unverified: bool = False
) -> tuple[np.ndarray, dict, int, str | None]:
    """Parameters, optimizer buffers and step of a checkpoint made by a compatible run, and why the run that
    wrote it failed verification (None when it did not).

    Raises:
        InputError: missing, unreadable or damaged file, or not a spmd checkpoint.
        ConfigError: made by a run whose model, optimizer, batch or data order differ; or by a run whose
            verification failed, unless ``unverified``.
    """
    with open_h5(path) as f:
        failed = str(f.attrs[FAILED]) if FAILED in f.attrs else None
        if failed is not None and not unverified:
            raise ConfigError(
                f"params.resume: {path} was written by a run whose verification failed ({brief(failed)}"
                f"): resuming would continue a wrong training; set params.resume_unverified: true to "
                f"resume from it anyway (the report says so)"
            )
        try:
            if int(f.attrs["format"]) != FORMAT:
                raise InputError(
                    f"{path}: a checkpoint of format {int(f.attrs['format'])}, which carries no "
                    f"checksums and cannot be verified; this spmd reads format {FORMAT}"
                )
            text, step = str(f.attrs["meta"]), int(f.attrs["step"])
            if f.attrs["sha256"] != _attrs_sha256(step, text):
                raise InputError(f"{path}: damaged: its attributes (step, meta) do not match their checksum")
            stored = json.loads(text)
            for key in MATCH:
                if stored.get(key) != meta.get(key):
                    raise ConfigError(
                        f"params.resume: {path} was made with {key} = {stored.get(key)}, this run "
                        f"has {meta.get(key)}; resuming would not continue the same training"
                    )
            data = {name: _verified(f, path, name) for name in ["weights", *(f"optimizer/{n}" for n in state_names)]}
        except (KeyError, ValueError, OSError) as exc:
            raise InputError(f"{path}: not a complete spmd training checkpoint ({exc})") from None
    weights = data["weights"]
    if weights.size != layout.parameters:
        raise InputError(f"{path}: {weights.size} weights, the model has {layout.parameters}")
    dtype = np.dtype(meta["dtype"])
    return (
        _unflatten(layout, weights, dtype),
        {k: _unflatten(layout, data[f"optimizer/{k}"], dtype) for k in state_names},
        step,
        failed,
    )


def _verified(f, path: str, name: str) -> np.ndarray:
    """Dataset ``name`` of an open checkpoint, its bytes checked against the checksum stored with it."""
    dataset = f[name]
    values = dataset[...]
    if dataset.attrs["sha256"] != _sha256(values):
        raise InputError(
            f"{path}: damaged: dataset {name} does not match its checksum (written at step "
            f"{int(f.attrs['step'])}); resume from another checkpoint"
        )
    return values


def state_digest(weights, state) -> str:
    """SHA-256 of parameters and optimizer state: the replicas must agree on it bit for bit."""
    h = hashlib.sha256(np.ascontiguousarray(weights).tobytes())
    for name in sorted(state):
        h.update(np.ascontiguousarray(state[name]).tobytes())
    return h.hexdigest()


def checkpoint_path(cfg) -> str:
    """Where a run of ``cfg`` writes its checkpoint: ``params.checkpoint.path``, else the output folder's."""
    return cfg.params.checkpoint.path if cfg.params.checkpoint else f"{cfg.output}/checkpoint.h5"
