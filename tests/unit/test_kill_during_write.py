"""Outputs are never half-written: a process killed (SIGKILL) while it writes a report, a training
checkpoint or a saved result leaves the previous file whole and loadable.

Each writer runs in a child process that kills itself at a chosen moment (mid-write, before the
fsync, before the rename), then in a loop killed at random moments from outside.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
import time

import h5py
import numpy as np
import pytest
from helpers import LAUNCH_ENV

WRITER = textwrap.dedent("""
    import os, signal, sys
    import numpy as np

    kind, path, moment, first = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    def write(step):
        n = 200_000 + step % 7  # a few MB, a size that differs from one step to the next
        if kind == "report":
            from spmd.core.files import write_json_atomic
            write_json_atomic(path, {"step": step, "payload": [step] * n})
        elif kind == "checkpoint":
            from spmd.workloads.train.checkpoint import save_checkpoint
            from spmd.workloads.train.layout import Layout
            layout = Layout((64, 512, 512, 10))
            flat = np.full(layout.size, step, dtype=np.float32)
            save_checkpoint(path, layout, flat, {"m": flat}, step, {"widths": [64, 512, 512, 10], "dtype": "float32"})
        else:  # a result saved by save_blocks, on a one-rank MPI job
            from spmd.io.blocks import save_blocks
            from spmd.io.plan import Block
            from spmd.core.runtime import Context
            ctx = Context()
            save_blocks(ctx, path, "C", (1000, 300), np.float64, Block(0, 1000, 0, 300),
                        np.full((1000, 300), step, dtype=np.float64))

    write(first)  # the previous, complete file
    if moment == "mid-write":  # the write itself stops halfway
        import builtins, h5py
        if kind in ("report", "checkpoint"):  # both go to disk through files.write_bytes_atomic
            import spmd.core.files
            class Half:
                def __init__(self, f): self.f = f
                def __enter__(self): return self
                def __exit__(self, *a): return False
                def read(self, n=-1): return self.f.read(n)  # spmd's record is checked before a write
                def write(self, data): self.f.write(data[:len(data) // 2]); self.f.flush(); die()
            spmd.core.files.open = lambda *a, **k: Half(builtins.open(*a, **k))
        else:
            real = h5py.Group.create_dataset
            def half(self, name, *a, **k):
                out = real(self, name, *a, **k)
                self.file.flush()
                die()
            h5py.Group.create_dataset = half
    elif moment == "before-fsync":
        os.fsync = die
    elif moment == "before-rename":
        os.replace = die
    step = first + 1
    while True:  # 'random': keep writing new versions until killed from outside
        write(step)
        step += 1
""")


def load_step(kind: str, path) -> int:
    """The step the file at ``path`` holds, after checking it is whole and self-consistent."""
    if kind == "report":
        data = json.loads(path.read_text())
        assert set(data["payload"]) == {data["step"]} and len(data["payload"]) == 200_000 + data["step"] % 7
        return data["step"]
    if kind == "checkpoint":
        from spmd.workloads.train.checkpoint import load_checkpoint
        from spmd.workloads.train.layout import Layout

        layout = Layout((64, 512, 512, 10))
        weights, state, step, _ = load_checkpoint(
            str(path), layout, {"widths": [64, 512, 512, 10], "dtype": "float32"}, ("m",)
        )
        for buf in (weights, state["m"]):
            assert set(np.unique(buf[buf != 0])) == {step}
        return step
    with h5py.File(path) as f:
        values = np.unique(f["C"][...])
    assert len(values) == 1
    return int(values[0])


def start(kind, path, moment, first):
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, kind, str(path), moment, str(first)],
        env=LAUNCH_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


KINDS = {"report": "report.json", "checkpoint": "checkpoint.h5", "result": "C.h5"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("moment", ["mid-write", "before-fsync", "before-rename"])
def test_a_kill_at_each_moment_of_a_write_leaves_the_previous_file(tmp_path, kind, moment):
    path = tmp_path / KINDS[kind]
    proc = start(kind, path, moment, first=5)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, err  # it died during the second write
    assert load_step(kind, path) == 5


@pytest.mark.parametrize("kind", KINDS)
def test_kills_at_random_moments_always_leave_a_whole_file(tmp_path, kind):
    path = tmp_path / KINDS[kind]
    rng = random.Random(kind)
    seen = []
    for round_ in range(6):
        proc = start(kind, path, "random", first=1000 * round_ + 1)
        while not path.exists() or load_step(kind, path) <= 1000 * round_:  # its first write is done
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        seen.append(load_step(kind, path))  # whole, whichever version it is
    assert all(1000 * r <= s < 1000 * (r + 1) for r, s in enumerate(seen)), seen
