"""Plug-in workloads through the command line at 2 and 3 ranks: the examples, spmd scale, job scripts, merge
and compare; and every way a plug-in can go wrong: not found, not importable, not a workload, results of
different shapes, an exception or a hang in its code, a wrong answer."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys

import h5py
import numpy as np
import pytest
import yaml
from helpers import EXAMPLES, LAUNCH_ENV, ROWS, config, example, plugin
from mpi_job import DEADLINE_S, spmd

HOST = socket.gethostname()


def test_the_histogram_example_from_the_command_line(tmp_path):
    cfg = example("histogram", tmp_path)
    assert spmd("generate", cfg, ranks=1)[0] == 0
    rc, out, err, _ = spmd("run", cfg)
    assert rc == 0, err
    with h5py.File(tmp_path / "events.h5") as f:
        want, _ = np.histogram(f["energy"][...], bins=64, range=(0.0, 100.0))
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert report["result"]["value"] == want.tolist() and report["verified"] and report["ranks"] == 3
    assert report["workload"] == f"{EXAMPLES}/histogram.py:energy_histogram"
    assert "verified (the function over the whole input as one block" in out


def test_spmd_scale_strong_and_weak_of_a_plugin(tmp_path):
    """Everything the built-ins get: weak scaling grows the generated input, the model and advice."""
    cfg = example("pca", tmp_path)
    rc, out, err, _ = spmd("scale", cfg, "--mode", "both", "--ranks", "1,2", "--probe-max-bytes", "64K", ranks=2)
    assert rc == 0, err
    scaling = json.loads((tmp_path / "out/scaling/scaling.json").read_text())
    assert [r["ranks"] for r in scaling["series"]["weak"]] == [1, 2] and scaling["model"] is not None
    weak2 = next(r for r in scaling["runs"] if r["mode"] == "weak" and r["ranks"] == 2)["report"]
    assert weak2["result"]["rows"] == 2 * ROWS and (tmp_path / "weak-x2/features.h5").exists()
    assert any(line.startswith("Weak scaling 1 -> 2 ranks") for line in scaling["advice"])


@pytest.mark.parametrize(
    "workload, source, message",
    [
        ("nope.py:f", None, "workload: nope.py: no such file"),
        (
            "plug.py:f",
            "import math\nraise RuntimeError('no licence server')\n",
            re.compile(r"workload: importing plug.py failed: RuntimeError: no licence server \(.*plug.py:2\)"),
        ),
        ("plug.py:f", "def f(:\n", "workload: importing plug.py failed: SyntaxError:"),
        ("plug.py:nope", "def f(block, xp, params):\n    return block\n", "workload: plug.py has no nope (it has: f)"),
        ("plug.py:f", "f = 42\n", "workload: plug.py:f is a int, not a subclass of spmd.Workload"),
        ("no_such_pkg.mod:f", None, "workload: no module no_such_pkg.mod on the Python path"),
        ("plug.py:", None, "expected path/to/file.py:NAME or package.module:NAME"),
    ],
)
def test_a_plugin_that_cannot_be_loaded_exits_2_naming_path_and_name(tmp_path, workload, source, message):
    if source is not None:
        plugin(tmp_path, source)
    rc, out, err, elapsed = spmd("run", config(tmp_path, workload), cwd=tmp_path)
    assert rc == 2 and f"rank 0 on {HOST}: " in err, err
    assert message.search(err) if isinstance(message, re.Pattern) else message in err, err
    assert elapsed < DEADLINE_S and not (tmp_path / "out").exists()


def test_a_plugin_from_a_package_on_the_python_path(tmp_path):
    package = tmp_path / "site" / "mine"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    plugin(
        package,
        """
        import spmd

        @spmd.map_reduce(combine="max")
        def largest(block, xp, params):
            return block.max(keepdims=True)
    """,
        "stats.py",
    )
    rc, out, err, _ = spmd("run", config(tmp_path, "mine.stats:largest"), env={"PYTHONPATH": str(tmp_path / "site")})
    assert rc == 0, err
    report = json.loads((tmp_path / "out/report.json").read_text())
    with h5py.File(tmp_path / "x.h5") as f:
        assert report["result"]["value"] == [float(f["x"][...].max())]


PARAMS_PLUGIN = """
    from dataclasses import dataclass

    import spmd
    from spmd.core.errors import ConfigError

    @dataclass(frozen=True)
    class Bins:
        bins: int = 8
        hi: float = 1.0

        def __post_init__(self):
            if self.bins < 1:
                raise ConfigError("params.bins: must be >= 1")

    @spmd.map_reduce(combine="sum", params=Bins)
    def counts(block, xp, params):
        return xp.histogram(block, bins=params.bins, range=(-params.hi, params.hi))[0]
