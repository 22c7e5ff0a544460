"""The direct read engine's pieces and its failures: byte ranges against the file's own bytes, missing data named
by file, dataset and rows, short files and I/O errors named, the first failure stopping the rest, and an
injected NaN in place before any piece is handed on."""

import os

import h5py
import numpy as np
import pytest

from spmd.core import faults
from spmd.core.config import InputConfig, IoConfig
from spmd.core.errors import InputError
from spmd.io.direct import ByteRange, byte_ranges, pread_into, read_pieces, split
from spmd.io.hdf5 import plan_rank_input
from spmd.io.reader import RowReader


def test_byte_ranges_point_at_the_rows_bytes_in_the_file(tmp_path):
    path = tmp_path / "x.h5"
    data = np.arange(5000 * 3, dtype=np.float64).reshape(5000, 3)
    with h5py.File(path, "w") as f:
        f.create_dataset("flat", data=data)
        f.create_dataset("chunked", data=data, chunks=(128, 3))
    raw = path.read_bytes()
    for name in ("flat", "chunked"):
        ranges, why = byte_ranges(str(path), name, 1001, 3333)
        assert why is None
        got = bytearray(2332 * 24)
        for r in ranges:
            got[r.dest : r.dest + r.nbytes] = raw[r.file_offset : r.file_offset + r.nbytes]
        assert bytes(got) == data[1001:3333].tobytes(), name
        assert sum(r.nbytes for r in ranges) == 2332 * 24
    # h5py writes the chunks of a fresh dataset one after another: neighbours merge into few ranges
    assert len(byte_ranges(str(path), "chunked", 0, 5000)[0]) < 40


def test_split_cuts_ranges_into_pieces_that_cover_them_once():
    pieces = split([ByteRange(100, 1000, 0), ByteRange(5000, 10, 1000)], 300)
    assert [p.nbytes for p in pieces] == [300, 300, 300, 100, 10]
    assert [p.dest for p in pieces] == [0, 300, 600, 900, 1000]
    assert [p.file_offset for p in pieces] == [100, 400, 700, 1000, 5000]


def test_what_the_direct_engine_cannot_read_is_said_and_left_to_h5py(tmp_path):
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("gz", data=np.ones((100, 2), np.float32), chunks=(10, 2), compression="gzip")
        f.create_dataset("tiles", data=np.ones((100, 4), np.float32), chunks=(10, 2))
        f.create_dataset("be", data=np.ones(100, ">f4"))
    assert "filtered" in byte_ranges(str(path), "gz", 0, 50)[1]
    assert "split its rows" in byte_ranges(str(path), "tiles", 0, 50)[1]
    assert "byte order" in byte_ranges(str(path), "be", 0, 50)[1]
    plan = plan_rank_input(InputConfig(path=str(path), dataset="gz"), None, 0, 1, ("float32",), (2,))
    reader = RowReader(plan, IoConfig(engine="direct"))
    assert reader.engines() == [
        {
            "source": f"{path}:gz rows 0-100",
            "engine": "h5py",
            "why_h5py": "filtered (compressed or shuffled): HDF5 decodes it",
        }
    ]
    out = np.full((100, 2), np.nan, np.float32)
    reader.read(out)
    assert (out == 1).all()


def test_rows_the_file_does_not_hold_are_named(tmp_path):
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("x", shape=(1000,), dtype=np.float32, chunks=(100,))
        ds[:600] = 1.0  # chunks 6-9 never written
        f.create_dataset("empty", shape=(50,), dtype=np.float32)
    assert byte_ranges(str(path), "x", 0, 600)[1] is None
    with pytest.raises(InputError, match=r"x.h5:x rows 600-700: the chunk holding them was never written"):
        byte_ranges(str(path), "x", 550, 1000)
    with pytest.raises(InputError, match=r"x.h5:empty rows 0-50: no data stored"):
        byte_ranges(str(path), "empty", 0, 50)


def test_a_short_file_and_an_io_error_are_named(tmp_path):
    path = tmp_path / "short.bin"
    path.write_bytes(b"\0" * 1000)
    buffer = memoryview(bytearray(600))
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(
            InputError, match=r"f.h5:x rows 0-5: the file ends at 1000 bytes, inside the data \(bytes 700-1300"
        ):
            pread_into(fd, buffer, ByteRange(700, 600, 0), "f.h5:x rows 0-5")
    finally:
        os.close(fd)
    fd = os.open(tmp_path, os.O_RDONLY)  # a folder: read() fails with EISDIR
    try:
        with pytest.raises(InputError, match=r"f.h5:x rows 0-5: read of 10 bytes at offset 0 failed \(Is a directory"):
            pread_into(fd, buffer, ByteRange(0, 10, 0), "f.h5:x rows 0-5")
    finally:
        os.close(fd)


def test_the_first_failed_piece_stops_the_read_and_is_raised(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)) * 64)  # 16 KiB
    buffer = memoryview(bytearray(64 * 1024))
    pieces = split([ByteRange(0, 16 * 1024, 0)], 1024) + [ByteRange(20_000, 1024, 16 * 1024)]
    landed = []
    with pytest.raises(InputError, match="the file ends at 16384 bytes"):
        read_pieces(str(path), pieces, buffer, 1, "data.bin", landed.append)  # one thread: in order
    assert pieces[-1] not in landed and set(landed) <= set(pieces[:-1])  # the failed piece is never handed on
    assert bytes(buffer[: 16 * 1024]) == path.read_bytes()


