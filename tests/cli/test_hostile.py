"""A hostile-input trial's cases, each under a real mpiexec: every way out of user code that is not a verified
result is a non-zero exit naming it, every HDF5 layout reads right or exits 2 naming the real cause, NaN never
passes and report.json is strict JSON, and every value a user can type is refused by name (exit 2), on one
line, never with a traceback."""

from __future__ import annotations

import json
import os
import time

import h5py
import numpy as np
import pytest
from helpers import config, plugin, write_dataset
from mpi_job import spmd


def strict(path):
    """report.json parsed as strict JSON: NaN or Infinity tokens are an error."""

    def refuse(token):
        raise AssertionError(f"{path}: the non-JSON token {token}")

    return json.loads(path.read_text(), parse_constant=refuse)


# -- ways out of user code -------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["function", "import", "class"])
def test_sys_exit_in_a_plugin_is_a_failure_naming_it(tmp_path, where):
    source = {
        "function": """
            import sys, spmd
            @spmd.map_reduce(combine="sum")
            def f(block, xp, params):
                sys.exit(0)
        """,
        "import": """
            import sys
            sys.exit(0)
        """,
        "class": """
            import sys, spmd
            class f(spmd.Workload):
                def setup(self, ctx, cfg, comm): pass
                def run(self, timer): sys.exit(0)
                def verify(self): return {}
                def result(self): return {}
        """,
    }[where]
    job = config(tmp_path, f"{plugin(tmp_path, source)}:f")
    rc, out, err, _ = spmd("run", job, cwd=tmp_path, ranks=2)
    assert rc != 0 and "sys.exit(0)" in err and "plug.py" in err, (rc, err)
    assert rc == (2 if where == "import" else 1)
    assert not (tmp_path / "out/report.json").exists()


def test_an_endless_loop_at_plugin_import_ends_within_the_configs_timeout(tmp_path):
    loop = plugin(tmp_path, "while True:\n    pass\n")
    job = config(tmp_path, f"{loop}:f", timeout_s=3)
    start = time.monotonic()
    rc, out, err, _ = spmd("run", job, cwd=tmp_path, ranks=2, timeout=60)
    assert rc == 4 and "phase loading workload" in err and "plug.py:f" in err, (rc, err)
    assert time.monotonic() - start < 30


def test_an_endless_import_is_bounded_where_no_watchdog_runs_too(tmp_path):
    """spmd jobscript loads the plug-in in one process, without MPI: an alarm bounds the import by timeout_s."""
    from helpers import cli

    loop = plugin(tmp_path, "while True:\n    pass\n")
    job = config(tmp_path, f"{loop}:f", timeout_s=2)
    start = time.monotonic()
    rc, out, err = cli("jobscript", job, "--nodes", "1,2", "--gpus-per-node", "1", "--out", "jobs", cwd=tmp_path)
    assert rc == 4 and "still running after timeout_s (2 s): an import that never returns?" in err, (rc, err)
    assert time.monotonic() - start < 20 and not (tmp_path / "jobs").exists()


def test_a_plugin_whose_result_changes_shape_after_the_first_repeat_is_named(tmp_path):
    """Later repeats return a shape of the rank's own (5 and 4 elements): MPI would truncate the message."""
    source = """
        import spmd
        calls = [0]
        @spmd.map_reduce(combine="sum")
        def f(block, xp, params):
            calls[0] += 1
            return xp.ones(3 if calls[0] == 1 else len(block) % 5 + 1)
    """
    job = config(tmp_path, f"{plugin(tmp_path, source)}:f")
    rc, out, err, _ = spmd("run", job, cwd=tmp_path, ranks=2)
    assert rc == 1 and "float64 in a later repeat, [3] float64 in the first: it must return the same" in err, err
    assert "Message truncated" not in err and "Traceback" not in err