"""


@pytest.mark.parametrize(
    "params, message",
    [
        ({"bnis": 4}, "unknown key params.bnis"),
        ({"bins": "many"}, "params.bins: expected an integer, got 'many'"),
        ({"bins": 0}, "params.bins: must be >= 1"),
    ],
)
def test_a_plugins_params_dataclass_checks_the_config_like_the_builtins(tmp_path, params, message):
    path = plugin(tmp_path, PARAMS_PLUGIN)
    rc, out, err, _ = spmd("run", config(tmp_path, f"{path}:counts", params=params))
    assert rc == 2 and message in err, err


def test_a_plugins_params_dataclass_reaches_the_function(tmp_path):
    path = plugin(tmp_path, PARAMS_PLUGIN)
    rc, out, err, _ = spmd("run", config(tmp_path, f"{path}:counts", params={"bins": 5, "hi": 2.0}))
    assert rc == 0, err
    with h5py.File(tmp_path / "x.h5") as f:
        want, _ = np.histogram(f["x"][...], bins=5, range=(-2.0, 2.0))
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert report["result"]["value"] == want.tolist() and report["result"]["dtype"] == "int64" and report["verified"]


def test_results_of_different_shapes_are_refused_before_the_collective(tmp_path):
    plugin(
        tmp_path,
        """
        import spmd

        @spmd.map_reduce(combine="sum")
        def per_row(block, xp, params):
            return block * 2  # one value per row: rank 2 holds one row fewer
    """,
    )
    rc, out, err, elapsed = spmd("run", config(tmp_path, f"{tmp_path}/plug.py:per_row"))
    assert rc == 2, err
    assert (
        f"rank 2 on {HOST}: per_row returned arrays of different shapes or dtypes (rank 0: [3336] float64, "
        f"rank 1: [3336] float64, rank 2: [3335] float64)"
    ) in err, err
    assert elapsed < DEADLINE_S


def test_an_exception_in_the_plugin_on_one_rank_names_function_file_and_line(tmp_path):
    path = plugin(
        tmp_path,
        """
        import spmd

        @spmd.map_reduce(combine="sum")
        def fragile(block, xp, params):
            if block.shape[0] == 3335:
                raise ValueError("calibration table missing for this run")
            return block.sum(keepdims=True)
    """,
    )
    rc, out, err, elapsed = spmd("run", config(tmp_path, f"{path}:fragile"))
    assert rc == 1, err
    assert (
        f"spmd: error: rank 2 on {HOST}: fragile, {path}:7: ValueError: calibration table missing for this run" in err
    ), err
    assert "Traceback" not in err and elapsed < DEADLINE_S and not (tmp_path / "out").exists()


CLASS_PLUGIN = """
    import spmd

    class Step(spmd.Workload):
        def setup(self, ctx, cfg, comm):
            self.ctx, self.rows = ctx, spmd.InputRows(ctx, cfg)

        def run(self, timer):
            block = self.rows.read(timer)
            if self.ctx.rank == 1:
                raise KeyError("no detector geometry for this run")

        def verify(self):
            return {}

        def result(self):
            return {}

    class Modelled(Step):
        def run(self, timer):
            self.rows.read(timer)

        def problem(self):
            return {"bytes": 80056, "comm": [{"op": "alltoall", "bytes": 8}]}
