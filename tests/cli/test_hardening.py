"""What a hostile or unlucky user meets, under a real mpiexec: saves and checkpoints that cannot be
written (a full disk, simulated by a file size limit set after MPI started), jobs saving to one path
at once, damaged checkpoints. Each ends with exit 2 naming the path and the cause, nothing left behind."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import h5py
import numpy as np
import pytest
from helpers import LAUNCH_ENV, LIMITED, small, train_config
from mpi_job import spmd, spmd_script


def leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.tmp"))


def test_a_save_that_does_not_fit_is_refused_before_writing(tmp_path):
    """matmul's C (float64 256 x 256 = 512 KiB) where a file may grow to 200 KB: space is reserved before
    HDF5 writes anything, so the job ends with a message instead of HDF5 crashing while it closes."""
    config = small(
        "matmul.yaml",
        tmp_path,
        **{
            "generate.shape": [256, 64],
            "generate.dtype": "float64",
            "params.b.generate.shape": [64, 256],
            "params.b.generate.dtype": "float64",
            "repeats": 1,
        },
    )
    assert spmd("generate", config, cwd=tmp_path)[0] == 0
    rc, out, err, _ = spmd_script(tmp_path, LIMITED, 200_000, "run", config, ranks=2)
    assert rc == 2, (out, err)
    assert "results/matmul/C.h5: cannot write the result (512 KiB): File too large" in err, err
    assert "Traceback" not in err and "Segmentation" not in err
    assert not (tmp_path / "results/matmul/C.h5").exists() and not (tmp_path / "results/matmul/report.json").exists()
    assert leftovers(tmp_path) == []


def test_a_checkpoint_that_does_not_fit_is_an_error_naming_it(tmp_path):
    config = train_config(tmp_path, **{"params.checkpoint": {"path": "ckpt.h5"}, "repeats": 1})
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    rc, out, err, _ = spmd_script(tmp_path, LIMITED, 20_000, "run", config, ranks=2)
    assert rc == 2, (out, err)
    assert "ckpt.h5: cannot write the checkpoint (File too large)" in err, err
    assert not (tmp_path / "ckpt.h5").exists() and leftovers(tmp_path) == []


SAVER = textwrap.dedent("""
    import sys
    import numpy as np
    from mpi4py import MPI
    from spmd.io.blocks import save_blocks
    from spmd.io.plan import Block
    from spmd.core.runtime import Context

    path, value = sys.argv[1], float(sys.argv[2])
    with Context(MPI.COMM_SELF) as ctx:
        for _ in range(25):
            save_blocks(ctx, path, "C", (300, 200), np.float64, Block(0, 300, 0, 200), np.full((300, 200), value))
""")


def test_jobs_saving_to_one_path_at_once_never_collide(tmp_path):
    """Two jobs write the same params.save path 25 times each, at the same time: every write succeeds
    (each has its own temporary file) and the file always holds one job's whole result."""
    target = tmp_path / "C.h5"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SAVER, str(target), str(v)],
            env=LAUNCH_ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for v in (1.0, 2.0)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with h5py.File(target) as f:
        assert len(np.unique(f["C"][...])) == 1
    assert leftovers(tmp_path) == []


