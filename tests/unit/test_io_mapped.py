"""The mapped engine's byte bookkeeping on a CPU: CUDA's runtime is stood in for by one that records what is
locked and does each 'copy' with memmove, so the bytes that land are compared with h5py's read of the same rows
(contiguous and chunked, at offsets that are not page-aligned). Its refusals: a truncated file, pages the driver
will not lock, no GPU."""

import mmap
import types

import h5py
import numpy as np
import pytest
from helpers import DeviceArray, Runtime, stand_in_cupy

from spmd.core.config import IoConfig
from spmd.core.errors import ConfigError, InputError
from spmd.io.direct import byte_ranges
from spmd.io.mapped import MappedRanges


def device_like(array):
    """A stand-in for a CuPy uint8 array: what copy_to reads of one (data.ptr)."""
    return types.SimpleNamespace(data=types.SimpleNamespace(ptr=array.ctypes.data))


@pytest.mark.parametrize("chunks", [None, (1000, 3)])
def test_mapped_ranges_land_the_rows_bytes_where_h5py_puts_them(tmp_path, chunks):
    path = tmp_path / "x.h5"
    data = np.random.default_rng(3).standard_normal((20_000, 3))
    with h5py.File(path, "w") as f:
        f.create_dataset("pad", data=np.arange(777, dtype=np.uint8))  # the data starts at no page boundary
        f.create_dataset("x", data=data, chunks=chunks)
    ranges, why = byte_ranges(str(path), "x", 4321, 17_777)
    assert why is None and ranges[0].file_offset % mmap.PAGESIZE
    runtime = Runtime()
    mapped = MappedRanges(str(path), ranges, "x.h5:x rows 4321-17777", runtime)
    assert list(runtime.locked.values()) == [mapped.nbytes] and mapped.seconds >= 0
    out = np.full((17_777 - 4321, 3), np.nan)  # poisoned: a byte no copy writes shows
    mapped.copy_to(device_like(out.reshape(-1).view(np.uint8)), types.SimpleNamespace(ptr=7))
    np.testing.assert_array_equal(out, data[4321:17_777])
    mapped.close()
    assert runtime.locked == {}
    mapped.close()  # a second close does nothing


def test_a_truncated_file_and_pages_that_cannot_be_locked_are_refused_by_name(tmp_path):
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.ones((50_000,)))
    ranges, _ = byte_ranges(str(path), "x", 0, 50_000)
    with pytest.raises(
        ConfigError,
        match=r"io.engine: mapped could not page-lock x.h5:x \(cudaErrorNotSupported.*"
        r"use io.engine: direct",
    ):
        MappedRanges(str(path), ranges, "x.h5:x", Runtime(refuse=True))
    with open(path, "r+b") as f:
        f.truncate(ranges[0].file_offset + 1000)
    with pytest.raises(
        InputError,
        match=r"x.h5:x: the file ends at \d+ bytes, inside the data .* a short or "
        r"truncated file",
    ):
        MappedRanges(str(path), ranges, "x.h5:x", Runtime())


def test_the_mapped_engine_without_a_gpu_is_refused_by_name(ones_plan, monkeypatch):
    from spmd.core import xp as xpmod
    from spmd.io.reader import RowReader

    monkeypatch.setattr(xpmod, "gpu_count", lambda: 0)
    plan = ones_plan(10)
    with pytest.raises(ConfigError, match="io.engine: mapped page-locks the file for a GPU's copies: no GPU here"):
        RowReader(plan, IoConfig(engine="mapped"))


@pytest.mark.parametrize("chunks", [None, (700, 3)])
def test_a_mapped_reader_fills_the_device_rows_without_a_host_buffer_and_unlocks_on_close(
    tmp_path, monkeypatch, chunks
):
    from spmd.core import xp as xpmod
    from spmd.core.config import InputConfig
    from spmd.io.hdf5 import plan_rank_input
    from spmd.io.reader import RowReader

    runtime = Runtime()
    monkeypatch.setattr(xpmod, "cupy", stand_in_cupy(runtime))
    monkeypatch.setattr(xpmod, "gpu_count", lambda: 1)
    path = tmp_path / "x.h5"
    data = np.random.default_rng(8).standard_normal((10_001, 3)).astype(np.float32)
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=chunks)
    plan = plan_rank_input(InputConfig(path=str(path), dataset="x"), None, 1, 3, ("float32",), (2,))  # rank 1 of 3
    reader = RowReader(plan, IoConfig(engine="mapped"))
    assert not reader.fills_host and [p.engine for p in reader.parts] == ["mapped"]
    (engine,) = reader.engines()
    assert engine["locked_bytes"] >= plan.nbytes and engine["lock_s"] >= 0 and len(runtime.locked) == 1
    device = np.full(plan.shape, np.nan, np.float32).view(DeviceArray)  # poisoned: rows no copy writes show
    reader.read(None, check_finite=True, device=device)
    start = plan.pieces[0].start
    np.testing.assert_array_equal(np.asarray(device), data[start : start + plan.rows])
    assert not reader.host_current
    reader.close()
    assert runtime.locked == {}
