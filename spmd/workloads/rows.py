"""A rank's rows of the config's ``input``, read each repeat in the timed phases: public as ``spmd.InputRows``.

One dataset split by rows over the ranks (``input.path``) or shard files split by file (``input.shards``);
1-D or 2-D. Set up collectively (every failure agreed, the memory checked before allocating); each repeat
``read`` fills a host buffer (page-locked on a GPU) in the ``read`` phase with the engine of config ``io``
(io.reader), waits for every rank (``wait``) and has it on the device (``h2d``), returning the array the rank
computes on. On a GPU each piece is copied to the device on a copy stream as soon as it lands, so ``h2d`` is
the part of the copy the read did not hide, and ``h2d_overlapped`` the part it did. Under io.engine kvikio or
mapped the read lands in GPU memory itself: no host buffer is allocated, and ``h2d`` is nil.
"""

from __future__ import annotations

import numpy as np

from ..core import xp as xpmod
from ..core.cpus import reader_threads
from ..core.errors import ConfigError, InputError
from ..core.memory import require_memory
from ..io.hdf5 import expand_shards, open_h5, plan_rank_input
from ..io.reader import GPU_ENGINES, RowReader
from .base import read_then_wait

FLOATS = ("float32", "float64")
NUMBERS = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


class InputRows:
    """This rank's rows of ``cfg.input``, and what the others hold.

    Attributes:
        plan: the pieces this rank reads (``io.hdf5.RankInput``): ``rows``, ``row_shape``, ``dtype``, ``nbytes``.
        sources: every (file, dataset) of the input, in order.
        global_rows: rows over all ranks; rank_bytes: bytes each rank holds, by rank.
    """

    def __init__(self, ctx, cfg, dtypes: tuple[str, ...] = FLOATS, ndims: tuple[int, ...] = (1, 2)):
        self.ctx, self.check_finite = ctx, cfg.check_finite
        shards = ctx.agree(expand_shards, cfg.input.shards, root_only=True) if cfg.input.shards is not None else None
        self.sources = [(p, cfg.input.dataset) for p in (shards or [cfg.input.path])]
        self._plan_args = (cfg.input, shards, dtypes, ndims)
        self.plan = ctx.agree(plan_rank_input, cfg.input, shards, ctx.rank, ctx.size, dtypes, ndims)
        layouts = ctx.comm.allgather((self.plan.row_shape, self.plan.dtype.str, self.plan.rows))
        for rank, (row_shape, dtype, _) in enumerate(layouts):
            if (row_shape, dtype) != layouts[0][:2]:
                raise ctx.collective_error(
                    InputError,
                    rank,
                    f"{self.plan.describe()}: rows of shape {row_shape} {dtype} differ from rank 0's {layouts[0][:2]}",
                )
        self.global_rows = sum(rows for _, _, rows in layouts)
        self.rank_bytes = [rows * self.plan.nbytes // max(self.plan.rows, 1) for _, _, rows in layouts]
        self.reader = ctx.agree(self._reader, cfg.io)
        self.host, self.device = ctx.agree(self._allocate)
        self.copy_stream = ctx.xp.cuda.Stream(non_blocking=True) if self.device is not None else None

    def _reader(self, io_cfg) -> RowReader:
        if io_cfg.engine in GPU_ENGINES and self.ctx.device != "gpu":
            raise ConfigError(
                f"io.engine: {io_cfg.engine} reads into GPU memory; this run is on the CPU (use io.engine: direct)"
            )
        threads = reader_threads(io_cfg.threads, self.ctx.local_size, self.ctx.local_rank)
        return RowReader(self.plan, io_cfg, threads, gpu=self.ctx.device == "gpu", ranks_on_node=self.ctx.local_size)

    def _allocate(self):
        gpu = self.ctx.device == "gpu"
        what = f"{self.plan.describe()}: the shard's rows"
        if self.reader.fills_host:  # not under io.engine kvikio or mapped: every piece goes straight to the GPU
            require_memory(self.plan.nbytes, "host", self.ctx, what)
        elif any(p.engine == "mapped" for p in self.reader.parts):  # its pages held locked in the page cache
            require_memory(self.plan.nbytes, "host", self.ctx, f"{what}, page-locked in the page cache")
        if gpu:
            require_memory(self.plan.nbytes, "device", self.ctx, what)
        host = xpmod.empty_host(self.plan.shape, self.plan.dtype, pinned=gpu) if self.reader.fills_host else None
        device = self.ctx.xp.empty(self.plan.shape, self.plan.dtype) if gpu else None
        return host, device

    def poison(self) -> None:
        """Fill the buffers with what no read writes (NaN, or an integer type's largest value): rows the read
        misses show."""
        value = np.nan if self.plan.dtype.kind == "f" else np.iinfo(self.plan.dtype).max
        for buf in (self.host, self.device):
            if buf is not None:
                buf.fill(value)

    def read(self, timer):
        """Phases read, wait (and h2d on a GPU): this rank's rows, on its device."""
        if self.device is None:
            read_then_wait(self.ctx, timer, lambda: self.reader.read(self.host, self.check_finite))
            return self.host
        cupy, stream = self.ctx.xp, self.copy_stream
        device_bytes = self.device.reshape(-1).view(np.uint8)
        host_bytes = self.host.reshape(-1).view(np.uint8) if self.host is not None else None
        first = cupy.cuda.Event()

        def landed(lo: int, hi: int) -> None:
            if not started:  # the copy stream's work starts with the first piece
                first.record(stream)
                started.append(True)
            device_bytes[lo:hi].set(host_bytes[lo:hi], stream=stream)

        started: list[bool] = []
        read_then_wait(self.ctx, timer, lambda: self.reader.read(self.host, self.check_finite, landed, self.device))
        last = cupy.cuda.Event()
        last.record(stream)
        with timer.phase("h2d"):  # what the read did not hide: the compute stream waits for the last copy
            exposed = cupy.cuda.Event()
            exposed.record()
            cupy.cuda.get_current_stream().wait_event(last)
            done = cupy.cuda.Event()
            done.record()
        if started:
            timer.span("h2d_overlapped", first, last, track="gpu copy stream")
            timer.span("h2d_overlapped", exposed, done, weight=-1)
        return self.device

    def host_rows(self) -> np.ndarray:
        """This rank's rows in host memory as the last repeat read them, for references: the host buffer, or
        (when KvikIO read straight into GPU memory) the rows read again by h5py: independent of the device path."""
        if self.reader.host_current:
            return self.host
        out = np.empty(self.plan.shape, self.plan.dtype)
        self.plan.read_into(out)
        return out

    def engines(self) -> list[dict]:
        """What read each piece of this rank's input (report.json ``io``)."""
        return self.reader.engines()

    def check_input_finite(self) -> None:
        """Read this rank's rows again; InputError naming the rows that hold NaN or infinity."""
        self.plan.read_into(np.empty(self.plan.shape, self.plan.dtype), check_finite=True)

    def rank_rows(self, rank: int) -> np.ndarray:
        """The rows rank ``rank`` holds, read on this rank into host memory (references, verification)."""
        rows = plan_rank_input(*self._plan_args[:2], rank, self.ctx.size, *self._plan_args[2:])
        out = np.empty(rows.shape, rows.dtype)
        rows.read_into(out)
        return out

    def head(self, n: int) -> np.ndarray:
        """The first ``n`` rows of the input (all of it when shorter), in host memory."""
        parts, left = [], n
        for path, dataset in self.sources:
            with open_h5(path) as f:
                parts.append(f[dataset][:left])
            left -= len(parts[-1])
            if left <= 0:
                break
        return np.concatenate(parts)

    def whole(self) -> np.ndarray:
        """Every row of the input, in order, in host memory (a reference over the whole input)."""
        parts = []
        for path, dataset in self.sources:
            with open_h5(path) as f:
                parts.append(f[dataset][...])
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def close(self) -> None:
        self.reader.close()  # what io.engine: mapped locked
        self.host = self.device = self.copy_stream = None  # pinned and device buffers released with them
