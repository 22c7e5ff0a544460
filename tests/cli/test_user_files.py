"""A user's files are sacred: spmd writes only missing files or files carrying its own record, under a real
mpiexec. A user's own input, a corrupt file and a read-only file stay byte-identical through generate, run,
scale (strong, weak, both) and bench io, whatever the config's generate section says; outputs (report.json, a
scaling report, a save, a checkpoint, --json) that hold a file spmd did not write are refused before the work;
weak scaling of a user's input writes grown copies under the run's output."""

from __future__ import annotations

import hashlib
import json
import os

import h5py
import numpy as np
import pytest
from helpers import assert_result_close, reference, write_dataset
from mpi_job import spmd

USERS = np.random.default_rng(7).normal(3.0, 2.0, size=(3001, 9))  # the user's table: float64, odd rows


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def user_input(tmp_path, kind: str):
    """The user's file at data/events.h5 (dataset x): their own table, a corrupt copy, or a read-only one."""
    path = tmp_path / "data" / "events.h5"
    path.parent.mkdir()
    write_dataset(path, USERS)
    if kind == "corrupt":
        raw = bytearray(path.read_bytes())
        raw[:8] = b"NOT HDF5"  # the signature gone: no HDF5 library will open it
        path.write_bytes(bytes(raw))
    if kind == "read-only":
        path.chmod(0o444)
    return path


def config(tmp_path, **extra):
    """A reduce of the user's file with a generate section that does not match it (the case that destroyed data)."""
    cfg = {
        "workload": "reduce",
        "device": "cpu",
        "repeats": 2,
        "timeout_s": 60,
        "output": "out",
        "input": {"path": "data/events.h5", "dataset": "x"},
        "generate": {"shape": [1000, 9], "dtype": "float64", "seed": 1},
        **extra,
    }
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("kind", ["user", "read-only", "corrupt"])
def test_a_users_file_is_left_byte_identical_by_every_command(tmp_path, kind):
    source = user_input(tmp_path, kind)
    before = digest(source)
    job = config(tmp_path)

    rc, out, err, _ = spmd("generate", job, cwd=tmp_path, ranks=2)
    assert rc == 2 and "data/events.h5" in err, err
    why = "is read-only" if kind == "read-only" else "exists and was not written by spmd generate"
    assert why in err and "remove it or point input at another path" in err, err
    assert digest(source) == before

    rc, out, err, _ = spmd("run", job, cwd=tmp_path, ranks=2)
    if kind == "corrupt":
        assert rc == 2 and "data/events.h5: not an HDF5 file" in err, err
    else:
        assert rc == 0, err
        result = json.loads((tmp_path / "out/report.json").read_text())["result"]
        assert_result_close(result, reference(USERS))  # the user's data, not random numbers
    assert digest(source) == before

    for mode in ("strong", "weak", "both"):
        rc, out, err, _ = spmd(
            "scale", job, "--mode", mode, "--ranks", "1,2", "--out", f"sc-{mode}", cwd=tmp_path, ranks=2, timeout=180
        )
        assert digest(source) == before, mode
        if kind == "corrupt":
            assert rc == 2 and "data/events.h5" in err, (mode, err)
            continue
        assert rc == 0, (mode, err)
        assert "data/events.h5 is your file (not written by spmd generate): read as it is" in out, out
        scaling = json.loads((tmp_path / f"sc-{mode}/scaling.json").read_text())
        for run in scaling["runs"]:
            want = USERS if run["mode"] == "strong" or run["ranks"] == 1 else np.concatenate([USERS, USERS])
            assert_result_close(run["report"]["result"], reference(want))
        if mode != "strong":  # the grown copy lies under the output, never beside the input
            copy = tmp_path / "out/weak-inputs/x2/events.h5"
            assert "in out/weak-inputs/x2/events.h5: 6002 rows, 422 KiB" in out, out
            with h5py.File(copy) as f:
                np.testing.assert_array_equal(f["x"][...], np.concatenate([USERS, USERS]))
            assert sorted(p.name for p in source.parent.iterdir()) == ["events.h5"]

    rc, out, err, _ = spmd("bench", "io", job, "--rounds", "1", cwd=tmp_path, ranks=2)
    assert (rc == 2 and "data/events.h5" in err) if kind == "corrupt" else rc == 0, err
    assert digest(source) == before
    assert not list(tmp_path.rglob("*.tmp"))


