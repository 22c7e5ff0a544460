"""``spmd bench io CONFIG``: how fast each rank gets its rows of the config's input, by each engine, against the
limits measured in the same run (as fio or NVIDIA's gdsio would report them):

- ``h5py`` and ``direct`` (io.reader): file to this rank's host buffer (page-locked on a GPU);
- ``file to GPU`` (GPU only): the direct engine with each piece copied to the device as it lands, as a run does;
  the mapped engine's copy from the pages it locked at set-up (as each repeat of a run), and its lock, copy and
  unlock together (a read with nothing locked before it; cold where asked: locked pages cannot be dropped, so
  the first row is always from memory); and KvikIO reading straight into GPU memory where it is installed;
- limits: one plain ``pread`` of the same bytes on one thread, the same bytes in ``buffer_mb`` pieces on
  ``threads`` threads, and host-to-device copies of the buffer from pageable and from page-locked memory.

Each is timed ``rounds`` times after one untimed round; every rank measures at once (as their reads would
share the storage in a run), and the table holds every rank's medians. ``cold``: before each timed read the
file's pages are dropped from the page cache with posix_fadvise(DONTNEED) (no privileges needed; clean pages
only, so a file just written may stay cached: the table says which reads were cold).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import statistics
import tempfile
import time

import numpy as np

from ..core import xp as xpmod
from ..core.config import IoConfig
from ..core.cpus import reader_cpus, reader_threads
from ..core.errors import ConfigError
from ..core.units import fmt_bytes
from ..io.direct import as_bytes, merge, read_pieces, split
from ..io.reader import RowReader

PREAD_MAX = 1 << 30  # one pread call reads at most this much (Linux stops near 2 GiB anyway)
COLD_ENOUGH = 0.05  # a drop that left at most this share of the pages cached counts as cold


def _drop_cache(paths) -> bool:
    """Ask the kernel to drop the files' cached pages; False where it cannot be asked."""
    if not hasattr(os, "posix_fadvise"):
        return False
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True


def cached_fraction(paths) -> float | None:
    """The share of the files' pages in the page cache (mincore on a private mapping), or None where it cannot
    be asked: whether a drop took (dirty pages, or a file system that ignores the advice, keep theirs)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        cached = total = 0
        for path in paths:
            size = os.path.getsize(path)
            if size == 0:
                continue
            with open(path, "rb") as f:
                mapping = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
            try:
                pages = -(-size // mmap.PAGESIZE)
                flags = (ctypes.c_ubyte * pages)()
                start = ctypes.c_char.from_buffer(mapping)
                status = libc.mincore(ctypes.c_void_p(ctypes.addressof(start)), ctypes.c_size_t(size), flags)
                del start  # the mapping cannot close while exported
                if status:
                    return None
                cached += int((np.frombuffer(flags, np.uint8) & 1).sum())
                total += pages
            finally:
                mapping.close()
        return cached / total if total else 0.0
    except (OSError, AttributeError, TypeError, ValueError):
        return None


def _timed(fn, rounds: int, before=None) -> list[float]:
    fn()  # untimed: page cache, thread start, first-touch of buffers
    out = []
    for _ in range(rounds):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def measure_rank_io(plan, io_cfg, device: str, rounds: int, cold: bool, threads: int) -> dict:
    """This rank's measurements of reading ``plan`` (io.hdf5.RankInput) with ``io_cfg`` (config ``io``) on
    ``threads`` reader threads."""
    gpu = device == "gpu"
    host = xpmod.empty_host(plan.shape, plan.dtype, pinned=gpu)
    paths = sorted({p.path for p in plan.pieces})
    dropped = cold and _drop_cache(paths)
    left: list[float] = []  # the share still cached after each drop, where it can be seen

    def drop():
        _drop_cache(paths)
        share = cached_fraction(paths)
        if share is not None:
            left.append(share)

    before = drop if dropped else None
    readers = {
        engine: RowReader(plan, IoConfig(engine=engine, threads=threads, buffer_mb=io_cfg.buffer_mb), threads)
        for engine in ("h5py", "direct")
    }
    times = {name: _timed(lambda r=reader: r.read(host), rounds, before) for name, reader in readers.items()}
    ranges = _file_ranges(readers["direct"])
    if ranges is not None:  # the limits underneath: plain preads of the same bytes
        buffer = as_bytes(host)
        whole = [(path, split(rs, PREAD_MAX)) for path, rs in ranges]
        pieces = [(path, split(rs, max(1, int(io_cfg.buffer_mb * 2**20)))) for path, rs in ranges]
        times["pread, 1 thread"] = _timed(lambda: [read_pieces(p, rs, buffer, 1, p) for p, rs in whole], rounds, before)
        # the limit under the direct engine: its pieces on its threads ("1 thread" is the whole-file pread above)
        times[f"pread, {threads} threads" if threads > 1 else "pread, 1 thread, in pieces"] = _timed(
            lambda: [read_pieces(p, rs, buffer, threads, p) for p, rs in pieces], rounds, before
        )
    skipped: dict[str, str] = {}  # way -> why it was not measured
    if gpu:
        times.update(_gpu_times(plan, host, readers["direct"], rounds, before, skipped))
    engines = readers["direct"].engines()
    return {
        "bytes": plan.nbytes,
        "source": plan.describe(),
        "engines": engines,
        "cold": bool(dropped),
        "cached_after_drop": max(left) if left else None,
        "threads": threads,
        "reader_cpus": len(reader_cpus() or ()) or None,  # where io.threads: auto moved them beyond the binding
        "seconds": times,
        **({"skipped": skipped} if skipped else {}),
    }


def _file_ranges(reader):
    """[(path, byte ranges)] of a direct reader's pieces, or None where one is not plain bytes in its file."""
    if any(part.engine != "direct" for part in reader.parts):
        return None
    return [(part.piece.path, merge(list(part.reads))) for part in reader.parts]


