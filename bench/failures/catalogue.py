"""The one catalogue of failures: every injected fault, bad input, config, and hostile or unlucky use that
docs/reliability.md's table lists; bench's faults suite runs every case, tests/cli runs the injected faults and
the refusals of bad inputs and configs from it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import h5py
import numpy as np

from .case import EXAMPLES, FaultCase, report_json, sha256, write_dataset

# what each kind of injected fault ends with: an exception exit 1, the watchdog 4, verification 3, a refusal 2 (exit:
# the process's own code, whatever it is, so any non-zero one)
FAULT_EXITS = {"raise": 1, "hang": 4, "nan": 3, "oom": 2, "corrupt": 3}


def fault_cases(ranks: int, gpu: bool) -> list[FaultCase]:
    last = ranks - 1
    faults = [
        (f"raise at {phase} on rank {r}", f"rank={r},phase={phase},kind=raise")
        for phase, r in (("read", last), ("h2d", 1), ("compute", 1), ("comm", 0), ("report", 1))
        if gpu or phase != "h2d"
    ]
    faults += [("exit at compute on rank 1", "rank=1,phase=compute,kind=exit")]
    faults += [
        (f"hang at {phase} on rank {r}", f"rank={r},phase={phase},kind=hang")
        for phase, r in (("read", 0), ("compute", 1), ("comm", last), ("report", 1))
    ]
    faults += [
        ("hang at read on every rank", "rank=all,phase=read,kind=hang"),
        ("nan at read on rank 1 (verification)", "rank=1,phase=read,kind=nan"),
        ("oom at read on rank 1 (host buffers)", "rank=1,phase=read,kind=oom"),
        ("oom at h2d on rank 1 (device buffers)", "rank=1,phase=h2d,kind=oom"),
    ]
    out = [FaultCase(name, fault, expect=FAULT_EXITS.get(fault.split("kind=")[1])) for name, fault in faults]
    out.append(
        FaultCase("nan at read on rank 1, check_finite: true", "rank=1,phase=read,kind=nan", {"check_finite": True})
    )
    out.append(
        FaultCase(
            "corrupt at compute on rank 1 (silent: one moment times 1.01)",
            "rank=1,phase=compute,kind=corrupt",
            expect=3,
        )
    )
    return out


def input_cases(ranks: int) -> list[FaultCase]:
    def writes(name, maker):
        return lambda d: maker(d / name)

    def reads(name):
        return {"input": {"path": name, "dataset": "x"}}

    loop = writes("loop.h5", lambda p: p.symlink_to(p))
    cases = [
        FaultCase("missing file", config=reads("nope.h5")),
        FaultCase(
            "not an HDF5 file", config=reads("text.h5"), prepare=writes("text.h5", lambda p: p.write_text("no\n" * 99))
        ),
        FaultCase(
            "truncated HDF5 file",
            config=reads("cut.h5"),
            prepare=writes(
                "cut.h5",
                lambda p: (
                    write_dataset(p, np.arange(100_000, dtype=np.float32)),
                    os.truncate(p, os.path.getsize(p) // 2),
                ),
            ),
        ),
        FaultCase(
            "wrong dtype (int32)",
            config=reads("int.h5"),
            prepare=writes("int.h5", lambda p: write_dataset(p, np.arange(100, dtype=np.int32))),
        ),
        FaultCase(
            "wrong rank of array (3-D)",
            config=reads("cube.h5"),
            prepare=writes("cube.h5", lambda p: write_dataset(p, np.zeros((4, 2, 2), np.float32))),
        ),
        FaultCase(
            "an input of shape (10, 0)",
            config=reads("empty.h5"),
            prepare=writes("empty.h5", lambda p: write_dataset(p, np.zeros((10, 0), np.float32))),
        ),
        FaultCase(
            "more ranks than rows",
            config=reads("two.h5"),
            prepare=writes("two.h5", lambda p: write_dataset(p, np.zeros(ranks - 1, np.float32))),
        ),
        FaultCase("a FIFO as input.path", config=reads("fifo.h5"), prepare=writes("fifo.h5", os.mkfifo)),
        FaultCase("a symbolic link loop as input.path", config=reads("loop.h5"), prepare=loop),
        FaultCase("one shard listed twice", config={"input": {"shards": ["x.h5", "./x.h5"], "dataset": "x"}}),
        FaultCase("params.ddof >= the rows", config={"params": {"ddof": 10**9}}),
    ]
    return [dataclasses.replace(case, expect=2) for case in cases]  # refused before any work, named


BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]\n" for a, b in zip("abcdefghi", "bcdefghij"))
    + "workload: reduce\ninput: {path: x.h5, dataset: x}\noutput: *j\n"
)


def config_cases() -> list[FaultCase]:
    base = "workload: reduce\ninput: {path: x.h5, dataset: x}\n"
    cases = [
        FaultCase("config that is not YAML", config="workload: [reduce\n"),
        FaultCase("config that is not UTF-8", config=(base + "output: caf\xe9\n").encode("latin-1")),
        FaultCase("a key given twice", config=base + "repeats: 2\nrepeats: 3\n"),
        FaultCase("a YAML alias bomb (10^10 values)", config=BOMB),
        FaultCase("a 50 MB config", config=base + "# padding\n" * 5_000_000),
        FaultCase("unknown key", config={"repeatz": 2}),
        FaultCase("wrong type", config={"repeats": "three"}),
        FaultCase("zero repeats", config={"repeats": 0}),
        FaultCase("negative timeout_s", config={"timeout_s": -5}),
        FaultCase("params.lr: .nan (train)", config=base.replace("reduce", "train") + "params: {lr: .nan}\n"),
        FaultCase("zero-size generate.shape", config={"generate": {"shape": [0]}}),
    ]
    return [dataclasses.replace(case, expect=2) for case in cases]


MATMUL = {
    "workload": "matmul",
    "repeats": 1,
    "input": {"path": "A.h5", "dataset": "A"},
    "generate": {"shape": [256, 64], "dtype": "float64", "seed": 1},
    "params": {
        "b": {"path": "B.h5", "dataset": "B", "generate": {"shape": [64, 256], "dtype": "float64", "seed": 2}},
        "gather": "root",
        "save": {"path": "C.h5", "dataset": "C"},
    },
}
TRAIN = {
    "workload": "train",
    "repeats": 199,
    "input": {"path": "t.h5"},
    "generate": {"shape": [2048, 24], "seed": 1, "loc": 0.0, "scale": 1.0},
    "params": {
        "model": [24, 32, 16, 5],
        "batch": 16,
        "steps": 10,
        "eval_rows": 512,
        "checkpoint": {"path": "ckpt.h5", "every": 50},
    },
}

# spmd with every file the process writes limited to argv[1] bytes (EFBIG, what a full disk or a quota gives),
# set after mpi4py started MPI (whose shared-memory files it would refuse)
LIMITED = textwrap.dedent("""
    import resource, sys
    from mpi4py import MPI
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
    from spmd.cli.main import main
    sys.exit(main(sys.argv[2:]))
