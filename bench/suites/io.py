"""The input path: each rank's read of its rows by spmd's engines against parallel preads of the same bytes (and,
on a GPU, page-locked host-to-device copies), and reduce's whole repeat with the default engine against h5py."""

from __future__ import annotations

import statistics

import yaml

from spmd.core.units import fmt_bytes

from ..records import Measure
from . import Case

GPU_WAY = "file to GPU (direct, copies as pieces land)"
PINNED = "host to device, page-locked"


def config(env, rows: int) -> str:
    """A float32 reduce input of ``rows`` rows in the scratch folder (generated once), and its config."""
    path = env.work / f"io-{rows}.yaml"
    if not path.exists():
        path.write_text(
            yaml.safe_dump(
                {
                    "workload": "reduce",
                    "device": env.device,
                    "input": {"path": str(env.work / f"io-{rows}.h5"), "dataset": "x"},
                    "generate": {"shape": [rows], "dtype": "float32", "seed": 5},
                    "warmup": 1,
                    "repeats": 5,
                    "output": str(env.work / "io-out"),
                }
            )
        )
        env.spmd("generate", path, ranks=None)
    return str(path)


def rows(env) -> int:
    if env.quick:
        return 5_000_000  # 20 MB
    return 1 << 28 if env.gpus else 40_000_000  # 1 GiB on a GPU machine, 160 MB on a small CPU one


def read_rates(env, ranks: int, cold: bool = False) -> list[Measure]:
    """``spmd bench io`` at ``ranks`` ranks: each way's rate (GB/s, median of its rounds, the slowest rank)."""
    out = env.work / "io.json"
    args = ["bench", "io", config(env, rows(env)), "--rounds", "5", "--json", out] + (["--cold"] if cold else [])
    env.spmd(*args, ranks=ranks)
    import json

    per_rank = json.loads(out.read_text())["per_rank"]
    rates: dict[str, float] = {}
    for record in per_rank:
        for way, seconds in record["seconds"].items():
            rate = record["bytes"] / statistics.median(seconds) / 1e9
            rates[way] = min(rates.get(way, rate), rate)  # the slowest rank's: what the job waits for
    case = f"read {fmt_bytes(per_rank[0]['bytes'])} per rank, {ranks} rank(s), {'cold' if cold else 'page cache'}"
    threads = per_rank[0]["threads"]
    parallel = "pread, 1 thread" if threads == 1 else f"pread, {threads} threads"  # as many as the engine's
    roles = {"direct": "result", GPU_WAY: "result", parallel: "ceiling", PINNED: "ceiling", "h5py": "peer"}
    return [
        Measure(case, way, rate, "read rate", "GB/s", roles.get(way, "peer"), params={"threads": threads})
        for way, rate in rates.items()
    ]


def repeat_by_engine(env) -> list[Measure]:
    """reduce's whole repeat (the slowest rank's median) reading with the default engine and with h5py."""
    out = []
    for engine, role in (("auto", "result"), ("h5py", "peer")):
        folder = env.work / f"io-run-{engine}"
        env.spmd("run", config(env, rows(env)), "-o", f"io.engine={engine}", "--out", folder, "-q", ranks=env.ranks)
        report = env.report(folder)
        used = sorted({piece["engine"] for rank in (report.get("io") or {}).get("per_rank", []) for piece in rank})
        out.append(
            Measure(
                f"reduce repeat, {env.ranks} rank(s)",
                f"io.engine {engine}",
                report["intervals"]["total"]["median"],
                "time per repeat",
                "s",
                role,
                better="lower",
                params={"engines": used},  # what auto chose (report.json io)
            )
        )
    return out


def cases(env) -> list[Case]:
    out = [
        Case("read, 1 rank", lambda e: read_rates(e, 1)),
        Case("read, all ranks", lambda e: read_rates(e, e.ranks), needs=("ranks2",)),
    ]
    if not env.gpus:  # a cold read is one the page cache does not serve (posix_fadvise DONTNEED first)
        out.append(Case("read, 1 rank, cold", lambda e: read_rates(e, 1, cold=True)))
    out.append(Case("reduce repeat by engine", repeat_by_engine))
    return out
