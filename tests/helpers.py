"""The builders tests share, in one place: small HDF5 inputs and their float64 reference answers, configs of the
repository's inputs shrunk to test size, plug-ins, a synthetic machine for the scaling model, stand-ins for the
CUDA runtime. A test module imports these, never another test module."""

from __future__ import annotations

import ctypes
import gzip
import os
import re
import socket
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import h5py
import numpy as np
import yaml

from spmd.io.mapped import HOST_TO_DEVICE, REGISTER_READ_ONLY
from spmd.measure.collectives import model_terms

# The environment as the user gave it, taken when tests/conftest.py imports this module,
# before any test starts MPI in pytest's own process. Open MPI's singleton start adds
# OMPI_*/PMIX_* variables; an mpirun that inherits them thinks it is nested in a job and
# fails. Launch jobs with this snapshot (it keeps the user's own OMPI_MCA_* settings).
LAUNCH_ENV = dict(os.environ)


def write_dataset(path, data, name="x", **kwargs) -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset(name, data=data, **kwargs)


def reference(data: np.ndarray, ddof: int = 0) -> dict:
    """The reduce answer by plain NumPy float64 over the whole array."""
    x = np.asarray(data, dtype=np.float64)
    scalar = x.ndim == 1
    x2 = x.reshape(x.shape[0], -1)
    out = {
        "sum": x2.sum(0),
        "mean": x2.mean(0),
        "min": x2.min(0),
        "max": x2.max(0),
        "var": x2.var(0, ddof=ddof),
        "std": x2.std(0, ddof=ddof),
    }
    return {k: float(v[0]) if scalar else v.tolist() for k, v in out.items()}


def assert_result_close(result: dict, expected: dict, rtol: float = 1e-12) -> None:
    assert set(result) == {"sum", "mean", "min", "max", "var", "std"}
    for key, want in expected.items():
        got = np.asarray(result[key])
        want = np.asarray(want)
        if key in ("min", "max"):
            np.testing.assert_array_equal(got, want, err_msg=key)
        else:
            scale = 1e-12 if key != "sum" else 1e-12 * max(1.0, float(np.abs(want).max()))
            np.testing.assert_allclose(got, want, rtol=rtol, atol=scale, err_msg=key)


# -- Configs of the repository's inputs/, shrunk to test size (from test_workloads_cli.py) --

INPUTS = Path(__file__).resolve().parents[1] / "inputs"


def small(config: str, folder: Path, **overrides) -> Path:
    """inputs/CONFIG made smaller (CI has 2 cores), in ``folder``, with ``overrides`` applied."""
    cfg = yaml.safe_load((INPUTS / config).read_text())
    cfg["device"] = "cpu"  # 3 ranks on a 2-GPU machine would share a GPU; tests/mpi --gpu cover GPUs
    for key, value in overrides.items():
        node = cfg
        *parents, last = key.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    path = folder / config
    path.write_text(yaml.safe_dump(cfg))
    return path


# -- A tiny train config, and a checkpoint's weights (from test_train_cli.py) --

TINY = {
    "generate.shape": [2048, 24],
    "params.model": [24, 32, 16, 5],
    "params.batch": 16,
    "params.steps": 10,
    "params.eval_rows": 512,
    "params.checkpoint": None,
    "repeats": 3,
}


def train_config(folder: Path, name="train.yaml", **overrides) -> Path:
    scratch = folder / "made"
    scratch.mkdir(exist_ok=True)
    return small("train.yaml", scratch, **{**TINY, **overrides}).replace(folder / name)


def weights(path) -> np.ndarray:
    with h5py.File(path) as f:
        return f["weights"][...]


# spmd run with every file this process writes limited to LIMIT bytes (EFBIG: what a full disk or a quota
# gives); the limit is set after mpi4py started MPI, whose shared-memory files it would otherwise refuse.
LIMITED = textwrap.dedent("""
    import resource, sys
    from mpi4py import MPI
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    from spmd.cli.main import main
    sys.exit(main(sys.argv[2:]))
""")


# -- Plug-ins: the examples, a plug-in file, a config over a small input (from test_plugins_cli.py) --

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


ROWS = 10_007  # 3336, 3336, 3335 rows on 3 ranks


