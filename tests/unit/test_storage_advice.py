"""spmd scale's storage finding: the largest run's read phase against plain preads of the same bytes measured
right after it, and whether reading is most of a repeat."""

from spmd.scale.decision.advice import storage_advice


def run(ranks, read_s, total_s, limit_s, nbytes=1 << 30):
    timings = {"read": {"min": read_s, "median": read_s, "max": read_s}, "total": {"median": total_s}}
    return {
        "ranks": ranks,
        "report": {"timings": timings},
        "read_limit": [{"bytes": nbytes, "seconds": limit_s}] * ranks,
    }


def test_reads_at_the_storages_limit_and_most_of_a_repeat_are_storage_bound():
    (line,) = storage_advice([run(1, 0.5, 0.6, 0.25), run(2, 0.5, 0.6, 0.45)])
    assert line.startswith(
        "At 2 ranks each rank read 1 GiB at 2.15 GB/s (the slowest rank), 90% of what plain preads of the same bytes"
    )
    assert "reading is 83% of a repeat" in line and "storage-bound" in line and "fewer bytes or faster storage" in line


def test_reads_below_the_limit_name_the_engine_and_threads():
    (line,) = storage_advice([run(4, 0.5, 0.6, 0.1)])
    assert "20% of what plain preads" in line and "read-bound below the storage's limit" in line
    assert "io.engine, io.threads" in line


def test_a_short_read_is_only_described_and_no_limit_says_nothing():
    (line,) = storage_advice([run(2, 0.1, 1.0, 0.1)])
    assert line.endswith("reading is 10% of a repeat.")
    assert storage_advice([{**run(2, 0.1, 1.0, 0.1), "read_limit": None}]) == []
    assert storage_advice([{**run(2, 0.1, 1.0, 0.1), "read_limit": [None, {"bytes": 1, "seconds": 1}]}]) == []
