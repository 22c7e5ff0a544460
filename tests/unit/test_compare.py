"""report compare weighs the runs' own noise: a change whose intervals overlap is noise, not a regression; and
what it prints is consistent: each value is the median of the repeats whose interval is printed beside it."""

from __future__ import annotations

import re

from spmd.report.compare import HEADER, compare, entries, format_compare


def report(compute_repeats: list[list[float]]) -> dict:
    """A report.json's parts compare reads: per rank, every repeat's compute (and total)."""
    per_rank = [
        {"rank": r, "median": {}, "repeats": [{"compute": c, "total": c + 1e-3} for c in rank]}
        for r, rank in enumerate(compute_repeats)
    ]
    flat = {"median": 1.0, "min": 1.0, "max": 1.0}  # the ranks' medians: not what compare reads when repeats exist
    return {
        "schema": 1,
        "workload": "reduce",
        "ranks": len(compute_repeats),
        "per_rank": per_rank,
        "timings": {"compute": flat, "total": flat},
        "config": {},
        "result": {},
        "nodes": [],
        "device": "cpu",
        "comm": "mpi",
        "verified": True,
    }


def test_a_change_inside_the_spread_is_noise_and_one_beyond_it_is_flagged():
    # sub-millisecond phases with a noisy tail: the median moved 30%, the ranges overlap
    old = report([[100e-6, 110e-6, 160e-6], [105e-6, 108e-6, 150e-6]])
    noisy = report([[130e-6, 140e-6, 150e-6], [128e-6, 135e-6, 145e-6]])
    rows, slower = compare(entries(old), entries(noisy), 10, 0.0)
    compute = next(r for r in rows if r["phase"] == "compute")
    assert compute["change_pct"] > 10 and compute["noise"] and slower == []
    assert compute["old_range"] == (105e-6, 160e-6) and compute["new_range"] == (130e-6, 150e-6)
    text = format_compare(rows, slower, 10)
    assert "(intervals overlap)" in text and text.endswith(
        "no slowdown above 10% (1 more whose intervals overlap: noise, not flagged)"
    )
    # every new repeat slower than every old one: a regression, however small the phase
    slow = report([[170e-6, 175e-6, 180e-6], [171e-6, 172e-6, 173e-6]])
    rows, slower = compare(entries(old), entries(slow), 10, 1.0)
    assert [r["phase"] for r in slower] == ["compute"] and "SLOWER" in format_compare(rows, slower, 10)


def test_every_printed_value_lies_inside_its_printed_range():
    """The value is the median over repeats of the slowest rank; the range, that of the same numbers. (The
    median over ranks of each rank's median, printed before, could fall below its own range: rank 1's median
    here is 1 ms, every repeat's slowest rank took 3 ms or more.)"""
    old = report([[3e-3, 4e-3, 5e-3], [1e-3, 1e-3, 1e-3]])
    new = report([[3.5e-3, 4.5e-3, 5.5e-3], [1e-3, 1e-3, 1e-3]])
    rows, slower = compare(entries(old), entries(new), None, 0.0)
    text = format_compare(rows, slower, None)
    assert text.splitlines()[0] == HEADER and "slowest rank" in HEADER and "median over the repeats" in HEADER
    compute = next(r for r in rows if r["phase"] == "compute")
    assert compute["old"] == 4e-3 and compute["new"] == 4.5e-3
    for row in rows:
        assert row["old_range"][0] <= row["old"] <= row["old_range"][1]
        assert row["new_range"][0] <= row["new"] <= row["new_range"][1]
    line = next(line for line in text.splitlines() if " compute " in line)
    assert re.search(r"4 ms\s+4\.5 ms\s+\+12\.5%\s+\[3 ms - 5 ms\] / \[3\.5 ms - 5\.5 ms\]", line), line


def test_reports_without_repeats_fall_back_to_the_noise_floor():
    from spmd.report.compare import Point

    old, new = {("strong", 1): {"compute": Point(50e-6)}}, {("strong", 1): {"compute": Point(80e-6)}}
    assert compare(old, new, 10, 1e-4)[1] == []  # under --min-seconds in both: noise
    assert compare(old, new, 10, 1e-5)[1][0]["phase"] == "compute"


def test_with_enough_repeats_the_interval_not_the_range_decides():
    """10 repeats: the 95% interval of the median is [2nd, 9th] value, so one outlier in each run no longer hides
    a real slowdown that the ranges (one 90 us repeat in the new run) would call noise."""
    old = report([[100e-6, 101e-6, 102e-6, 103e-6, 99e-6, 100e-6, 101e-6, 102e-6, 100e-6, 200e-6]])
    new = report([[150e-6, 151e-6, 152e-6, 149e-6, 150e-6, 151e-6, 90e-6, 150e-6, 152e-6, 151e-6]])
    rows, slower = compare(entries(old), entries(new), 10, 0.0)
    compute = next(r for r in rows if r["phase"] == "compute")
    assert compute["old_range"] == (100e-6, 103e-6) and compute["new_range"] == (149e-6, 152e-6)
    assert [r["phase"] for r in slower] == ["compute"]  # total: 1 ms more in each, +5%: under 10%