def example(name: str, folder: Path, **changes) -> Path:
    """examples/NAME.yaml with a small input in ``folder`` (and ``changes``); the plug-in by its absolute path."""
    cfg = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    cfg["workload"] = str(EXAMPLES / cfg["workload"].removeprefix("examples/"))
    cfg["generate"]["shape"][0] = ROWS
    cfg.update(device="cpu", repeats=2, output=str(folder / "out"), **changes)
    cfg["input"]["path"] = str(folder / Path(cfg["input"]["path"]).name)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def plugin(folder: Path, source: str, name: str = "plug.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


def config(folder: Path, workload: str, **keys) -> Path:
    """A config over folder/x.h5 (ROWS float64 values, written here) for ``workload``."""
    with h5py.File(folder / "x.h5", "w") as f:
        f.create_dataset("x", data=np.random.default_rng(1).standard_normal(ROWS))
    path = folder / "job.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "workload": workload,
                "device": "cpu",
                "repeats": 2,
                "timeout_s": 5,
                "output": str(folder / "out"),
                "input": {"path": str(folder / "x.h5"), "dataset": "x"},
                **keys,
            }
        )
    )
    return path


def cli(*args, cwd, env: dict | None = None):
    """``python -m spmd ARGS`` as one process, no MPI launcher: (exit code, stdout, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "spmd", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**LAUNCH_ENV, **(env or {})},
        timeout=120,
    )
    return proc.returncode, proc.stdout, proc.stderr


def fake_sinfo(folder: Path, cpus: int | None) -> dict:
    """The environment of a command that finds, first on its PATH, an sinfo saying each node has ``cpus`` CPUs
    (None: an sinfo that fails, as where no SLURM answers)."""
    bin_dir = folder / "fake-sinfo"
    bin_dir.mkdir(exist_ok=True)
    answer = f'echo "{cpus}"; echo "{cpus}"' if cpus else "echo 'sinfo: error: no SLURM here' >&2; exit 1"
    (bin_dir / "sinfo").write_text(f"#!/bin/bash\n{answer}\n")
    (bin_dir / "sinfo").chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{LAUNCH_ENV['PATH']}"}


def reduce_config(folder: Path, **keys) -> Path:
    write_dataset(folder / "x.h5", np.random.default_rng(1).standard_normal(200_003).astype(np.float32))
    cfg = {
        "workload": "reduce",
        "device": "cpu",
        "warmup": 1,
        "repeats": 4,
        "input": {"path": str(folder / "x.h5"), "dataset": "x"},
        "output": str(folder / "out"),
        **keys,
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


HOST = socket.gethostname()


def watchdog_lines(err: str) -> dict[int, str]:
    """The watchdog's 'where every rank is' lines, by rank."""
    return {int(m[1]): m[2] for m in re.finditer(rf"^  rank (\d+) on {re.escape(HOST)}: (.*)$", err, re.M)}


# -- A synthetic machine whose scaling model is known: sweeps of it for the model's tests (test_scaling_model.py) --

# The "true" machine behind the synthetic sweep.
READ_RATE, READ_INTERCEPT = 2e9, 1e-3


COMPUTE_RATE = 10e9


ALPHA, BETA = 20e-6, 1 / 5e9


OVERHEAD, GAP = 50e-6, 1e-4


MOMENTS = 40  # bytes per rank allgathered by reduce


def true_time(ranks: int, problem: float) -> dict:
    share = problem / ranks
    steps, volume = model_terms("allgather", ranks, MOMENTS)
    phases = {
        "read": READ_INTERCEPT + share / READ_RATE,
        "wait": 0.0,
        "h2d": 0.0,
        "compute": share / COMPUTE_RATE,
        "comm": OVERHEAD + ALPHA * steps + BETA * volume,
    }
    return phases


def synthetic_run(mode: str, ranks: int, problem: float) -> dict:
    phases = true_time(ranks, problem)
    timings = {p: {"min": t, "median": t, "max": t} for p, t in phases.items()}
    total = sum(phases.values()) + GAP
    timings["total"] = {"min": total, "median": total, "max": total}
    return {
        "mode": mode,
        "ranks": ranks,
        "time": total,
        "timings": timings,
        "problem": {"bytes": problem, "comm": [{"op": "allgather", "bytes": MOMENTS}]},
    }


