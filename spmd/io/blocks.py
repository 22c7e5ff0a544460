"""Reading a 2-D block of a dataset, and writing a distributed result back to HDF5.

A result is written with serial h5py: rank 0 creates the file under a unique temporary name and
reserves its space, the ranks take turns writing their blocks, rank 0 renames it into place. Each
turn is agreed, so a rank that cannot write ends the job instead of leaving the next one waiting.
"""

from __future__ import annotations

import numpy as np

from ..core import faults
from ..core.errors import InputError, SpmdError
from ..core.files import HDF5_RECORD, discard, hdf5_record, publish, require_replaceable, reserve, temp_beside
from ..core.units import fmt_bytes
from .direct import as_bytes, byte_ranges, read_pieces, split
from .hdf5 import open_h5, require_finite


def read_block(
    path: str, dataset: str, block, out: np.ndarray, out_sel=None, check_finite: bool = False, io=None, threads: int = 1
) -> str:
    """Fill ``out`` (or its part ``out_sel``, a tuple of slices) with rows [r0, r1) and columns
    [c0, c1) of ``path:dataset``, straight into place: by the direct engine (config ``io``, on ``threads``
    threads) when the block is whole rows of a dataset stored as plain bytes and ``out`` is all of it, else one
    hyperslab read by h5py. With ``check_finite``, refuse a block holding NaN or infinity (InputError naming the
    rows). Returns the engine that read it."""
    engine = "h5py"
    if io is not None and io.engine != "h5py" and out_sel is None and out.flags.c_contiguous:
        engine = read_rows_direct(path, dataset, block, out, io, threads)
    if engine == "h5py":
        with open_h5(path) as f:
            try:
                f[dataset].read_direct(out, np.s_[block.r0 : block.r1, block.c0 : block.c1], out_sel)
            except OSError as exc:  # e.g. a corrupt chunk: only this rank sees it
                raise InputError(f"{path}:{dataset} {block.describe()}: read failed ({exc})") from None
    rows = out[out_sel] if out_sel is not None else out
    faults.poison_rows(rows)
    if check_finite:
        require_finite(rows, f"{path}:{dataset} columns {block.c0}-{block.c1}", block.r0)
    return engine


def read_rows_direct(path: str, dataset: str, block, out: np.ndarray, io, threads: int) -> str:
    """``block`` into ``out`` by the direct engine when it is whole rows stored as plain bytes: "direct", else
    "h5py" (nothing read)."""
    ranges, why = byte_ranges(path, dataset, block.r0, block.r1)
    if why is not None or block.c0 != 0 or sum(r.nbytes for r in ranges) != out.nbytes:  # not all of each row
        return "h5py"
    where = f"{path}:{dataset} {block.describe()}"
    read_pieces(path, split(ranges, max(1, int(io.buffer_mb * 2**20))), as_bytes(out), threads, where)
    return "direct"


def save_blocks(
    ctx, path: str, dataset: str, shape: tuple[int, ...], dtype, block, local, overwrite: bool = False
) -> str:
    """Write every rank's ``local`` array (a host array, or None for a rank holding no part)
    into ``block`` of a new ``shape`` dataset; collective. Returns the path written.

    Rank 0 makes a temporary file of a unique name beside ``path`` and reserves the disk space the
    dataset needs (a full disk is refused before any write); the ranks write their blocks in turn;
    rank 0 renames the file into place. Any failure removes the temporary file on every path. A file at
    ``path`` that spmd did not write is refused (InputError) unless ``overwrite``.
    """
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize

    def create() -> str:
        require_replaceable(
            path, "the result", overwrite, "remove it, choose another params.save.path, or set overwrite: true"
        )
        tmp = None
        try:
            tmp = temp_beside(path)
            with open_h5(str(tmp), "w") as f:
                f.create_dataset(dataset, shape=shape, dtype=dtype)
                f.attrs[HDF5_RECORD] = hdf5_record("spmd run", kind="saved result", dataset=dataset)
            reserve(tmp, nbytes)
        except (OSError, InputError) as exc:
            if tmp is not None:
                discard(tmp)
            raise InputError(f"{path}: cannot write the result ({fmt_bytes(nbytes)}): {_cause(exc)}") from None
        return str(tmp)

    def write_mine(tmp: str) -> None:
        if local is None:
            return
        try:
            with open_h5(tmp, "a") as f:
                f[dataset][block.r0 : block.r1, block.c0 : block.c1] = local
        except (OSError, InputError) as exc:
            raise InputError(f"{path}: cannot write rank {ctx.rank}'s block: {_cause(exc)}") from None

    def finish(tmp: str) -> None:
        try:
            publish(tmp, path, overwrite)
        except OSError as exc:
            raise InputError(f"{path}: cannot write the result: {_cause(exc)}") from None

    tmp = ctx.agree(create, root_only=True)
    try:
        for turn in range(ctx.size):
            ctx.agree(lambda: write_mine(tmp) if ctx.rank == turn else None)
        ctx.agree(finish, tmp, root_only=True)
    except SpmdError:  # agreed on every rank: nothing half-written stays behind
        if ctx.rank == 0:
            discard(tmp)
        raise
    return path


def _cause(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)