def _gpu_times(plan, host, reader, rounds: int, before, skipped: dict) -> dict[str, list[float]]:
    cupy = xpmod.cupy
    device = cupy.empty(plan.shape, plan.dtype)
    pageable = np.empty(plan.shape, plan.dtype)
    stream = cupy.cuda.Stream(non_blocking=True)
    host_bytes, device_bytes = host.reshape(-1).view(np.uint8), device.reshape(-1).view(np.uint8)

    def to_gpu():
        reader.read(host, landed=lambda lo, hi: device_bytes[lo:hi].set(host_bytes[lo:hi], stream=stream))
        stream.synchronize()

    def copy(src):
        device.set(src)
        cupy.cuda.get_current_stream().synchronize()

    out = {
        "file to GPU (direct, copies as pieces land)": _timed(to_gpu, rounds, before),
        "host to device, page-locked": _timed(lambda: copy(host), rounds),
        "host to device, pageable": _timed(lambda: copy(pageable), rounds),
    }
    mapped_cfg = IoConfig(engine="mapped", threads=reader.threads, buffer_mb=reader.cfg.buffer_mb)

    def lock_copy_unlock():  # what a read costs when nothing was locked before it
        once = RowReader(plan, mapped_cfg, reader.threads)
        try:
            once.read(host, device=device)
        finally:
            once.close()

    try:
        mapped = RowReader(plan, mapped_cfg, reader.threads)
    except ConfigError as exc:  # the driver would not lock these pages (e.g. a network file system)
        skipped["file to GPU (mapped)"] = str(exc)
    else:
        try:
            if any(p.engine == "mapped" for p in mapped.parts):  # not where h5py reads every piece
                out["file to GPU (mapped, locked at set-up)"] = _timed(lambda: mapped.read(host, device=device), rounds)
                mapped.close()  # before the next row: a cold read cannot drop locked pages
                out["file to GPU (mapped, lock + copy + unlock)"] = _timed(lock_copy_unlock, rounds, before)
        finally:
            mapped.close()  # a second close does nothing
    try:
        kvikio_reader = RowReader(
            plan, IoConfig(engine="kvikio", threads=reader.threads, buffer_mb=reader.cfg.buffer_mb), reader.threads
        )
    except ConfigError:  # KvikIO not installed: no such row (spmd bench io says nothing of it)
        return out
    if any(p.engine == "kvikio" for p in kvikio_reader.parts):
        out["file to GPU (kvikio)"] = _timed(lambda: kvikio_reader.read(host, device=device), rounds, before)
    return out


