"""The direct read engine: a rank's rows of an uncompressed HDF5 dataset as file byte ranges, read with
parallel positional reads.

h5py reads a hyperslab on one thread, through HDF5's own buffering, several times slower from the page cache than
threads of ``pread`` on the same chunks (bench/tools/read_paths.py measures both). So for a dataset HDF5 stores as
plain bytes (contiguous, or chunked with whole rows per chunk, no filter, native byte order) the file offsets of the
rank's rows come from h5py's low-level API (the dataset's offset, each chunk's address) and are read straight into
the destination buffer, piece by piece, on a thread pool; each piece is handed on as soon as it lands (to a
host-to-device copy, io.reader). Anything else is refused with the reason, and read by h5py.
"""

from __future__ import annotations

import math
import os
import queue
import threading
from dataclasses import dataclass

import h5py
import numpy as np

from ..core.cpus import pin_reader_thread
from ..core.errors import InputError
from .hdf5 import open_h5


@dataclass(frozen=True)
class ByteRange:
    """``nbytes`` at ``file_offset`` of the file, for bytes [dest, dest + nbytes) of the rank's buffer."""

    file_offset: int
    nbytes: int
    dest: int


def byte_ranges(path: str, dataset: str, start: int, stop: int) -> tuple[list[ByteRange], str | None]:
    """Where rows [start, stop) of ``path:dataset`` lie in the file: (ranges in destination order, None), or
    ([], why the direct engine cannot read this dataset). InputError for rows the file does not hold (a chunk
    never written, storage never allocated)."""
    with open_h5(path) as f:
        ds = f[dataset]
        plist = ds.id.get_create_plist()
        if plist.get_nfilters():
            return [], "filtered (compressed or shuffled): HDF5 decodes it"
        if not ds.dtype.isnative:
            return [], f"byte order of {ds.dtype.str} is not this machine's"
        if plist.get_external_count():
            return [], "external storage (its bytes live in other files): HDF5 reads it"
        row_bytes = ds.dtype.itemsize * math.prod(ds.shape[1:])
        where = f"{path}:{dataset}"
        layout = plist.get_layout()
        if layout == h5py.h5d.CONTIGUOUS:
            offset = ds.id.get_offset()
            if offset is None:
                raise InputError(f"{where} rows {start}-{stop}: no data stored (the dataset was never written)")
            return [ByteRange(offset + start * row_bytes, (stop - start) * row_bytes, 0)], None
        if layout != h5py.h5d.CHUNKED:
            return [], "neither contiguous nor chunked (compact, external or virtual storage)"
        if tuple(ds.chunks[1:]) != tuple(ds.shape[1:]):
            return [], f"chunks of shape {ds.chunks} split its rows"
        per_chunk = ds.chunks[0]
        ranges: list[ByteRange] = []
        for first in range(start - start % per_chunk, stop, per_chunk):
            info = ds.id.get_chunk_info_by_coord((first,) + (0,) * (ds.ndim - 1))
            lo, hi = max(start, first), min(stop, first + per_chunk)
            if info.byte_offset is None:
                raise InputError(f"{where} rows {lo}-{hi}: the chunk holding them was never written")
            if info.size != per_chunk * row_bytes:
                raise InputError(
                    f"{where} rows {lo}-{hi}: the chunk holds {info.size} bytes, "
                    f"{per_chunk * row_bytes} expected: a damaged file"
                )
            ranges.append(
                ByteRange(info.byte_offset + (lo - first) * row_bytes, (hi - lo) * row_bytes, (lo - start) * row_bytes)
            )
        return merge(ranges), None


def merge(ranges: list[ByteRange]) -> list[ByteRange]:
    """Neighbouring ranges that are neighbours in the file too, as one."""
    out: list[ByteRange] = []
    for r in ranges:
        last = out[-1] if out else None
        if last and last.file_offset + last.nbytes == r.file_offset and last.dest + last.nbytes == r.dest:
            out[-1] = ByteRange(last.file_offset, last.nbytes + r.nbytes, last.dest)
        else:
            out.append(r)
    return out


def split(ranges: list[ByteRange], piece_bytes: int) -> list[ByteRange]:
    """The ranges cut into pieces of at most ``piece_bytes``: the unit of one read and of one copy onwards."""
    return [
        ByteRange(r.file_offset + at, min(piece_bytes, r.nbytes - at), r.dest + at)
        for r in ranges
        for at in range(0, r.nbytes, piece_bytes)
    ]


def pread_into(fd: int, buffer: memoryview, piece: ByteRange, where: str) -> None:
    """Read ``piece`` into ``buffer`` (the rank's bytes); InputError on a short file or an I/O error."""
    done = 0
    while done < piece.nbytes:
        try:
            got = os.preadv(fd, [buffer[piece.dest + done : piece.dest + piece.nbytes]], piece.file_offset + done)
        except OSError as exc:
            raise InputError(
                f"{where}: read of {piece.nbytes} bytes at offset {piece.file_offset} failed ({exc.strerror or exc})"
            ) from None
        if got == 0:
            raise InputError(
                f"{where}: the file ends at {os.fstat(fd).st_size} bytes, inside the data (bytes "
                f"{piece.file_offset}-{piece.file_offset + piece.nbytes} are needed): a short or "
                f"truncated file"
            )
        done += got


def read_pieces(path: str, pieces: list[ByteRange], buffer: memoryview, threads: int, where: str, landed=None) -> None:
    """Read every piece of ``path`` into ``buffer`` on ``threads`` threads, each reading a contiguous run of the
    pieces in order: sequential access per thread keeps the kernel's read-ahead working (pieces dealt out in
    turn read a cold file slower on the CI machine's disk). ``landed(piece)`` is called on this
    thread as each piece completes (the caller's copy onwards); without it a thread reads its whole run in as
    few calls as the file allows (one plain pread, on one thread). The first failure stops every thread before its
    next piece and is raised once all have stopped (none writes into ``buffer`` afterwards)."""
    count = max(1, min(threads, len(pieces)))
    runs = [pieces[i * len(pieces) // count : (i + 1) * len(pieces) // count] for i in range(count)]
    if landed is None:  # nothing waits for single pieces: each thread reads its run in as few calls as it can
        runs = [merge(run) for run in runs]
    finished: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()
    fd = os.open(path, os.O_RDONLY)

    def work(run: list[ByteRange]) -> None:
        pin_reader_thread()  # io.threads: auto may give the readers more CPUs than the rank is bound to
        for piece in run:
            if stop.is_set():
                return
            try:
                pread_into(fd, buffer, piece, where)
            except BaseException as exc:  # handed to the calling thread, which raises it
                finished.put(exc)
                return
            finished.put(piece)

    workers = [threading.Thread(target=work, args=(run,), name="spmd-read", daemon=True) for run in runs]
    started: list[threading.Thread] = []  # a Ctrl-C may land between two starts: join only those that run
    try:
        for worker in workers:
            worker.start()
            started.append(worker)
        for _ in range(sum(map(len, runs))):
            item = finished.get()
            if isinstance(item, BaseException):
                raise item
            if landed is not None:
                landed(item)
    finally:
        stop.set()
        for worker in started:
            worker.join()
        os.close(fd)


def as_bytes(array: np.ndarray) -> memoryview:
    """A writable byte view of a C-contiguous host array."""
    if not array.flags.c_contiguous:
        raise ValueError("the direct engine reads into C-contiguous buffers only")
    return memoryview(array.reshape(-1).view(np.uint8))