def test_an_injected_nan_is_in_place_before_any_piece_is_handed_on(ones_plan):
    plan = ones_plan(4096)
    reader = RowReader(plan, IoConfig(engine="direct", buffer_mb=0.001))
    out = np.zeros(4096, np.float32)
    seen = []
    faults.arm(faults.parse_fault("rank=0,phase=read,kind=nan"), 0, "here")
    try:
        reader.read(out, landed=lambda lo, hi: seen.append(out.view(np.uint8)[lo:hi].copy()))
    finally:
        faults.disarm()
    handed = np.concatenate(seen).view(np.float32)
    assert np.isnan(out[2048]) and np.isnan(handed[2048]) and np.isnan(handed).sum() == 1


def test_a_failure_on_one_thread_is_raised_after_every_reader_thread_stopped(tmp_path):
    import threading

    path = tmp_path / "data.bin"
    path.write_bytes(b"\1" * (64 * 1024))
    buffer = memoryview(bytearray(128 * 1024))
    pieces = split([ByteRange(0, 64 * 1024, 0)], 1024) + split([ByteRange(70_000, 64 * 1024, 64 * 1024)], 1024)
    with pytest.raises(InputError, match="the file ends at 65536 bytes"):
        read_pieces(str(path), pieces, buffer, 4, "data.bin")
    assert not [t for t in threading.enumerate() if t.name == "spmd-read"]


def test_kvikio_missing_is_a_config_error_saying_how_to_get_it(monkeypatch, ones_plan):
    import sys

    from spmd.core.errors import ConfigError
    from spmd.io.reader import load_kvikio

    monkeypatch.setitem(sys.modules, "kvikio", None)  # import kvikio raises ImportError
    with pytest.raises(
        ConfigError,
        match=r"io.engine: kvikio is not usable here \(ModuleNotFoundError.*pip install "
        r"'spmd\[gds\]'.*io.engine: direct",
    ):
        load_kvikio()
    plan = ones_plan(10)
    with pytest.raises(ConfigError, match="kvikio is not usable here"):
        RowReader(plan, IoConfig(engine="kvikio"))


def test_kvikio_reads_on_the_configured_threads_in_whole_row_tasks(monkeypatch, tmp_path):
    """KvikIO's pool defaults to 1 thread (measured on an H200 at 7.3 GB/s against 37 GB/s for 8 direct threads):
    a kvikio reader sets io.threads and whole rows of io.buffer_mb as KvikIO's tasks, and hands it whole ranges."""
    import sys

    # a stand-in package laid out as KvikIO 26.10 is: `defaults` is a submodule that `import kvikio` leaves out
    package = tmp_path / "site" / "kvikio"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "defaults.py").write_text("settings = []\nset = settings.append\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in ("kvikio", "kvikio.defaults"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.ones((3000, 3), np.float32), chunks=(1000, 3))  # 12,000-byte chunks
    plan = plan_rank_input(InputConfig(path=str(path), dataset="x"), None, 0, 1, ("float32",), (2,))
    reader = RowReader(plan, IoConfig(engine="kvikio", threads=6, buffer_mb=0.01), threads=5)
    assert sys.modules["kvikio.defaults"].settings == [
        {"num_threads": 5, "task_size": 10476}
    ]  # 873 rows of 12 bytes: whole rows in 10,485 bytes
    assert [p.engine for p in reader.parts] == ["kvikio"]
    assert sum(r.nbytes for r in reader.parts[0].reads) == 36000 and len(reader.parts[0].reads) <= 3


def test_cached_fraction_sees_a_read_file_in_the_page_cache_and_the_table_says_when_a_drop_did_not_take(tmp_path):
    from spmd.measure.io import cached_fraction, format_io

    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(1 << 20))
    path.read_bytes()
    assert cached_fraction([str(path)]) == pytest.approx(1.0)
    record = {
        "rank": 0,
        "host": "h",
        "bytes": 10,
        "source": "f.h5:x rows 0-1",
        "cold": True,
        "threads": 1,
        "engines": [{"source": "f.h5:x rows 0-1", "engine": "direct"}],
        "seconds": {"direct": [1.0]},
        "cached_after_drop": 0.5,
    }
    result = {"device": "cpu", "io": {"threads": 1, "buffer_mb": 8}, "rounds": 1, "per_rank": [record]}
    assert (
        "cold asked, but up to 50% of the file stayed in the page cache after the drop: these reads are "
        "partly warm" in format_io(result)
    )
    record["cached_after_drop"] = 0.0
    assert "cold (pages dropped before each read, at most 0% stayed)" in format_io(result)
    record["skipped"] = {"file to GPU (mapped)": "io.engine: mapped could not page-lock f.h5:x (no)"}
    assert "#  file to GPU (mapped): not measured: io.engine: mapped could not page-lock f.h5:x (no)" in format_io(
        result
    )


def test_ctrl_c_while_the_readers_start_stays_a_keyboard_interrupt(tmp_path, monkeypatch):
    """SIGINT landing between two thread starts (seen in CI: Ctrl-C of a running job) must reach the caller as
    KeyboardInterrupt, the threads already started joined, not as 'cannot join thread before it is started'."""
    import threading

    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(1 << 16))
    pieces = split([ByteRange(0, 1 << 16, 0)], 1 << 12)
    real, starts = threading.Thread.start, []

    def start(self):
        starts.append(self)
        if len(starts) == 2:
            raise KeyboardInterrupt
        real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    buffer = memoryview(bytearray(1 << 16))
    with pytest.raises(KeyboardInterrupt):
        read_pieces(str(path), pieces, buffer, 4, "f.bin")
    assert not starts[0].is_alive()