def test_a_plugin_path_that_is_a_folder_says_so(tmp_path):
    (tmp_path / "plug.py").mkdir()
    job = config(tmp_path, "plug.py:f")
    rc, out, err, _ = spmd("run", job, cwd=tmp_path, ranks=2)
    assert rc == 2 and "workload: plug.py is a folder, not a Python file" in err, err


def test_the_kmeans_example_on_1d_input_says_what_it_needs(tmp_path):
    from helpers import EXAMPLES

    job = config(tmp_path, f"{EXAMPLES / 'kmeans.py'}:KMeans")
    rc, out, err, _ = spmd("run", job, cwd=tmp_path, ranks=2)
    assert rc == 2 and "1-D array" in err and "expected 2-D" in err, err
    assert "AttributeError" not in err and "close() failed" not in err


# -- NaN and strict JSON ------------------------------------------------------------------------------


def test_nan_never_passes_and_report_json_is_strict(tmp_path):
    source = """
        import spmd
        @spmd.map_reduce(combine="max")
        def f(block, xp, params):
            return xp.full(2, xp.nan)
    """
    job = config(tmp_path, f"{plugin(tmp_path, source)}:f")
    rc, out, err, _ = spmd("run", job, cwd=tmp_path, ranks=2)
    assert rc == 3 and "result[0] = nan: a result holding NaN or infinity never passes verification" in err, err
    assert not (tmp_path / "out/report.json").exists()
    rc, out, err, _ = spmd("run", job, "-o", "verify=none", cwd=tmp_path, ranks=2)  # not checked: kept, as null
    assert rc == 0, err
    report = strict(tmp_path / "out/report.json")
    assert report["result"]["value"] == [None, None] and report["verified"] is False


# -- HDF5 layouts -----------------------------------------------------------------------------------------


def reduce_job(tmp_path, path: str, **keys) -> str:
    (tmp_path / "job.yaml").write_text(
        json.dumps(
            {
                "workload": "reduce",
                "device": "cpu",
                "repeats": 1,
                "output": "out",
                "input": {"path": path, "dataset": "x"},
                **keys,
            }
        )
    )
    return "job.yaml"


def test_every_hdf5_layout_reads_right_or_names_the_real_cause(tmp_path):
    halves = [np.arange(500.0), np.arange(500.0, 1000.0)]
    for i, half in enumerate(halves):
        write_dataset(tmp_path / f"src{i}.h5", half)
    layout = h5py.VirtualLayout(shape=(1000,), dtype="f8")
    for i in range(2):
        layout[i * 500 : (i + 1) * 500] = h5py.VirtualSource(f"src{i}.h5", "x", shape=(500,))
    with h5py.File(tmp_path / "vds.h5", "w") as f:
        f.create_virtual_dataset("x", layout, fillvalue=0)
    rc, out, err, _ = spmd("run", reduce_job(tmp_path, "vds.h5"), cwd=tmp_path, ranks=2)
    assert rc == 0 and json.loads((tmp_path / "out/report.json").read_text())["result"]["sum"] == 499500, err
    os.rename(tmp_path / "src1.h5", tmp_path / "src1.gone")
    rc, out, err, _ = spmd("run", "job.yaml", cwd=tmp_path, ranks=2)
    assert rc == 2 and "vds.h5:x: a virtual dataset whose source file src1.h5 is missing" in err, err

    with h5py.File(tmp_path / "ext.h5", "w") as f:
        f["x"] = h5py.ExternalLink("nofile.h5", "/x")
    rc, out, err, _ = spmd("run", reduce_job(tmp_path, "ext.h5"), cwd=tmp_path, ranks=2)
    assert rc == 2 and "ext.h5: 'x' is an external link to nofile.h5:/x, which cannot be opened" in err, err

    np.arange(1000.0).tofile(tmp_path / "raw.bin")
    with h5py.File(tmp_path / "extstore.h5", "w") as f:
        f.create_dataset("x", shape=(1000,), dtype="f8", external=[("raw.bin", 0, 8000)])
    rc, out, err, _ = spmd("run", reduce_job(tmp_path, "extstore.h5"), cwd=tmp_path, ranks=2)
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert rc == 0 and report["result"]["sum"] == 499500, err
    assert {e["engine"] for rank in report["io"]["per_rank"] for e in rank} == {"h5py"}
    (tmp_path / "raw.bin").unlink()
    rc, out, err, _ = spmd("run", "job.yaml", cwd=tmp_path, ranks=2)
    assert rc == 2 and "extstore.h5:x: its bytes are stored in raw.bin, which HDF5 looks for" in err, err

    with h5py.File(tmp_path / "soft.h5", "w") as f:
        f["x"] = h5py.SoftLink("/y")
        f["y"] = h5py.SoftLink("/x")
    rc, out, err, _ = spmd("run", reduce_job(tmp_path, "soft.h5"), cwd=tmp_path, ranks=2)
    assert rc == 2 and "soft.h5: 'x' cannot be followed" in err and "a loop of links" in err, err
    assert "internal error" not in err