def test_generate_checks_every_file_before_any_rank_writes_one(tmp_path):
    """Four shards to generate, the third a user's file: nothing is written, by any rank."""
    (tmp_path / "d").mkdir()
    write_dataset(tmp_path / "d/part-002.h5", np.ones(10))
    before = digest(tmp_path / "d/part-002.h5")
    cfg = {
        "workload": "reduce",
        "device": "cpu",
        "input": {"shards": "d/part-*.h5", "dataset": "x"},
        "generate": {"shape": [400], "shards": 4},
    }
    (tmp_path / "job.yaml").write_text(json.dumps(cfg))
    rc, out, err, _ = spmd("generate", "job.yaml", cwd=tmp_path, ranks=3)
    assert rc == 2 and "d/part-002.h5 exists and was not written by spmd generate" in err, err
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["part-002.h5"]
    assert digest(tmp_path / "d/part-002.h5") == before
    rc, out, err, _ = spmd("generate", "job.yaml", "--skip-user-files", cwd=tmp_path, ranks=3)
    assert (
        rc == 0
        and "wrote 0 of 4 file(s), 1 of yours left as they are, 3 not made (their input holds files of yours)" in out
    ), err
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["part-002.h5"]
    assert digest(tmp_path / "d/part-002.h5") == before


def test_a_generated_input_is_regenerated_and_a_result_spmd_saved_is_not(tmp_path):
    """spmd's own generated input with another recipe is rewritten; a result spmd saved (its record says so)
    is not an input spmd generate may replace."""
    cfg = {
        "workload": "reduce",
        "device": "cpu",
        "input": {"path": "x.h5", "dataset": "x"},
        "generate": {"shape": [100], "seed": 1},
    }
    (tmp_path / "job.yaml").write_text(json.dumps(cfg))
    assert spmd("generate", "job.yaml", cwd=tmp_path, ranks=1)[0] == 0
    rc, out, err, _ = spmd("generate", "job.yaml", "-o", "generate.seed=2", cwd=tmp_path, ranks=1)
    assert rc == 0 and "wrote 1 of 1" in out, err
    matmul = {
        "workload": "matmul",
        "device": "cpu",
        "input": {"path": "A.h5", "dataset": "A"},
        "generate": {"shape": [40, 30]},
        "params": {
            "b": {"path": "B.h5", "dataset": "B", "generate": {"shape": [30, 20]}},
            "save": {"path": "C.h5", "dataset": "C"},
        },
    }
    (tmp_path / "mm.yaml").write_text(json.dumps(matmul))
    assert spmd("generate", "mm.yaml", cwd=tmp_path, ranks=1)[0] == 0
    assert spmd("run", "mm.yaml", cwd=tmp_path, ranks=2)[0] == 0
    saved = digest(tmp_path / "C.h5")
    rc, out, err, _ = spmd("generate", "job.yaml", "-o", "input.path=C.h5", cwd=tmp_path, ranks=1)
    assert rc == 2 and "C.h5 exists and was not written by spmd generate" in err, err
    assert digest(tmp_path / "C.h5") == saved
    assert spmd("run", "mm.yaml", cwd=tmp_path, ranks=2)[0] == 0  # spmd's own save: replaced by the next run


