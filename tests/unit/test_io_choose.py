"""io.engine: auto on a GPU run (io.choose): mapped where the page cache holds the rank's bytes and they may be
locked, direct otherwise, each choice with its reason in the report; a driver that will not lock the pages sends
auto back to direct. The GPU is stood in for (test_io_mapped's runtime and CuPy), so the rows that land are
compared with the file's."""

import mmap
import os

import h5py
import numpy as np
import pytest
from helpers import DeviceArray, Runtime, stand_in_cupy

from spmd.core.config import InputConfig, IoConfig
from spmd.io import choose
from spmd.io.direct import ByteRange

GIB = 2**30


def test_auto_maps_only_what_is_resident_lockable_and_small_enough_for_the_node():
    assert choose.auto_engine(GIB, GIB, 2, 64 * GIB, None) == (
        "mapped",
        "the page cache holds all 1.00 GiB: locked once at set-up, no CPU copy",
    )
    engine, why = choose.auto_engine(GIB, GIB // 2, 1, 64 * GIB, None)
    assert engine == "direct" and why.startswith("the page cache holds 50% of its 1.00 GiB")
    engine, why = choose.auto_engine(GIB, GIB, 1, 64 * GIB, 64 * 2**20)
    assert engine == "direct" and "RLIMIT_MEMLOCK lets it lock 0.06 GiB" in why
    engine, why = choose.auto_engine(8 * GIB, 8 * GIB, 4, 64 * GIB, None)  # 32 GiB locked of 64: allowed
    assert engine == "mapped"
    engine, why = choose.auto_engine(8 * GIB, 8 * GIB, 5, 64 * GIB, None)  # 40 GiB: more than half
    assert engine == "direct" and "5 rank(s) locking 8.00 GiB each would pin more than 50%" in why
    assert choose.auto_engine(0, 0, 1, GIB, None)[0] == "direct"


def test_resident_bytes_counts_the_pages_the_page_cache_holds(tmp_path):
    page = mmap.PAGESIZE
    path = tmp_path / "f"
    with open(path, "wb") as f:
        f.write(os.urandom(8 * page))  # written: in the page cache
        f.truncate(16 * page)  # a hole after it: no page there until read
    whole = [ByteRange(0, 16 * page, 0)]
    assert choose.resident_bytes(str(path), whole) == 8 * page
    assert choose.resident_bytes(str(path), [ByteRange(100, 3 * page, 0)]) == 3 * page  # not page-aligned
    assert choose.resident_bytes(str(path), [ByteRange(9 * page, page, 0)]) == 0
    assert choose.resident_bytes(str(path), [ByteRange(0, 17 * page, 0)]) == 0  # past the end: the read says so
    assert choose.resident_bytes(str(path), []) == 0


@pytest.fixture
def gpu_rank(tmp_path, monkeypatch):
    """make(runtime): a reader of rank 1 of 3's rows on a stood-in GPU, and the rows it must read."""
    from spmd.core import xp as xpmod
    from spmd.io import reader as reader_mod
    from spmd.io.hdf5 import plan_rank_input

    monkeypatch.setattr(reader_mod, "lock_limit", lambda: None)
    monkeypatch.setattr(reader_mod, "node_memory", lambda: 64 * GIB)
    monkeypatch.setattr(xpmod, "gpu_count", lambda: 1)
    path = tmp_path / "x.h5"
    data = np.random.default_rng(2).standard_normal((9_001, 3)).astype(np.float32)
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data)
    plan = plan_rank_input(InputConfig(path=str(path), dataset="x"), None, 1, 3, ("float32",), (2,))
    start = plan.pieces[0].start

    def make(runtime, gpu=True):
        monkeypatch.setattr(xpmod, "cupy", stand_in_cupy(runtime))
        return reader_mod.RowReader(plan, IoConfig(engine="auto"), 2, gpu=gpu, ranks_on_node=2)

    return make, plan, data[start : start + plan.rows]


def read(reader, plan):
    device = np.full(plan.shape, np.nan, np.float32).view(DeviceArray)  # poisoned: rows no read writes show
    host = None if not reader.fills_host else np.full(plan.shape, np.nan, np.float32)
    reader.read(host, device=device)
    return np.asarray(device) if not reader.fills_host else host


def test_auto_maps_a_resident_file_on_a_gpu_run_and_says_why(gpu_rank):
    make, plan, want = gpu_rank
    runtime = Runtime()
    reader = make(runtime)
    (piece,) = reader.engines()
    assert piece["engine"] == "mapped" and piece["auto"].startswith("the page cache holds all")
    assert not reader.fills_host and len(runtime.locked) == 1
    np.testing.assert_array_equal(read(reader, plan), want)
    reader.close()
    assert runtime.locked == {}


def test_auto_reads_with_direct_where_the_pages_are_not_all_resident(gpu_rank, monkeypatch):
    from spmd.io import reader as reader_mod

    make, plan, want = gpu_rank
    monkeypatch.setattr(reader_mod, "resident_bytes", lambda path, ranges: sum(r.nbytes for r in ranges) // 2)
    runtime = Runtime()
    reader = make(runtime)
    (piece,) = reader.engines()
    assert piece["engine"] == "direct" and piece["auto"].startswith("the page cache holds 50%")
    assert reader.fills_host and runtime.locked == {}
    np.testing.assert_array_equal(read(reader, plan), want)


def test_auto_falls_back_to_direct_when_the_driver_will_not_lock_the_pages(gpu_rank):
    make, plan, want = gpu_rank
    runtime = Runtime(refuse=True)
    reader = make(runtime)
    (piece,) = reader.engines()
    assert piece["engine"] == "direct" and piece["auto"].startswith("mapped could not lock the pages")
    assert "operation not supported" in piece["auto"] and runtime.locked == {}
    np.testing.assert_array_equal(read(reader, plan), want)


def test_auto_on_a_cpu_run_reads_with_direct_and_says_nothing_of_mapped(gpu_rank):
    make, plan, want = gpu_rank
    reader = make(Runtime(), gpu=False)
    (piece,) = reader.engines()
    assert piece["engine"] == "direct" and "auto" not in piece
    host = np.full(plan.shape, np.nan, np.float32)
    reader.read(host)
    np.testing.assert_array_equal(host, want)