# -- values a user types ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "override, message",
    [
        ("timeout_s=1e15", "timeout_s: must be a positive number of seconds, got 1e+15"),
        ("timeout_s=1.0e+15", "timeout_s: must be a positive number of seconds, got 1e+15"),
        ("generate.seed=-1", "generate.seed: must be >= 0, got -1"),
        ("generate.shape=[1e20]", "generate.shape[0]: 100000000000000000000 is out of range"),
        ("generate.shape=[100000000000000000000]", "generate.shape[0]: 100000000000000000000 is out of range"),
        ("repeats=1e3x", "repeats: expected an integer or auto, got '1e3x'"),
        ("generate.loc=1e300", "generate.loc, generate.scale: values near 1e+300 +- 2 do not fit float32"),
    ],
)
def test_out_of_range_numbers_are_exit_2_naming_the_key(tmp_path, override, message):
    job = reduce_job(tmp_path, "x.h5", generate={"shape": [10]})
    for command in ("generate", "run"):
        rc, out, err, _ = spmd(command, job, "-o", override, cwd=tmp_path, ranks=2)
        assert rc == 2 and message in err and "Traceback" not in err, (command, err)


def test_a_config_value_yaml_cannot_build_is_exit_2(tmp_path):
    write_dataset(tmp_path / "x.h5", np.arange(10.0))
    (tmp_path / "big.yaml").write_text(
        "workload: reduce\ninput: {path: x.h5, dataset: x}\nrepeats: " + "1" * 5000 + "\n"
    )
    rc, out, err, _ = spmd("run", "big.yaml", cwd=tmp_path, ranks=2)
    assert rc == 2 and "config big.yaml: a value that cannot be read: Exceeds the limit" in err, err
    assert "internal error" not in err and "Traceback" not in err


def test_a_number_written_as_yaml_1_2_has_it_is_read_as_one(tmp_path):
    write_dataset(tmp_path / "x.h5", np.arange(10.0))
    rc, out, err, _ = spmd(
        "run", reduce_job(tmp_path, "x.h5"), "-o", "repeats=2e0", "-o", "timeout_s=1e2", cwd=tmp_path, ranks=2
    )
    assert rc == 0, err
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert report["config"]["repeats"] == 2 and report["config"]["timeout_s"] == 100.0


