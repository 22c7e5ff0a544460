"""A rank's rows read by the engine its config asks for (``io``), and on a GPU copied to the device piece by
piece as the pieces land, so the copy hides behind the read.

The engines: ``direct`` (io.direct, parallel positional reads of the dataset's bytes) wherever the layout allows it,
and ``h5py`` (one hyperslab read) for the rest (filtered, byte-swapped or tiled datasets, or ``engine: h5py``).
``auto`` is ``direct`` where it can be, and on a GPU run ``mapped`` where that is safe (io.choose: the page cache
holds the rank's bytes and they may be locked); the report names the engine of every piece, why h5py read one, and
why auto chose as it did.
``kvikio`` (optional extra ``gds``) reads the same byte ranges straight into GPU memory through KvikIO
(GPUDirect Storage where the file system has it, KvikIO's own threads and bounce buffers otherwise); ``mapped``
(io.mapped) page-locks the file's pages holding them at set-up and has the GPU copy them from the page cache,
no CPU copy. Under both the host buffer stays unread (``host_current``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core import faults
from ..core import xp as xpmod
from ..core.cpus import reader_cpus, reader_threads
from ..core.errors import ConfigError, InputError
from .choose import auto_engine, lock_limit, node_memory, resident_bytes
from .direct import ByteRange, as_bytes, byte_ranges, merge, read_pieces, split
from .hdf5 import Piece, open_h5, require_finite
from .mapped import MappedRanges


@dataclass(frozen=True)
class Part:
    """One piece of the rank's input and how it is read: bytes [offset, offset + nbytes) of the rank's buffer."""

    piece: Piece
    engine: str
    why: str | None  # why h5py reads it, when it does
    reads: tuple[ByteRange, ...]
    offset: int
    nbytes: int


GPU_ENGINES = ("kvikio", "mapped")  # read straight into GPU memory: whole byte ranges, no host buffer


def load_kvikio():
    """KvikIO (the optional extra ``gds``), or ConfigError saying how to get it."""
    try:
        import kvikio
        import kvikio.defaults  # a submodule: `import kvikio` alone leaves it out (KvikIO 26.10)
    except Exception as exc:  # not installed, or a CUDA library it loads is missing
        raise ConfigError(
            f"io.engine: kvikio is not usable here ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:160] if str(exc) else ''}): install it with "
            f"pip install 'spmd[gds]' (CUDA 13; 'spmd[gds12]' for CUDA 12), or use io.engine: direct"
        ) from None
    return kvikio


class RowReader:
    """Reads a ``RankInput`` (io.hdf5) with ``io_cfg`` (config ``io``) on ``threads`` threads (reader_threads).

    Attributes:
        host_current: whether the last read filled the host buffer everywhere (not under kvikio or mapped).
    """

    def __init__(self, plan, io_cfg, threads: int | None = None, gpu: bool = False, ranks_on_node: int = 1):
        self.plan, self.cfg = plan, io_cfg
        self.threads = threads or reader_threads(io_cfg.threads)  # one rank on the node, unless told
        self._kvikio = load_kvikio() if io_cfg.engine == "kvikio" else None
        if io_cfg.engine == "mapped" and xpmod.gpu_count() == 0:
            raise ConfigError(
                "io.engine: mapped page-locks the file for a GPU's copies: no GPU here (use io.engine: direct)"
            )
        self.host_current = True
        self._mapped: dict[int, MappedRanges] = {}  # by part, under io.engine: mapped
        self._stream = None
        self._row_bytes = row_bytes = plan.dtype.itemsize * math.prod(plan.row_shape)
        self._piece_bytes = max(1, int(io_cfg.buffer_mb * 2**20) // row_bytes) * row_bytes  # whole rows per read
        if self._kvikio:  # KvikIO's own pool reads on 1 thread in 4 MiB tasks unless told: the same as direct
            self._kvikio.defaults.set({"num_threads": self.threads, "task_size": self._piece_bytes})
        self.auto = None  # under io.engine auto on a GPU run: why it reads with mapped or direct (choose.py)
        # each piece's byte ranges in the file, placed in the rank's buffer, and why h5py reads it (once per reader)
        ranges = self._piece_ranges() if io_cfg.engine != "h5py" else None
        engine = io_cfg.engine
        if engine == "auto" and gpu:
            total = sum(r.nbytes for moved, _ in ranges for r in moved)
            resident = sum(resident_bytes(p.path, moved) for p, (moved, _) in zip(plan.pieces, ranges))
            engine, self.auto = auto_engine(total, resident, ranks_on_node, node_memory(), lock_limit())
        try:
            self._build(engine, ranges)
        except ConfigError as exc:
            if self.auto is None or engine != "mapped":
                raise
            self.close()  # the driver would not lock these pages: auto reads them with direct instead
            self.auto = f"mapped could not lock the pages ({exc})"
            self._build("direct", ranges)

    def _piece_ranges(self) -> list[tuple[list[ByteRange], str | None]]:
        out, offset = [], 0
        for piece in self.plan.pieces:
            ranges, why = byte_ranges(piece.path, piece.dataset, piece.start, piece.stop)
            out.append(([ByteRange(r.file_offset, r.nbytes, r.dest + offset) for r in ranges], why))
            offset += piece.rows * self._row_bytes
        return out

    def _build(self, engine: str, ranges) -> None:
        """The parts read by ``engine`` (h5py where the layout needs it, or everywhere when ``ranges`` is None);
        mapped's pages locked here."""
        parts, offset = [], 0
        for i, piece in enumerate(self.plan.pieces):
            nbytes, reads, why = piece.rows * self._row_bytes, (), "io.engine: h5py"
            if engine != "h5py":
                moved, why = ranges[i]
                # KvikIO cuts a read into tasks on its own threads, and one DMA copies a mapped range: whole ranges
                reads = tuple(merge(moved) if engine in GPU_ENGINES else split(moved, self._piece_bytes))
            used = (engine if engine in GPU_ENGINES else "direct") if reads else "h5py"
            parts.append(Part(piece, used, None if reads else why, reads, offset, nbytes))
            offset += nbytes
        self.parts = parts
        try:
            for i, part in enumerate(parts):
                if part.engine == "mapped" and part.nbytes:
                    self._mapped[i] = MappedRanges(part.piece.path, list(part.reads), self._where(part))
        except BaseException:
            self.close()
            raise
        if self._mapped:
            self._stream = xpmod.cupy.cuda.Stream(non_blocking=True)

    @property
    def fills_host(self) -> bool:
        """Whether a read writes the host buffer (any piece not read straight into GPU memory)."""
        return any(p.engine not in GPU_ENGINES for p in self.parts)

    @staticmethod
    def _where(part: Part) -> str:
        return f"{part.piece.path}:{part.piece.dataset} rows {part.piece.start}-{part.piece.stop}"

    def close(self) -> None:
        """Unlock and unmap what io.engine: mapped holds (after the last read's copies are done)."""
        if self._stream is not None:
            self._stream.synchronize()
        for mapping in self._mapped.values():
            mapping.close()
        self._mapped, self._stream = {}, None

    def engines(self) -> list[dict]:
        """What read each piece (report.json ``io``)."""
        return [
            {
                "source": self._where(p),
                "engine": p.engine,
                **({"why_h5py": p.why} if not p.reads else self._threads() if p.engine == "direct" else {}),
                **(
                    {"locked_bytes": self._mapped[i].nbytes, "lock_s": self._mapped[i].seconds}
                    if i in self._mapped
                    else {}
                ),
                **({"auto": self.auto} if self.auto else {}),
            }
            for i, p in enumerate(self.parts)
        ]

    def _threads(self) -> dict:
        """The direct engine's threads, and their CPUs where they run beyond the rank's binding (io.cpus)."""
        cpus = reader_cpus()
        return {"threads": self.threads, **({"reader_cpus": len(cpus)} if cpus else {})}

    def read(self, host: np.ndarray | None, check_finite: bool = False, landed=None, device=None) -> None:
        """Fill ``host`` (shape ``plan.shape``, C-contiguous); ``landed(lo, hi)`` is called for each range of its
        bytes as soon as they hold their final values (a copy onwards may start). Under kvikio and mapped the rows
        go straight into ``device`` (a CuPy array of the same shape) instead, and ``host`` may be None where no
        piece is read through it (``fills_host``). With ``check_finite``, refuse rows holding NaN or infinity
        (InputError naming them)."""
        if host is None and self.fills_host:
            raise ValueError("a piece of this input is read through host memory: a host buffer is needed")
        buffer = as_bytes(host) if host is not None else None
        self.host_current = True
        # an injected NaN lands after the read: pieces are handed on only once it is in place
        pass_on = landed if not faults.poisoning() else None
        for i, part in enumerate(self.parts):
            where = self._where(part)
            first = part.offset // self._row_bytes
            rows = host[first : first + part.piece.rows] if host is not None else None
            if part.engine in GPU_ENGINES:
                if device is None:
                    raise ConfigError(f"io.engine: {part.engine} reads into GPU memory: use it with device: gpu")
                if part.engine == "kvikio":
                    self._read_kvikio(part, device, where)
                elif i in self._mapped:  # one DMA per range from the locked pages, waited for here: the read
                    # after the device work queued so far (e.g. poisoning the rows), which its own stream skips
                    self._stream.wait_event(xpmod.cupy.cuda.get_current_stream().record())
                    self._mapped[i].copy_to(device.reshape(-1).view(np.uint8), self._stream)
                    self._stream.synchronize()
                rows = device[first : first + part.piece.rows]
                faults.poison_rows(rows)
                if check_finite:
                    require_finite(xpmod.to_host(rows), f"{part.piece.path}:{part.piece.dataset}", part.piece.start)
                self.host_current = False
                continue
            if part.reads:
                read_pieces(
                    part.piece.path,
                    list(part.reads),
                    buffer,
                    self.threads,
                    where,
                    (lambda r: pass_on(r.dest, r.dest + r.nbytes)) if pass_on else None,
                )
            else:
                with open_h5(part.piece.path) as f:
                    try:
                        f[part.piece.dataset].read_direct(
                            host, np.s_[part.piece.start : part.piece.stop], np.s_[first : first + part.piece.rows]
                        )
                    except OSError as exc:  # e.g. a corrupt chunk: only this rank sees it
                        raise InputError(f"{where}: read failed ({exc})") from None
                if pass_on:
                    pass_on(part.offset, part.offset + part.nbytes)
            faults.poison_rows(rows)
            if landed is not None and pass_on is None:
                landed(part.offset, part.offset + part.nbytes)
            if check_finite:
                require_finite(rows, f"{part.piece.path}:{part.piece.dataset}", part.piece.start)

    def _read_kvikio(self, part: Part, device, where: str) -> None:
        """The part's byte ranges straight into ``device`` through KvikIO; every read is waited for before the
        first failure is raised."""
        target = device.reshape(-1).view(np.uint8)
        failure = None
        with self._kvikio.CuFile(part.piece.path, "r") as f:
            futures = [(r, f.pread(target[r.dest : r.dest + r.nbytes], r.nbytes, r.file_offset)) for r in part.reads]
            for r, future in futures:
                try:
                    got = future.get()
                except Exception as exc:  # an I/O error KvikIO reports
                    failure = failure or InputError(
                        f"{where}: KvikIO read of {r.nbytes} bytes at offset {r.file_offset} failed ({exc})"
                    )
                    continue
                if got != r.nbytes:
                    failure = failure or InputError(
                        f"{where}: KvikIO read {got} of the {r.nbytes} bytes at offset "
                        f"{r.file_offset}: a short or truncated file"
                    )
        if failure is not None:
            raise failure
