"""``io.engine: auto`` on a GPU run: ``mapped`` where it is safe, else ``direct``.

Mapped reads need no CPU copy, so they reach the GPU several times as fast as direct reads (docs/benchmarks.md,
io), and locking the pages once at set-up costs about one direct read. It is safe where
(1) the page cache already holds every page of the rank's byte ranges (locking a cold file would read it through
page faults, and a file larger than memory cannot stay resident), (2) the process may lock that many bytes
(RLIMIT_MEMLOCK, unless root), and (3) the ranks of the node together lock at most half of its memory (the locked
pages cannot be reclaimed while the run holds them). Otherwise auto reads with direct, and report.json ``io``
says which and why for every rank.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import resource

import numpy as np

from .direct import ByteRange

PAGE = mmap.PAGESIZE
LOCKABLE_SHARE = 0.5  # of the node's memory, for every rank's locked pages together


def resident_bytes(path: str, ranges: list[ByteRange]) -> int:
    """Bytes of ``ranges`` of the file whose pages the page cache holds now (mincore on a read-only mapping; no
    page is read). 0 where it cannot be told (not Linux, an unmappable file)."""
    if not ranges:
        return 0
    start = min(r.file_offset for r in ranges) // PAGE * PAGE
    end = max(r.file_offset + r.nbytes for r in ranges)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        mincore = libc.mincore
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size < end:
                return 0  # a short file: the reads will say so
            with mmap.mmap(f.fileno(), end - start, prot=mmap.PROT_READ, offset=start) as mapped:
                view = np.frombuffer(mapped, np.uint8)
                pages = np.zeros(-(-(end - start) // PAGE), np.uint8)
                mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
                failed = mincore(view.ctypes.data, end - start, pages.ctypes.data)
                del view  # the mapping cannot close while a view of it lives
    except (OSError, AttributeError, ValueError):
        return 0
    if failed:
        return 0
    resident = pages & 1
    total = 0
    for r in ranges:  # each range's bytes on resident pages
        first, last = (r.file_offset - start) // PAGE, (r.file_offset + r.nbytes - 1 - start) // PAGE
        total += int(resident[first : last + 1].sum()) * PAGE
    return min(total, sum(r.nbytes for r in ranges))


def lock_limit() -> int | None:
    """The bytes this process may lock (None: no limit, or root)."""
    if os.geteuid() == 0:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return None if soft == resource.RLIM_INFINITY else soft


def node_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def auto_engine(nbytes: int, resident: int, ranks_on_node: int, memory: int, limit: int | None) -> tuple[str, str]:
    """(engine, why) for a GPU rank reading ``nbytes`` of which ``resident`` are in the page cache."""
    gib = 2**30
    if nbytes == 0:
        return "direct", "nothing to map"
    if resident < nbytes:
        return "direct", (
            f"the page cache holds {resident / nbytes:.0%} of its {nbytes / gib:.2f} GiB (mapped needs all of it)"
        )
    if limit is not None and limit < nbytes:
        return "direct", f"RLIMIT_MEMLOCK lets it lock {limit / gib:.2f} GiB, less than its {nbytes / gib:.2f} GiB"
    if ranks_on_node * nbytes > LOCKABLE_SHARE * memory:
        return "direct", (
            f"{ranks_on_node} rank(s) locking {nbytes / gib:.2f} GiB each would pin more than "
            f"{LOCKABLE_SHARE:.0%} of the node's {memory / gib:.0f} GiB"
        )
    return "mapped", f"the page cache holds all {nbytes / gib:.2f} GiB: locked once at set-up, no CPU copy"