def test_generate_refuses_a_shape_the_disk_cannot_take_before_writing(tmp_path):
    cfg = {
        "workload": "reduce",
        "device": "cpu",
        "input": {"path": "big/x.h5", "dataset": "x"},
        "generate": {"shape": [10**15], "dtype": "float64"},
    }
    (tmp_path / "job.yaml").write_text(json.dumps(cfg))
    rc, out, err, _ = spmd("generate", "job.yaml", cwd=tmp_path, ranks=2)
    assert rc == 2 and "generating 1 file(s) needs 7.11 PiB, the file system of" in err, err
    assert "refused before writing anything" in err and not (tmp_path / "big").exists()


def test_outputs_that_are_not_spmds_are_refused_before_the_work(tmp_path):
    """report.json, a save, a checkpoint, scaling outputs and --json paths holding a user's file: exit 2 naming
    it, nothing run; overwrite: true lets a save replace one; spmd's own files are replaced."""
    write_dataset(tmp_path / "x.h5", np.arange(1000.0))
    cfg = {
        "workload": "reduce",
        "device": "cpu",
        "input": {"path": "x.h5", "dataset": "x"},
        "output": "out",
        "repeats": 1,
    }
    (tmp_path / "job.yaml").write_text(json.dumps(cfg))
    (tmp_path / "out").mkdir()
    (tmp_path / "out/report.json").write_text('{"mine": "a report of another tool"}\n')
    rc, out, err, _ = spmd("run", "job.yaml", cwd=tmp_path, ranks=2)
    assert rc == 2 and "the report out/report.json exists and was not written by spmd" in err, err
    assert (tmp_path / "out/report.json").read_text() == '{"mine": "a report of another tool"}\n'
    (tmp_path / "out/report.json").unlink()
    assert spmd("run", "job.yaml", cwd=tmp_path, ranks=2)[0] == 0
    assert spmd("run", "job.yaml", "-o", "repeats=2", cwd=tmp_path, ranks=2)[0] == 0  # spmd's own: replaced
    assert json.loads((tmp_path / "out/report.json").read_text())["repeats"] == 2

    (tmp_path / "mine.json").write_text("[1, 2, 3]\n")
    for args in (["info", "--json", "mine.json"], ["bench", "comm", "--max-bytes", "64", "--json", "mine.json"]):
        rc, out, err, _ = spmd(*args, cwd=tmp_path, ranks=2)
        assert rc == 2 and "mine.json exists and was not written by spmd" in err, (args, err)
    assert (tmp_path / "mine.json").read_text() == "[1, 2, 3]\n"

    (tmp_path / "sc").mkdir()
    (tmp_path / "sc/scaling.md").write_text("# my notes\n")
    rc, out, err, _ = spmd("scale", "job.yaml", "--ranks", "1,2", "--out", "sc", cwd=tmp_path, ranks=2)
    assert rc == 2 and "sc/scaling.md exists and was not written by spmd" in err and "spmd scale:" not in out, err
    assert (tmp_path / "sc/scaling.md").read_text() == "# my notes\n"


def test_a_save_path_holding_a_users_file_needs_overwrite(tmp_path):
    matmul = {
        "workload": "matmul",
        "device": "cpu",
        "repeats": 1,
        "input": {"path": "A.h5", "dataset": "A"},
        "generate": {"shape": [40, 30]},
        "params": {
            "b": {"path": "B.h5", "dataset": "B", "generate": {"shape": [30, 20]}},
            "save": {"path": "C.h5", "dataset": "C"},
        },
    }
    (tmp_path / "mm.yaml").write_text(json.dumps(matmul))
    assert spmd("generate", "mm.yaml", cwd=tmp_path, ranks=1)[0] == 0
    write_dataset(tmp_path / "C.h5", np.zeros(3), name="precious")
    before = digest(tmp_path / "C.h5")
    rc, out, err, _ = spmd("run", "mm.yaml", cwd=tmp_path, ranks=2)
    assert rc == 2 and "the output C.h5 exists and was not written by spmd" in err and "overwrite: true" in err, err
    assert digest(tmp_path / "C.h5") == before and not (tmp_path / "results/report.json").exists()
    rc, out, err, _ = spmd("run", "mm.yaml", "-o", "overwrite=true", cwd=tmp_path, ranks=2)
    assert rc == 0, err
    with h5py.File(tmp_path / "C.h5") as f:
        assert f["C"].shape == (40, 20) and "spmd_record" in f.attrs