def pread_limit(plan, threads: int, buffer_mb: float, rounds: int = 3) -> float | None:
    """Median seconds to pread the bytes of ``plan`` in ``buffer_mb`` pieces on ``threads`` threads (the page
    cache as it is), or None where a piece is not plain bytes in its file: the limit under a read phase."""
    ranges = _file_ranges(RowReader(plan, IoConfig(engine="direct", threads=threads, buffer_mb=buffer_mb), threads))
    if ranges is None:
        return None
    buffer = memoryview(np.empty(plan.nbytes, np.uint8))
    pieces = [(path, split(rs, max(1, int(buffer_mb * 2**20)))) for path, rs in ranges]
    return statistics.median(_timed(lambda: [read_pieces(p, rs, buffer, threads, p) for p, rs in pieces], rounds))


def bench_io(ctx, plan, io_cfg, rounds: int, cold: bool) -> dict:
    """Every rank measures its part at once; rank 0 gets {config, per_rank: [...]} (others: None)."""
    mine = ctx.agree(
        measure_rank_io,
        plan,
        io_cfg,
        ctx.device,
        rounds,
        cold,
        reader_threads(io_cfg.threads, ctx.local_size, ctx.local_rank),
    )
    ranks = ctx.comm.gather({"rank": ctx.rank, "host": ctx.host, **mine}, root=0)
    if ranks is None:
        return None
    return {
        "io": {"engine": io_cfg.engine, "threads": io_cfg.threads, "buffer_mb": io_cfg.buffer_mb},
        "device": ctx.device,
        "rounds": rounds,
        "per_rank": ranks,
    }


def rate(record: dict, way: str) -> float:
    """Median GB/s of ``way`` in one rank's record."""
    return record["bytes"] / statistics.median(record["seconds"][way]) / 1e9


def format_io(result: dict) -> str:
    """The table of ``spmd bench io``: per rank and way, median GB/s (min-max) and the share of the N-thread
    pread limit."""
    lines = [
        f"# spmd bench io: {result['device']}, io.threads {result['io']['threads']} (auto: the rank's share of "
        f"the node's CPUs), io.buffer_mb {result['io']['buffer_mb']}, median of {result['rounds']} rounds after "
        "one untimed"
    ]
    for r in result["per_rank"]:
        cache = "from the page cache"
        if r["cold"]:
            left = r.get("cached_after_drop")
            cache = (
                "cold (pages dropped before each read; whether they left cannot be checked here)"
                if left is None
                else f"cold (pages dropped before each read, at most {left:.0%} stayed)"
                if left <= COLD_ENOUGH
                else f"cold asked, but up to {left:.0%} of the file stayed in the page cache after the drop: "
                f"these reads are partly warm"
            )
        lines.append(
            f"# rank {r['rank']} on {r['host']}: {fmt_bytes(r['bytes'])} of {r['source']}, {cache}, "
            f"{r['threads']} reader thread(s)"
        )
        limit = next((way for way in r["seconds"] if way.startswith("pread, ") and not way.endswith("1 thread")), None)
        lines.append(f"#  {'way':<46} {'GB/s':>8} {'(min-max)':>16} {'vs pread N':>11}")
        for way, seconds in r["seconds"].items():
            lo, hi = r["bytes"] / max(seconds) / 1e9, r["bytes"] / min(seconds) / 1e9
            share = f"{rate(r, way) / rate(r, limit):.0%}" if limit and not way.startswith("host to") else "-"
            lines.append(f"   {way:<46} {rate(r, way):>8.2f} {f'({lo:.2f}-{hi:.2f})':>16} {share:>11}")
        for way, reason in r.get("skipped", {}).items():
            lines.append(f"#  {way}: not measured: {reason}")
        why = [e for e in r["engines"] if e["engine"] != "direct"]
        for e in why:
            lines.append(f"#  direct is h5py for {e['source']}: {e.get('why_h5py')}")
    return "\n".join(lines) + "\n"


HOST_READ_ROW = 1024  # float32 elements a row of host_read's file (4 KiB rows, as a run's inputs hold floats)


