"""What a new user meets first: a machine without an MPI library, help texts, job scripts, skipped plots.

A missing MPI library is simulated with mpi4py's own switch, MPI4PY_LIBMPI pointing at no file: exactly what
``pip install .`` gives on a machine with no MPI (``RuntimeError: cannot load MPI library``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

ROOT = Path(__file__).resolve().parents[2]
NO_MPI = {"MPI4PY_LIBMPI": "/nonexistent/libmpi.so"}


def plain(*args, cwd, env=None, timeout=120):
    """``python -m spmd ARGS`` as one plain process (no mpiexec)."""
    return subprocess.run(
        [sys.executable, "-m", "spmd", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


@pytest.mark.parametrize(
    "command",
    [["info"], ["run", "CONFIG"], ["scale", "CONFIG"], ["bench", "io", "CONFIG"], ["bench", "comm"], ["topo"]],
)
def test_a_missing_mpi_library_is_one_line_naming_the_fix(tmp_path, command):
    config = ROOT / "inputs/reduce.yaml"
    out = plain(*[str(config) if a == "CONFIG" else a for a in command], cwd=tmp_path, env=NO_MPI)
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(
        f"spmd: error: spmd {command[0]} runs under MPI, and no MPI library could be loaded "
        f"(RuntimeError: cannot load MPI library)"
    )
    assert "pip install 'spmd[mpich]'" in lines[0] and "system MPI" in lines[0]


def test_generate_jobscript_report_and_help_work_without_mpi(tmp_path):
    config = ROOT / "inputs/reduce.yaml"
    over = ["-o", f"input.path={tmp_path}/x.h5", "-o", f"output={tmp_path}/out", "-o", "generate.shape=[1000]"]
    out = plain("generate", config, *over, cwd=tmp_path, env=NO_MPI)
    assert out.returncode == 0, out.stderr
    assert "wrote 1 of 1 file(s)" in out.stdout
    with h5py.File(tmp_path / "x.h5") as f:
        assert f["x"].shape == (1000,) and "sum" in f["x"].attrs

    out = plain(
        "jobscript",
        config,
        *over,
        "--nodes",
        "1,2",
        "--gpus-per-node",
        "0",
        "--tasks-per-node",
        "2",
        "--out",
        tmp_path / "jobs",
        cwd=tmp_path,
        env=NO_MPI,
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "jobs/submit.sh").exists()

    report = ROOT / "tests/fixtures/reports/gpu-reduce-report.json"  # a real report (2 H200s)
    out = plain("report", "compare", report, report, cwd=tmp_path, env=NO_MPI)
    assert out.returncode == 0, out.stderr
    out = plain("report", "compare", report, tmp_path / "missing.json", cwd=tmp_path, env=NO_MPI)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        f"spmd: error: {tmp_path}/missing.json: cannot read a JSON report: No such file or directory"
    ]
    for args in (["--help"], ["run", "--help"], ["report", "compare", "--help"]):
        out = plain(*args, cwd=tmp_path, env=NO_MPI)
        assert out.returncode == 0 and out.stdout.startswith("usage: spmd"), out


def _options(parser, path=("spmd",)):
    """(command path, argparse action) of every option and positional of every subcommand."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, (*path, name))
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield path, action


def test_every_option_of_every_subcommand_has_help_with_its_default():
    from spmd.cli.arguments import build_parser

    missing, no_default = [], []
    for path, action in _options(build_parser()):
        name = f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}"
        if not action.help:
            missing.append(name)
        elif action.default not in (None, False, [], "==SUPPRESS==") and "default" not in action.help:
            no_default.append(f"{name} (default {action.default!r})")
    assert not missing, f"options without help: {missing}"
    assert not no_default, f"options whose help does not state the default: {no_default}"


