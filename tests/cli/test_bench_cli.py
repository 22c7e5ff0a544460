"""``spmd bench comm``, ``spmd info`` and ``spmd topo`` under mpiexec on a machine without a GPU."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile

import pytest
from helpers import LAUNCH_ENV
from mpi_job import mpiexec, spmd

from spmd.core import xp as xpmod


def table_rows(text: str) -> list[list[str]]:
    return [
        line.split()
        for line in text.splitlines()
        if line and not line.startswith("#") and line.split()[0].isdigit() and len(line.split()) == 9
    ]


@pytest.mark.parametrize(
    "op, factor",
    [("allreduce", 4 / 3), ("allgather", 2 / 3), ("reduce_scatter", 2 / 3), ("bcast", 1.0), ("sendrecv", 1.0)],
)
def test_bench_comm_table_and_json(tmp_path, op, factor):
    out = tmp_path / "comm.json"
    rc, stdout, err, _ = spmd(
        "bench",
        "comm",
        "--op",
        op,
        "--backend",
        "mpi",
        "--device",
        "cpu",
        "--min-bytes",
        "8",
        "--max-bytes",
        "64K",
        "--factor",
        "8",
        "--dtype",
        "float64",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--json",
        out,
    )
    assert rc == 0, err
    rows = table_rows(stdout)
    assert [int(r[0]) for r in rows] == (
        [8, 64, 512, 4096, 32768] if op not in ("allgather", "reduce_scatter") else [24, 48, 504, 4080, 32760]
    )  # whole elements per rank (3 ranks)
    for size, count, dtype, redop, root, time_us, algbw, busbw, wrong in rows:
        assert int(count) * 8 == int(size) and dtype == "double" and wrong == "0"
        assert redop == ("sum" if op in ("allreduce", "reduce_scatter") else "none")
        assert root == ("0" if op == "bcast" else "-1")
        assert float(time_us) > 0 and float(busbw) == pytest.approx(float(algbw) * factor, abs=0.011)
    data = json.loads(out.read_text())
    assert data["op"] == op and data["ranks"] == 3 and data["wrong"] == 0 and list(data["results"]) == ["mpi"]
    assert data["bus_factor"] == pytest.approx(factor)
    for r in data["results"]["mpi"]:
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * factor)
        assert r["algbw_GBps"] == pytest.approx(r["size"] / r["time_us"] / 1e3)


@pytest.mark.skipif(xpmod.gpu_count() > 0, reason="this machine has a GPU: nccl is available here")
def test_backend_all_skips_what_cannot_run_and_named_backends_fail(tmp_path):
    rc, stdout, err, _ = spmd("bench", "comm", "--backend", "all", "--max-bytes", "64", "--iters", "2", ranks=2)
    assert rc == 0, err
    assert "# nccl: skipped: rank 0 on" in stdout and "needs device: gpu" in stdout
    assert "# mpi-cuda: skipped:" in stdout and "needs a CUDA-aware MPI" in stdout
    assert len(table_rows(stdout)) == 4
    rc, _, err, _ = spmd("bench", "comm", "--backend", "nccl", "--max-bytes", "64", ranks=2)
    assert rc == 2 and "comm: nccl needs device: gpu" in err


def test_wrong_results_exit_non_zero(tmp_path):
    """A collective that returns a wrong element is reported in #wrong and fails the run."""
    code = (
        "import spmd.measure.collectives as c; real = c.expected; "
        "c.expected = lambda *a: real(*a) + 1; "
        "from spmd.cli.main import main; raise SystemExit(main(sys.argv[1:]))"
    )
    cmd = [
        *mpiexec(),
        "-n",
        "2",
        sys.executable,
        "-c",
        f"import sys; {code}",
        "bench",
        "comm",
        "--device",
        "cpu",
        "--max-bytes",
        "64",
        "--iters",
        "2",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=LAUNCH_ENV, timeout=60)
    assert proc.returncode == 3, proc.stderr
    rows = table_rows(proc.stdout)
    assert rows and all(int(r[-1]) > 0 for r in rows)
    assert "element(s) wrong in allreduce results" in proc.stderr


