import numpy as np
import pytest
from helpers import reference

from spmd.core.errors import VerificationError
from spmd.workloads.reduce import moments as mom
from spmd.workloads.reduce.workload import compare, finalize, merge_stats, reference_stats


def stats_of(x):
    """Reference statistics in the reduce attrs layout, straight from NumPy."""
    x2 = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    return {
        "count": np.full(x2.shape[1], float(len(x2))),
        "sum": x2.sum(0),
        "abs_sum": np.abs(x2).sum(0),
        "min": x2.min(0),
        "max": x2.max(0),
        "m2": ((x2 - x2.mean(0)) ** 2).sum(0),
    }


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (7,), (1000,), (257, 3)])
def test_split_and_merge_equals_whole(dtype, shape):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 3 + 100).astype(dtype)
    cuts = sorted(rng.choice(np.arange(1, shape[0]), size=min(3, shape[0] - 1), replace=False)) if shape[0] > 1 else []
    parts = [mom.moments_xp(p, np) for p in np.split(x, cuts)]
    merged = mom.combine_all(np.stack(parts))
    want = reference(x)
    got = finalize(merged, ddof=0, scalar=len(shape) == 1)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-12, atol=1e-9, err_msg=key)


def test_chunked_path_matches_numpy(monkeypatch):
    monkeypatch.setattr(mom, "CHUNK_ELEMENTS", 1000)  # force many chunks
    x = np.random.default_rng(2).uniform(-5, 5, size=(12345, 2))
    got = finalize(mom.moments_xp(x, np), ddof=1, scalar=False)
    want = reference(x, ddof=1)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-12, err_msg=key)


def test_float32_sum_accumulates_in_float64():
    x = np.full(20_000_000, 0.1, dtype=np.float32)  # a float32 running sum would drift by ~%
    got = finalize(mom.moments_xp(x, np), 0, True)
    assert got["sum"] == pytest.approx(20_000_000 * float(np.float32(0.1)), rel=1e-12)


def test_nan_propagates():
    x = np.array([1.0, np.nan, 3.0])
    m = mom.moments_xp(x, np)
    assert np.isnan(m[mom.MEAN]).all() and np.isnan(m[mom.MIN]).all()


def test_reference_stats_and_merge_stats(tmp_path):
    import h5py

    x = np.random.default_rng(3).standard_normal((5000, 2))
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f["a"] = x[:1234]
        f["b"] = x[1234:]
        parts = [reference_stats(f["a"]), reference_stats(f["b"])]
    merged = merge_stats(parts)
    for key, want in stats_of(x).items():
        np.testing.assert_allclose(merged[key], want, rtol=1e-12, err_msg=key)


def test_compare_accepts_right_and_rejects_wrong_answers():
    x = np.random.default_rng(4).standard_normal(100_000).astype(np.float32) + 5
    expected = stats_of(x)
    m = mom.moments_xp(x, np)
    assert compare(m, expected) < 1e-12
    missing_row = mom.moments_xp(x[1:], np)
    with pytest.raises(VerificationError, match="count"):
        compare(missing_row, expected)
    wrong_sum = m.copy()
    wrong_sum[mom.MEAN] *= 1 + 1e-7
    with pytest.raises(VerificationError, match="sum"):
        compare(wrong_sum, expected)
    wrong_max = m.copy()
    wrong_max[mom.MAX] = np.nextafter(wrong_max[mom.MAX], 0)
    with pytest.raises(VerificationError, match="max"):
        compare(wrong_max, expected)
    poisoned = mom.moments_xp(np.where(np.arange(x.size) == 7, np.nan, x), np)
    with pytest.raises(VerificationError):
        compare(poisoned, expected)


def test_ddof_of_as_many_rows_as_the_input_has_is_refused(tmp_path):
    """var = M2 / (n - ddof) is undefined for n <= ddof: it used to divide by 1 and report 'verified'."""
    from helpers import write_dataset
    from mpi4py import MPI

    from spmd.core.errors import ConfigError
    from spmd.core.runtime import Context
    from spmd.job import run_job
    from spmd.workloads.registry import job_config_from_dict

    write_dataset(tmp_path / "x.h5", np.arange(3.0))
    for ddof, ok in ((2, True), (3, False)):
        cfg = job_config_from_dict(
            {
                "workload": "reduce",
                "device": "cpu",
                "params": {"ddof": ddof},
                "input": {"path": str(tmp_path / "x.h5"), "dataset": "x"},
            }
        )
        with Context(MPI.COMM_SELF) as ctx:
            if ok:
                assert run_job(ctx, cfg).report["result"]["var"] == pytest.approx(2.0)  # 2 / (3 - 2)
            else:
                with pytest.raises(ConfigError, match="params.ddof: 3, but the input has 3 rows"):
                    run_job(ctx, cfg)


def test_resident_blocks_from_registers_match_the_drivers_answers(monkeypatch):
    """Where the driver's occupancy cannot be asked, FusedMoments works the resident blocks out from the kernel's
    registers: checked against what the driver answered on an H200 for every shape of the committed sweep."""
    import json
    import types
    from pathlib import Path

    from spmd.core import libraries
    from spmd.core import xp as xpmod

    sweep = json.loads((Path(__file__).parents[2] / "docs/results/h200x1/kernels/sweeps.json").read_text())["reduce"]
    h200 = {
        "MaxRegistersPerMultiprocessor": 65536,
        "MaxThreadsPerMultiProcessor": 2048,
        "MaxBlocksPerMultiprocessor": 32,
    }
    device = types.SimpleNamespace(attributes=h200)
    monkeypatch.setattr(xpmod, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(Device=lambda: device)))
    monkeypatch.setattr(libraries, "cuda_driver", lambda: None)
    answers = {(v["registers"], v["resident_per_sm"]) for v in sweep["variants"]}
    assert len({regs for regs, _ in answers}) >= 8  # registers from 52 to 226: one block per SM to four
    for regs, resident in answers:
        assert mom._occupancy(types.SimpleNamespace(num_regs=regs), mom.FusedMoments.THREADS) == (resident, regs)
    assert mom._occupancy(types.SimpleNamespace(), 256) == (None, None)  # nothing to go on


# CuPy's Device().attributes as an H100 SXM and an H200 report them (memory clock and SM clock in kHz)
H100 = {"ComputeCapability": 90, "MemoryClockRate": 2_619_000, "GlobalMemoryBusWidth": 5120,
        "MultiProcessorCount": 132, "ClockRate": 1_980_000}  # fmt: skip
H200 = {**H100, "MemoryClockRate": 3_201_000, "GlobalMemoryBusWidth": 6016}  # as one reported itself


def test_the_ring_where_memory_outpaces_what_registers_keep_in_flight():
    assert mom.memory_bytes_per_sm_clock(H100) == pytest.approx(2 * 2.619e9 * 640 / (132 * 1.98e9))
    assert mom.ring_stages(H200) == mom.RING_STAGES  # 18.4 bytes an SM clock
    assert mom.ring_stages(H100) == 0  # 12.8
    assert mom.ring_stages({**H200, "ComputeCapability": 75}) == 0  # no cp.async before sm_80
    unknown = {"ComputeCapability": 90, "MultiProcessorCount": 132}
    assert mom.memory_bytes_per_sm_clock(unknown) is None and mom.ring_stages(unknown) == mom.RING_STAGES
    assert mom.memory_bytes_per_sm_clock({**H100, "ClockRate": 0}) is None