def test_a_checkpoint_path_holding_a_users_file_is_refused(tmp_path):
    from helpers import train_config

    config = train_config(tmp_path, **{"params.checkpoint": {"path": "ckpt.h5", "every": 10}, "repeats": 1})
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    (tmp_path / "ckpt.h5").write_text("my own notes, not a checkpoint\n")
    rc, out, err, _ = spmd("run", config, cwd=tmp_path, ranks=2)
    assert rc == 2 and "ckpt.h5 exists and was not written by spmd" in err and "overwrite: true" in err, err
    assert (tmp_path / "ckpt.h5").read_text() == "my own notes, not a checkpoint\n"


def test_a_full_disk_for_the_outputs_is_exit_2_naming_the_file_and_leaves_nothing_half_written(tmp_path):
    """report.json and a scaling report on a disk that takes no more (a file size limit set after MPI started):
    exit 2 naming the file, no report, no temporary file, and a scaling report's files all or none."""
    from helpers import LIMITED
    from mpi_job import spmd_script

    write_dataset(tmp_path / "x.h5", np.arange(30000.0))
    cfg = {
        "workload": "reduce",
        "device": "cpu",
        "input": {"path": "x.h5", "dataset": "x"},
        "output": "out",
        "repeats": 30,
    }
    (tmp_path / "job.yaml").write_text(json.dumps(cfg))
    rc, out, err, _ = spmd_script(tmp_path, LIMITED, 6000, "run", "job.yaml", ranks=2)
    assert rc == 2 and "out/report.html: cannot write it (File too large); none of the 2 file(s)" in err, err
    assert "Traceback" not in err and not (tmp_path / "out/report.json").exists()
    assert not (tmp_path / "out/report.html").exists()  # report.json and report.html: both or neither
    rc, out, err, _ = spmd_script(
        tmp_path, LIMITED, 20000, "scale", "job.yaml", "--ranks", "1,2", "--out", "sc", "-o", "repeats=2", ranks=2
    )
    assert rc == 2 and "cannot write it (File too large); none of the" in err, err
    assert not (tmp_path / "sc").exists() and not list(tmp_path.rglob("*.tmp"))