def test_bad_sizes_exit_2():
    rc, _, err, _ = spmd("bench", "comm", "--min-bytes", "1K", "--max-bytes", "8", ranks=2)
    assert rc == 2 and "min-bytes <= max-bytes" in err


@pytest.mark.skipif(xpmod.gpu_count() > 0, reason="checks the no-GPU answer")
def test_info_without_a_gpu(tmp_path):
    out = tmp_path / "info.json"
    rc, stdout, err, _ = spmd("info", "--json", out, ranks=2, env={"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "2"})
    assert rc == 0, err
    assert "CUDA-aware MPI: no (" in stdout and "GPUs: none visible" in stdout
    assert "SLURM_JOB_ID=4242" in stdout
    data = json.loads(out.read_text())
    assert [r["rank"] for r in data["ranks"]] == [0, 1] and all(r["gpu"] is None for r in data["ranks"])
    assert data["versions"]["mpi4py"] and data["versions"]["mpi_library"]
    assert data["cuda_aware_mpi"] is False and "MPIX" in data["cuda_aware_how"]
    assert data["slurm"] == {"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "2"}


@pytest.mark.skipif(xpmod.gpu_count() > 0, reason="checks the no-GPU answer")
def test_topo_without_a_gpu(tmp_path):
    out, png = tmp_path / "topo.json", tmp_path / "topo.png"
    rc, stdout, err, _ = spmd("topo", "--json", out, "--png", png, ranks=2)
    assert rc == 0, err
    assert stdout.count("no GPU visible") == 1  # one rank per node measures
    data = json.loads(out.read_text())
    ((host, topo),) = data["nodes"].items()
    assert data["spmd_version"]  # spmd's record: a later run may replace the file
    assert topo["gpus"] == [] and "nothing to measure" in topo["note"]
    assert not png.exists()  # no heat map without GPUs


@pytest.mark.parametrize("per_node", [None, 1])
def test_bench_comm_links_one_node_and_two_emulated(tmp_path, per_node):
    """``--links``: with both ranks on one node the allreduce inside it; as two nodes (SPMD_HOST per rank, set by
    bench/programs/as_node.py) the allreduce over every rank; either way links spmd predict can fit, results
    checked (#wrong 0) and the file spmd predict's target key links reads."""
    from pathlib import Path

    from mpi_job import launch

    from spmd.scale.prediction.machines import read_links

    root = Path(__file__).resolve().parents[2]

    out = tmp_path / "links.json"
    args = ["bench", "comm", "--links", "--backend", "mpi", "--device", "cpu", "--max-bytes", "1M", "--factor", "8"]
    args += ["--iters", "3", "--warmup", "1", "--read-bytes", "8M", "--json", out]
    before = set(Path(tempfile.gettempdir()).glob("spmd-host-read-*"))
    if per_node is None:
        rc, stdout, err, _ = spmd(*args, ranks=2)
    else:
        program = [str(root / "bench/programs/as_node.py"), str(per_node), "-m", "spmd", *map(str, args)]
        rc, stdout, err, _ = launch(program, 2, None, None, 300)
    assert rc == 0, err
    data = json.loads(out.read_text())
    level = "intra" if per_node is None else "world"
    assert data["kind"] == "links" and list(data["levels"]) == [level] and data["wrong"] == 0
    assert data["nodes"] == (1 if per_node is None else 2) and data["ranks_per_node"] == (2 if per_node is None else 1)
    assert [r["bytes"] for r in data["levels"][level]["rows"]] == [8, 64, 512, 4096, 32768, 262144]
    # the allgather at the same bytes per rank, checked too (a gather's prediction is held to it)
    assert [r["bytes"] for r in data["levels"][level]["allgather"]] == [8, 64, 512, 4096, 32768, 262144]
    assert all(r["wrong"] == 0 and r["seconds"] > 0 for r in data["levels"][level]["allgather"])
    # and a ring shift (a halo's sendrecv, each rank's neighbours), checked: halos are held to it
    assert [r["bytes"] for r in data["levels"][level]["sendrecv"]] == [8, 64, 512, 4096, 32768, 262144]
    assert all(r["wrong"] == 0 and r["seconds"] > 0 for r in data["levels"][level]["sendrecv"])
    links = read_links(out)
    fitted = links["intra"] if per_node is None else links["inter"]
    assert fitted.busbw_Bps > 0 and fitted.latency_s >= 0 and links["backend"] == "mpi"
    assert len(fitted.gather_curve) == 6 and len(fitted.p2p_curve) == 6
    assert "sendrecv" in stdout
    assert ("inside a node" if per_node is None else "over every rank") in stdout
    # the host's read ceiling: each rank's own 8 MiB HDF5 file, read by a run's reader alone and all at once, then
    # removed; emulated nodes share the one host's memory, and its read ceiling is the host's: both ranks read it
    reads = data["host_read"]
    assert reads["bytes"] == 8 << 20 and reads["readers"] == 2
    assert reads["alone_Bps"] > 0 and reads["together_Bps"] > 0 and links["host_read"] == reads
    assert reads["engine"] == "direct"  # a run's reader on a CPU: io.engine auto reads with direct there
    # measured by each engine a run may read with: direct alone on a CPU (a GPU adds the engine auto chose)
    assert reads["engines"] == {"direct": {"alone_Bps": reads["alone_Bps"], "together_Bps": reads["together_Bps"]}}
    assert "host reads of 8 MiB a rank from the page cache by direct" in stdout
    assert "host reads of 8 MiB a rank" in stdout
    # what the host's ranks at once cost each other's compute: each kernel alone and at once, emulated nodes on one
    # host sharing its cores too; a phase charged the kernels' geometric mean, between the least and most slowed
    cores = data["node_cores"]
    assert cores["ranks"] == 2 and set(cores["kernels"]) == {"stream", "cached", "matmul"}
    slowdowns = [k["together_s"] / k["alone_s"] for k in cores["kernels"].values()]
    assert all(k["alone_s"] > 0 and k["together_s"] > 0 for k in cores["kernels"].values())
    assert cores["slowdown"] == pytest.approx(math.prod(slowdowns) ** (1 / 3))
    assert (cores["low"], cores["high"]) == (pytest.approx(min(slowdowns)), pytest.approx(max(slowdowns)))
    assert links["node_cores"] == cores and "the node's cores: 2 rank(s) at once against one alone" in stdout
    assert set(Path(tempfile.gettempdir()).glob("spmd-host-read-*")) == before


def test_bench_comm_host_read_measures_the_hosts_reads_alone_for_a_preset_target(tmp_path):
    """``--host-read``: the host's shared reads with no collective (a machine of one GPU measures them with its ranks
    sharing it), each rank's own temporary file read alone and all at once and then removed, into the file a preset
    target's key host_read reads; beside --links, or of no bytes, it is refused naming the flag (exit 2)."""
    from pathlib import Path

    from spmd.scale.prediction.machines import read_host_read

    out = tmp_path / "reads.json"
    before = set(Path(tempfile.gettempdir()).glob("spmd-host-read-*"))
    rc, stdout, err, _ = spmd("bench", "comm", "--host-read", "--device", "cpu", "--read-bytes", "8M", "--json", out,
                              ranks=2)  # fmt: skip
    assert rc == 0, err
    data = json.loads(out.read_text())
    assert (data["kind"], data["ranks"], data["nodes"], data["gpus"], data["shared_gpu"]) == (
        "host_read",
        2,
        1,
        0,
        False,
    )
    reads = data["host_read"]
    assert reads["bytes"] == 8 << 20 and reads["readers"] == 2 and reads["engine"] == "direct"
    assert reads["alone_Bps"] > 0 and reads["together_Bps"] > 0 and set(reads["engines"]) == {"direct"}
    assert read_host_read(out) == (reads, "spmd bench comm --host-read, 2 rank(s) reading at once")
    assert "--host-read: 2 rank(s) on 1 host(s) on cpu" in stdout and "host reads of 8 MiB a rank" in stdout
    assert set(Path(tempfile.gettempdir()).glob("spmd-host-read-*")) == before
    for extra, why in ((["--links"], "--links measures the host's reads too"), (["--read-bytes", "0"], "at least 1")):
        rc, _, err, _ = spmd("bench", "comm", "--host-read", "--device", "cpu", *extra, ranks=2)
        assert rc == 2 and "--host-read: " in err and why in err, err
