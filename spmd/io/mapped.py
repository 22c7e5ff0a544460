"""The mapped engine (GPU runs): a rank's byte ranges of a file mapped read-only and page-locked for the GPU once,
at set-up, so each read is one DMA by the copy engine straight from the page cache.

The direct engine moves every byte through a CPU: ``pread`` copies it from the page cache into a page-locked
buffer, and the GPU's copy engine reads it again from there. Two GPUs reading at once share the host's copy
bandwidth, so a second rank on the node reads slower than the first. Mapped, the CPU copies nothing: registering
the ranges is quick, and each rank copies at the copy engine's rate, one rank or two (bench/tools/mapped_h2d.py
measures it; docs/scaling.md has the figures).

The pages stay locked (and in memory) while the run holds them: the cost moves to set-up (report.json ``io``
says how long it took and how many bytes it holds), and the file's pages cannot be evicted until the run ends.
Each read copies what the file holds then (the mapping is shared with the page cache). Registration fails
where the driver cannot lock the pages (e.g. some network file systems): the run is refused with the reason.
"""

from __future__ import annotations

import mmap
import os
import time

import numpy as np

from ..core import xp as xpmod
from ..core.errors import ConfigError, InputError
from .direct import ByteRange

REGISTER_READ_ONLY = 8  # cudaHostRegisterReadOnly: the GPU only reads the pages (a read-only mapping allows no more)
HOST_TO_DEVICE = 1  # cudaMemcpyHostToDevice


class MappedRanges:
    """``ranges`` of the file at ``path`` mapped and page-locked (``where`` names them in messages); ``runtime`` is
    CUDA's runtime API (CuPy's, unless a test hands in its own).

    Attributes:
        nbytes: bytes mapped and locked (the span from the first range to the end of the last).
        seconds: how long mapping and locking took.
    """

    def __init__(self, path: str, ranges: list[ByteRange], where: str, runtime=None):
        self.ranges, self.where = ranges, where
        self.runtime = runtime if runtime is not None else xpmod.cupy.cuda.runtime
        t0 = time.perf_counter()
        start = min(r.file_offset for r in ranges) // mmap.ALLOCATIONGRANULARITY * mmap.ALLOCATIONGRANULARITY
        end = max(r.file_offset + r.nbytes for r in ranges)
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if size < end:  # a mapping past the end of the file faults when read: refuse it here
                raise InputError(
                    f"{where}: the file ends at {size} bytes, inside the data (bytes up to {end} are "
                    f"needed): a short or truncated file"
                )
            self._map = mmap.mmap(fd, end - start, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ, offset=start)
        finally:
            os.close(fd)  # the mapping keeps the file
        self._view = np.frombuffer(self._map, np.uint8)  # for its address: a read-only buffer has no other way
        self._base, self._start, self.nbytes = self._view.ctypes.data, start, end - start
        try:
            self.runtime.hostRegister(self._base, self.nbytes, REGISTER_READ_ONLY)
        except Exception as exc:  # CUDARuntimeError: the driver could not lock these pages
            self._unmap()
            raise ConfigError(f"io.engine: mapped could not page-lock {where} ({exc}): use io.engine: direct") from None
        self.seconds = time.perf_counter() - t0

    def copy_to(self, device_bytes, stream) -> None:
        """Queue the copies of every range into ``device_bytes`` (a CuPy uint8 array, the rank's rows) on
        ``stream``: each range at its ``dest``."""
        for r in self.ranges:
            self.runtime.memcpyAsync(
                device_bytes.data.ptr + r.dest,
                self._base + r.file_offset - self._start,
                r.nbytes,
                HOST_TO_DEVICE,
                stream.ptr,
            )

    def close(self) -> None:
        """Unlock and unmap (the caller has waited for the copies)."""
        if self._view is None:
            return
        self.runtime.hostUnregister(self._base)
        self._unmap()

    def _unmap(self) -> None:
        self._view = None  # the mapping cannot close while a view of it lives
        self._map.close()
