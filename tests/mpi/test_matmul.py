"""matmul end to end in-process on 2 and 3 ranks (and 4 when launched so): every algorithm,
source of B, gather mode and dtype, the saved C against NumPy float64 A @ B."""

import h5py
import numpy as np
import pytest
from helpers import write_dataset

from spmd.core.errors import VerificationError
from spmd.core.runtime import Context
from spmd.job import run_job
from spmd.workloads.matmul.workload import MatmulWorkload
from spmd.workloads.registry import job_config_from_dict

M, K, N = 53, 37, 29  # odd sizes: every split over 2, 3 and 4 ranks is uneven


@pytest.fixture(scope="module")
def matrices(world, shared_tmp):
    rng = np.random.default_rng(5)
    a64, b64 = rng.standard_normal((M, K)) + 1, rng.standard_normal((K, N)) - 0.5
    if world.rank == 0:
        for dtype in ("float32", "float64"):
            write_dataset(f"{shared_tmp}/A-{dtype}.h5", a64.astype(dtype), name="A")
            write_dataset(f"{shared_tmp}/B-{dtype}.h5", b64.astype(dtype), name="B")
    world.Barrier()
    return a64, b64


def matmul_config(folder, backend, dtype, **params):
    return job_config_from_dict(
        {
            "workload": "matmul",
            "device": backend[0],
            "comm": backend[1],
            "warmup": 1,
            "repeats": 2,
            "input": {"path": f"{folder}/A-{dtype}.h5", "dataset": "A"},
            "params": {"b": {"path": f"{folder}/B-{dtype}.h5", "dataset": "B"}, **params},
        }
    )


def run_and_load(world, folder, cfg, tag):
    """Run the job with C saved; every rank gets the report and the saved C."""
    save = f"{folder}/C-{tag}.h5"
    cfg = job_config_from_dict(
        {**cfg.to_dict(), "params": {**cfg.to_dict()["params"], "save": {"path": save, "dataset": "C"}}}
    )
    ctx = Context()
    report = run_job(ctx, cfg).report
    ctx.close()
    world.Barrier()
    with h5py.File(save, "r") as f:
        return report, f["C"][...]


CASES = [
    ("rows", "read", "none"),
    ("rows", "bcast", "root"),
    ("rows", "allgather", "allgather"),
    ("summa", "read", "none"),
    ("summa", "read", "allgather"),
    ("summa", "read", "root"),
]


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("algorithm,b_source,gather", CASES)
def test_matmul_equals_numpy_float64(backend, world, shared_tmp, matrices, dtype, algorithm, b_source, gather):
    a64, b64 = matrices
    params = {"algorithm": algorithm, "b_source": b_source, "gather": gather, "panel": 7}
    tag = f"{backend[0]}-{backend[1]}-{dtype}-{algorithm}-{b_source}-{gather}"
    report, c = run_and_load(world, shared_tmp, matmul_config(shared_tmp, backend, dtype, **params), tag)
    want = a64.astype(dtype).astype(np.float64) @ b64.astype(dtype).astype(np.float64)
    rtol = 1e-5 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(c, want, rtol=rtol, atol=rtol * np.abs(want).max())
    grid = report["result"]["grid"]
    assert grid[0] * grid[1] == world.size and (algorithm == "summa" or grid == [world.size, 1])
    if algorithm == "summa":  # the default grid: most nearly square, rows >= cols
        assert grid == {2: [2, 1], 3: [3, 1], 4: [2, 2]}.get(world.size, grid)
    assert report["result"]["shape"] == [M, N]
    np.testing.assert_allclose(report["result"]["sum"], want.sum(), rtol=1e-5)
    v = report["verification"]
    assert v["freivalds_worst_to_bound"] < 1 and v["max_relative_error"] < v["tolerance_tau"]
    assert v["sampled_rows"] >= 2 * world.size
    assert all(r > 0 for r in report["metrics"]["tflops_per_rank"])


@pytest.mark.mpi(min_size=2)
def test_summa_on_a_one_row_grid(backend, world, shared_tmp, matrices):
    """[1, n]: A's panels travel along the only grid row, B is split by columns."""
    a64, b64 = matrices
    cfg = matmul_config(shared_tmp, backend, "float64", algorithm="summa", grid=[1, world.size], panel=5)
    report, c = run_and_load(world, shared_tmp, cfg, f"{backend[0]}-{backend[1]}-1xn")
    np.testing.assert_allclose(c, a64 @ b64, rtol=1e-12)
    assert report["result"]["grid"] == [1, world.size]


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("fault", ["skip_last_panel", "wrong_block"])
def test_a_wrong_product_fails_verification(backend, world, shared_tmp, matrices, monkeypatch, fault):
    """Both checks catch what tutorials get wrong: a missing panel, a block computed from the
    wrong rows of B."""
    if fault == "skip_last_panel":
        original = MatmulWorkload._panels
        monkeypatch.setattr(MatmulWorkload, "_panels", lambda self: original(self)[:-1])
        cfg = matmul_config(shared_tmp, backend, "float64", algorithm="summa", panel=5)
    else:

        def shifted(self):  # the last rank multiplies by B with its rows rolled: a wrong block of C
            if self.ctx.rank == self.ctx.size - 1:
                self.dev_b[...] = self.ctx.xp.roll(self.dev_b, 1, axis=0)

        monkeypatch.setattr(MatmulWorkload, "_share_b", shifted)
        cfg = matmul_config(shared_tmp, backend, "float64")
    ctx = Context()
    with pytest.raises(VerificationError) as err:
        run_job(ctx, cfg)
    ctx.close()
    assert err.value.collective
    assert "Freivalds" in str(err.value) or "recomputation" in str(err.value)


@pytest.mark.mpi(min_size=2)
def test_uneven_allgather_of_b_closes_the_gaps(backend, world, shared_tmp, matrices):
    """b_source allgather with K not divisible by the ranks: the slices are padded, then packed."""
    a64, b64 = matrices
    assert K % world.size or world.size == 1
    report, c = run_and_load(
        world,
        shared_tmp,
        matmul_config(shared_tmp, backend, "float64", b_source="allgather"),
        f"{backend[0]}-{backend[1]}-ag",
    )
    np.testing.assert_allclose(c, a64 @ b64, rtol=1e-12)
    assert report["problem"]["comm"][0]["op"] == "allgather"
