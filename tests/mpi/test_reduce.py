"""The reduce workload end to end in-process: every layout, against NumPy float64."""

import json
import os
import zlib

import numpy as np
import pytest
from helpers import assert_result_close, reference, write_dataset

from spmd.core.runtime import Context
from spmd.io.hdf5 import plan_rank_input
from spmd.job import run_job
from spmd.workloads.registry import job_config_from_dict

CASES = {
    # name: (shape, dtype, number of shard files or None for one file)
    "1d-float32": ((1001,), np.float32, None),
    "1d-float64-odd": ((4099,), np.float64, None),
    "2d-float32": ((1003, 4), np.float32, None),
    "2d-float64": ((517, 3), np.float64, None),
    "1d-shards": ((2000,), np.float32, 5),
    "2d-shards": ((999, 2), np.float64, 4),
}


def make_input(world, folder, name, shape, dtype, shards):
    """Rank 0 writes the data (one file or shard files); every rank gets the paths and data."""
    data = (np.random.default_rng(zlib.crc32(name.encode())).standard_normal(shape) * 3 + 2).astype(dtype)
    base = os.path.join(folder, name)
    if world.rank == 0:
        os.makedirs(base, exist_ok=True)
        if shards is None:
            write_dataset(f"{base}/data.h5", data)
        else:
            for i, part in enumerate(np.array_split(data, shards)):
                write_dataset(f"{base}/part-{i:02d}.h5", part)
    world.Barrier()
    spec = (
        {"path": f"{base}/data.h5", "dataset": "x"}
        if shards is None
        else {"shards": f"{base}/part-*.h5", "dataset": "x"}
    )
    return data, spec


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("ddof", [0, 1])
def test_reduce_matches_numpy(backend, world, shared_tmp, case, ddof):
    shape, dtype, shards = CASES[case]
    data, spec = make_input(world, shared_tmp, f"{case}-{backend[0]}-{backend[1]}", shape, dtype, shards)
    cfg = job_config_from_dict(
        {
            "workload": "reduce",
            "device": backend[0],
            "comm": backend[1],
            "input": spec,
            "warmup": 1,
            "repeats": 2,
            "params": {"ddof": ddof},
        }
    )
    out = os.path.join(shared_tmp, f"out-{case}-{ddof}-{backend[0]}-{backend[1]}")
    ctx = Context()
    job = run_job(ctx, cfg, out)
    report, path = job.report, job.path
    ctx.close()
    world.Barrier()
    assert_result_close(report["result"], reference(data, ddof))
    assert report["verified"] and report["verification"]["reference"] == "full"
    assert report["ranks"] == world.size and report["comm"] == backend[1] and report["device"] == backend[0]
    assert report["metrics"]["bytes_total"] == data.nbytes
    for phase in ("read", "wait", "h2d", "compute", "comm", "total"):
        t = report["timings"][phase]
        assert 0 <= t["min"] <= t["median"] <= t["max"]
    assert len(report["per_rank"]) == world.size and len(report["per_rank"][0]["repeats"]) == 2
    if world.rank == 0:
        assert json.load(open(path)) == json.loads(json.dumps(report))


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("rows", [7, 10, 11])
def test_each_rank_reads_exactly_its_block(world, shared_tmp, rows):
    data = np.arange(rows * 2, dtype=np.float64).reshape(rows, 2)
    path = os.path.join(shared_tmp, f"blocks-{rows}.h5")
    if world.rank == 0:
        write_dataset(path, data)
    world.Barrier()
    cfg = job_config_from_dict({"workload": "reduce", "input": {"path": path, "dataset": "x"}})
    part = plan_rank_input(cfg.input, None, world.rank, world.size, ("float64",), (1, 2))
    buf = np.full(part.shape, np.nan)  # poison: unwritten rows stay NaN
    part.read_into(buf)
    gathered = world.allgather(buf)
    base, extra = divmod(rows, world.size)
    assert buf.shape[0] == base + (1 if world.rank < extra else 0)
    np.testing.assert_array_equal(np.concatenate(gathered), data)


@pytest.mark.mpi(min_size=2)
def test_untimed_preparation_slower_on_one_rank_is_not_the_others_wait(world, shared_tmp, monkeypatch):
    """Each repeat starts on every rank together: rank 1 poisoning its buffers 0.3 s longer must not show as
    0.3 s of rank 0's wait (the barrier after the read measures input imbalance only)."""
    import time

    from spmd.workloads.reduce.workload import ReduceWorkload as Reduce

    data, spec = make_input(world, shared_tmp, "slow-prepare", (4001,), np.float32, None)
    prepare = Reduce.prepare

    def slow_on_rank_1(self):
        prepare(self)
        if world.rank == 1:
            time.sleep(0.3)

    monkeypatch.setattr(Reduce, "prepare", slow_on_rank_1)
    cfg = job_config_from_dict(
        {"workload": "reduce", "device": "cpu", "comm": "mpi", "input": spec, "warmup": 0, "repeats": 2}
    )
    with Context() as ctx:
        report = run_job(ctx, cfg).report
    assert_result_close(report["result"], reference(data, 0))
    assert report["timings"]["wait"]["max"] < 0.15, report["timings"]["wait"]