"""


def test_an_exception_in_a_class_plugin_names_the_method_file_and_line(tmp_path):
    path = plugin(tmp_path, CLASS_PLUGIN)
    rc, out, err, elapsed = spmd("run", config(tmp_path, f"{path}:Step"))
    assert rc == 1, err
    assert (
        f"spmd: error: rank 1 on {HOST}: Step.run, {path}:11: KeyError: 'no detector geometry for this run'" in err
    ), err
    assert elapsed < DEADLINE_S and not (tmp_path / "out").exists()


def test_a_problem_the_scaling_model_cannot_read_is_refused_naming_it(tmp_path):
    path = plugin(tmp_path, CLASS_PLUGIN)
    rc, out, err, elapsed = spmd("run", config(tmp_path, f"{path}:Modelled"))
    assert rc == 1, err
    assert (
        "Modelled.problem() returned comm[0] = {'op': 'alltoall', 'bytes': 8}: expected {'op': one of allreduce" in err
    ), err
    assert elapsed < DEADLINE_S and not (tmp_path / "out").exists()


def test_a_hang_in_the_plugin_is_ended_by_the_watchdog(tmp_path):
    path = plugin(
        tmp_path,
        """
        import time
        import spmd

        @spmd.map_reduce(combine="sum")
        def slow(block, xp, params):
            if block.shape[0] == 3335:
                time.sleep(600)
            return block.sum(keepdims=True)
    """,
    )
    rc, out, err, elapsed = spmd("run", config(tmp_path, f"{path}:slow"))
    assert rc == 4 and "watchdog: rank 0" in err and f"rank 2 on {HOST}: phase compute, not in a collective" in err, err
    assert elapsed < DEADLINE_S


def test_a_plugin_whose_parts_do_not_add_up_fails_verification(tmp_path):
    """The squares of the row counts: summed over ranks, not the square of all rows; exit 3, named."""
    path = plugin(
        tmp_path,
        """
        import spmd

        @spmd.map_reduce(combine="sum")
        def rows_squared(block, xp, params):
            return xp.asarray([float(block.shape[0]) ** 2])
    """,
    )
    rc, out, err, _ = spmd("run", config(tmp_path, f"{path}:rows_squared"))
    assert rc == 3 and "rows_squared: result[0] = " in err and "the reference gives 100140049.0" in err, err
    assert not (tmp_path / "out").exists()


def test_verify_none_is_recorded_as_not_checked_and_only_for_plugins(tmp_path):
    path = plugin(
        tmp_path,
        """
        import spmd

        @spmd.map_reduce(combine="sum")
        def rows_squared(block, xp, params):
            return xp.asarray([float(block.shape[0]) ** 2])
    """,
    )
    rc, out, err, _ = spmd("run", config(tmp_path, f"{path}:rows_squared", verify="none"))
    assert rc == 0, err
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert report["verified"] is False and "not checked" in report["verification"]["reference"]
    assert "NOT verified" in out
    rc, out, err, _ = spmd("run", config(tmp_path, "reduce", verify="none"))
    assert (
        rc == 2
        and "verify: none is for plug-ins and the user's own model (torch) only; the built-in reduce always verifies"
        in err
    ), err


def test_faults_jobscripts_merge_and_compare_take_plugins_too(tmp_path):
    cfg = example("histogram", tmp_path)
    assert spmd("generate", cfg, ranks=1)[0] == 0
    rc, out, err, _ = spmd("run", cfg, env={"SPMD_FAULT": "rank=1,phase=compute,kind=raise"})
    assert rc == 1 and f"rank 1 on {HOST}: injected fault" in err and "at phase compute" in err, err
    for ranks in (1, 2):
        rc, out, err, _ = spmd("run", cfg, "--out", tmp_path / f"r{ranks}", ranks=ranks)
        assert rc == 0, err
    merged = subprocess.run(
        [
            sys.executable,
            "-m",
            "spmd",
            "report",
            "merge",
            tmp_path / "r1",
            tmp_path / "r2",
            "--out",
            tmp_path / "merged",
        ],
        capture_output=True,
        text=True,
        env=LAUNCH_ENV,
    )
    assert merged.returncode == 0, merged.stderr
    assert json.loads((tmp_path / "merged/scaling.json").read_text())["series"]["strong"][1]["ranks"] == 2
    compared = subprocess.run(
        [
            sys.executable,
            "-m",
            "spmd",
            "report",
            "compare",
            tmp_path / "r1/report.json",
            tmp_path / "merged/scaling.json",
        ],
        capture_output=True,
        text=True,
        env=LAUNCH_ENV,
    )
    assert compared.returncode == 0 and "strong" in compared.stdout, compared.stderr
    jobs = subprocess.run(
        [
            sys.executable,
            "-m",
            "spmd",
            "jobscript",
            cfg,
            "--nodes",
            "1,2",
            "--gpus-per-node",
            "1",
            "--out",
            tmp_path / "jobs",
        ],
        capture_output=True,
        text=True,
        env=LAUNCH_ENV,
    )
    assert jobs.returncode == 0, jobs.stderr
    label = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{EXAMPLES}/histogram.py:energy_histogram")  # a job name: plain
    assert f"#SBATCH --job-name=spmd-{label}-strong-2n\n" in (tmp_path / "jobs/strong-2n.sbatch").read_text()
    weak = yaml.safe_load((tmp_path / "jobs/configs/weak-2n.yaml").read_text())
    assert weak["workload"] == f"{EXAMPLES}/histogram.py:energy_histogram" and weak["generate"]["shape"] == [2 * ROWS]


HISTORY_PLUGIN = """
    import time
    import spmd

    largest = [0]  # the largest block this rank has run, as glibc's thresholds remember the largest block freed


    @spmd.map_reduce(combine="sum")
    def remembers(block, xp, params):
        fresh = block.shape[0] >= largest[0]  # no larger block before: its pages faulted in again every repeat
        largest[0] = max(largest[0], block.shape[0])
        time.sleep(0.04 + (0.04 if fresh and HISTORY else 0.0))
        return block.sum(keepdims=True)