def host_read(ctx, nbytes: int, rounds: int = 3, host_only: bool = False) -> dict:
    """The host's shared read ceiling for ``spmd predict``, met as a run's read phase meets it. Each rank reads an HDF5
    file of ``nbytes`` of its own from the page cache (as a sweep's repeats read their input) with a run's reader
    (``io.engine: auto``; on a GPU into device memory, by the engine a run would choose), and on a GPU with ``direct``
    too, the engine a run reads with where it may not lock its pages (``engines``: a sweep read by one is bounded by
    that one's ceiling; their copies differ, and so do their shares of the host's memory). First the first rank of each
    host reads alone, on the threads a rank alone on its host gets; then every rank reads at once, on the threads each
    gets beside the others. A host is the ranks sharing its memory (``node_comm``), also where nodes are emulated on one
    machine (``SPMD_HOST``), where all of them read at once. {bytes, readers (ranks on the busiest host), engine (the
    one auto chose), alone_Bps (one rank), together_Bps (the busiest host's ranks together, at the slowest rank's pace),
    engines (engine -> {alone_Bps, together_Bps})}. The files are spmd's own temporary ones, written back to disk before
    timing (a write-back running under the reads slows them) and removed after. ``host_only`` (ranks sharing a GPU):
    ``direct`` alone, whose reads land in the host's memory; auto's engine on a GPU reads into the device, and ranks
    sharing one would measure its one link, not the host."""
    import h5py

    from ..io.hdf5 import Piece, RankInput

    fd, path = tempfile.mkstemp(prefix="spmd-host-read-", suffix=".h5")
    os.close(fd)
    measured = {}
    try:
        rows = max(1, nbytes // (4 * HOST_READ_ROW))
        block = np.ones((max(1, (64 << 20) // (4 * HOST_READ_ROW)), HOST_READ_ROW), np.float32)
        with h5py.File(path, "w") as f:
            data = f.create_dataset("x", (rows, HOST_READ_ROW), np.float32)  # contiguous: plain bytes in the file
            for at in range(0, rows, block.shape[0]):
                data[at : at + block.shape[0]] = block[: rows - at]
        with open(path, "rb+") as f:
            os.fsync(f.fileno())
        plan = RankInput((Piece(path, "x", 0, rows),), (HOST_READ_ROW,), np.dtype(np.float32))
        gpu = ctx.device == "gpu"
        for engine in ("direct",) if host_only else ("auto", "direct") if gpu else ("auto",):
            # auto may have chosen direct itself: not read twice where every rank's did (the reads are collective)
            if not all(engine in done for done in ctx.comm.allgather(list(measured))):
                rates = _host_read_by(ctx, plan, IoConfig(engine=engine), gpu, rounds)
                measured[rates.pop("engine")] = rates
    finally:
        os.unlink(path)
    busiest = max(ctx.comm.allgather(ctx.local_size))
    engines = {
        engine: {"alone_Bps": plan.nbytes / m["alone_s"], "together_Bps": busiest * plan.nbytes / m["together_s"]}
        for engine, m in measured.items()
    }
    chosen = next(iter(engines))
    return {"bytes": plan.nbytes, "readers": busiest, "engine": chosen, **engines[chosen], "engines": engines}


def bench_host_read(ctx, nbytes: int, rounds: int = 3) -> dict:
    """``spmd bench comm --host-read``: the host's shared read ceiling alone (``host_read``), what a target whose links
    are presets takes from the machine at hand (``spmd predict``'s target key ``host_read``). Its ranks may share a GPU:
    a machine of one GPU measures its host's reads by as many ranks as the target puts on a host (by ``direct`` alone
    there, whose reads land in the host's memory: ``host_read``'s ``host_only``). {kind, device, ranks, nodes, gpus
    (distinct GPUs on the busiest host, 0 on CPUs), shared_gpu, host_read}."""
    reads = host_read(ctx, nbytes, rounds, host_only=ctx.shared_gpu)
    return {
        "kind": "host_read",
        "device": ctx.device,
        "ranks": ctx.size,
        "nodes": len(set(ctx.hosts)),
        "gpus": max(ctx.comm.allgather(ctx.node_gpus)),
        "shared_gpu": ctx.shared_gpu,
        "host_read": reads,
    }


def format_host_read_bench(result: dict) -> str:
    """``bench_host_read``'s result: who read, then a line per engine."""
    gpus = f", {result['gpus']} GPU(s) a host" + (" shared by its ranks" if result["shared_gpu"] else "")
    head = (
        f"# spmd bench comm --host-read: {result['ranks']} rank(s) on {result['nodes']} host(s) on "
        f"{result['device']}{gpus if result['device'] == 'gpu' else ''}"
    )
    return "\n".join([head, *format_host_read(result["host_read"])]) + "\n"


def format_host_read(reads: dict) -> list[str]:
    """A line per engine of a ``host_read`` measurement (a file of an older spmd measured the one auto chose)."""
    return [
        f"# host reads of {fmt_bytes(reads['bytes'])} a rank from the page cache by {engine}: "
        f"{rates['alone_Bps'] / 1e9:.1f} GB/s one rank alone, {rates['together_Bps'] / 1e9:.1f} GB/s a host's "
        f"{reads['readers']} together"
        for engine, rates in (reads.get("engines") or {reads.get("engine", "auto"): reads}).items()
    ]


def _host_read_by(ctx, plan, io_cfg: IoConfig, gpu: bool, rounds: int) -> dict:
    """{engine, alone_s, together_s}: ``plan`` read by ``io_cfg``'s engine by the host's first rank alone, then by
    every rank at once (host_read)."""
    readers = []
    try:
        alone = RowReader(plan, io_cfg, reader_threads("auto", 1, 0), gpu=gpu)
        readers.append(alone)
        together = RowReader(
            plan, io_cfg, reader_threads("auto", ctx.local_size, ctx.local_rank), gpu=gpu, ranks_on_node=ctx.local_size
        )
        readers.append(together)
        read, settle = _reading(plan, gpu, together.fills_host or alone.fills_host)
        read(together)()  # untimed: into the page cache, the buffers touched
        settle()
        first = ctx.local_rank == 0  # the host's first rank
        alone_s = _rounds(ctx, read(alone) if first else None, rounds, settle)
        together_s = _rounds(ctx, read(together), rounds, settle)
        return {"engine": together.engines()[0]["engine"], "alone_s": alone_s, "together_s": together_s}
    finally:
        for reader in readers:
            reader.close()  # mapped's pages unlocked


def _reading(plan, gpu: bool, fills_host: bool):
    """(reader -> a read of ``plan`` as a run's read phase does it, settle: what waits for its copies): into the
    host buffer (page-locked on a GPU), each piece copied to the device as it lands, the copies' tail left to
    ``settle`` (a run's h2d phase holds it, not its read); or straight into device memory (mapped, kvikio)."""
    host = xpmod.empty_host(plan.shape, plan.dtype, pinned=gpu) if fills_host else None
    if not gpu:
        return (lambda reader: lambda: reader.read(host)), lambda: None
    cupy = xpmod.cupy
    device = cupy.empty(plan.shape, plan.dtype)
    stream = cupy.cuda.Stream(non_blocking=True)
    device_bytes = device.reshape(-1).view(np.uint8)
    host_bytes = host.reshape(-1).view(np.uint8) if host is not None else None

    def landed(lo: int, hi: int) -> None:
        device_bytes[lo:hi].set(host_bytes[lo:hi], stream=stream)

    def read(reader):
        def once():
            reader.read(host, landed=landed if reader.fills_host else None, device=device)
            if not reader.fills_host:
                cupy.cuda.get_current_stream().synchronize()

        return once

    def settle() -> None:
        stream.synchronize()
        cupy.cuda.get_current_stream().synchronize()

    return read, settle


def _rounds(ctx, read, rounds: int, settle) -> float:
    """The median over ``rounds`` of the slowest rank's seconds, every rank starting together (``read`` None:
    this rank only waits), each round's copies settled before the next starts."""
    times = []
    for _ in range(rounds):
        settle()
        ctx.comm.Barrier()
        t0 = time.perf_counter()
        if read is not None:
            read()
        elapsed = np.array([time.perf_counter() - t0 if read is not None else 0.0])
        ctx.allreduce_host(elapsed, op="max")
        times.append(float(elapsed[0]))
    return statistics.median(times)
