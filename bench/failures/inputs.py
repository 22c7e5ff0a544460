"""Bad inputs: a file missing, not HDF5, cut short, of the wrong dtype or shape, too few rows for the ranks, a
FIFO, a link loop, a shard listed twice. Each is refused before any work (exit 2), naming the file."""

from __future__ import annotations

import os

import numpy as np

from .case import FaultCase, write_dataset
from .setups import reads


def _writes(name, maker):
    return lambda work: maker(work / name)


def _dataset(name, data):
    return _writes(name, lambda p: write_dataset(p, data))


def _truncated(path):
    write_dataset(path, np.arange(100_000, dtype=np.float32))
    os.truncate(path, os.path.getsize(path) // 2)


def cases(ranks: int) -> list[FaultCase]:
    def refused(name, file, says, prepare=None):
        return FaultCase(name, config=reads(file), prepare=prepare, expect=2, says=says)

    return [
        refused("missing file", "nope.h5", ("nope.h5: no such file",)),
        refused(
            "not an HDF5 file",
            "text.h5",
            ("text.h5: not an HDF5 file",),
            _writes("text.h5", lambda p: p.write_text("no\n" * 99)),
        ),
        refused("truncated HDF5 file", "cut.h5", ("cut.h5: truncated HDF5 file",), _writes("cut.h5", _truncated)),
        refused(
            "wrong dtype (int32)",
            "int.h5",
            ("int.h5:x: dtype int32 is not supported",),
            _dataset("int.h5", np.arange(100, dtype=np.int32)),
        ),
        refused(
            "wrong rank of array (3-D)",
            "cube.h5",
            ("cube.h5:x: 3-D array",),
            _dataset("cube.h5", np.zeros((4, 2, 2), np.float32)),
        ),
        refused(
            "an input of shape (10, 0)",
            "empty.h5",
            ("empty.h5:x: empty dataset",),
            _dataset("empty.h5", np.zeros((10, 0), np.float32)),
        ),
        refused(
            "more ranks than rows",
            "two.h5",
            (f"two.h5:x: {ranks - 1} rows cannot be split over {ranks} ranks",),
            _dataset("two.h5", np.zeros(ranks - 1, np.float32)),
        ),
        refused("a FIFO as input.path", "fifo.h5", ("fifo.h5: a FIFO",), _writes("fifo.h5", os.mkfifo)),
        refused(
            "a symbolic link loop as input.path",
            "loop.h5",
            ("loop.h5: Too many levels of symbolic links",),
            _writes("loop.h5", lambda p: p.symlink_to(p)),
        ),
        FaultCase(
            "one shard listed twice",
            config={"input": {"shards": ["x.h5", "./x.h5"], "dataset": "x"}},
            expect=2,
            says=("./x.h5 and x.h5 are the same file",),
        ),
        FaultCase(
            "params.ddof >= the rows",
            config={"params": {"ddof": 10**9}},
            expect=2,
            says=("params.ddof: 1000000000, but the input has",),
        ),
    ]