"""


@pytest.mark.parametrize("history", [True, False])
def test_a_strong_sweeps_ranks_new_to_the_launch_slowed_by_their_history_are_told_apart(tmp_path, history):
    """A plug-in whose rank runs slower until it has run a larger block (as a rank whose allocator never freed one
    does): in one launch of 1, 2 and 4 ranks, ranks 2-3 at 4 are the slow ones, named as new to the launch. Its clean
    twin, the same time on every rank, is named nothing."""
    path = plugin(tmp_path, HISTORY_PLUGIN.replace("and HISTORY", f"and {history}"))
    cfg = config(tmp_path, f"{path}:remembers", repeats=5, timeout_s=30)
    rc, out, err, _ = spmd("scale", cfg, "--mode", "strong", "--ranks", "1,2,4", "--probe-max-bytes", "64K", ranks=4)
    assert rc == 0, err
    advice = json.loads((tmp_path / "out/scaling/scaling.json").read_text())["advice"]
    told = [line for line in advice if "new to this launch" in line]
    if history:
        assert len(told) == 1 and told[0].startswith("At 4 ranks (strong): ranks 2-3, new to this launch"), advice
        ratio = float(re.search(r"\(0-1\), ([\d.]+)x", told[0])[1])
        assert 1.6 < ratio < 2.4, told  # 80 ms against 40 a repeat
    else:
        assert told == [], advice