def test_temporary_files_go_on_sigterm_and_stale_ones_on_the_next_write(tmp_path):
    """SIGTERM to spmd generate while it writes: no temporary file stays; one left by a process killed with
    SIGKILL is removed by the next write of the same file (its process is gone)."""
    import signal
    import subprocess
    import sys
    import time

    from helpers import LAUNCH_ENV

    cfg = {
        "workload": "reduce",
        "device": "cpu",
        "input": {"path": "x.h5", "dataset": "x"},
        "generate": {"shape": [100_000_000]},
    }  # 381 MiB: seconds of writing
    (tmp_path / "job.yaml").write_text(json.dumps(cfg))
    proc = subprocess.Popen(
        [sys.executable, "-m", "spmd", "generate", "job.yaml"],
        cwd=tmp_path,
        env=LAUNCH_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".x.h5.*.tmp")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp_path.glob(".x.h5.*.tmp")), proc.communicate()
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM
    assert not list(tmp_path.glob(".x.h5.*")) and not (tmp_path / "x.h5").exists()

    proc = subprocess.Popen(
        [sys.executable, "-m", "spmd", "generate", "job.yaml"],
        cwd=tmp_path,
        env=LAUNCH_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    while not list(tmp_path.glob(".x.h5.*.tmp")) and time.monotonic() < deadline + 60:
        time.sleep(0.05)
    proc.kill()  # SIGKILL: no handler runs
    proc.communicate(timeout=60)
    stale = list(tmp_path.glob(".x.h5.*.tmp"))
    assert len(stale) == 1 and str(proc.pid) in stale[0].name
    rc, out, err, _ = spmd("generate", "job.yaml", "-o", "generate.shape=[1000]", cwd=tmp_path, ranks=1)
    assert rc == 0, err
    assert not list(tmp_path.glob(".x.h5.*")), list(tmp_path.iterdir())


def test_the_watchdog_ending_a_job_removes_the_file_being_written(tmp_path):
    import subprocess
    import sys

    from helpers import LAUNCH_ENV

    code = (
        "from mpi4py import MPI\nfrom spmd.core.files import temp_beside\nfrom spmd.core.watchdog import end_job\n"
        f"tmp = temp_beside({str(tmp_path / 'C.h5')!r})\nassert tmp.exists()\nend_job(None, 4)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=LAUNCH_ENV, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4, proc.stderr
    assert not list(tmp_path.iterdir())


def test_stale_temporaries_of_live_or_foreign_processes_are_kept(tmp_path):
    from spmd.core.files import _HOST, remove_stale_temps

    live = tmp_path / f".x.h5.{_HOST}-{os.getpid()}.abc.tmp"
    foreign = tmp_path / ".x.h5.otherhost-1.abc.tmp"
    dead = tmp_path / f".x.h5.{_HOST}-{2**22 + 12345}.abc.tmp"  # above Linux's pid_max default: no such process
    other = tmp_path / f".y.h5.{_HOST}-{2**22 + 12345}.abc.tmp"
    for path in (live, foreign, dead, other):
        path.write_text("partial")
    assert remove_stale_temps(tmp_path / "x.h5") == [dead]
    assert live.exists() and foreign.exists() and other.exists()


def test_generate_never_adds_files_to_an_input_of_the_users(tmp_path):
    """Three shards of the user's under a glob, a generate section for four: --skip-user-files (what a job
    script's generate step and spmd scale's strong runs do) generates none of them, since a fourth file would
    change what the glob reads; the run reads the user's three."""
    (tmp_path / "d").mkdir()
    for i in range(3):
        write_dataset(tmp_path / f"d/part-00{i}.h5", np.full(10, float(i)))
    cfg = {
        "workload": "reduce",
        "device": "cpu",
        "input": {"shards": "d/part-*.h5", "dataset": "x"},
        "generate": {"shape": [400], "shards": 4},
    }
    (tmp_path / "job.yaml").write_text(json.dumps(cfg))
    rc, out, err, _ = spmd("generate", "job.yaml", "--skip-user-files", cwd=tmp_path, ranks=2)
    assert rc == 0 and "wrote 0 of 4 file(s), 3 of yours left as they are, 1 not made" in out, (out, err)
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == [f"part-00{i}.h5" for i in range(3)]
    rc, out, err, _ = spmd("scale", "job.yaml", "--ranks", "1,2", "--out", "sc", cwd=tmp_path, ranks=2)
    assert rc == 0, err
    result = json.loads((tmp_path / "sc/scaling.json").read_text())["runs"][0]["report"]["result"]
    assert result["sum"] == 30.0 and result["max"] == 2.0
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == [f"part-00{i}.h5" for i in range(3)]


def test_a_users_file_where_a_weak_copy_goes_is_refused(tmp_path):
    user_input(tmp_path, "user")
    (tmp_path / "out/weak-inputs/x2").mkdir(parents=True)
    write_dataset(tmp_path / "out/weak-inputs/x2/events.h5", np.zeros(5))
    rc, out, err, _ = spmd("scale", config(tmp_path), "--mode", "weak", "--ranks", "1,2", cwd=tmp_path, ranks=2)
    assert rc == 2 and "out/weak-inputs/x2/events.h5 exists and was not written by spmd generate" in err, err
