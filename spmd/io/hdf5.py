"""Reading each rank's part of an HDF5 input.

Two layouts: one dataset split by rows (``input.path``), or shard files split by file
(``input.shards``: a list of paths or one glob; more shards than ranks is fine).
Every problem a rank can see becomes an InputError naming the file and dataset.
"""

from __future__ import annotations

import errno
import glob
import os
import stat
from dataclasses import dataclass

import h5py
import numpy as np

from ..core import faults
from ..core.errors import InputError, brief, one_line
from .plan import block_range

LOCKING_HINT = (
    "HDF5 could not lock the file (common on NFS/Lustre): set HDF5_USE_FILE_LOCKING=FALSE in the job's environment"
)


@dataclass(frozen=True)
class Piece:
    """Rows [start, stop) of one dataset in one file."""

    path: str
    dataset: str
    start: int
    stop: int

    @property
    def rows(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class RankInput:
    """What one rank reads: its pieces, and the shape and dtype they assemble into."""

    pieces: tuple[Piece, ...]
    row_shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.pieces)

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.rows, *self.row_shape)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def read_into(self, out: np.ndarray, check_finite: bool = False) -> None:
        """Fill ``out`` (shape ``self.shape``) with one hyperslab read per piece; with
        ``check_finite``, refuse rows holding NaN or infinity (InputError naming them)."""
        offset = 0
        for piece in self.pieces:
            with open_h5(piece.path) as f:
                try:
                    f[piece.dataset].read_direct(
                        out, np.s_[piece.start : piece.stop], np.s_[offset : offset + piece.rows]
                    )
                except OSError as exc:  # e.g. a corrupt chunk: only this rank sees it
                    raise InputError(
                        f"{piece.path}:{piece.dataset} rows {piece.start}-{piece.stop}: read failed ({exc})"
                    ) from None
            rows = out[offset : offset + piece.rows]
            faults.poison_rows(rows)
            if check_finite:
                require_finite(rows, f"{piece.path}:{piece.dataset}", piece.start)
            offset += piece.rows

    def describe(self) -> str:
        """Which files and rows this rank reads, for messages."""
        return "; ".join(f"{p.path}:{p.dataset} rows {p.start}-{p.stop}" for p in self.pieces)


def require_finite(rows: np.ndarray, where: str, first_row: int) -> None:
    """Raise InputError naming the rows of ``rows`` (file rows from ``first_row``) that hold NaN
    or infinity (``check_finite: true``)."""
    finite = np.isfinite(rows)
    if finite.all():
        return
    bad = np.flatnonzero(~finite.reshape(len(rows), -1).all(axis=1)) + first_row
    raise InputError(f"{where} rows {bad[0]}-{bad[-1] + 1}: {len(bad)} row(s) hold NaN or infinity after the read")


FILE_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def open_h5(path: str, mode: str = "r") -> h5py.File:
    """Open an HDF5 file, turning every failure into an InputError that says what to do. Only a
    regular file is read: HDF5 opening a FIFO blocks in C, holding the GIL, until a writer comes."""
    if mode == "r":
        try:
            info = os.stat(path)
        except OSError as exc:  # missing, a loop of symbolic links, no permission
            raise InputError(f"{path}: {'no such file' if exc.errno == errno.ENOENT else exc.strerror}") from None
        if not stat.S_ISREG(info.st_mode):
            kind = FILE_KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise InputError(f"{path}: {kind}, not an HDF5 file")
    try:
        return h5py.File(path, mode)
    except OSError as exc:
        text = str(exc)
        if "unable to lock file" in text.lower() or "file locking" in text.lower():
            raise InputError(f"{path}: {LOCKING_HINT} ({text})") from None
        if "truncated file" in text:
            raise InputError(
                f"{path}: truncated HDF5 file, shorter than its header says: copy it again ({text})"
            ) from None
        if mode == "r":
            raise InputError(f"{path}: not an HDF5 file, or truncated/corrupt ({text})") from None
        raise InputError(f"{path}: cannot open for writing ({text})") from None


def dataset_info(path: str, name: str, dtypes: tuple[str, ...], ndims: tuple[int, ...]):
    """Rows, per-row shape and dtype of dataset ``name`` in ``path``, checked.

    Raises:
        InputError: missing file or dataset, not a dataset, unsupported dtype or rank.
    """
    with open_h5(path) as f:
        obj = _dataset(f, path, name)
        _require_storage(obj, path, name)
        dtype = obj.dtype
        if dtype.name not in dtypes:
            raise InputError(f"{path}:{name}: dtype {dtype} is not supported (use {' or '.join(dtypes)})")
        if obj.ndim not in ndims:
            raise InputError(
                f"{path}:{name}: {obj.ndim}-D array of shape {obj.shape}; "
                f"expected {' or '.join(f'{d}-D' for d in ndims)}"
            )
        if 0 in obj.shape:
            raise InputError(f"{path}:{name}: empty dataset (shape {obj.shape})")
        return obj.shape[0], tuple(obj.shape[1:]), dtype


