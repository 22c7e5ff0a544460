"""The input engines under mpiexec (2, 3 and 4 ranks: even and uneven splits): every layout read by the direct
engine, h5py and auto is bit-identical to h5py's own read of the same rows, into buffers poisoned first; the
engine the reader reports is the one the layout allows; a file whose layout changed between two runs is read
as it is now."""

import os
import zlib

import h5py
import numpy as np
import pytest

from spmd.core.config import InputConfig, IoConfig
from spmd.io.hdf5 import expand_shards, plan_rank_input
from spmd.io.reader import RowReader

LAYOUTS = {
    # name: (shape, dtype, dataset keywords, shard files or None, the engine auto must pick)
    "1d-contiguous-float32": ((100_003,), np.float32, {}, None, "direct"),
    "2d-contiguous-float64": ((5_001, 7), np.float64, {}, None, "direct"),
    "1d-chunks-straddle": ((100_003,), np.float64, {"chunks": (4_099,)}, None, "direct"),
    "2d-chunks-straddle": ((5_001, 7), np.float32, {"chunks": (333, 7)}, None, "direct"),
    "2d-chunks-tiles": ((5_001, 8), np.float32, {"chunks": (100, 4)}, None, "h5py"),
    "gzip-shuffle": (
        (50_001, 3),
        np.float32,
        {"chunks": (1_000, 3), "compression": "gzip", "shuffle": True},
        None,
        "h5py",
    ),
    "big-endian": ((10_001,), ">f8", {}, None, "h5py"),
    "shards-uneven": ((20_011, 2), np.float64, {"chunks": (97, 2)}, 5, "direct"),
}


def write(world, folder, name, shape, dtype, keywords, shards):
    data = (np.random.default_rng(zlib.crc32(name.encode())).standard_normal(shape) * 3).astype(dtype)
    base = os.path.join(folder, name)
    if world.rank == 0:
        os.makedirs(base, exist_ok=True)
        parts = [data] if shards is None else np.array_split(data, shards)
        for i, part in enumerate(parts):
            with h5py.File(f"{base}/part-{i:02d}.h5", "w") as f:
                f.create_dataset(
                    "x", data=part, **{k: v for k, v in keywords.items() if k != "chunks" or v[0] <= len(part)}
                )
    world.Barrier()
    return (
        InputConfig(path=f"{base}/part-00.h5", dataset="x")
        if shards is None
        else InputConfig(shards=(f"{base}/part-*.h5",), dataset="x")
    )


def read_with(world, input_cfg, io_cfg, hand_on=True):
    """This rank's rows through RowReader (into a NaN-poisoned buffer; ``hand_on``: pieces handed on as they land,
    as on a GPU, else each thread's run in as few reads as it can, as on a CPU), h5py's plain read of them, the
    engines, and whether every byte was handed on."""
    shards = expand_shards(input_cfg.shards) if input_cfg.shards else None
    plan = plan_rank_input(input_cfg, shards, world.rank, world.size, ("float32", "float64"), (1, 2))
    got = np.full(plan.shape, np.nan, plan.dtype.newbyteorder("="))
    reader = RowReader(plan, io_cfg)
    landed = []
    reader.read(got, landed=(lambda lo, hi: landed.append((lo, hi))) if hand_on else None)
    want = np.concatenate([h5py.File(p.path, "r")[p.dataset][p.start : p.stop] for p in plan.pieces])
    covered = np.zeros(got.nbytes, bool)
    for lo, hi in landed:
        covered[lo:hi] = True
    return got, want, [e["engine"] for e in reader.engines()], bool(covered.all()) or not hand_on


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("name", LAYOUTS)
@pytest.mark.parametrize(
    "engine,buffer_mb,hand_on",
    [("auto", 8.0, True), ("direct", 0.01, True), ("direct", 0.01, False), ("h5py", 8.0, True)],
)
def test_every_engine_reads_what_h5py_reads(world, shared_tmp, name, engine, buffer_mb, hand_on):
    shape, dtype, keywords, shards, auto_pick = LAYOUTS[name]
    input_cfg = write(world, shared_tmp, name, shape, dtype, keywords, shards)
    got, want, engines, covered = read_with(
        world, input_cfg, IoConfig(engine=engine, threads=4, buffer_mb=buffer_mb), hand_on
    )
    results = world.allgather(
        (
            np.array_equal(got.view(np.uint8), np.ascontiguousarray(want.astype(got.dtype)).view(np.uint8)),
            engines,
            covered,
        )
    )
    expected = "h5py" if engine == "h5py" else auto_pick
    assert all(same for same, _, _ in results), [same for same, _, _ in results]
    assert all(set(e) == {expected} for _, e, _ in results), results
    assert all(c for _, _, c in results), "some bytes were never handed on as landed"


@pytest.mark.mpi(min_size=2)
def test_a_file_whose_layout_changed_between_two_runs_is_read_as_it_is_now(world, shared_tmp):
    path = os.path.join(shared_tmp, "changing.h5")
    rng = np.random.default_rng(9)
    for keywords in ({}, {"chunks": (777,)}, {"chunks": (50,), "compression": "gzip"}, {}):
        data = rng.standard_normal(30_011).astype(np.float32)
        if world.rank == 0:
            with h5py.File(path, "w") as f:
                f.create_dataset("x", data=data, **keywords)
        world.Barrier()
        got, want, _, _ = read_with(world, InputConfig(path=path, dataset="x"), IoConfig(engine="auto"))
        same = world.allgather(np.array_equal(got, want))
        world.Barrier()
        assert all(same), (keywords, same)
