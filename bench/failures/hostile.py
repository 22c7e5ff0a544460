"""Hostile or odd values, each as a user meets it: plug-ins that exit, loop or change their result, HDF5 layouts
that point elsewhere, huge or negative numbers, a newline or a YAML tag in a value, reports that are not
reports, script values that would inject a command."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np

from .case import EXAMPLES, FaultCase, report_json, write_dataset
from .setups import JOBSCRIPT, MATMUL, TRAIN, reads, spmd

PLUGIN_EXIT = "import sys, spmd\n@spmd.map_reduce(combine='sum')\ndef f(block, xp, params):\n    sys.exit(0)\n"
PLUGIN_NAN = "import spmd\n@spmd.map_reduce(combine='max')\ndef f(block, xp, params):\n    return xp.full(2, xp.nan)\n"
PLUGIN_SHAPE = (
    "import spmd\ncalls = [0]\n@spmd.map_reduce(combine='sum')\ndef f(block, xp, params):\n"
    "    calls[0] += 1\n    return xp.ones(3 if calls[0] == 1 else len(block) % 5 + 1)\n"
)
PLUGIN = {"workload": "plug.py:f"}


def _source(name, text):
    return lambda work: (work / name).write_text(text)


def _layouts(work):
    """A virtual dataset missing a source, an external link to a missing file, a valid external-storage
    dataset and a loop of soft links."""
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


def _compared(what, name, says, make=None):
    def prepare(work):
        (work / "a.json").write_text(json.dumps(report_json()))
        if make:
            make(work / name)

    argv = ["report", "compare", "a.json", name]
    return FaultCase(f"report compare of {what}", argv=argv, prepare=prepare, ranks=0, expect=2, says=(says,))


def _nan_report(path):
    report = report_json()
    for rank in report["per_rank"]:
        rank["repeats"][0]["total"] = float("nan")
    path.write_text(json.dumps(report))


def _generate(work):
    spmd(work, "generate", "job.yaml")


def _failed_checkpoint(work):
    _generate(work)
    env = {**os.environ, "SPMD_FAULT": "rank=0,phase=compute,kind=corrupt"}
    spmd(work, "run", "job.yaml", "-o", "repeats=3", "--out", "first", env=env, check=False)


def _verified(work):
    report = work / "ok/report.json"
    return None if report.exists() and json.loads(report.read_text())["verified"] else "ok/report.json not verified"


def plugin_cases() -> list[FaultCase]:
    return [
        FaultCase(
            "a plug-in calling sys.exit(0) in its function",
            config=PLUGIN,
            prepare=_source("plug.py", PLUGIN_EXIT),
            expect=1,
            says=("plug.py:4: it called sys.exit(0), which does not end a job",),
        ),
        FaultCase(
            "a plug-in calling sys.exit(0) at import",
            config=PLUGIN,
            prepare=_source("plug.py", "import sys\nsys.exit(0)\n"),
            expect=2,
            says=("importing plug.py failed: it called sys.exit(0)",),
        ),
        FaultCase(
            "an endless loop at plug-in import",
            config=PLUGIN,
            prepare=_source("plug.py", "while True:\n    pass\n"),
            expect=4,
            says=("watchdog", "phase loading workload 'plug.py:f'"),
        ),
        FaultCase(
            "a plug-in whose result changes shape after the first repeat",
            config=PLUGIN,
            prepare=_source("plug.py", PLUGIN_SHAPE),
            expect=1,
            says=("it must return the same shape and dtype every repeat",),
        ),
        FaultCase(
            "a plug-in path that is a folder",
            config=PLUGIN,
            prepare=lambda w: (w / "plug.py").mkdir(),
            expect=2,
            says=("plug.py is a folder, not a Python file",),
        ),
        FaultCase(
            "a combine=max plug-in returning NaN",
            config=PLUGIN,
            prepare=_source("plug.py", PLUGIN_NAN),
            expect=3,
            says=("a result holding NaN or infinity never passes verification",),
        ),
        FaultCase(
            "examples/kmeans.py on a 1-D input",
            config={"workload": str(EXAMPLES / "kmeans.py") + ":KMeans"},
            expect=2,
            says=("x.h5:x: 1-D array", "expected 2-D"),
        ),
    ]


def value_cases() -> list[FaultCase]:
    zero_mean = {"loc": 0.0, "scale": 1.0}
    matmul_k256 = {
        **MATMUL,
        "generate": {"shape": [512, 256], "seed": 11, **zero_mean},
        "params": {"b": {"path": "B.h5", "dataset": "B", "generate": {"shape": [256, 512], "seed": 12, **zero_mean}}},
    }
    return [
        FaultCase(
            "a virtual dataset with a missing source file",
            config=reads("vds.h5"),
            prepare=_layouts,
            expect=2,
            says=("vds.h5:x: a virtual dataset whose source file src1.h5 is missing",),
        ),
        FaultCase(
            "an external link to a missing file",
            config=reads("ext.h5"),
            prepare=_layouts,
            expect=2,
            says=("ext.h5: 'x' is an external link to nofile.h5:/x",),
        ),
        FaultCase(
            "a valid external-storage dataset",
            config=reads("store.h5"),
            prepare=_layouts,
            argv=["run", "{config}", "--out", "ok"],
            expect=0,
            says=("verified (full)",),
            check=_verified,
        ),
        FaultCase(
            "a soft-link loop",
            config=reads("soft.h5"),
            prepare=_layouts,
            expect=2,
            says=("soft.h5: 'x' cannot be followed",),
        ),
        FaultCase(
            "train with a batch of 10^11",
            config={**TRAIN, "params": {**TRAIN["params"], "batch": 10**11}},
            prepare=_generate,
            expect=2,
            says=("100000000000 samples need", "refused before allocating"),
        ),
        FaultCase(
            "matmul, one element 1% off at k = 256 (zero-mean data)",
            fault="rank=1,phase=compute,kind=corrupt",
            config=matmul_k256,
            prepare=_generate,
            expect=3,
            says=("rank 1 on {host}: Freivalds check failed",),
        ),
        FaultCase(
            "resume from the checkpoint of a run that failed verification",
            config={
                **TRAIN,
                "repeats": 5,
                "params": {**TRAIN["params"], "checkpoint": {"path": "ckpt.h5", "every": 10}},
            },
            prepare=_failed_checkpoint,
            argv=["run", "{config}", "-q", "-o", "params.resume=ckpt.h5"],
            ranks=1,
            expect=2,
            says=("ckpt.h5 was written by a run whose verification failed",),
        ),
        FaultCase(
            "timeout_s: 1e15",
            config={"timeout_s": "1e15"},
            expect=2,
            says=("timeout_s: must be a positive number of seconds, got 1e+15",),
        ),
        FaultCase(
            "generate.seed: -1",
            config={"generate": {"shape": [10], "seed": -1}},
            argv=["generate", "{config}"],
            expect=2,
            says=("generate.seed: must be >= 0",),
        ),
        FaultCase(
            "generate.shape: [1e20]",
            config={"generate": {"shape": ["1e20"]}},
            argv=["generate", "{config}"],
            expect=2,
            says=("generate.shape[0]: 100000000000000000000 is out of range",),
        ),
        FaultCase(
            "OUT/report.json is a folder",
            argv=["run", "{config}", "--out", "rj"],
            prepare=lambda w: (w / "rj/report.json").mkdir(parents=True),
            expect=2,
            says=("rj/report.json exists and is a folder",),
        ),
        FaultCase(
            "a dangling symbolic link as --out",
            argv=["run", "{config}", "--out", "dang"],
            prepare=lambda w: (w / "dang").symlink_to("/nonexistent/zzz"),
            expect=2,
            says=("dang is a symbolic link to '/nonexistent/zzz', which does not exist",),
        ),
        FaultCase(
            "a refused YAML tag",
            config="workload: reduce\ninput: {path: x.h5, dataset: !!python/object:os.system x}\n",
            says=("could not determine a constructor for the tag",),
        ),
        FaultCase(
            "a newline in input.path",
            config={"input": {"path": "a\nspmd: verified fake", "dataset": "x"}},
            expect=2,
            says=("a\\nspmd: verified fake: no such file",),
        ),
    ]


def report_cases() -> list[FaultCase]:
    not_a_report = "not a report.json of spmd run"
    return [
        _compared("a FIFO", "fifo.json", "fifo.json: cannot read a JSON report: not a regular file", os.mkfifo),
        _compared("/dev/zero", "/dev/zero", "/dev/zero: cannot read a JSON report: not a regular file"),
        _compared(
            "JSON nested 100,000 deep",
            "nested.json",
            "nested.json: cannot read a JSON report: nested too deeply",
            lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
        ),
        _compared("NaN timings", "nan.json", f"nan.json: {not_a_report} (missing or malformed: per_rank", _nan_report),
        _compared(
            "a 10,000-line workload name",
            "long.json",
            f"long.json: {not_a_report}",
            lambda p: p.write_text(json.dumps({**report_json(), "workload": "reduce\n" * 10_000})),
        ),
        FaultCase(
            "report merge of a glob that matched nothing",
            argv=["report", "merge", "none/*/report.json", "--out", "m"],
            ranks=0,
            expect=2,
            says=("no report.json matched none/*/report.json",),
        ),
        FaultCase(
            "jobscript: an #SBATCH line in --prologue",
            argv=[*JOBSCRIPT, "--prologue", "p.sh"],
            prepare=_source("p.sh", "#SBATCH --mem=1G\n"),
            ranks=0,
            expect=2,
            says=("an #SBATCH line there would be ignored",),
        ),
        FaultCase(
            "jobscript: a newline in --env",
            argv=[*JOBSCRIPT, "--env", "A=b\ntouch pwned"],
            ranks=0,
            expect=2,
            says=("--env 'A=b\\ntouch pwned': a value of one line",),
        ),
    ]


def cases() -> list[FaultCase]:
    return [*plugin_cases(), *value_cases(), *report_cases()]