def test_unusable_output_folders_are_refused_before_the_work(tmp_path):
    write_dataset(tmp_path / "x.h5", np.arange(10.0))
    job = reduce_job(tmp_path, "x.h5")
    (tmp_path / "rj/report.json").mkdir(parents=True)
    rc, out, err, _ = spmd("run", job, "--out", "rj", cwd=tmp_path, ranks=2)
    assert rc == 2 and "the report rj/report.json exists and is a folder" in err and "internal" not in err, err
    rc, out, err, _ = spmd(
        "generate", job, "-o", "input.path=x.h5/sub.h5", "-o", "generate.shape=[10]", cwd=tmp_path, ranks=2
    )
    assert rc == 2 and "the folder of the input x.h5: x.h5 exists and is not a folder" in err, err
    os.symlink("/nonexistent/zzz", tmp_path / "dang")
    rc, out, err, _ = spmd("run", job, "--out", "dang", cwd=tmp_path, ranks=2)
    assert (
        rc == 2 and "output folder dang: dang is a symbolic link to '/nonexistent/zzz', which does not exist" in err
    ), err


def test_messages_stay_one_line_whatever_a_value_holds(tmp_path):
    """A newline in a path cannot forge a second 'spmd:' line; a refused YAML tag is one line too."""
    write_dataset(tmp_path / "x.h5", np.arange(10.0))
    job = reduce_job(tmp_path, "x.h5")
    rc, out, err, _ = spmd("run", job, "-o", r'input.path="a\nspmd: verified fake"', cwd=tmp_path, ranks=2)
    said = [line for line in err.splitlines() if line.startswith("spmd")]  # (Open MPI's mpirun adds a block of its own)
    assert rc == 2 and len(said) == 1 and r"a\nspmd: verified fake: no such file" in said[0], err
    (tmp_path / "tag.yaml").write_text("workload: reduce\ninput: {path: x.h5, dataset: !!python/object:os.system x}\n")
    rc, out, err, _ = spmd("run", "tag.yaml", cwd=tmp_path, ranks=2)
    said = [line for line in err.splitlines() if line.strip() and not line.startswith(("-", " "))]
    assert rc == 2 and len([line for line in said if line.startswith("spmd")]) == 1, err
    assert "could not determine a constructor for the tag 'tag:yaml.org,2002:python/object:os.system' (line 2" in err
    assert "^" not in err and 'in "<unicode string>"' not in err, err  # PyYAML's multi-line text, with its caret


def test_run_on_more_ranks_than_cpus_says_so(tmp_path):
    """Two ranks on one CPU (taskset): the report and the output carry the oversubscription warning."""
    import shutil
    import subprocess
    import sys

    from helpers import LAUNCH_ENV
    from mpi_job import mpiexec

    if shutil.which("taskset") is None:
        pytest.fail("taskset (util-linux) is needed to pin the launch to one CPU")
    write_dataset(tmp_path / "x.h5", np.arange(10.0))
    job = reduce_job(tmp_path, "x.h5")
    proc = subprocess.run(
        ["taskset", "-c", "0", *mpiexec(), "-n", "2", sys.executable, "-m", "spmd", "run", job],
        cwd=tmp_path,
        env=LAUNCH_ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    warning = "oversubscribed: "
    assert f"spmd: warning: {warning}" in proc.stderr and "ran 2 ranks on 1 CPU(s)" in proc.stderr, proc.stderr
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert any(w.startswith(warning) for w in report["warnings"])
    # each rank's own binding (taskset's one CPU) and what the node's cpuset allows, beside the ranks' union
    assert [r["bound_cpus"] for r in report["placement"]["ranks"]] == [1, 1]
    assert all(r["node_cpus"] >= 1 and r["cpus"] == 1 for r in report["placement"]["ranks"])
    assert report["placement"]["single_cpu_gpu_ranks"] == []  # CPU ranks: binding them is the point


# -- report compare on what it was not made for --------------------------------------------------------------


def test_report_compare_bounds_what_it_reads_and_validates_what_it_compares(tmp_path):
    """A FIFO (it would block), /dev/zero (it never ends), deeply nested JSON, a string among the repeats, NaN
    timings and a 10,000-line workload name: each exit 2 within seconds, one short line, no traceback."""
    from helpers import cli

    write_dataset(tmp_path / "x.h5", np.arange(1000.0))
    rc, out, err, _ = spmd("run", reduce_job(tmp_path, "x.h5", repeats=3), cwd=tmp_path, ranks=2)
    assert rc == 0, err
    good = json.loads((tmp_path / "out/report.json").read_text())
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "nested.json").write_text("[" * 100_000 + "]" * 100_000)
    stringy = json.loads(json.dumps(good))
    stringy["per_rank"][1]["repeats"][0]["compute"] = "fast"
    nan = json.loads(json.dumps(good))
    nan["timings"]["compute"]["median"] = float("nan")
    for rank in nan["per_rank"]:
        for rep in rank["repeats"]:
            rep["compute"] = float("nan")
    long = {**good, "workload": "reduce\n" * 10_000}
    for name, data in (("stringy.json", stringy), ("nan.json", nan), ("long.json", long)):
        (tmp_path / name).write_text(json.dumps(data))
    cases = {
        "fifo.json": "not a regular file",
        "/dev/zero": "not a regular file",
        "nested.json": "nested too deeply",
        "stringy.json": "per_rank[].repeats[] (finite seconds",
        "nan.json": "(finite",
        "long.json": "workload",
    }
    for name, why in cases.items():
        start = time.monotonic()
        rc, out, err = cli("report", "compare", "out/report.json", name, "--fail-above", "10", cwd=tmp_path)
        assert rc == 2 and why in err and "Traceback" not in err, (name, err)
        assert len(err) < 400 and time.monotonic() - start < 20, (name, err)