""")

# two jobs of one config at once (both save C.h5): argv = mpiexec words, then the config
TWO_JOBS = textwrap.dedent("""
    import subprocess, sys
    *mpiexec, config = sys.argv[1:]
    jobs = [subprocess.Popen([*mpiexec, "-n", "2", sys.executable, "-m", "spmd", "run", config, "-q", "--out", f"out{i}"])
            for i in range(2)]
    codes = [job.wait() for job in jobs]
    print(f"two jobs saving C.h5 at once: exit codes {codes}", file=sys.stderr)
    sys.exit(max(codes))
""")


def use_cases(mpiexec: list[str]) -> list[FaultCase]:
    def spmd(work: Path, *args: str) -> None:
        subprocess.run(
            [*mpiexec, "-n", "2", sys.executable, "-m", "spmd", *args], cwd=work, check=True, capture_output=True
        )

    def generate(work):
        spmd(work, "generate", "job.yaml")

    def damaged_checkpoint(work):
        generate(work)
        spmd(work, "run", "job.yaml", "-o", "repeats=5", "-o", "params.checkpoint.every=0", "--out", "first")
        path = work / "ckpt.h5"
        with open(path, "r+b") as f:
            f.seek(path.stat().st_size // 4)  # inside the weights, the first dataset
            f.write(bytes(200_000))

    def whole_c(work):
        with h5py.File(work / "C.h5") as f:
            c = f["C"][...]
        return (
            None
            if c.shape == (256, 256) and np.isfinite(c).all() and not list(work.glob(".*.tmp"))
            else "C.h5 not whole, or a temporary file left"
        )

    def no(*names):
        return lambda work: next((f"{n} exists" for n in names if list(work.rglob(n))), None)

    def after(seconds):
        start = []
        return lambda work: start.append(time.monotonic()) or time.monotonic() > start[0] + seconds

    def scalings(work):
        t = {"median": 1.0, "min": 1.0, "max": 1.0}
        for name, workload in (("reduce.json", "reduce"), ("matmul.json", "matmul")):
            (work / name).write_text(
                json.dumps(
                    {
                        "kind": "scaling",
                        "schema": 1,
                        "workload": workload,
                        "series": {"strong": [{"ranks": 1, "time": 1.0, "timings": {"total": t}}]},
                    }
                )
            )
        (work / "bad.json").write_text(json.dumps({"schema": 1, "timings": {"total": t}, "config": {}}))

    jobscript = ["jobscript", "{config}", "--nodes", "1,2", "--gpus-per-node", "1"]
    return [
        FaultCase(
            "report compare of a reduce and a matmul report",
            argv=["report", "compare", "reduce.json", "matmul.json"],
            prepare=scalings,
            ranks=0,
            expect=2,
        ),
        FaultCase(
            "report merge of a malformed report.json",
            argv=["report", "merge", "bad.json", "bad.json", "--out", "m"],
            prepare=scalings,
            ranks=0,
            expect=2,
            check=no("m"),
        ),
        FaultCase(
            "report render of a report.json (not a scaling.json)",
            argv=["report", "render", "bad.json"],
            prepare=scalings,
            ranks=0,
            expect=2,
        ),
        FaultCase(
            "jobscript: a newline in --partition",
            argv=[*jobscript, "--partition", "gpu\ntouch pwned"],
            ranks=0,
            expect=2,
            check=no("pwned", "*.sbatch"),
        ),
        FaultCase(
            "jobscript: $(...) in the output folder",
            argv=[*jobscript, "--out", "jobs$(touch pwned)"],
            ranks=0,
            expect=2,
            check=no("pwned", "*.sbatch"),
        ),
        FaultCase(
            "a save larger than the disk allows",
            config=MATMUL,
            prepare=generate,
            driver=LIMITED,
            driver_args=["200000"],
            expect=2,
            check=no("C.h5", "*.tmp"),
        ),
        FaultCase(
            "two jobs saving one path at once",
            config=MATMUL,
            prepare=generate,
            driver=TWO_JOBS,
            driver_args=mpiexec,
            argv=["{config}"],
            ranks=0,
            expect=0,
            check=whole_c,
        ),
        FaultCase(
            "an existing file as --out",
            argv=["run", "{config}", "--out", "taken"],
            prepare=lambda w: (w / "taken").write_text("a file"),
            expect=2,
        ),
        FaultCase(
            "the output folder on a full disk", driver=LIMITED, driver_args=["1000"], expect=2, check=no("*.tmp")
        ),
        FaultCase(
            "a damaged checkpoint (200 KB zeroed)",
            prepare=damaged_checkpoint,
            config={
                **TRAIN,
                "repeats": 10,
                "generate": {**TRAIN["generate"], "shape": [2048, 844]},
                "params": {**TRAIN["params"], "model": "medium"},
            },
            argv=["run", "{config}", "-o", "params.resume=ckpt.h5", "-q"],
            ranks=2,
            expect=2,
        ),
        FaultCase(
            "Ctrl-C (SIGINT to mpiexec)", config={"repeats": 1_000_000, "timeout_s": 60}, interrupt=after(4), expect=130
        ),
        FaultCase(
            "Ctrl-C during training",
            config={**TRAIN, "timeout_s": 60},
            prepare=generate,
            interrupt=lambda w: (w / "ckpt.h5").exists(),
            expect=130,
            check=lambda w: None if (w / "ckpt.h5").exists() else "no checkpoint",
        ),
    ]


def data_cases(mpiexec: list[str]) -> list[FaultCase]:
    """A user's files are never written: each case checks the file it must leave as it was."""
    table = np.random.default_rng(1).normal(size=(3001, 9))

    def users(name, mode=0o644):
        def make(work):
            write_dataset(work / name, table)
            (work / name).chmod(mode)
            (work / f"{name}.sha256").write_text(sha256(work / name))

        return make

    def unchanged(*names):
        return lambda work: next(
            (f"{n} changed" for n in names if sha256(work / n) != (work / f"{n}.sha256").read_text()), None
        )

    def report_of_another_tool(work):
        (work / "theirs").mkdir()
        (work / "theirs/report.json").write_text('{"tool": "not spmd"}\n')
        (work / "theirs/report.json.sha256").write_text(sha256(work / "theirs/report.json"))

    def saved_by_user(work):
        subprocess.run(
            [*mpiexec, "-n", "1", sys.executable, "-m", "spmd", "generate", "job.yaml"],
            cwd=work,
            check=True,
            capture_output=True,
        )
        users("C.h5")(work)

    mine = {"input": {"path": "events.h5", "dataset": "x"}, "generate": {"shape": [1000, 9], "dtype": "float64"}}
    scale = ["scale", "{config}", "--ranks", "1,2", "--out", "sc"]
    return [
        FaultCase(
            "spmd generate over the user's own file (a generate section in the config)",
            config=mine,
            prepare=users("events.h5"),
            argv=["generate", "{config}"],
            expect=2,
            check=unchanged("events.h5"),
        ),
        FaultCase(
            "spmd generate over a read-only file",
            config=mine,
            prepare=users("events.h5", 0o444),
            argv=["generate", "{config}"],
            expect=2,
            check=unchanged("events.h5"),
        ),
        FaultCase(
            "spmd scale --mode strong on the user's own file",
            config=mine,
            prepare=users("events.h5"),
            argv=scale,
            ranks=2,
            expect=0,
            check=unchanged("events.h5"),
        ),
        FaultCase(
            "spmd scale --mode weak on the user's own file (copies under the output)",
            config=mine,
            prepare=users("events.h5"),
            argv=[*scale, "--mode", "weak"],
            ranks=2,
            expect=0,
            check=lambda w: (
                unchanged("events.h5")(w)
                or (None if (w / "out/weak-inputs/x2/events.h5").exists() else "no copy under out/weak-inputs")
            ),
        ),
        FaultCase(
            "a report.json of another tool in --out",
            argv=["run", "{config}", "--out", "theirs"],
            prepare=report_of_another_tool,
            expect=2,
            check=unchanged("theirs/report.json"),
        ),
        FaultCase(
            "params.save holding the user's file",
            config=MATMUL,
            prepare=saved_by_user,
            expect=2,
            check=unchanged("C.h5"),
        ),
        FaultCase(
            "spmd generate of a shape too big for the disk",
            config={"generate": {"shape": [10**15]}, "input": {"path": "big/x.h5", "dataset": "x"}},
            argv=["generate", "{config}"],
            expect=2,
            check=lambda w: "big/ written" if (w / "big").exists() else None,
        ),
        FaultCase(
            "report.json on a full disk",
            config={"repeats": 50},
            driver=LIMITED,
            driver_args=["8000"],
            expect=2,
            check=lambda w: "a temporary file left" if list(w.rglob("*.tmp")) else None,
        ),
        FaultCase(
            "a scaling report on a full disk",
            driver=LIMITED,
            driver_args=["20000"],
            argv=scale,
            ranks=2,
            expect=2,
            check=lambda w: "a scaling file written" if (w / "sc").exists() else None,
        ),
    ]


