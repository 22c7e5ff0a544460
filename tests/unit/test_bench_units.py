"""nccl-tests conventions: sizes, counts, bus bandwidth, and the table layout."""

import pytest

from spmd.bench.collectives import algbw_busbw, counts
from spmd.bench.comm import format_tables, sizes


def test_sizes_are_geometric_like_nccl_tests():
    assert sizes(8, 64, 2) == [8, 16, 32, 64]
    assert sizes(8, 100, 4) == [8, 32]
    for bad in ((0, 8, 2), (16, 8, 2), (8, 64, 1)):
        with pytest.raises(ValueError):
            sizes(*bad)


def test_counts_follow_nccl_tests_size_meaning():
    assert counts("allreduce", 1024, 4, 3) == (256, 256)
    assert counts("allgather", 1024, 4, 3) == (85, 255)       # size = the gathered output
    assert counts("reduce_scatter", 1024, 4, 3) == (255, 255)  # size = each rank's input
    assert counts("allgather", 4, 4, 3) == (1, 3)              # never below one element per rank
    assert counts("bcast", 2, 4, 2) == (1, 1)


def test_bus_bandwidth_factors():
    algbw, busbw = algbw_busbw("allreduce", 4, 1_000_000, 1e-3)
    assert algbw == pytest.approx(1e9) and busbw == pytest.approx(1.5e9)
    assert algbw_busbw("allgather", 8, 1_000_000, 1e-3)[1] == pytest.approx(0.875e9)
    assert algbw_busbw("bcast", 8, 1_000_000, 1e-3)[1] == pytest.approx(1e9)


def test_table_has_nccl_tests_columns_and_side_by_side():
    row = {"size": 1024, "count": 256, "time_us": 10.0, "algbw_GBps": 0.1024, "busbw_GBps": 0.1536, "wrong": 0}
    bench = {"op": "allreduce", "dtype": "float32", "ranks": 4, "device": "gpu", "iters": 20, "warmup": 5,
             "bus_factor": 1.5, "results": {"nccl": [row], "mpi": [{**row, "time_us": 40.0}]},
             "skipped": {"mpi-cuda": "not CUDA-aware"}}
    text = format_tables(bench)
    assert "#       size        count     type  redop  root      time   algbw   busbw #wrong" in text
    assert "        1024          256    float    sum    -1     10.00    0.10    0.15      0" in text
    assert "# mpi-cuda: skipped: not CUDA-aware" in text
    last = text.strip().splitlines()[-1].split()
    assert last == ["1", "KiB", "10.00", "1.00", "40.00", "4.00", "nccl"]
