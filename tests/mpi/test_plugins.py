"""Plug-in workloads under mpiexec (2 and 3 ranks; the GPU backends with --gpu): the examples against serial
NumPy over the whole input, and every way to combine (sum, min, max, gather) with uneven splits."""

from __future__ import annotations

import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

from spmd.core.runtime import Context
from spmd.job import run_job
from spmd.workloads.registry import job_config_from_dict

EXAMPLES = Path(__file__).parents[2] / "examples"
ROWS = 10_007  # split unevenly over 2 and 3 ranks

COMBINES = textwrap.dedent("""
    import spmd

    @spmd.map_reduce(combine="min")
    def column_min(block, xp, params):
        return block.min(axis=0)

    @spmd.map_reduce(combine="max")
    def column_max(block, xp, params):
        return block.max(axis=0)

    @spmd.map_reduce(combine="gather")
    def rows_and_sums(block, xp, params):
        return xp.stack([xp.asarray(float(block.shape[0])), block.astype(xp.float64).sum()])

    @spmd.map_reduce(combine="sum")
    def grand_total(block, xp, params):
        return xp.sum(block, dtype=xp.float64)

    @spmd.map_reduce(combine="gather")
    def row_counts(block, xp, params):
        return xp.asarray(block.shape[0], dtype=xp.int64)

    @spmd.map_reduce(combine="sum", reference=lambda data, params: data.astype("float64").sum(axis=0) * 2)
    def doubled_sums(block, xp, params):
        return block.astype(xp.float64).sum(axis=0) * 2
""")


@pytest.fixture(scope="module")
def data(world, shared_tmp):
    """events (1-D), points (2-D, 2 columns), features (2-D, 5 columns), and the combine plug-ins."""
    rng = np.random.default_rng(3)
    arrays = {
        "events": (rng.standard_normal(ROWS) * 15 + 50).astype(np.float32),
        "points": rng.uniform(-10, 10, (ROWS, 2)).astype(np.float32),
        "features": rng.standard_normal((ROWS, 5)) * [1, 2, 3, 4, 5] + 1,
    }
    if world.rank == 0:
        for name, array in arrays.items():
            with h5py.File(f"{shared_tmp}/{name}.h5", "w") as f:
                f.create_dataset("x", data=array)
        Path(shared_tmp, "combines.py").write_text(COMBINES)
    world.Barrier()
    return arrays


def run(backend, workload, name, shared_tmp, **keys):
    cfg = job_config_from_dict(
        {
            "workload": workload,
            "device": backend[0],
            "comm": backend[1],
            "repeats": 2,
            "input": {"path": f"{shared_tmp}/{name}.h5", "dataset": "x"},
            **keys,
        }
    )
    with Context() as ctx:
        return run_job(ctx, cfg).report


@pytest.mark.mpi(min_size=2)
def test_histogram_example_equals_numpy(backend, data, shared_tmp):
    params = {"bins": 40, "lo": 0.0, "hi": 100.0}
    report = run(backend, f"{EXAMPLES}/histogram.py:energy_histogram", "events", shared_tmp, params=params)
    want, _ = np.histogram(data["events"], bins=40, range=(0.0, 100.0))
    result = report["result"]
    np.testing.assert_array_equal(result["value"], want)
    assert result["shape"] == [40] and result["dtype"] == "float64" and result["events"] == want.sum()
    assert report["verified"] and report["timings"]["compute"]["median"] > 0
    assert report["problem"]["comm"] == [{"op": "allreduce", "bytes": 40 * 8}]


@pytest.mark.mpi(min_size=2)
def test_kmeans_example_equals_a_serial_kmeans(backend, data, shared_tmp):
    """10 Lloyd iterations from the same start (the first k points), against NumPy on one process."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("kmeans_example", EXAMPLES / "kmeans.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    report = run(backend, f"{EXAMPLES}/kmeans.py:KMeans", "points", shared_tmp, params={"k": 5, "iterations": 12})
    x = data["points"].astype(np.float64)
    want = x[:5].copy()
    for _ in range(12):
        want = example.move(example.lloyd_step(x, want, np), 5, 2, np)
    np.testing.assert_allclose(report["result"]["centroids"], want, rtol=1e-9, atol=1e-9)
    assert report["verified"] and report["problem"]["comm"][0]["calls"] == 12


@pytest.mark.mpi(min_size=2)
def test_pca_example_equals_numpy_covariance(backend, data, shared_tmp):
    report = run(backend, f"{EXAMPLES}/pca.py:scatter_matrix", "features", shared_tmp)
    x = data["features"]
    result = report["result"]
    np.testing.assert_allclose(result["mean"], x.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(result["covariance"], np.cov(x.T), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(result["principal_variances"], np.sort(np.linalg.eigvalsh(np.cov(x.T)))[::-1], rtol=1e-9)
    assert result["rows"] == ROWS


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize(
    "name, want",
    [
        ("column_min", lambda x, n: x.min(axis=0)),
        ("column_max", lambda x, n: x.max(axis=0)),
        ("doubled_sums", lambda x, n: x.astype(np.float64).sum(axis=0) * 2),
        (
            "rows_and_sums",
            lambda x, n: np.array([[b.shape[0], b.astype(np.float64).sum()] for b in np.array_split(x, n)]),
        ),
        ("grand_total", lambda x, n: np.sum(x, dtype=np.float64)),  # a 0-d result stays 0-d
        ("row_counts", lambda x, n: np.array([len(b) for b in np.array_split(x, n)])),
    ],
)
def test_every_combine_against_numpy(backend, data, shared_tmp, world, name, want):
    report = run(backend, f"{shared_tmp}/combines.py:{name}", "points", shared_tmp)
    expected = want(data["points"], world.size)
    np.testing.assert_allclose(report["result"]["value"], expected, rtol=1e-12)
    assert report["verified"] and report["result"]["shape"] == list(expected.shape)
    expected_op = "allgather" if name in ("rows_and_sums", "row_counts") else "allreduce"
    assert report["problem"]["comm"][0]["op"] == expected_op