def test_report_merge_of_a_glob_that_matched_nothing_says_so(tmp_path):
    from helpers import cli

    rc, out, err = cli("report", "merge", "results/*/report.json", "--out", "m", cwd=tmp_path)
    assert rc == 2 and "no report.json matched results/*/report.json" in err, err
    assert not (tmp_path / "m").exists()


# -- verification that must not let a corrupted result through ---------------------------------------------


def test_matmul_default_catches_every_element_the_docs_say_it_does(tmp_path):
    """Zero-mean data at k = 256 (the trial's case: one element 1% off passed): for each seed, the corrupted
    element's error against the documented bound, 2 min(8, sqrt(n/G)) tau ||a_i|| ||B_g||_F, computed here from
    the files; above it the default (grouped Freivalds + sampled rows) must exit 3. The one below it (a tiny
    element) is caught by verify: full, whose bound is per element."""
    import math

    from spmd.workloads.matmul.check import FREIVALDS_GROUPS, tau

    cfg = {
        "workload": "matmul",
        "device": "cpu",
        "repeats": 1,
        "warmup": 0,
        "output": "out",
        "input": {"path": "A.h5", "dataset": "A"},
        "generate": {"shape": [512, 256], "seed": 11, "loc": 0.0, "scale": 1.0},
        "params": {
            "b": {
                "path": "B.h5",
                "dataset": "B",
                "generate": {"shape": [256, 512], "seed": 12, "loc": 0.0, "scale": 1.0},
            }
        },
    }
    (tmp_path / "mm.yaml").write_text(json.dumps(cfg))
    assert spmd("generate", "mm.yaml", cwd=tmp_path, ranks=1)[0] == 0
    a = h5py.File(tmp_path / "A.h5")["A"][...]
    b = h5py.File(tmp_path / "B.h5")["B"][...]
    c = a @ b
    n, groups = b.shape[1], min(b.shape[1], FREIVALDS_GROUPS)
    group_sq = np.bincount(np.arange(n) % groups, weights=(b.astype(np.float64) ** 2).sum(axis=0))
    scale = 2 * min(8.0, math.sqrt(n / groups)) * tau("float32", 256, False)
    mine = c[256:]  # rank 1 of 2 holds rows 256..511; the fault corrupts one of its elements
    below = []
    for seed in range(12):
        index = int(np.random.default_rng(seed).choice(np.flatnonzero(mine.reshape(-1) != 0)))
        i, j = np.unravel_index(index, mine.shape)
        delta = 0.01 * abs(float(mine[i, j]))
        bound = scale * np.linalg.norm(a[256 + i].astype(np.float64)) * math.sqrt(group_sq[j % groups])
        env = {"SPMD_FAULT": "rank=1,phase=compute,kind=corrupt", "SPMD_FAULT_SEED": str(seed)}
        rc, out, err, _ = spmd("run", "mm.yaml", cwd=tmp_path, ranks=2, env=env)
        if delta > bound:
            assert rc == 3 and "Freivalds check failed" in err, (seed, delta, bound, err)
        else:
            below.append(seed)
    assert below, "no seed drew an element below the bound: the test no longer covers verify: full's part"
    # SUMMA on a 2 x 2 grid: blocks of rows, so the ranks' sums meet on the host (the check's other path);
    # rank 1 holds rows 0-255, columns 256-511
    block = c[:256, 256:]
    above = []
    for seed in range(4):
        index = int(np.random.default_rng(seed).choice(np.flatnonzero(block.reshape(-1) != 0)))
        i, j = np.unravel_index(index, block.shape)
        bound = scale * np.linalg.norm(a[i].astype(np.float64)) * math.sqrt(group_sq[(256 + j) % groups])
        if 0.01 * abs(float(block[i, j])) > bound:
            above.append(seed)
    assert len(above) >= 2, above
    for seed in above[:2]:
        env = {"SPMD_FAULT": "rank=1,phase=compute,kind=corrupt", "SPMD_FAULT_SEED": str(seed)}
        rc, out, err, _ = spmd("run", "mm.yaml", "-o", "params.algorithm=summa", cwd=tmp_path, ranks=4, env=env)
        assert rc == 3 and "Freivalds check failed" in err, (seed, err)
    env = {"SPMD_FAULT": "rank=1,phase=compute,kind=corrupt", "SPMD_FAULT_SEED": str(below[0])}
    rc, out, err, _ = spmd("run", "mm.yaml", "-o", "verify=full", cwd=tmp_path, ranks=2, env=env)
    assert rc == 3 and "float64 recomputation gives" in err, err