def test_a_damaged_checkpoint_is_refused_naming_the_dataset(tmp_path):
    """200 KB zeroed in the middle of a checkpoint, the file size unchanged: resuming from it ends with
    exit 2 instead of training on and reporting 'verified'."""
    config = train_config(
        tmp_path,
        **{
            "params.checkpoint": {"path": "ckpt.h5"},
            "params.model": "medium",
            "generate.shape": [2048, 844],
            "repeats": 1,
        },
    )
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    assert spmd("run", config, cwd=tmp_path, ranks=2)[0] == 0
    path = tmp_path / "ckpt.h5"
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(size // 4)  # inside the weights, the first dataset
        f.write(bytes(200_000))
    assert path.stat().st_size == size
    rc, out, err, _ = spmd(
        "run", config, "-o", "params.resume=ckpt.h5", "-o", "repeats=2", "--out", "again", cwd=tmp_path, ranks=2
    )
    assert rc == 2 and "ckpt.h5: damaged: dataset" in err and "does not match its checksum" in err, err
    assert not (tmp_path / "again").exists()
    report = json.loads((tmp_path / "results/train/report.json").read_text())
    assert report["verified"]  # the first run's report, untouched


def test_an_unusable_output_is_refused_before_the_work(tmp_path):
    """An existing file as --out, a save under a file, a file system that takes no more bytes: exit 2
    within seconds, before a 300-window training run or a matmul even starts."""
    import time

    config = train_config(tmp_path, **{"repeats": 300})
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    (tmp_path / "taken").write_text("a file, not a folder")
    start = time.monotonic()
    rc, out, err, _ = spmd("run", config, "--out", "taken", cwd=tmp_path, ranks=2)
    assert rc == 2 and "output folder taken: taken exists and is not a folder" in err, err
    rc, out, err, _ = spmd_script(tmp_path, LIMITED, 1000, "run", config, "--out", "fresh/out", ranks=2)
    assert rc == 2 and "output folder fresh/out: cannot write there (File too large)" in err, err
    assert time.monotonic() - start < 30 and not (tmp_path / "fresh").exists()
    matmul = small("matmul.yaml", tmp_path, **{"params.save.path": "taken/C.h5"})
    rc, out, err, _ = spmd("run", matmul, cwd=tmp_path, ranks=2)
    assert rc == 2 and "the folder of taken/C.h5: taken: taken exists and is not a folder" in err, err
    rc, out, err, _ = spmd("scale", config, "--ranks", "1,2", "--out", "taken/scaling", cwd=tmp_path, ranks=2)
    assert rc == 2 and "output folder taken/scaling: taken exists and is not a folder" in err, err


def test_a_fifo_as_input_is_refused_not_waited_on(tmp_path):
    """HDF5 opening a FIFO blocks in C, holding the GIL, until something writes to it: every rank would
    hang where no watchdog thread can run. A path that is not a regular file is refused up front."""
    import os
    import time

    os.mkfifo(tmp_path / "x.h5")
    config = tmp_path / "job.yaml"
    config.write_text(
        json.dumps(
            {
                "workload": "reduce",
                "device": "cpu",
                "timeout_s": 5,
                "output": "out",
                "input": {"path": "x.h5", "dataset": "x"},
            }
        )
    )
    start = time.monotonic()
    rc, out, err, _ = spmd("run", config, cwd=tmp_path, ranks=2)
    assert rc == 2 and "x.h5: a FIFO, not an HDF5 file" in err, err
    assert time.monotonic() - start < 15
    (tmp_path / "loop.h5").symlink_to(tmp_path / "loop.h5")
    rc, out, err, _ = spmd("run", config, "-o", "input.path=loop.h5", cwd=tmp_path, ranks=2)
    assert rc == 2 and "loop.h5: Too many levels of symbolic links" in err, err


def start_job(tmp_path, *args, ranks=3, env=None):
    """``mpiexec -n ranks python -m spmd ARGS`` in the background, in its own process group."""
    from mpi_job import mpiexec

    return subprocess.Popen(
        [*mpiexec(), "-n", str(ranks), sys.executable, "-m", "spmd", *map(str, args)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**LAUNCH_ENV, **(env or {})},
        start_new_session=True,
    )


def interrupt(proc, when, timeout=60):
    """Wait until ``when()`` holds, send SIGINT to mpiexec (what Ctrl-C in its terminal does), collect."""
    import os
    import signal
    import time

    try:
        deadline = time.monotonic() + 60
        while not when() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err, time.monotonic() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.parametrize("watchdog", ["on", "off"])
def test_ctrl_c_ends_the_job_with_130_and_one_line(tmp_path, watchdog):
    """The watchdog's thread ends the job on its next beat; without one, the main thread's
    KeyboardInterrupt does (SPMD_WATCHDOG=off)."""
    import time

    config = small("reduce.yaml", tmp_path, **{"repeats": 100_000, "generate.shape": [100_000], "output": "out"})
    assert spmd("generate", config, cwd=tmp_path)[0] == 0
    proc = start_job(tmp_path, "run", config, "-o", "timeout_s=60", env={"SPMD_WATCHDOG": watchdog})
    started = time.monotonic()
    rc, out, err, seconds = interrupt(proc, lambda: time.monotonic() > started + 4)  # repeats are running
    assert rc == 130, err
    assert err.count("spmd: interrupted (SIGINT): ending the job (exit 130)") == 1, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert seconds < 15 and not (tmp_path / "out").exists()


def test_ctrl_c_during_training_writes_the_checkpoint_first(tmp_path):
    config = train_config(tmp_path, **{"params.checkpoint": {"path": "ckpt.h5", "every": 50}, "repeats": 199})
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    proc = start_job(tmp_path, "run", config, "--out", "stopped", ranks=2)
    rc, out, err, seconds = interrupt(proc, (tmp_path / "ckpt.h5").exists)  # training is under way
    assert rc == 130, err
    # the rank named is the first one the signal reached when the ranks compared (mpiexec forwards it to each)
    assert re.search(r"spmd: interrupted: rank [01] on \S+: SIGINT received: checkpoint at step \d+", err), err
    assert "continue with -o params.resume=ckpt.h5" in err and "Traceback" not in err
    with h5py.File(tmp_path / "ckpt.h5") as f:
        assert int(f.attrs["step"]) > 50  # the window the Ctrl-C came in, not the last periodic one
    assert not (tmp_path / "stopped/report.json").exists() and seconds < 30
