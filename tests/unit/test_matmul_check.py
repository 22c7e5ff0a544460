"""matmul's check (spmd.workloads.matmul.check): its tolerance by dtype and depth, and the rows it samples."""

from spmd.io.plan import Grid, grid_block
from spmd.workloads.matmul.check import sample_rows, tau


def test_matmul_tolerances_and_sampled_rows():
    assert tau("float64", 1000, False) < tau("float32", 1000, False) < tau("float32", 1000, True)
    assert tau("float32", 4 * 1000, False) > tau("float32", 1000, False)
    blocks = [grid_block((20, 5), Grid(3, 1), r) for r in range(3)]
    rows = sample_rows(20, blocks, 3, seed=1)
    assert {0, 6, 7, 13, 14, 19} <= set(rows) and rows == sorted(set(rows)) and len(rows) <= 9