def test_a_checkpoint_from_a_failed_verification_is_not_resumed_without_saying_so(tmp_path):
    """Training that ends in exit 3 (one rank's parameters corrupted) marks its checkpoint; resuming from it
    exits 2 naming why, and params.resume_unverified resumes with the report saying so."""
    from helpers import train_config

    config = train_config(tmp_path, **{"params.checkpoint": {"path": "ckpt.h5", "every": 20}, "repeats": 3})
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    rc, out, err, _ = spmd(
        "run", config, cwd=tmp_path, ranks=2, env={"SPMD_FAULT": "rank=1,phase=compute,kind=corrupt"}
    )
    assert rc == 3 and (tmp_path / "ckpt.h5").exists(), err
    with h5py.File(tmp_path / "ckpt.h5") as f:
        assert "differ from rank 0's" in str(f.attrs["verification_failed"])
    rc, out, err, _ = spmd("run", config, "-o", "params.resume=ckpt.h5", "--out", "again", cwd=tmp_path, ranks=2)
    assert rc == 2 and "ckpt.h5 was written by a run whose verification failed" in err, err
    assert "params.resume_unverified: true" in err and not (tmp_path / "again").exists()
    rc, out, err, _ = spmd(
        "run",
        config,
        "-o",
        "params.resume=ckpt.h5",
        "-o",
        "params.resume_unverified=true",
        "-o",
        "repeats=4",
        "--out",
        "again",
        cwd=tmp_path,
        ranks=2,
    )
    assert rc == 0, err
    warnings = json.loads((tmp_path / "again/report.json").read_text())["warnings"]
    assert any("resumed from ckpt.h5, written by a run whose verification failed" in w for w in warnings), warnings
