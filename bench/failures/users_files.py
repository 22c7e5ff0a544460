"""A user's files are never written: spmd generate, scale, run and their saves each meet a file spmd did not
write (or a disk too small), and each case checks the file it must leave as it was."""

from __future__ import annotations

import numpy as np

from .case import FaultCase, sha256, write_dataset
from .setups import LIMITED, MATMUL, no, spmd

SCALE = ["scale", "{config}", "--ranks", "1,2", "--out", "sc"]
# an input of the user's own, where the config also has a generate section
MINE = {"input": {"path": "events.h5", "dataset": "x"}, "generate": {"shape": [1000, 9], "dtype": "float64"}}


def _users(name, mode=0o644):
    """Write a file of the user's, with its checksum beside it."""
    table = np.random.default_rng(1).normal(size=(3001, 9))

    def make(work):
        write_dataset(work / name, table)
        (work / name).chmod(mode)
        (work / f"{name}.sha256").write_text(sha256(work / name))

    return make


def _unchanged(*names):
    return lambda work: next(
        (f"{n} changed" for n in names if sha256(work / n) != (work / f"{n}.sha256").read_text()), None
    )


def _report_of_another_tool(work):
    (work / "theirs").mkdir()
    (work / "theirs/report.json").write_text('{"tool": "not spmd"}\n')
    (work / "theirs/report.json.sha256").write_text(sha256(work / "theirs/report.json"))


def cases(mpiexec: list[str]) -> list[FaultCase]:
    def saved_by_user(work):
        spmd(work, "generate", "job.yaml", mpiexec=tuple(mpiexec), ranks=1)
        _users("C.h5")(work)

    def copied(work):
        return _unchanged("events.h5")(work) or (
            None if (work / "out/weak-inputs/x2/events.h5").exists() else "no copy under out/weak-inputs"
        )

    read_as_is = "events.h5 is your file (not written by spmd generate): read as it is"
    return [
        FaultCase(
            "spmd generate over the user's own file (a generate section in the config)",
            config=MINE,
            prepare=_users("events.h5"),
            argv=["generate", "{config}"],
            expect=2,
            says=("events.h5 exists and was not written by spmd generate",),
            check=_unchanged("events.h5"),
        ),
        FaultCase(
            "spmd generate over a read-only file",
            config=MINE,
            prepare=_users("events.h5", 0o444),
            argv=["generate", "{config}"],
            expect=2,
            says=("events.h5 is read-only",),
            check=_unchanged("events.h5"),
        ),
        FaultCase(
            "spmd scale --mode strong on the user's own file",
            config=MINE,
            prepare=_users("events.h5"),
            argv=SCALE,
            ranks=2,
            expect=0,
            says=(read_as_is,),
            check=_unchanged("events.h5"),
        ),
        FaultCase(
            "spmd scale --mode weak on the user's own file (copies under the output)",
            config=MINE,
            prepare=_users("events.h5"),
            argv=[*SCALE, "--mode", "weak"],
            ranks=2,
            expect=0,
            says=(read_as_is,),
            check=copied,
        ),
        FaultCase(
            "a report.json of another tool in --out",
            argv=["run", "{config}", "--out", "theirs"],
            prepare=_report_of_another_tool,
            expect=2,
            says=("theirs/report.json exists and was not written by spmd",),
            check=_unchanged("theirs/report.json"),
        ),
        FaultCase(
            "params.save holding the user's file",
            config=MATMUL,
            prepare=saved_by_user,
            expect=2,
            says=("the output C.h5 exists and was not written by spmd",),
            check=_unchanged("C.h5"),
        ),
        FaultCase(
            "spmd generate of a shape too big for the disk",
            config={"generate": {"shape": [10**15]}, "input": {"path": "big/x.h5", "dataset": "x"}},
            argv=["generate", "{config}"],
            expect=2,
            says=("refused before writing anything",),
            check=lambda w: "big/ written" if (w / "big").exists() else None,
        ),
        FaultCase(
            "report.json on a full disk",
            config={"repeats": 50},
            driver=LIMITED,
            driver_args=["8000"],
            expect=2,
            says=("cannot write it (File too large)", "none of the 2 file(s) was changed"),
            check=no("*.tmp"),
        ),
        FaultCase(
            "a scaling report on a full disk",
            driver=LIMITED,
            driver_args=["20000"],
            argv=SCALE,
            ranks=2,
            expect=2,
            says=("cannot write it (File too large)", "file(s) was changed"),
            check=lambda w: "a scaling file written" if (w / "sc").exists() else None,
        ),
    ]
