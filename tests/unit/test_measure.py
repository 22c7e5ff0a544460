"""nccl-tests conventions: sizes, counts, bus bandwidth, and the table layout."""

import pytest

from spmd.measure.collectives import algbw_busbw, counts
from spmd.measure.comm import format_tables, size_series


def test_sizes_are_geometric_like_nccl_tests():
    assert size_series(8, 64, 2) == [8, 16, 32, 64]
    assert size_series(8, 100, 4) == [8, 32]
    for bad in ((0, 8, 2), (16, 8, 2), (8, 64, 1)):
        with pytest.raises(ValueError):
            size_series(*bad)


def test_counts_follow_nccl_tests_size_meaning():
    assert counts("allreduce", 1024, 4, 3) == (256, 256)
    assert counts("allgather", 1024, 4, 3) == (85, 255)  # size = the gathered output
    assert counts("reduce_scatter", 1024, 4, 3) == (255, 255)  # size = each rank's input
    assert counts("allgather", 4, 4, 3) == (1, 3)  # never below one element per rank
    assert counts("bcast", 2, 4, 2) == (1, 1)


def test_bus_bandwidth_factors():
    algbw, busbw = algbw_busbw("allreduce", 4, 1_000_000, 1e-3)
    assert algbw == pytest.approx(1e9) and busbw == pytest.approx(1.5e9)
    assert algbw_busbw("allgather", 8, 1_000_000, 1e-3)[1] == pytest.approx(0.875e9)
    assert algbw_busbw("bcast", 8, 1_000_000, 1e-3)[1] == pytest.approx(1e9)


def test_table_has_nccl_tests_columns_and_side_by_side():
    row = {"size": 1024, "count": 256, "time_us": 10.0, "algbw_GBps": 0.1024, "busbw_GBps": 0.1536, "wrong": 0}
    bench = {
        "op": "allreduce",
        "dtype": "float32",
        "ranks": 4,
        "device": "gpu",
        "iters": 20,
        "warmup": 5,
        "bus_factor": 1.5,
        "results": {"nccl": [row], "mpi": [{**row, "time_us": 40.0}]},
        "skipped": {"mpi-cuda": "not CUDA-aware"},
    }
    text = format_tables(bench)
    assert "#       size        count     type  redop  root      time   algbw   busbw #wrong" in text
    assert "        1024          256    float    sum    -1     10.00    0.10    0.15      0" in text
    assert "# mpi-cuda: skipped: not CUDA-aware" in text
    last = text.strip().splitlines()[-1].split()
    assert last == ["1", "KiB", "10.00", "1.00", "40.00", "4.00", "nccl"]


def fake_topology():
    link = {"class": "pcie", "detail": "PCIe, through the CPU's host bridge"}
    return {
        "gpus": [{"index": i, "name": "GPU X", "memory_GiB": 80.0, "pci_bus_id": f"0000:0{i}:00.0"} for i in range(2)],
        "peer_access": [[True, False], [False, True]],
        "links": [[None, link], [link, None]],
        "p2p": [
            [None, {"GBps": 12.5, "latency_us": 20.0, "verified": True}],
            [{"GBps": 12.0, "latency_us": 21.0, "verified": True}, None],
        ],
        "host": [{"h2d_pinned": 25.0, "d2h_pinned": 26.0, "h2d_pageable": 8.0, "d2h_pageable": 9.0}] * 2,
        "bytes": 1 << 28,
        "iters": 10,
        "warnings": ["GPU 0 -> GPU 1: no peer access, copies go through host memory"],
        "note": None,
    }


def test_topology_text_and_heat_map():
    from spmd.measure.copies import format_topology
    from spmd.report.heatmap import heatmap_png

    text = format_topology("node1", fake_topology())
    assert "GPU 0 - GPU 1: PCIe, through the CPU's host bridge" in text
    assert "   GPU 0       yes        NO" in text and "    12.5" in text
    assert "warning: GPU 0 -> GPU 1: no peer access" in text
    png = heatmap_png("node1", fake_topology())
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert format_topology("n", {"gpus": [], "note": "no GPU visible (x)"}) == "spmd topo on n: no GPU visible (x)\n"
