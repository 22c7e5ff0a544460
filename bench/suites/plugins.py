"""Your own array code as a plug-in: reduce's sum through ``@spmd.map_reduce`` against the same calls written by
hand (h5py, CuPy or NumPy, NCCL or MPI: bench/programs/inline_sum.py) on the same data, and the examples
(histogram, k-means, PCA) verified, each beside a memory copy of its bytes (what a pass over them costs)."""

from __future__ import annotations

import json

import yaml

from spmd.core.units import fmt_bytes

from ..ceilings import device_copy_TBps, host_copy_GBps
from ..env import PROGRAMS, ROOT
from ..records import Measure
from . import Case

EXAMPLES = {"histogram": [134217728], "kmeans": [4194304, 2], "pca": [8388608, 16]}  # GPU sizes (bench/ before)


def sum_config(env) -> str:
    rows = 1 << 18 if env.quick else (1 << 28 if env.gpus else 1 << 25)
    path = env.work / "plugin-sum.yaml"
    if not path.exists():
        path.write_text(
            yaml.safe_dump(
                {
                    "workload": str(PROGRAMS / "plugin_sum.py:total"),
                    "device": env.device,
                    "input": {"path": str(env.work / "plugin-sum.h5"), "dataset": "x"},
                    "generate": {"shape": [rows], "dtype": "float32", "seed": 3, "loc": 1.0, "scale": 2.0},
                    "warmup": 2,
                    "repeats": 5 if env.quick else 20,
                    "output": str(env.work / "plugin-sum-out"),
                }
            )
        )
        env.spmd("generate", path, ranks=None)
    return str(path)


def plugin_sum(env, ranks: int) -> list[Measure]:
    """A repeat of the plug-in (the slowest rank's median) against the same calls by hand."""
    cfg = sum_config(env)
    env.spmd("run", cfg, "-q", ranks=ranks)
    mine = env.report(env.work / "plugin-sum-out")
    by_hand = json.loads(env.program("inline_sum.py", cfg, ranks=ranks).stdout.strip().splitlines()[-1])
    if abs(mine["result"]["value"] - by_hand["sum"]) > 1e-9 * abs(by_hand["sum"]):
        raise RuntimeError(
            f"the plug-in's sum {mine['result']['value']} is not the hand-written one's {by_hand['sum']}"
        )
    case = f"sum of {fmt_bytes(mine['problem'].get('bytes', 0))} float32, {ranks} rank(s)"
    return [
        Measure(
            case, "plug-in (spmd run)", mine["intervals"]["total"]["median"], "time per repeat", "s", better="lower"
        ),
        Measure(
            case, "the same calls by hand", by_hand["median_s"]["total"], "time per repeat", "s", "peer", better="lower"
        ),
    ]


def example(env, name: str) -> list[Measure]:
    """An example verified against NumPy: its compute phase's rate over its bytes, beside a copy of as many."""
    shape = [max(1, s // 64) if env.quick or not env.gpus else s for s in EXAMPLES[name][:1]] + EXAMPLES[name][1:]
    over = [
        "-o",
        f"generate.shape={shape}",
        "-o",
        "repeats=5",
        "-o",
        f"device={env.device}",
        "-o",
        f"input.path={env.work / name}.h5",
        "-o",
        f"output={env.work / name}-out",
    ]
    config = ROOT / f"examples/{name}.yaml"
    if not (env.work / f"{name}.h5").exists():  # once per run of the suite: the runs time the same data
        env.spmd("generate", config, *over, ranks=None)
    env.spmd("run", config, *over, "-q", ranks=1)
    report = env.report(env.work / f"{name}-out")
    nbytes = report["problem"]["bytes"]
    rate = nbytes / report["intervals"]["compute"]["median"] / 1e9
    ceiling = device_copy_TBps(nbytes) * 1e3 / 2 if env.gpus else host_copy_GBps(nbytes) / 2  # read once
    case = f"{name}, {fmt_bytes(nbytes)}, 1 rank"
    return [
        Measure(case, "spmd (compute phase)", rate, "read rate", "GB/s"),
        Measure(case, "memory copy, read side", ceiling, "read rate", "GB/s", "ceiling"),
    ]


def cases(env) -> list[Case]:
    out = [
        Case("plug-in sum against by hand, 1 rank", lambda e: plugin_sum(e, 1)),
        Case("plug-in sum against by hand, all ranks", lambda e: plugin_sum(e, e.ranks), needs=("ranks2",)),
    ]
    out += [Case(f"example {name}", lambda e, name=name: example(e, name)) for name in EXAMPLES]
    return out
