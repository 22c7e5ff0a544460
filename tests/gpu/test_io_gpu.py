"""The input engines on a GPU: reduce reads its rows by each engine (the direct engine's pieces copied to the
device as they land; KvikIO straight into GPU memory where it is installed), verifies against NumPy float64,
reports the engine of every piece, and splits the copy into the part the read hid and the part it did not."""

import h5py
import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def write(path, layout):
    data = np.random.default_rng(6).standard_normal(3_000_001).astype(np.float32)
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, **({"chunks": (100_000,)} if layout == "chunked" else {}))
    return data


def reduce_on_gpu(path, io=None) -> dict:
    """report.json of reduce on this GPU over ``path``:x, verified in full, with config ``io`` (None: defaults)."""
    from spmd.core.runtime import Context
    from spmd.job import run_job
    from spmd.workloads.registry import job_config_from_dict

    job = {"workload": "reduce", "device": "gpu", "repeats": 3, "verify": "full"}
    cfg = job_config_from_dict({**job, "input": {"path": str(path), "dataset": "x"}, **({"io": io} if io else {})})
    ctx = Context()
    try:
        return run_job(ctx, cfg).report
    finally:
        ctx.close()


@pytest.mark.parametrize("layout", ["contiguous", "chunked"])
@pytest.mark.parametrize("engine", ["h5py", "direct", "kvikio", "mapped"])
def test_reduce_reads_by_each_engine_on_the_gpu(tmp_path, engine, layout):
    from spmd.core.errors import ConfigError
    from spmd.io.reader import load_kvikio

    if engine == "kvikio":
        try:
            load_kvikio()
        except ConfigError as exc:
            pytest.skip(str(exc))
    data = write(tmp_path / "x.h5", layout)
    report = reduce_on_gpu(tmp_path / "x.h5", {"engine": engine, "buffer_mb": 1})
    assert report["verified"] and report["result"]["sum"] == pytest.approx(float(data.sum(dtype=np.float64)), rel=1e-6)
    assert [p["engine"] for p in report["io"]["per_rank"][0]] == [engine]
    timings = report["timings"]
    assert timings["h2d"]["median"] >= 0 and timings["read"]["median"] > 0
    if engine == "mapped":  # the rank's bytes locked at set-up, and how long that took, in the report
        (piece,) = report["io"]["per_rank"][0]
        assert piece["locked_bytes"] >= data.nbytes and piece["lock_s"] > 0, piece
    if engine == "direct":  # 12 pieces of 1 MiB: the copies of all but the last ran during the read
        assert timings["h2d_overlapped"]["median"] > 0, timings


def test_auto_maps_a_file_the_page_cache_holds_on_the_gpu(tmp_path):
    """io.engine: auto (the default) on a GPU run, the file just written (so in the page cache): read by mapped,
    the report saying why; the result verified against NumPy float64."""
    data = write(tmp_path / "x.h5", "contiguous")
    report = reduce_on_gpu(tmp_path / "x.h5")
    assert report["verified"] and report["result"]["sum"] == pytest.approx(float(data.sum(dtype=np.float64)), rel=1e-6)
    (piece,) = report["io"]["per_rank"][0]
    assert piece["engine"] == "mapped" and piece["auto"].startswith("the page cache holds all"), piece
    assert piece["locked_bytes"] >= data.nbytes