PLUGIN_EXIT = "import sys, spmd\n@spmd.map_reduce(combine='sum')\ndef f(block, xp, params):\n    sys.exit(0)\n"
PLUGIN_NAN = "import spmd\n@spmd.map_reduce(combine='max')\ndef f(block, xp, params):\n    return xp.full(2, xp.nan)\n"
PLUGIN_SHAPE = (
    "import spmd\ncalls = [0]\n@spmd.map_reduce(combine='sum')\ndef f(block, xp, params):\n"
    "    calls[0] += 1\n    return xp.ones(3 if calls[0] == 1 else len(block) % 5 + 1)\n"
)


def hostile_cases() -> list[FaultCase]:
    """A hostile-input trial's cases, each as a user meets it."""

    def source(name, text):
        return lambda work: (work / name).write_text(text)

    def layouts(work):
        for i in range(2):
            write_dataset(work / f"src{i}.h5", np.arange(i * 500.0, (i + 1) * 500.0))
        vds = h5py.VirtualLayout(shape=(1000,), dtype="f8")
        for i in range(2):
            vds[i * 500 : (i + 1) * 500] = h5py.VirtualSource(f"src{i}.h5", "x", shape=(500,))
        with h5py.File(work / "vds.h5", "w") as f:
            f.create_virtual_dataset("x", vds, fillvalue=0)
        (work / "src1.h5").unlink()
        with h5py.File(work / "ext.h5", "w") as f:
            f["x"] = h5py.ExternalLink("nofile.h5", "/x")
        np.arange(1000.0).tofile(work / "raw.bin")
        with h5py.File(work / "store.h5", "w") as f:
            f.create_dataset("x", shape=(1000,), dtype="f8", external=[("raw.bin", 0, 8000)])
        with h5py.File(work / "soft.h5", "w") as f:
            f["x"], f["y"] = h5py.SoftLink("/y"), h5py.SoftLink("/x")

    def reads(name):
        return {"input": {"path": name, "dataset": "x"}}

    def compared(what, name, make=None):
        def prepare(work):
            (work / "a.json").write_text(json.dumps(report_json()))
            if make:
                make(work / name)

        return FaultCase(
            f"report compare of {what}", argv=["report", "compare", "a.json", name], prepare=prepare, ranks=0, expect=2
        )

    def nan_report(path):
        report = report_json()
        for rank in report["per_rank"]:
            rank["repeats"][0]["total"] = float("nan")
        path.write_text(json.dumps(report))

    def failed_checkpoint(work):
        subprocess.run(
            [sys.executable, "-m", "spmd", "generate", "job.yaml"], cwd=work, check=True, capture_output=True
        )
        env = {**os.environ, "SPMD_FAULT": "rank=0,phase=compute,kind=corrupt"}
        subprocess.run(
            [sys.executable, "-m", "spmd", "run", "job.yaml", "-o", "repeats=3", "--out", "first"],
            cwd=work,
            env=env,
            capture_output=True,
        )

    jobscript = ["jobscript", "{config}", "--nodes", "1,2", "--gpus-per-node", "1"]
    zero_mean = {"loc": 0.0, "scale": 1.0}
    matmul_k256 = {
        **MATMUL,
        "generate": {"shape": [512, 256], "seed": 11, **zero_mean},
        "params": {"b": {"path": "B.h5", "dataset": "B", "generate": {"shape": [256, 512], "seed": 12, **zero_mean}}},
    }
    return [
        FaultCase(
            "a plug-in calling sys.exit(0) in its function",
            config={"workload": "plug.py:f"},
            prepare=source("plug.py", PLUGIN_EXIT),
            expect=1,
        ),
        FaultCase(
            "a plug-in calling sys.exit(0) at import",
            config={"workload": "plug.py:f"},
            prepare=source("plug.py", "import sys\nsys.exit(0)\n"),
            expect=2,
        ),
        FaultCase(
            "an endless loop at plug-in import",
            config={"workload": "plug.py:f"},
            prepare=source("plug.py", "while True:\n    pass\n"),
            expect=4,
        ),
        FaultCase(
            "a plug-in whose result changes shape after the first repeat",
            config={"workload": "plug.py:f"},
            prepare=source("plug.py", PLUGIN_SHAPE),
            expect=1,
        ),
        FaultCase(
            "a plug-in path that is a folder",
            config={"workload": "plug.py:f"},
            prepare=lambda w: (w / "plug.py").mkdir(),
            expect=2,
        ),
        FaultCase(
            "a combine=max plug-in returning NaN",
            config={"workload": "plug.py:f"},
            prepare=source("plug.py", PLUGIN_NAN),
            expect=3,
        ),
        FaultCase(
            "examples/kmeans.py on a 1-D input",
            config={"workload": str(EXAMPLES / "kmeans.py") + ":KMeans"},
            expect=2,
            says="1-D",
        ),
        FaultCase("a virtual dataset with a missing source file", config=reads("vds.h5"), prepare=layouts, expect=2),
        FaultCase("an external link to a missing file", config=reads("ext.h5"), prepare=layouts, expect=2),
        FaultCase(
            "a valid external-storage dataset",
            config=reads("store.h5"),
            prepare=layouts,
            argv=["run", "{config}", "-q", "--out", "ok"],
            expect=0,
        ),
        FaultCase("a soft-link loop", config=reads("soft.h5"), prepare=layouts, expect=2),
        FaultCase(
            "train with a batch of 10^11",
            config={**TRAIN, "params": {**TRAIN["params"], "batch": 10**11}},
            prepare=lambda w: subprocess.run(
                [sys.executable, "-m", "spmd", "generate", "job.yaml"], cwd=w, check=True, capture_output=True
            ),
            expect=2,
        ),
        FaultCase(
            "matmul, one element 1% off at k = 256 (zero-mean data)",
            fault="rank=1,phase=compute,kind=corrupt",
            config=matmul_k256,
            prepare=lambda w: subprocess.run(
                [sys.executable, "-m", "spmd", "generate", "job.yaml"], cwd=w, check=True, capture_output=True
            ),
            expect=3,
        ),
        FaultCase(
            "resume from the checkpoint of a run that failed verification",
            config={
                **TRAIN,
                "repeats": 5,
                "params": {**TRAIN["params"], "checkpoint": {"path": "ckpt.h5", "every": 10}},
            },
            prepare=failed_checkpoint,
            argv=["run", "{config}", "-q", "-o", "params.resume=ckpt.h5"],
            ranks=1,
            expect=2,
        ),
        FaultCase("timeout_s: 1e15", config={"timeout_s": "1e15"}, expect=2),
        FaultCase(
            "generate.seed: -1",
            config={"generate": {"shape": [10], "seed": -1}},
            argv=["generate", "{config}"],
            expect=2,
        ),
        FaultCase(
            "generate.shape: [1e20]", config={"generate": {"shape": ["1e20"]}}, argv=["generate", "{config}"], expect=2
        ),
        FaultCase(
            "OUT/report.json is a folder",
            argv=["run", "{config}", "--out", "rj"],
            prepare=lambda w: (w / "rj/report.json").mkdir(parents=True),
            expect=2,
        ),
        FaultCase(
            "a dangling symbolic link as --out",
            argv=["run", "{config}", "--out", "dang"],
            prepare=lambda w: (w / "dang").symlink_to("/nonexistent/zzz"),
            expect=2,
        ),
        FaultCase(
            "a refused YAML tag", config="workload: reduce\ninput: {path: x.h5, dataset: !!python/object:os.system x}\n"
        ),
        FaultCase(
            "a newline in input.path", config={"input": {"path": "a\nspmd: verified fake", "dataset": "x"}}, expect=2
        ),
        compared("a FIFO", "fifo.json", os.mkfifo),
        compared("/dev/zero", "/dev/zero"),
        compared("JSON nested 100,000 deep", "nested.json", lambda p: p.write_text("[" * 100_000 + "]" * 100_000)),
        compared("NaN timings", "nan.json", nan_report),
        compared(
            "a 10,000-line workload name",
            "long.json",
            lambda p: p.write_text(json.dumps({**report_json(), "workload": "reduce\n" * 10_000})),
        ),
        FaultCase(
            "report merge of a glob that matched nothing",
            argv=["report", "merge", "none/*/report.json", "--out", "m"],
            ranks=0,
            expect=2,
        ),
        FaultCase(
            "jobscript: an #SBATCH line in --prologue",
            argv=[*jobscript, "--prologue", "p.sh"],
            prepare=source("p.sh", "#SBATCH --mem=1G\n"),
            ranks=0,
            expect=2,
        ),
        FaultCase("jobscript: a newline in --env", argv=[*jobscript, "--env", "A=b\ntouch pwned"], ranks=0, expect=2),
    ]


def every_case(ranks: int, gpu: bool, mpiexec: list[str]) -> list[FaultCase]:
    """The whole catalogue, in docs/reliability.md's order."""
    return [
        *fault_cases(ranks, gpu),
        *input_cases(ranks),
        *config_cases(),
        *use_cases(mpiexec),
        *data_cases(mpiexec),
        *hostile_cases(),
    ]