def test_jobscript_calls_this_interpreter_counts_its_files_and_writes_all_or_nothing(tmp_path, monkeypatch):
    import shlex

    from spmd.scale.jobscript import write_jobscripts
    from spmd.workloads.registry import load_job_config

    config = ROOT / "inputs/reduce.yaml"
    out = plain(
        "jobscript", config, "--nodes", "1,2,4", "--gpus-per-node", "4", "--out", tmp_path / "jobs", cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    files = sorted(p for p in (tmp_path / "jobs").rglob("*") if p.is_file())
    assert out.stdout.startswith(f"wrote {len(files)} file(s) to {tmp_path}/jobs;"), (out.stdout, files)
    assert len(files) == 5 + 5 + 3  # configs and sbatch of strong 1, 2, 4 and weak 2, 4; generate, merge, submit
    assert (
        f'srun ${{mpi_flag[@]+"${{mpi_flag[@]}}"}} --kill-on-bad-exit=1 {shlex.quote(sys.executable)} -m spmd run '
        in (tmp_path / "jobs/strong-2n.sbatch").read_text()
    )
    assert not list(tmp_path.rglob("*.tmp"))

    # a failure while the series is written (a full disk at its fourth file) leaves the folder as it was (here:
    # empty), and an earlier series untouched, with no temporary file anywhere
    import spmd.core.files
    from spmd.core.errors import InputError
    from spmd.scale.jobscript import JobOptions

    cfg = load_job_config(config)
    real = spmd.core.files.fsync_file
    calls = []

    def failing(path):
        calls.append(path)
        if len(calls) == 4:
            raise OSError(28, "No space left on device")
        return real(path)

    monkeypatch.setattr(spmd.core.files, "fsync_file", failing)
    with pytest.raises(InputError, match="No space left on device.*none of the .* file.s. was changed"):
        write_jobscripts(cfg, str(config), [1, 2], tmp_path / "fresh", JobOptions(gpus_per_node=4))
    assert not (tmp_path / "fresh").exists() or not any((tmp_path / "fresh").rglob("*"))
    before = {p: p.read_bytes() for p in files}
    calls.clear()
    with pytest.raises(InputError):
        write_jobscripts(cfg, str(config), [1, 2, 4], tmp_path / "jobs", JobOptions(gpus_per_node=2))
    assert {p: p.read_bytes() for p in files} == before  # the earlier series untouched
    assert not list(tmp_path.rglob("*.tmp"))


def test_skipped_plots_and_heat_maps_say_why_and_how_to_get_them(tmp_path):
    """Without matplotlib (hidden here) report render writes the tables and says the plots need spmd[plot]; topo
    --png on a node without GPUs says no heat map was written, and why."""
    from mpi_job import spmd

    scaling = ROOT / "tests/fixtures/reports/gpu-kmeans-scaling.json"  # a real sweep (2 H200s)
    hide = (
        "import sys; sys.modules['matplotlib'] = None; from spmd.cli.main import main; "
        f"sys.exit(main(['report', 'render', {str(scaling)!r}, '--out', {str(tmp_path / 'r')!r}]))"
    )
    out = subprocess.run([sys.executable, "-c", hide], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip() == (
        "spmd: note: no plots written: matplotlib is not installed (pip install "
        "'spmd[plot]' adds it); the tables are all there"
    )
    assert (tmp_path / "r/scaling.html").exists() and not list((tmp_path / "r").glob("*.png"))
    out = plain("report", "render", scaling, "--out", tmp_path / "with", cwd=tmp_path)  # matplotlib is a test dep
    assert out.returncode == 0 and "note" not in out.stderr and (tmp_path / "with/speedup.png").exists()

    from spmd.core import xp as xpmod

    if xpmod.gpu_count() == 0:  # the CPU machines CI runs on
        code, stdout, stderr, _ = spmd(
            "topo", "--png", tmp_path / "topo.png", "--iters", "1", "--bytes", "1M", ranks=1, cwd=tmp_path
        )
        assert code == 0, stderr
        assert f"spmd: note: no heat map written to {tmp_path}/topo.png: " in stderr and "has no GPU" in stderr
        assert not (tmp_path / "topo.png").exists()


def test_progress_lines_on_rank_0_when_asked_and_never_with_quiet(tmp_path):
    """Not a terminal (captured): no progress unless --progress; each repeat with train's steps/s, samples/s and
    loss; each sweep size as it starts; --quiet silences everything."""
    import re

    from helpers import small
    from mpi_job import spmd

    config = small(
        "train.yaml",
        tmp_path,
        **{"generate.shape": [2048, 844], "params.steps": 20, "params.checkpoint": None, "repeats": 3, "output": "out"},
    )
    assert spmd("generate", config, cwd=tmp_path, ranks=2)[0] == 0
    code, out, err, _ = spmd("run", config, "--progress", cwd=tmp_path, ranks=2)
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("spmd run: train: ")]
    assert len(lines) == 4, err  # one warm-up, 3 repeats, rank 0 alone
    assert re.fullmatch(
        r"spmd run: train: repeat 3/3 done, [\d.]+ s elapsed; [\d,]+ steps/s, [\d,]+ samples/s, "
        r"loss [\d.]+ \(the window before\)",
        lines[-1],
    ), lines
    assert "samples_per_s" in out  # and the final table has the rate
    code, out, err, _ = spmd("run", config, cwd=tmp_path, ranks=2)
    assert code == 0 and "spmd run: train: " not in err, err  # captured: not a terminal
    code, out, err, _ = spmd("run", config, "--progress", "-q", cwd=tmp_path, ranks=2)
    assert code == 0 and out == "" and "spmd run: train: " not in err, (out, err)

    reduce = small("reduce.yaml", tmp_path, **{"generate.shape": [20000], "repeats": 2, "output": "r"})
    code, out, err, _ = spmd(
        "scale", reduce, "--progress", "--ranks", "1,2", "--probe-max-bytes", "0", cwd=tmp_path, ranks=2
    )
    assert code == 0, err
    assert "spmd scale: strong 1 rank(s): starting (size 1 of 2)" in err.splitlines()
    assert "spmd scale: strong 2 rank(s): starting (size 2 of 2)" in err.splitlines()
    assert "spmd scale: strong 2 rank(s): repeat 2/2 done" in err