def _dataset(f: h5py.File, path: str, name: str) -> h5py.Dataset:
    """Dataset ``name`` of the open file, every way of not being one named: missing, a group, a soft link to
    nothing, an external link whose file is gone, a loop of links."""
    where = f"{one_line(path)}: {brief(name)}"
    try:
        link = f.get(name, getlink=True)
        obj = f.get(name)
    except (RuntimeError, KeyError, OSError, ValueError) as exc:  # a loop of soft links, a broken path
        raise InputError(f"{where} cannot be followed ({one_line(exc)}): a loop of links, or a broken one") from None
    if obj is None:
        if isinstance(link, h5py.ExternalLink):
            raise InputError(
                f"{where} is an external link to {one_line(link.filename)}:{one_line(link.path)}, which "
                f"cannot be opened (a missing file, or no such dataset there)"
            )
        if isinstance(link, h5py.SoftLink):
            raise InputError(f"{where} is a soft link to {one_line(link.path)}, which does not exist")
        have = ", ".join(brief(k) for k in sorted(f.keys())[:20]) or "nothing"
        raise InputError(f"{one_line(path)}: no dataset {brief(name)} (the file has: {have})")
    if not isinstance(obj, h5py.Dataset):
        raise InputError(f"{where} is a group, not a dataset")
    return obj


def _require_storage(obj: h5py.Dataset, path: str, name: str) -> None:
    """Refuse a dataset whose bytes live in files that are not there: HDF5 reads what a missing source of a
    virtual dataset maps as its fill value (zeros), which would then pass for data."""
    where = f"{one_line(path)}:{brief(name)[1:-1]}"
    folder = os.path.dirname(os.path.abspath(path))
    if obj.is_virtual:
        for source in obj.virtual_sources():
            if source.file_name == ".":
                continue  # a source in the same file
            found = _found(source.file_name, folder)
            if found is None:
                raise InputError(
                    f"{where}: a virtual dataset whose source file {one_line(source.file_name)} is missing "
                    f"(HDF5 would read its rows as the fill value, not as data)"
                )
            with open_h5(found) as src:
                if not isinstance(src.get(source.dset_name), h5py.Dataset):
                    raise InputError(
                        f"{where}: a virtual dataset whose source {one_line(source.file_name)} has no "
                        f"dataset {brief(source.dset_name)}"
                    )
    plist = obj.id.get_create_plist()
    prefix = os.environ.get("HDF5_EXTFILE_PREFIX", "")
    for index in range(plist.get_external_count()):
        file_name, offset, size = plist.get_external(index)
        file_name = os.fsdecode(file_name)
        found = os.path.join(prefix.replace("${ORIGIN}", folder), file_name)  # where HDF5 looks (H5Pset_efile_prefix)
        if not os.path.isfile(found):
            beside = os.path.join(folder, file_name)
            hint = (
                f"; it is beside the file: run from {one_line(folder)}, or set HDF5_EXTFILE_PREFIX='${{ORIGIN}}'"
                if os.path.isfile(beside)
                else ""
            )
            raise InputError(
                f"{where}: its bytes are stored in {one_line(file_name)}, which HDF5 looks for from "
                f"{one_line(os.path.abspath(prefix.replace('${ORIGIN}', folder) or '.'))} and does not find"
                f"{hint}"
            )
        if size != h5py.h5f.UNLIMITED and os.path.getsize(found) < offset + size:
            raise InputError(
                f"{where}: its external file {one_line(file_name)} is shorter than the "
                f"{offset + size} bytes the dataset maps"
            )


def _found(name: str, folder: str) -> str | None:
    """Where HDF5 finds a file a dataset names: as given (from the working directory), or beside the file."""
    for candidate in (name, os.path.join(folder, name)):
        if os.path.isfile(candidate):
            return candidate
    return None


def expand_shards(patterns: tuple[str, ...]) -> list[str]:
    """Shard paths from a list of paths, or from one glob (sorted)."""
    if len(patterns) == 1 and glob.has_magic(patterns[0]):
        paths = sorted(glob.glob(patterns[0]))
        if not paths:
            raise InputError(f"input.shards: no file matches {patterns[0]!r}")
        return paths
    seen: dict[str, str] = {}
    for path in patterns:  # one file listed twice would be counted twice, and verified
        real = os.path.realpath(path)
        if real in seen:
            raise InputError(f"input.shards: {path} and {seen[real]} are the same file")
        seen[real] = path
    return list(patterns)


def plan_rank_input(
    input_cfg, shard_paths: list[str] | None, rank: int, size: int, dtypes: tuple[str, ...], ndims: tuple[int, ...]
) -> RankInput:
    """Decide and check what ``rank`` of ``size`` reads.

    Args:
        input_cfg: the config's ``input`` section.
        shard_paths: the expanded shard list (same on every rank), or None for ``input.path``.
        dtypes, ndims: what the workload accepts.
    """
    if shard_paths is None:
        rows, row_shape, dtype = dataset_info(input_cfg.path, input_cfg.dataset, dtypes, ndims)
        if rows < size:
            raise InputError(
                f"{input_cfg.path}:{input_cfg.dataset}: {rows} rows cannot be split over "
                f"{size} ranks (each rank needs at least one row)"
            )
        start, stop = block_range(rows, size, rank)
        return RankInput((Piece(input_cfg.path, input_cfg.dataset, start, stop),), row_shape, dtype)

    if len(shard_paths) < size:
        raise InputError(
            f"input.shards: {len(shard_paths)} shard files for {size} ranks (each rank needs at least one shard)"
        )
    first, last = block_range(len(shard_paths), size, rank)
    pieces, layout = [], None
    for path in shard_paths[first:last]:
        rows, row_shape, dtype = dataset_info(path, input_cfg.dataset, dtypes, ndims)
        if layout is not None and layout != (row_shape, dtype):
            raise InputError(
                f"{path}:{input_cfg.dataset}: rows of shape {row_shape} {dtype} differ from "
                f"the other shards' {layout[0]} {layout[1]}"
            )
        layout = (row_shape, dtype)
        pieces.append(Piece(path, input_cfg.dataset, 0, rows))
    return RankInput(tuple(pieces), layout[0], layout[1])
