"""``comm: mpi-cuda`` end to end on 2 GPUs, under whichever MPI runs the tests.

With ``--cuda-mpi`` (the Open MPI of bench/cuda-mpi/build.sh) every job below must run and be
right; without it (the machine's own, not CUDA-aware, Open MPI) each must be refused cleanly:
exit 2, the rank and the library's answer named, no segfault, no report. Both halves run in
bench/gpu_session.sh's cudampi mode, so neither can pass unseen.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from helpers import assert_result_close, reference, write_dataset
from mpi_job import spmd

pytestmark = pytest.mark.gpu
RANKS = 2


def refused(rc, out, err, answer="MPIX_Query_cuda_support() = 0"):
    text = out + err
    assert rc == 2, text
    assert "mpi-cuda needs a CUDA-aware MPI" in text and answer in text, text
    assert "rank 0" in text and "Segmentation" not in text and "SIGSEGV" not in text, text


def reduce_job(tmp_path, data, **keys):
    """A reduce job over ``data`` with comm: mpi-cuda on the GPU: the config's path."""
    write_dataset(tmp_path / "x.h5", data)
    config = tmp_path / "job.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "workload": "reduce",
                "device": "gpu",
                "comm": "mpi-cuda",
                "output": str(tmp_path / "out"),
                "input": {"path": str(tmp_path / "x.h5"), "dataset": "x"},
                **keys,
            }
        )
    )
    return config


def test_info_says_whether_the_loaded_mpi_is_cuda_aware_and_how_it_knows(tmp_path, cuda_mpi):
    rc, out, err, _ = spmd("info", "--json", tmp_path / "info.json", ranks=RANKS, timeout=120)
    assert rc == 0, out + err
    info = json.loads((tmp_path / "info.json").read_text())
    assert info["cuda_aware_mpi"] is cuda_mpi
    assert f"MPIX_Query_cuda_support() = {int(cuda_mpi)}" in info["cuda_aware_how"]
    assert "/libmpi.so" in info["cuda_aware_how"]  # the path of the library that answered
    assert f"CUDA-aware MPI: {'yes' if cuda_mpi else 'no'}" in out


@pytest.mark.gpus(RANKS)
@pytest.mark.parametrize("shape", [(1_000_003,), (4099, 3)])
def test_reduce_over_mpi_cuda_matches_numpy_float64(tmp_path, cuda_mpi, shape):
    data = np.random.default_rng(7).standard_normal(shape)
    rc, out, err, _ = spmd("run", reduce_job(tmp_path, data, repeats=3), ranks=RANKS, timeout=180)
    if not cuda_mpi:
        refused(rc, out, err)
        assert not (tmp_path / "out" / "report.json").exists()
        return
    assert rc == 0, out + err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["comm"] == "mpi-cuda" and report["device"] == "gpu" and report["verified"]
    assert_result_close(report["result"], reference(data))


@pytest.mark.gpus(RANKS)
def test_cuda_support_switched_off_at_run_time_is_refused_not_crashed(tmp_path, cuda_mpi):
    """``--mca opal_cuda_support 0``: Open MPI built with CUDA still answers MPIX_Query_cuda_support() = 1,
    but would treat device pointers as host memory. spmd reads the run-time switch and refuses."""
    config = reduce_job(tmp_path, np.random.default_rng(8).standard_normal(10_000))
    rc, out, err, _ = spmd("run", config, ranks=RANKS, env={"OMPI_MCA_opal_cuda_support": "0"}, timeout=180)
    refused(rc, out, err, "opal_cuda_support (at run time) = 0")
    if cuda_mpi:  # built with CUDA: only the switch says no
        assert "MPIX_Query_cuda_support() = 1" in out + err
    assert not (tmp_path / "out" / "report.json").exists()


@pytest.mark.gpus(RANKS)
@pytest.mark.parametrize("op", ["allreduce", "allgather", "bcast", "sendrecv"])
def test_bench_comm_puts_all_three_backends_side_by_side(tmp_path, cuda_mpi, op):
    rc, out, err, _ = spmd(
        "bench",
        "comm",
        "--op",
        op,
        "--backend",
        "all",
        "--min-bytes",
        "8",
        "--max-bytes",
        "4M",
        "--factor",
        "64",
        "--iters",
        "5",
        "--json",
        tmp_path / "bench.json",
        ranks=RANKS,
        timeout=240,
    )
    assert rc == 0, out + err
    bench = json.loads((tmp_path / "bench.json").read_text())
    assert bench["wrong"] == 0 and bench["device"] == "gpu"
    if cuda_mpi:
        assert list(bench["results"]) == ["nccl", "mpi", "mpi-cuda"] and not bench["skipped"]
        assert len(bench["results"]["mpi-cuda"]) == 4  # 8 B, 512 B, 32 KiB, 2 MiB
    else:
        assert list(bench["results"]) == ["nccl", "mpi"]
        assert "needs a CUDA-aware MPI" in bench["skipped"]["mpi-cuda"]
    # asked for by name, a backend that cannot run is an error, not a skip
    rc, out, err, _ = spmd(
        "bench", "comm", "--op", op, "--backend", "mpi-cuda", "--max-bytes", "64", ranks=RANKS, timeout=120
    )
    if cuda_mpi:
        assert rc == 0 and "over mpi-cuda" in out, out + err
    else:
        refused(rc, out, err)


@pytest.mark.gpus(RANKS)
def test_scale_findings_name_the_fastest_communicator_for_the_measured_sizes(tmp_path, cuda_mpi):
    config = tmp_path / "scale.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "workload": "stencil",
                "device": "gpu",
                "comm": "nccl",
                "repeats": 3,
                "output": str(tmp_path / "out"),
                "input": {"path": str(tmp_path / "field.h5"), "dataset": "x"},
                "generate": {"shape": [2048, 2048], "dtype": "float32", "seed": 3},
                "params": {"kernel": "gaussian", "size": 5, "iterations": 2},
            }
        )
    )
    rc, out, err, _ = spmd("scale", config, "--ranks", "1,2", "--probe-max-bytes", "0", ranks=RANKS, timeout=300)
    assert rc == 0, out + err
    scaling = json.loads((tmp_path / "out" / "scaling" / "scaling.json").read_text())
    two = next(r for r in scaling["runs"] if r["ranks"] == 2)
    seconds = two["backends"]["seconds"]
    assert set(seconds) == ({"nccl", "mpi", "mpi-cuda"} if cuda_mpi else {"nccl", "mpi"})
    assert all(s > 0 for s in seconds.values())
    assert two["backends"]["ops"][0]["op"] == "sendrecv"  # the halo rows, at their own size
    fastest = min(seconds, key=seconds.get)
    lines = [line for line in scaling["advice"] if line.startswith("Communicator")]
    assert lines[0].startswith(f"Communicator: {fastest} was fastest for this workload's own collectives at 2 ranks")
    assert ("Communicator mpi-cuda not compared" in " ".join(lines)) is not cuda_mpi
    assert f"Communicator: {fastest} was fastest" in out  # the findings printed at the end