def synthetic_probe() -> list[dict]:
    out = []
    for ranks in (2, 3, 4):
        for m in (8, 4096, 1 << 20, 16 << 20):
            steps, volume = model_terms("allgather", ranks, m)
            out.append({"op": "allgather", "ranks": ranks, "bytes": m, "seconds": ALPHA * steps + BETA * volume})
    return out


S = 64e6


RUNS = [synthetic_run("strong", n, S) for n in (1, 2, 3, 4)] + [synthetic_run("weak", n, S * n) for n in (2, 4)]


# -- Stand-ins for the CUDA runtime and CuPy, for the mapped engine's host tests (from test_io_mapped.py) --


class Runtime:
    """CUDA's runtime API as the mapped engine calls it: locks recorded, copies done at once by memmove."""

    def __init__(self, refuse=False):
        self.locked, self.refuse = {}, refuse

    def hostRegister(self, ptr, size, flags):
        assert flags == REGISTER_READ_ONLY
        if self.refuse:
            raise RuntimeError("cudaErrorNotSupported: operation not supported")
        self.locked[ptr] = size

    def memcpyAsync(self, dst, src, size, kind, stream):
        assert kind == HOST_TO_DEVICE and stream == 7
        assert any(lo <= src and src + size <= lo + n for lo, n in self.locked.items()), "copy from unlocked memory"
        ctypes.memmove(dst, src, size)

    def hostUnregister(self, ptr):
        del self.locked[ptr]


class DeviceArray(np.ndarray):
    """A host array standing in for a CuPy array: what the mapped read uses of one (``data.ptr``)."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)


def stand_in_cupy(runtime):
    """The parts of CuPy the mapped engine calls: its runtime, a stream, the current stream's events."""
    stream = types.SimpleNamespace(ptr=7, synchronize=lambda: None, wait_event=lambda event: None)
    current = types.SimpleNamespace(record=lambda: object())
    return types.SimpleNamespace(
        cuda=types.SimpleNamespace(
            runtime=runtime, Stream=lambda non_blocking: stream, get_current_stream=lambda: current
        ),
        ndarray=DeviceArray,
        asnumpy=lambda a: np.asarray(a).copy(),
    )


# -- A user's own torch model and data (from test_torch_cli.py) --

TORCH_MODEL = '''
import torch
from torch import nn


class Net(nn.Module):
    """A residual block with LayerNorm and GELU: nothing like the project's own models."""

    def __init__(self, features, hidden, classes):
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.block = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, hidden))
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        h = self.norm(self.inp(x))
        return self.out(h + self.block(h))


def make(params):
    o = params["options"]
    return Net(o["features"], o.get("hidden", 32), o["classes"])


def total_loss(output, target):
    return torch.nn.functional.cross_entropy(output, target, label_smoothing=0.1)
'''


