"""``python -m bench`` as a person runs it on a machine without a GPU: a CPU suite's case measured beside its ceiling
and written with its manifest, GPU suites skipped saying why, and --only keeping the other cases' results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import LAUNCH_ENV

pytest.importorskip("jinja2", reason="the test extra brings Jinja2")

ROOT = Path(__file__).resolve().parents[2]


def bench(*args, timeout=600):
    env = {**LAUNCH_ENV, "PYTHONPATH": str(ROOT)}
    if os.environ.get("SPMD_MPIEXEC"):
        env["SPMD_MPIEXEC"] = os.environ["SPMD_MPIEXEC"]
    return subprocess.run(
        [sys.executable, "-m", "bench", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]


def test_a_cpu_case_is_measured_beside_its_ceiling_with_a_manifest(tmp_path):
    done = bench("run", "io", "--quick", "--runs", "2", "--only", "1 rank", "--out", tmp_path)  # two cases hold it
    assert done.returncode == 0, done.stdout + done.stderr
    rows = records(tmp_path / "io")
    roles = {r["subject"]: r["role"] for r in rows if "cold" not in r["case"]}
    assert roles["direct"] == "result" and "ceiling" in roles.values() and roles["h5py"] == "peer"
    assert all(len(r["values"]) == 2 and all(v > 0 for v in r["values"]) for r in rows)
    manifest = json.loads((tmp_path / "io/manifest.json").read_text())
    assert manifest["machine_kind"].startswith("cpu-") and manifest["suite"] == "io" and manifest["runs"] == 2
    assert manifest["versions"]["numpy"] and manifest["command"].startswith("python -m bench run io")
    assert {c["case"] for c in manifest["cases"]} == {"read, 1 rank", "read, 1 rank, cold"}
    assert manifest["ranks"] == 2 and manifest["rank_cpus"] == [len(os.sched_getaffinity(0))] * 2  # unbound here

    again = bench("run", "io", "--quick", "--runs", "1", "--only", "reduce repeat", "--out", tmp_path)
    assert again.returncode == 0, again.stderr
    cases = {c["case"] for c in json.loads((tmp_path / "io/manifest.json").read_text())["cases"]}
    assert cases == {"read, 1 rank", "read, 1 rank, cold", "reduce repeat by engine"}
    assert {r["bench_case"] for r in records(tmp_path / "io")} == cases


def test_gpu_suites_skip_on_a_cpu_saying_why_and_list_names_every_suite(tmp_path):
    done = bench("run", "kernels", "--quick", "--runs", "1", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    status = json.loads((tmp_path / "kernels/manifest.json").read_text())["cases"]
    assert [c["skipped"] for c in status] == ["needs a GPU"] * 3
    listing = bench("list")
    assert listing.returncode == 0 and all(
        f"{name}:" in listing.stdout
        for name in ("kernels", "io", "comm", "train", "torch", "plugins", "scaling", "faults", "cuda-mpi")
    )
    unknown = bench("run", "nope", "--out", tmp_path)
    assert unknown.returncode == 1 and "unknown suite 'nope'" in unknown.stderr


def test_the_manifest_records_the_cpus_each_rank_was_bound_to():
    """A launch pinned to one CPU (taskset, as Open MPI's mpirun binds each of 1-2 ranks to one core): each of the 3
    ranks the launcher starts reports that one CPU, gathered once (ranks' own lines may interleave mid-line)."""
    import shutil

    if shutil.which("taskset") is None:
        pytest.fail("taskset (util-linux) is needed to pin the launch to one CPU")
    env = {**LAUNCH_ENV, "PYTHONPATH": str(ROOT), **{k: v for k, v in os.environ.items() if k == "SPMD_MPIEXEC"}}
    code = "from bench.manifest import rank_cpus; print(rank_cpus(3))"
    done = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "[1, 1, 1]", done.stdout + done.stderr


def test_recheck_derives_a_predictions_records_again_from_its_inputs(tmp_path):
    """A predict record's inputs (the fitted sweep, the sweep measured on the target, its links), gzipped beside
    it: ``bench recheck`` puts back what ``spmd predict --measured`` says of them, over a stale value; a record
    without inputs stays as it was; the manifest names the recheck."""
    import gzip

    folder = tmp_path / "predict"
    (folder / "inputs").mkdir(parents=True)
    sweep = ROOT / "tests/fixtures/reports/gpu-kmeans-scaling.json"
    links = ROOT / "tests/fixtures/links/h100x2-p2p-off.json"
    inputs = {}
    for role, path in (("fit", sweep), ("measured", sweep), ("links", links)):
        (folder / "inputs" / f"k-{role}.json.gz").write_bytes(gzip.compress(path.read_bytes()))
        inputs[role] = f"inputs/k-{role}.json.gz"
    target = "gpus_per_node=2,nodes=1,name=p2p off"
    base = {"suite": "predict", "subject": "spmd predict", "metric": "error of the prediction", "unit": "share",
            "role": "result", "better": "lower", "bench_case": "kmeans on other links"}  # fmt: skip
    stale = {**base, "case": "checked", "values": [0.99], "params": {"inputs": inputs, "target": target,
             "mode": "weak", "ranks": 2, "error": 0.99}}  # fmt: skip
    alone = {**base, "case": "no inputs", "values": [0.5], "params": {"error": 0.5}}
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (stale, alone)))
    (folder / "manifest.json").write_text(json.dumps({"suite": "predict", "cases": []}))
    done = bench("recheck", folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 record(s)" in done.stdout
    fresh, kept = records(folder)
    assert kept == alone
    out = tmp_path / "pred"
    cli = subprocess.run(
        [sys.executable, "-m", "spmd", "predict", sweep, "--target", f"links={links},{target}", "--measured", sweep,
         "--out", out, "-q"], capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    (c,) = [c for c in json.loads((out / "scaling.json").read_text())["other_machines"][0]["checked"]
            if (c["mode"], c["ranks"]) == ("weak", 2)]  # fmt: skip
    assert fresh["values"] == [abs(c["error"])] and fresh["params"]["predicted_s"] == c["predicted_s"]
    assert fresh["params"]["speedup_error"] == c["speedup_error"] and fresh["params"]["inputs"] == inputs
    assert json.loads((folder / "manifest.json").read_text())["rechecked"][0]["records"] == 1
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_bound_py_binds_each_node_local_rank_to_cpus_of_its_own_and_refuses_too_few(tmp_path):
    """bench/programs/bound.py: node-local rank k takes the k-th CORES of the CPUs the job may use, before spmd starts
    (report.json's own placement says so); a rank past the node's CPUs is refused, nothing run."""
    from helpers import reduce_config

    usable = sorted(os.sched_getaffinity(0))
    program = str(ROOT / "bench/programs/bound.py")
    cfg = reduce_config(tmp_path)
    env = {**LAUNCH_ENV, "OMPI_COMM_WORLD_LOCAL_RANK": str(len(usable) - 1)}
    done = subprocess.run([sys.executable, program, "1", "-m", "spmd", "run", cfg, "-q"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads((tmp_path / "out/report.json").read_text())["placement"]["ranks"]
    assert rank["bound_cpus"] == 1
    env["OMPI_COMM_WORLD_LOCAL_RANK"] = str(len(usable))
    done = subprocess.run([sys.executable, program, "1", "-m", "spmd", "run", cfg, "--out", tmp_path / "no", "-q"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0 and f"node-local rank {len(usable)}" in done.stderr and not (tmp_path / "no").exists()