def torch_user_data(folder: Path, rows=999, features=12, classes=4, seed=3) -> Path:
    """The user's own file: float64 features, int16 classes from a rule the model can learn."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, features))
    y = (np.argmax(x[:, :classes] + 0.3 * x[:, classes : 2 * classes], axis=1)).astype(np.int16)
    path = folder / "mine.h5"
    with h5py.File(path, "w") as f:
        f["features"] = x
        f["target"] = y
    return path


# a model of a user's own with BatchNorm (DDP broadcasts its buffers before every forward), as make(params): on rank
# options.slow_rank, options.slow seconds of sleep inside its forward or its backward (options.where)
TORCH_BN_MODEL = '''
import time

import torch
from torch import nn


class Net(nn.Module):
    """Two layers with BatchNorm between them; on rank ``slow_rank``, ``slow`` seconds of sleep inside its forward
    or its backward (``where``)."""

    def __init__(self, features, hidden, classes, slow_rank, slow, where):
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.norm = nn.BatchNorm1d(hidden)
        self.out = nn.Linear(hidden, classes)
        self.slow = slow if torch.distributed.get_rank() == slow_rank else 0.0
        self.where = where

    def forward(self, x):
        h = torch.relu(self.norm(self.inp(x)))
        if self.slow and self.training and torch.is_grad_enabled():
            if self.where == "forward":
                time.sleep(self.slow)
            else:
                h.register_hook(lambda grad: time.sleep(self.slow))
        return self.out(h)


def make(params):
    o = params["options"]
    return Net(o["features"], 32, o["classes"], o.get("slow_rank", -1), o.get("slow", 0.0), o.get("where"))
'''


def torch_user_config(folder: Path, **params) -> Path:
    """A workload torch config of a user's own model (net.py) and file (mine.h5: float64 features, int16 classes)."""
    (folder / "net.py").write_text(TORCH_MODEL)
    torch_user_data(folder)
    cfg = {
        "workload": "torch",
        "warmup": 1,
        "repeats": 2,
        "input": {"path": "mine.h5", "dataset": "features"},
        "params": {
            "model": "net.py:make",
            "options": {"features": 12, "classes": 4},
            "labels": {"dataset": "target"},
            "loss": "net.py:total_loss",
            "batch": 24,
            "steps": 6,
            "optimizer": {"name": "adamw", "lr": 0.01},
            **params,
        },
        "output": "out",
    }
    path = folder / "torch.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def recorded_prediction(folder: Path, prefix: str) -> dict[str, Path]:
    """A recorded prediction's inputs (tests/fixtures/reports/PREFIX-{fit,measured,links}.json.gz, as the predict suite
    keeps them) unpacked into ``folder``: role -> path."""
    data = Path(__file__).resolve().parent / "fixtures" / "reports"
    files = {}
    for role in ("fit", "measured", "links"):
        files[role] = folder / f"{role}.json"
        files[role].write_bytes(gzip.decompress((data / f"{prefix}-{role}.json.gz").read_bytes()))
    return files


def git_repo(folder: Path):
    """A git repository in ``folder`` with a committer set: returns ``git(*args)`` (its stdout, stripped)."""

    def git(*args):
        return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "t")
    return git


# -- Prose: sentences that chain clauses with colons (test_guides.py, test_code_comments.py) --

CHAINED = 3  # ": " three times in one sentence is a chain: say it in shorter sentences


def chained_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (one paragraph, lines joined) with CHAINED or more ": ", counted outside code spans,
    link targets, quoted words and braces."""
    masked = text
    for pattern in (r"``[^`]*``|`[^`]*`", r"\]\([^)]*\)", r"\b(e\.g|i\.e|etc|vs)\.", r"\{[^{}]*\}|'[^'\s]*'"):
        masked = re.sub(pattern, lambda m: "x" * len(m.group(0)), masked)
    out, start = [], 0
    ends = [m.end() for m in re.finditer(r"[.!?]\s", masked) if re.match(r"\s+[A-Z`(\"'*]", text[m.end() - 1 :])]
    for end in [*ends, len(text)]:
        if masked[start:end].count(": ") >= CHAINED:
            out.append(text[start:end].strip())
        start = end
    return out


def written_lines(markdown: str) -> list[tuple[int, str]]:
    """(number, line) of the lines of a Markdown text written by hand: fenced code and the blocks ``python -m bench
    report`` renders left out (tables and headings kept: each check says what it leaves aside)."""
    out, rendered, fenced = [], False, False
    for number, line in enumerate(markdown.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith("<!-- bench:"):
            rendered = True
        elif "<!-- /bench:" in line:  # a block's last rendered line may end with its closing mark
            rendered = False
        elif not (rendered or fenced):
            out.append((number, line))
    return out


def paragraphs(markdown: str, skip_catalogue: bool = False) -> list[str]:
    """The prose paragraphs and list items of a Markdown text, lines joined: headings, tables, fenced code and
    rendered blocks left out (with ``skip_catalogue``, list items that open with a name in code or bold: a
    catalogue of modules, one entry a module)."""
    out, current, last = [], [], 0
    for number, line in written_lines(markdown):
        prose = line.strip() and not line.startswith(("|", "#", "<!--"))
        item = re.match(r"\s*([-*]|\d+\.)\s", line)
        if current and (not prose or item or number != last + 1):
            out.append(" ".join(current))
            current = []
        if prose:
            current.append(line.strip())
            last = number
    if current:
        out.append(" ".join(current))
    catalogue = re.compile(r"- (`[^`]+`|\*\*[^*]+\*\*)( \([^)]*\))?:")
    return [p for p in out if not (skip_catalogue and catalogue.match(p))]
