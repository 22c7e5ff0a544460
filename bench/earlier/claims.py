"""Every figure a document quotes, recomputed from the committed raw file it comes from (`make claims`).

Each claim is a sentence fragment of README.md or docs/ with its numbers left as format fields, and a function
that computes those numbers from raw results under docs/results/. The check formats the fragment with the
computed numbers and looks for it in the document (line breaks and runs of spaces count as one space). A
document that says anything else, or a raw file that is gone, is a failure: exit 1, each one named.

    python bench/earlier/claims.py            # check
    python bench/earlier/claims.py --list     # every claim with its value and source

Covered: README.md, docs/plugins.md, docs/reliability.md's CPU table and GPU corruption runs, docs/cuda-mpi.md's
bandwidths, and docs/benchmarks.md's one-GPU train comparison, plug-in section, the input path on one H200 and the
two-GPU runs of 2026-11-23. The older multi-GPU sections of docs/benchmarks.md (2026-11-22, single sweeps) predate
this script and are marked so.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from summarize_io import (  # noqa: E402  (one home for the input path's arithmetic)
    GPU_WAY,
    PINNED,
    io_targets,
    scaling_runs,  # noqa: E402
    way_rates,
)
from summarize_io import scaling as io_scaling  # noqa: E402
from summarize_plugins import scaling as plugin_scaling  # noqa: E402
from summarize_train import against_torch, one_gpu, one_gpu_row, settings, speedups  # noqa: E402  (the train table's)

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs/results"


@dataclass(frozen=True)
class Claim:
    doc: str  # the document, relative to the repository
    text: str  # the fragment, numbers as format fields
    values: Callable[[], dict]  # the numbers, from raw files
    source: str  # where they come from (for people)


# -- reading raw results ---------------------------------------------------------------------------------


def load(path: str):
    return json.loads((RESULTS / path).read_text())


def jsonl(path: str) -> list[dict]:
    return [json.loads(line) for line in (RESULTS / path).read_text().splitlines() if line.strip()]


def comm_tables(path: str) -> dict[str, dict[int, dict]]:
    """``spmd bench comm`` text output (one table per backend): backend -> size -> {time_us, busbw_GBps}."""
    tables: dict[str, dict[int, dict]] = {}
    current = None
    for line in (RESULTS / path).read_text().splitlines():
        head = re.match(r"# spmd bench comm: \w+ over ([\w-]+),", line)
        if head:
            current = tables.setdefault(head[1], {})
        elif line.startswith("#"):
            current = None if not line.startswith("#  ") else current  # a table's own header lines start "#  "
        elif current is not None:
            cells = line.split()  # size count type redop root time algbw busbw #wrong
            if len(cells) == 9 and cells[0].isdigit() and cells[1].isdigit():
                current[int(cells[0])] = {"time_us": float(cells[5]), "busbw_GBps": float(cells[7])}
    return tables


def series(path: str, mode: str, ranks: int) -> dict:
    return next(r for r in load(path)["series"][mode] if r["ranks"] == ranks)


# -- the figures -----------------------------------------------------------------------------------------


def train_one_gpu(precision: str = "float32") -> dict:
    """spmd's train against PyTorch's setups on one H100: the range of margins against the strongest."""
    rows = [r for r in one_gpu(RESULTS / "train-h100x1") if r["precision"] == precision]
    if len(rows) != 10:
        raise ValueError(f"{len(rows)} rows of {precision}, not the table's 10")
    strongest = {r["strongest"] for r in rows}
    return {
        "lo": min(r["margin"] for r in rows),
        "hi": max(r["margin"] for r in rows),
        "worst": min(r["worst_margin"] for r in rows),
        "strongest": ", ".join(sorted(strongest)),
    }


def train_one_gpu_except(precision: str, model: str, batch: int) -> dict:
    """The margins of one precision without one (model, batch) row."""
    rows = [
        r
        for r in one_gpu(RESULTS / "train-h100x1")
        if r["precision"] == precision and (r["model"], r["batch"]) != (model, batch)
    ]
    return {
        "lo": min(r["margin"] for r in rows),
        "hi": max(r["margin"] for r in rows),
        "worst": min(r["worst_margin"] for r in rows),
    }


def train_row(precision: str, model: str, batch: int) -> dict:
    return next(
        r
        for r in one_gpu(RESULTS / "train-h100x1")
        if (r["precision"], r["model"], r["batch"]) == (precision, model, batch)
    )


def train_recheck() -> dict:
    """`large` at 512, float32: spmd and PyTorch's graphed step alternating, before and after round-robin tuning."""
    out = {}
    for tag in ("before", "after"):
        runs = jsonl(f"train-h100x1/recheck/{tag}-round-robin.jsonl")
        mine = [r["samples_per_s"] for r in runs if r["side"] == "spmd"]
        peer = [r["samples_per_s"] for r in runs if r["side"] == "torch-graph"]
        out.update(
            {
                f"{tag}_lo": min(mine),
                f"{tag}_hi": max(mine),
                f"{tag}_med": statistics.median(mine),
                f"{tag}_tlo": min(peer),
                f"{tag}_thi": max(peer),
                f"{tag}_tmed": statistics.median(peer),
                f"{tag}_margin": statistics.median(mine) / statistics.median(peer),
                f"{tag}_worst": min(mine) / max(peer),
            }
        )
    return out


def bf16_gradient_errors() -> dict:
    errors = [
        r["gradient_error"]
        for i in (1, 2, 3)
        for r in jsonl(f"train-h100x1/train-spmd-run{i}.jsonl")
        if r["variant"] == "graph-bf16"
    ]
    return {"lo": min(errors), "hi": max(errors), "n": len(errors)}


def bf16_fallback() -> dict:
    """precision bf16, `medium` at 1024: the dW GEMMs whose bias-gradient epilogue cuBLASLt offers one algorithm."""
    rows = jsonl("train-h100x1/train-ops-bf16.jsonl")
    ops = {r["op"]: r["us"] for r in rows if r.get("model") == "medium" and r.get("batch") == 1024 and "op" in r}
    single = [
        r
        for r in rows
        if r.get("model") == "medium"
        and r.get("batch") == 1024
        and r.get("epilogue") == "bias_grad"
        and not r["candidates_us"]
    ]
    fused = sorted(ops[k] for k in ("dW+db L1", "dW+db L2"))
    return {"l0": ops["dW+db L0"], "l3": ops["dW+db L3"], "lo": fused[0], "hi": fused[1], "single": len(single)}


def train_one_gpu_rows() -> list[str]:
    rows = one_gpu(RESULTS / "train-h100x1")
    out = []
    for precision in ("float32", "tf32", "bf16"):
        mine = [r for r in rows if r["precision"] == precision]
        names = sorted({n for r in mine for n in r["torch"]})
        out += [one_gpu_row(r, names) for r in mine]
    return out


def train_ops_median(path_glob: str, model: str, batch: int, op: str, key: str = "us") -> float:
    values = [
        r[key]
        for path in sorted(RESULTS.glob(path_glob))
        for r in map(json.loads, path.read_text().splitlines())
        if r.get("model") == model and r.get("batch") == batch and r.get("op", "").startswith(op)
    ]
    if not values:
        raise ValueError(f"no {op!r} at {model} {batch} in {path_glob}")
    return statistics.median(values)


def train_diagnosis() -> dict:
    before = [json.loads(line) for line in (RESULTS / "train-h100x1/before/train-spmd.jsonl").read_text().splitlines()]
    rate = {(r["model"], r["batch"]): r for r in before}
    after = {(r["model"], r["batch"]): r for r in one_gpu(RESULTS / "train-h100x1") if r["precision"] == "float32"}
    ops = "train-h100x1/train-ops-run*.jsonl"
    return {
        "l1_16": train_ops_median("train-h100x1/before/train-ops.jsonl", "medium", 16, "fwd gemm L1"),
        "l1_32": train_ops_median("train-h100x1/before/train-ops.jsonl", "medium", 32, "fwd gemm L1"),
        "fwd16": rate["medium", 16]["phase_ms_per_step"]["forward"] * 1e3,
        "fwd32": rate["medium", 32]["phase_ms_per_step"]["forward"] * 1e3,
        "now_l1": train_ops_median(ops, "medium", 16, "fwd linear_relu L1"),
        "step16_before": train_ops_median("train-h100x1/before/train-ops.jsonl", "medium", 16, "SUM", "whole_step_us"),
        "step16": train_ops_median(ops, "medium", 16, "SUM", "whole_step_us"),
        "b16": rate["medium", 16]["samples_per_s"],
        "a16": after["medium", 16]["spmd"],
        "b8": rate["large", 8]["samples_per_s"],
        "a8": after["large", 8]["spmd"],
        **large_step_bounds(),
    }


def large_step_bounds() -> dict:
    """`large` at batch 8: the SGD pass and the first layer's GEMM against HBM (a copy on the same machine kind)."""
    ops = "train-h100x1/train-ops-run*.jsonl"
    params = 6_899_466
    sgd = train_ops_median(ops, "large", 8, "sgd")
    l0 = train_ops_median(ops, "large", 8, "fwd linear_relu L0")
    copy = load("plugins-h100x1/hbm_ceiling.json")["copy_read_plus_write_TBps"]
    sgd_tbps = 5 * 4 * params / sgd / 1e6  # w, g, v read, w, v written; float32
    return {
        "sgd": sgd,
        "sgd_tbps": sgd_tbps,
        "sgd_copy": sgd_tbps / copy,
        "copy": copy,
        "large_step": train_ops_median(ops, "large", 8, "SUM", "whole_step_us"),
        "l0": l0,
        "l0_tbps": 4812 * 1024 * 4 / l0 / 1e6,
    }


def allreduce_times(path: str) -> dict[int, float]:
    return {r["size"]: r["time_us"] for r in load(path)["results"]["nccl"]}


def machines_apart() -> dict:
    """The 2- and 4-rank allreduce times of the 4-GPU and the 8-GPU machine, how far apart: from 256 MiB, and at 1 MiB."""
    big, small = [], []
    for ranks in (2, 4):
        a, b = (
            allreduce_times(f"multi-h200x4/allreduce-nccl-{ranks}.json"),
            allreduce_times(f"multi-h200x8/allreduce-nccl-{ranks}.json"),
        )
        big += [abs(a[n] / b[n] - 1) for n in a if n >= 256 << 20 and n in b]
        small.append(max(a[1 << 20], b[1 << 20]) / min(a[1 << 20], b[1 << 20]) - 1)
    return {"big": max(big), "lo": min(small), "hi": max(small)}


def allreduce_8b() -> dict:
    """8-byte NCCL allreduce, 2 ranks, 20 iterations: the three runs of 2026-11-22 (comm, 4-GPU, 8-GPU machines)."""
    runs = [
        comm_tables("comm-h200x2/spmd-allreduce-nccl.txt")["nccl"][8]["time_us"],
        allreduce_times("multi-h200x4/allreduce-nccl-2.json")[8],
        allreduce_times("multi-h200x8/allreduce-nccl-2.json")[8],
    ]
    return {"med": statistics.median(runs), "lo": min(runs), "hi": max(runs), "this": runs[0]}


def corrupt_gpu(path: str = "corrupt-h100x1/corrupt.md") -> dict:
    rows = [line.split("|")[1:-1] for line in (RESULTS / path).read_text().splitlines()[2:]]
    if not rows or any(cells[2].strip() != "3" or cells[4].strip() != "none" for cells in rows):
        raise ValueError("a corrupt run that did not exit 3 without a report")
    return {"n": len(rows), "cases": len({cells[0] for cells in rows})}


def verify_full_cost() -> dict:
    out = {}
    for tag, dtype in (("32", "float32"), ("64", "float64")):
        reports = [load(f"corrupt-h100x1/verify-full-{dtype}-{i}.json") for i in (1, 2, 3)]
        every = [r["verification"]["every_element_s"] for r in reports]
        out.update(
            {
                f"f{tag}": statistics.median(every),
                f"f{tag}lo": min(every),
                f"f{tag}hi": max(every),
                f"g{tag}": statistics.median(r["timings"]["compute"]["median"] for r in reports) * 1e3,
                f"r{tag}": statistics.median(r["timings"]["read"]["median"] for r in reports),
            }
        )
    return out


def grouped_check_cost() -> dict:
    """matmul's default check beside the GEMM it checks, one H100, 3 runs of bench/verify_cost.py (each a median
    of 5): the median run, and the range of the runs."""
    out = {}
    for n in (8192, 16384):
        rows = [
            next(r for r in load(f"verify-h100x1/verify_cost-run{i}.json")["rows"] if r["n"] == n) for i in (1, 2, 3)
        ]
        check, gemm = [r["check_median_s"] * 1e3 for r in rows], [r["gemm_median_s"] * 1e3 for r in rows]
        out.update(
            {
                f"c{n}": statistics.median(check),
                f"lo{n}": min(check),
                f"hi{n}": max(check),
                f"g{n}": statistics.median(gemm),
            }
        )
    return out


def reduce_h200x2() -> dict:
    big, small = "reduce-h200x2/nccl-4GiB/scaling.json", "reduce-h200x2/nccl-1MiB/scaling.json"
    strong, weak, strong_small = series(big, "strong", 2), series(big, "weak", 2), series(small, "strong", 2)
    even = load(small)["model"]["predictions"]["break_even"][0]["bytes_per_rank"]
    return {
        "s": strong["speedup"],
        "e": strong["efficiency"],
        "w": weak["efficiency"],
        "s1": strong_small["speedup"],
        "e1": strong_small["efficiency"],
        "kib": even / 1024,
    }


def fused_reduce() -> dict:
    rates = [
        g
        for run in load("reduce-h200x2/nccl-4GiB/scaling.json")["runs"]
        for g in run["report"]["metrics"]["compute_GBps_per_rank"]
    ]
    return {"lo": min(rates) / 1e3, "hi": max(rates) / 1e3}


def cuda_mpi_build() -> dict:
    """Minutes of each build (configure + make + mpi4py) in build-times.txt."""
    text = (RESULTS / "cuda-mpi-h200x2/build-times.txt").read_text()
    builds = [
        sum(int(x) for x in re.findall(r": (\d+) s", part)) / 60
        for part in re.split(r"\n(?=\S.*build)", text)
        if re.search(r": \d+ s", part)
    ]
    return {"lo": min(builds), "hi": max(builds)}


def eight_h200() -> dict:
    allreduce = load("multi-h200x8/allreduce-nccl-8.json")["results"]["nccl"]
    train = {
        r["gpus"]: r["samples_per_s"]
        for r in jsonl("multi-h200x8/train-spmd.jsonl")
        if r["model"] == "large" and r["batch"] == 512 and r["variant"] == "graph"
    }
    return {
        "busbw": next(r for r in allreduce if r["size"] == 1 << 30)["busbw_GBps"],
        "matmul": series("multi-h200x8/matmul/scaling.json", "strong", 8)["speedup"],
        "train": train[8] / train[1],
    }


def comm_h200x2() -> dict:
    spmd = comm_tables("comm-h200x2/spmd-allreduce-nccl.txt")["nccl"]
    torch = {r["size"]: r for r in load("comm-h200x2/torch-allreduce.json")["results"]}
    small, large = [], []
    tiny = [spmd[8]["time_us"]]
    for op in ("allreduce", "allgather", "reduce_scatter", "bcast", "sendrecv"):
        t = comm_tables(f"comm-h200x2/all-{op}.txt")
        small += [t["mpi"][s]["time_us"] / t["nccl"][s]["time_us"] for s in (8, 1024)]
        large += [t["mpi"][s]["time_us"] / t["nccl"][s]["time_us"] for s in t["nccl"] if s >= 16 << 20]
        if op == "allreduce":
            tiny.append(t["nccl"][8]["time_us"])
    p2p = [float(x) for x in re.findall(r"\d+\.\d+", _section(RESULTS / "comm-h200x2/topo.txt", "P2P copy bandwidth"))]
    return {
        "t8_lo": min(tiny),
        "t8_hi": max(tiny),
        "busbw": spmd[1 << 30]["busbw_GBps"],
        "torch": spmd[1 << 30]["busbw_GBps"] / torch[1 << 30]["busbw_GBps"],
        "small_lo": min(small),
        "small_hi": max(small),
        "large_lo": min(large),
        "large_hi": max(large),
        "p2p": max(p2p),
    }


def _section(path: Path, title: str) -> str:
    """The lines of ``path`` after the line holding ``title`` up to the next blank line."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if title in line) + 1
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(lines[start:end])


def cuda_mpi() -> dict:
    sendrecv = load("cuda-mpi-h200x2/comm-sendrecv.json")["results"]
    allreduce = load("cuda-mpi-h200x2/comm-allreduce.json")["results"]
    at = lambda rows, size: next(r for r in rows if r["size"] == size)  # noqa: E731
    ratios = [at(allreduce["mpi-cuda"], r["size"])["time_us"] / r["time_us"] for r in allreduce["nccl"]]
    big = 128 << 20
    return {
        "mine": at(sendrecv["mpi-cuda"], big)["busbw_GBps"],
        "nccl": at(sendrecv["nccl"], big)["busbw_GBps"],
        "worst": max(ratios),
        "ar_busbw": at(allreduce["mpi-cuda"], big)["busbw_GBps"],
        "ar_ratio": at(allreduce["mpi-cuda"], big)["time_us"] / at(allreduce["nccl"], big)["time_us"],
    }


def stencil_kernel() -> dict:
    k = load("workloads-h200x2/stencil_kernel.json")
    return {
        "tb": k["fused_TBps"],
        "share": k["fused_TBps"] / k["hbm_read_TBps"],
        "sliced": k["slicing_TBps"],
        "ceiling": k["hbm_read_TBps"],
        "ms": k["fused_ms"],
        "copy": k["copy_TBps"],
        "vs_copy": k["fused_vs_copy"],
        "sliced_ms": k["slicing_ms"],
        "sliced_share": k["slicing_TBps"] / k["hbm_read_TBps"],
    }


def plugin_example(name: str) -> Callable[[], dict]:
    def values() -> dict:
        folder = RESULTS / "plugins-h100x1"
        reports = [json.loads((p / "report.json").read_text()) for p in sorted(folder.glob(f"{name}-[0-9]"))]
        if len(reports) < 3:
            raise ValueError(f"{folder}: fewer than 3 runs of {name}")
        compute = [r["timings"]["compute"]["median"] for r in reports]
        ceiling = json.loads((folder / "hbm_ceiling.json").read_text())["sum_read_TBps"] * 1e12
        rate = reports[0]["problem"]["bytes"] / statistics.median(compute)
        return {
            "ms": statistics.median(compute) * 1e3,
            "lo": min(compute) * 1e3,
            "hi": max(compute) * 1e3,
            "gbps": rate / 1e9,
            "share": rate / ceiling,
        }

    return values


def io_gpu(layout: str) -> dict:
    """Issue 24's file-to-GPU target on one H200 (io-h200x2, GPU 0 of the 2-GPU machine): medians of 3 runs."""
    t = io_targets(RESULTS / "io-h200x2")[layout]
    return {
        "gpu": t[GPU_WAY]["median"],
        "gpu_lo": t[GPU_WAY]["min"],
        "gpu_hi": t[GPU_WAY]["max"],
        "today": t["today"]["median"],
        "vs_today": t["vs_today"],
        "vs_limit": t["vs_limit"],
        "pread": t[t["pread_n"]]["median"],
        "pread1": t["pread, 1 thread"]["median"],
        "pinned": t[PINNED]["median"],
        "pageable": t["host to device, pageable"]["median"],
        "h5py": t["h5py"]["median"],
        "direct": t["direct"]["median"],
        "kvikio": t["file to GPU (kvikio)"]["median"],
        "threads": t["threads"],
    }


def io_reduce() -> dict:
    red = io_targets(RESULTS / "io-h200x2")["reduce"]
    return {
        "h5py": red["h5py"]["median"] * 1e3,
        "h5py_lo": red["h5py"]["min"] * 1e3,
        "h5py_hi": red["h5py"]["max"] * 1e3,
        "direct": red["direct"]["median"] * 1e3,
        "direct_lo": red["direct"]["min"] * 1e3,
        "direct_hi": red["direct"]["max"] * 1e3,
        "speedup": red["speedup"],
        "h5py_read": red["h5py"]["phases"]["read"] * 1e3,
        "h5py_h2d": red["h5py"]["phases"]["h2d"] * 1e3,
        "direct_read": red["direct"]["phases"]["read"] * 1e3,
        "hidden": red["direct"]["phases"]["h2d_overlapped"] * 1e3,
        "exposed": red["direct"]["phases"]["h2d"] * 1e3,
        "h5py_c": red["h5py"]["phases"]["compute"] * 1e3,
        "direct_c": red["direct"]["phases"]["compute"] * 1e3,
    }


TWO = "two-gpu-h200x2"


def train_two(gpus: int, folder: str = f"{TWO}/train") -> dict:
    """spmd against the strongest PyTorch setup (DDP on 2 GPUs), float32, every batch: margins of the medians."""
    rows = [r for r in against_torch(RESULTS / folder) if r["precision"] == "float32" and r["gpus"] == gpus]
    if len(rows) != 10 or any(r["runs"] < 3 for r in rows):
        raise ValueError(f"{folder}: not every batch has 3 spmd runs at {gpus} GPU(s)")
    return {
        "lo": min(r["margin"] for r in rows),
        "hi": max(r["margin"] for r in rows),
        "worst": min(r["worst_margin"] for r in rows),
        "strongest": ", ".join(sorted({r["strongest"] for r in rows})),
    }


def train_two_speedup(model: str, batch: int, folder: str = f"{TWO}/train") -> dict:
    u = next(u for u in speedups(RESULTS / folder) if (u["model"], u["batch"]) == (model, batch))
    return {"spmd": u["speedup"], "lo": u["min"], "hi": u["max"], "torch": u["torch_speedup"]}


def io_two(workload: str, engine: str, mode: str, ranks: int) -> dict:
    r = next(
        r
        for r in io_scaling(RESULTS / TWO / "io")
        if (r["workload"], r["engine"], r["mode"], r["ranks"]) == (workload, engine, mode, ranks)
    )
    return {
        "ms": r["total"] * 1e3,
        "eff": r["efficiency"],
        "read": (r["read"] or 0) * 1e3,
        "rate": r["bytes_per_rank"] / r["read"] / 1e9 if r["read"] else 0.0,
        "limit": r["limit_GBps"] or 0.0,
    }


def bench_io_two(ranks: int, way: str) -> dict:
    """spmd bench io at 1 or 2 ranks (4 GiB each): GB/s per rank (slowest) and of all ranks together."""
    rates = [way_rates(r)[way] for r in load(f"{TWO}/io/bench-io-{ranks}.json")["per_rank"]]
    return {"slowest": min(rates), "together": sum(rates)}


def plugins_two(example: str, mode: str) -> dict:
    rows = {
        r["ranks"]: r
        for r in plugin_scaling(RESULTS / TWO / "plugins")
        if r["example"] == example and r["mode"] == mode
    }
    if not all(r["verified"] for r in rows.values()):
        raise ValueError(f"{TWO}/plugins: an unverified run of {example}")
    return {
        "one": rows[1]["total"] * 1e3,
        "two": rows[2]["total"] * 1e3,
        "eff": rows[2]["efficiency"],
        "read1": rows[1]["read"] * 1e3,
        "read2": rows[2]["read"] * 1e3,
    }


MAPPED = "mapped-h200x2"
MAPPED_SRC = (
    f"{MAPPED} (bench/mapped_h2d.py; bench/io_mapped_gpu.sh: reduce strong + weak 3 runs mapped, 1 direct, "
    f"bench io; bench/train_nccl_env.sh 3 runs per setting, two calls)"
)


def mapped_h2d() -> dict:
    """bench/mapped_h2d.py: 4 GiB per rank, 1 rank and 2 at once: lock, copy, pread path (medians of 5 rounds)."""
    w = load(f"{MAPPED}/mapped_h2d.json")["ways"]
    return {
        f"{k.replace('/', '_').replace('-', '_')}_{q}": v[q]
        for k, v in w.items()
        for q in ("median_s", "gbps_per_rank", "gbps_all")
    }


def mapped_io(engine: str, mode: str, ranks: int, folder: str = "io") -> dict:
    """Whole repeat (ms) and efficiency of reduce, medians over the runs with their range."""
    r = next(
        r
        for r in scaling_runs(RESULTS / MAPPED / folder)
        if (r["workload"], r["engine"], r["mode"], r["ranks"]) == ("reduce", engine, mode, ranks)
    )
    t, e = r["total"], r["efficiency"]
    return {
        "runs": r["runs"],
        "ms": t["median"] * 1e3,
        "ms_lo": t["min"] * 1e3,
        "ms_hi": t["max"] * 1e3,
        "eff": e["median"],
        "eff_lo": e["min"],
        "eff_hi": e["max"],
        "read": r["read"]["median"] * 1e3,
    }


def mapped_io_row(engine: str, mode: str) -> Callable[[], dict]:
    def values():
        a, b = mapped_io(engine, mode, 1), mapped_io(engine, mode, 2)
        return {
            "runs": b["runs"],
            "a": a["ms"],
            "a_lo": a["ms_lo"],
            "a_hi": a["ms_hi"],
            "b": b["ms"],
            "b_lo": b["ms_lo"],
            "b_hi": b["ms_hi"],
            "eff": b["eff"],
            "eff_lo": b["eff_lo"],
            "eff_hi": b["eff_hi"],
            "ra": a["read"],
            "rb": b["read"],
        }

    return values


def mapped_bench(ranks: int, way: str) -> dict:
    rates = [way_rates(r)[way] for r in load(f"{MAPPED}/io/bench-io-{ranks}.json")["per_rank"]]
    return {"slowest": min(rates), "together": sum(rates)}


def mapped_bench_row(way: str) -> Callable[[], dict]:
    return lambda: {
        "one": mapped_bench(1, way)["slowest"],
        "two": mapped_bench(2, way)["slowest"],
        "all": mapped_bench(2, way)["together"],
    }


def mapped_before_barrier() -> dict:
    b = mapped_io("mapped", "weak", 2, "io-before-barrier")
    waits = [
        json.loads(p.read_text())
        for p in sorted((RESULTS / MAPPED / "io-before-barrier").glob("io-reduce-mapped-run*/scaling.json"))
    ]
    worst = max(row["timings"]["wait"]["max"] for sc in waits for row in sc["series"]["weak"] if row["ranks"] == 2)
    return {**b, "wait": worst * 1e3}


CALLS = {1: "default-and-split", 3: "default-and-perbucket"}  # the first and third GPU calls' settings


def large512(call: int, setting: str) -> dict:
    r = next(r for r in settings(RESULTS / MAPPED / "train-large512" / CALLS[call]) if r["setting"] == setting)
    if r["runs"] < 3:
        raise ValueError(f"{MAPPED}/train-large512: {setting} has {r['runs']} runs")
    return {k.replace("_ms", "_us"): (v * 1e3 if k.endswith("_ms") else v) for k, v in r.items()}  # in us


def large512_effects() -> dict:
    """What each overlap hid and what it cost (us), and the exposed all-reduce against NCCL alone (comm-h200x2)."""
    d1, d3 = large512(1, "default"), large512(3, "default")
    split, early = large512(1, "split"), large512(3, "perbucket")
    bucket = max(
        json.loads(line)["buckets"][-1]
        for line in (RESULTS / MAPPED / "train-large512" / CALLS[3] / "default-run1.jsonl").read_text().splitlines()
    )
    alone = comm_tables("comm-h200x2/spmd-allreduce-nccl.txt")["nccl"]
    return {
        "speedup": d3["speedup"],
        "split_hid": d1["comm_us"] - split["comm_us"],
        "split_cost": split["backward_us"] - d1["backward_us"],
        "early_hid": d3["optimizer_us"] - early["optimizer_us"],
        "early_cost": early["comm_us"] - d3["comm_us"],
        "mb": bucket / 1e6,
        "exposed": d3["comm_us"],
        "busbw": bucket / (d3["comm_us"] * 1e-6) / 1e9,
        "t16": alone[16 << 20]["time_us"],
        "t32": alone[32 << 20]["time_us"],
        "need": d3["step1_us"] * 2 / 1.7,
        "one": d3["step1_us"],
        "short": d3["step2_us"] - d3["step1_us"] * 2 / 1.7,
        "overlapped": d3["comm_overlapped_us"],
    }


def large512_row(call: int, setting: str) -> Callable[[], dict]:
    return lambda: large512(call, setting)


def plugin_overhead(folder: str = "plugins-h100x1") -> dict:
    folder = RESULTS / folder
    plugin = [json.loads((p / "report.json").read_text()) for p in sorted(folder.glob("plugin-sum-[0-9]"))]
    if len(plugin) != len(list(folder.glob("inline-sum-[0-9].json"))):
        raise ValueError(f"{folder}: unequal runs")
    inline = [json.loads(p.read_text()) for p in sorted(folder.glob("inline-sum-[0-9].json"))]
    a = [r["timings"]["compute"]["median"] + r["timings"]["comm"]["median"] for r in plugin]
    b = [r["median_s"]["compute"] + r["median_s"]["comm"] for r in inline]
    ta = [r["timings"]["total"]["median"] for r in plugin]
    tb = [r["median_s"]["total"] for r in inline]
    if len(a) < 3 or len(b) < 3:
        raise ValueError(f"{folder}: fewer than 3 runs of each")
    ca = [r["timings"]["compute"]["median"] for r in plugin]
    cb = [r["median_s"]["compute"] for r in inline]
    return {
        "a": statistics.median(a) * 1e3,
        "b": statistics.median(b) * 1e3,
        "extra": (statistics.median(a) - statistics.median(b)) * 1e3,
        "ratio": statistics.median(a) / statistics.median(b),
        "ca": statistics.median(ca) * 1e3,
        "cb": statistics.median(cb) * 1e3,
        "ta": statistics.median(ta) * 1e3,
        "tb": statistics.median(tb) * 1e3,
        "tratio": statistics.median(ta) / statistics.median(tb),
    }


CLAIMS = [
    Claim(
        "docs/benchmarks-earlier.md",
        "`reduce`: 4 GiB strong {s:.2f}x ({e:.0%}), weak {w:.0%}; 1 MiB strong only {s1:.2f}x ({e1:.0%}",
        reduce_h200x2,
        "reduce-h200x2/nccl-4GiB, nccl-1MiB: scaling.json (one sweep each)",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "model break-even {kib:.0f} KiB per GPU",
        reduce_h200x2,
        "reduce-h200x2/nccl-1MiB/scaling.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "NCCL allreduce {busbw:.0f} GB/s busbw at 1 GiB",
        eight_h200,
        "multi-h200x8/allreduce-nccl-8.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "matmul 16384^3 strong {matmul:.2f}x",
        eight_h200,
        "multi-h200x8/matmul/scaling.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "train weak (`large`, 512 per GPU) {train:.2f}x",
        eight_h200,
        "multi-h200x8/train-spmd.jsonl",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "NCCL allreduce {t8_lo:.1f}-{t8_hi:.1f} us at 8 B",
        comm_h200x2,
        "comm-h200x2/spmd-allreduce-nccl.txt, all-allreduce.txt (two sweeps of one call)",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "{busbw:.0f} GB/s busbw at 1 GiB ({torch:.3f}x PyTorch's in the same call)",
        comm_h200x2,
        "comm-h200x2/spmd-allreduce-nccl.txt, torch-allreduce.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "host-staged MPI {small_lo:.1f}-{small_hi:.1f}x slower up to 1 KiB and {large_lo:.0f}-{large_hi:.0f}x "
        "from 16 MiB on",
        comm_h200x2,
        "comm-h200x2/all-*.txt (5 collectives)",
    ),
    Claim(
        "docs/benchmarks-earlier.md", "P2P copies at {p2p:.0f} GB/s over NVLink", comm_h200x2, "comm-h200x2/topo.txt"
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "mpi4py against it: {lo:.0f}-{hi:.0f} minutes on 32 cores",
        cuda_mpi_build,
        "cuda-mpi-h200x2/build-times.txt (two builds)",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "({mine:.0f} against {nccl:.0f} GB/s at 128 MiB, CUDA IPC) and lost up to {worst:.0f}x on allreduce",
        cuda_mpi,
        "cuda-mpi-h200x2/comm-sendrecv.json, comm-allreduce.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "sendrecv from 8 MiB on beats NCCL: {mine:.0f} GB/s against NCCL's {nccl:.0f} at 128 MiB",
        cuda_mpi,
        "cuda-mpi-h200x2/comm-sendrecv.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "It reached {ar_busbw:.2f} GB/s at 128 MiB: {ar_ratio:.0f}x NCCL's time",
        cuda_mpi,
        "cuda-mpi-h200x2/comm-allreduce.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "one fused CUDA kernel per filter ({tb:.2f} TB/s, {share:.1%} of the HBM read ceiling measured "
        "beside it, for the 5-point step that array slicing does at {sliced:.2f} TB/s)",
        stencil_kernel,
        "workloads-h200x2/stencil_kernel.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "{lo:.2f}-{hi:.2f} TB/s per H200 in the 4 GiB sweep",
        fused_reduce,
        "reduce-h200x2/nccl-4GiB/scaling.json (every run's per-rank compute rate)",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "ran its compute + comm at {ratio:.3f}x the same calls written by hand",
        plugin_overhead,
        "plugins-h100x1: plugin-sum-*/report.json, inline-sum-*.json (medians of 3 runs)",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "compute + comm took {a:.3f} ms against {b:.3f} ms by hand ({ratio:.3f}x",
        plugin_overhead,
        "plugins-h100x1 (medians of 3 runs)",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "its whole repeat {ta:.1f} against {tb:.1f} ms ({tratio:.3f}x",
        plugin_overhead,
        "plugins-h100x1 (medians of 3 runs)",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "**compute + comm** | **{a:.3f} (",
        plugin_overhead,
        "plugins-h100x1 (medians of 3 runs)",
    ),
    *(
        Claim(
            "docs/benchmarks-earlier.md",
            "{ms:.3f} ({lo:.3f}-{hi:.3f}) | {gbps:.1f} | {share:.1%}",
            plugin_example(name),
            f"plugins-h100x1/{name}-*/report.json, hbm_ceiling.json (medians of 3 runs)",
        )
        for name in ("histogram", "kmeans", "pca")
    ),
]


TRAIN_H100 = "train-h100x1 (bench/train_one_gpu.sh: spmd 3 runs, PyTorch setups 3 timed runs each)"
CLAIMS += [
    Claim(
        "docs/benchmarks-earlier.md",
        "On one H100 it trains the study's two MLPs at {lo:.2f}x-{hi:.2f}x the samples/s of the strongest "
        "PyTorch setup",
        train_one_gpu,
        TRAIN_H100,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "with TF32 on both sides {lo:.2f}x-{hi:.2f}x",
        lambda: train_one_gpu("tf32"),
        TRAIN_H100,
    ),
    Claim("docs/benchmarks-earlier.md", "with bf16 {lo:.2f}x-{hi:.2f}x", lambda: train_one_gpu("bf16"), TRAIN_H100),
    *(
        Claim("docs/benchmarks-earlier.md", row.replace("{", "{{").replace("}", "}}"), dict, TRAIN_H100)
        for row in train_one_gpu_rows()
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "**met by the medians at every batch**, {lo:.2f}x-{hi:.2f}x of the strongest setup ({strongest} everywhere)",
        train_one_gpu,
        TRAIN_H100,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "every other row's slowest spmd run is at least {worst:.2f}x the strongest's fastest",
        lambda: train_one_gpu_except("float32", "large", 512),
        TRAIN_H100,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "PyTorch's graphed step ran at {rate:,.0f} samples/s there",
        lambda: {"rate": train_row("float32", "large", 512)["strongest_rate"]},
        TRAIN_H100,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "before them spmd's runs spread {before_lo:,.0f}-{before_hi:,.0f} while PyTorch held "
        "{before_tlo:,.0f}-{before_thi:,.0f}; after them {after_lo:,.0f}-{after_hi:,.0f} against {after_tlo:,.0f}-"
        "{after_thi:,.0f}, {after_margin:.2f}x (slowest against fastest {after_worst:.2f}x)",
        train_recheck,
        "train-h100x1/recheck/*.jsonl",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "With TF32 on both sides {lo:.2f}x-{hi:.2f}x",
        lambda: train_one_gpu("tf32"),
        TRAIN_H100,
    ),
    Claim("docs/benchmarks-earlier.md", "with bf16 {lo:.2f}x-{hi:.2f}x", lambda: train_one_gpu("bf16"), TRAIN_H100),
    Claim(
        "docs/benchmarks-earlier.md",
        "measured {lo:.1e} to {hi:.1e} over the {n} bf16 runs",
        bf16_gradient_errors,
        TRAIN_H100,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "`dW+db` of layers 0 and 3 take {l0:.1f} and {l3:.1f} us where the fused ones of layers 1 "
        "and 2 take {lo:.1f}-{hi:.1f} us",
        bf16_fallback,
        "train-h100x1/train-ops-bf16.jsonl",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "forward took {fwd16:.0f} us at batch 16 against {fwd32:.0f} us at 32",
        train_diagnosis,
        "train-h100x1/before/train-spmd.jsonl",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "that took {l1_16:.1f} us per call in a CUDA graph, against {l1_32:.1f} us at batch 32",
        train_diagnosis,
        "train-h100x1/before/train-ops.jsonl",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "That layer now takes {now_l1:.2f} us; the whole `medium` step at batch 16 {step16:.1f} us "
        "against {step16_before:.1f} us",
        train_diagnosis,
        "train-h100x1/train-ops-run*.jsonl, before/train-ops.jsonl",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "the rate at batch 16 {a16:,.0f} samples/s against {b16:,.0f}; `large` at batch 8 {a8:,.0f} against {b8:,.0f}",
        train_diagnosis,
        "train-h100x1 summary, before/train-spmd.jsonl",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "takes {sgd:.1f} us = {sgd_tbps:.2f} TB/s read and written, {sgd_copy:.0%} of a device copy "
        "on this machine kind ({copy:.2f} TB/s",
        large_step_bounds,
        "train-h100x1/train-ops-run*.jsonl, plugins-h100x1/hbm_ceiling.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "a fifth of the {large_step:.0f} us step; the first layer's 8 x 4812 x 1024 GEMM takes "
        "{l0:.1f} us, {l0_tbps:.2f} TB/s",
        large_step_bounds,
        "train-h100x1/train-ops-run*.jsonl",
    ),
    Claim("docs/benchmarks-earlier.md", "all {n} runs exit 3 with no report", corrupt_gpu, "corrupt-h100x1/corrupt.md"),
    Claim(
        "docs/benchmarks-earlier.md",
        "| fused kernel alone (`bench/stencil_kernel.py`), 32 x 4 threads x 4 rows | {ms:.3f} | "
        "{tb:.2f} | **{share:.1%}** | {vs_copy:.1%} |",
        stencil_kernel,
        "workloads-h200x2/stencil_kernel.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "| CuPy slicing, one kernel per tap and sum (`bench/stencil_kernel.py`) | {sliced_ms:.2f} | "
        "{sliced:.2f} | {sliced_share:.1%} |",
        stencil_kernel,
        "workloads-h200x2/stencil_kernel.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "ceilings measured beside it by the same script: HBM read {ceiling:.2f} TB/s, device copy {copy:.2f} TB/s",
        stencil_kernel,
        "workloads-h200x2/stencil_kernel.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "within {big:.1%} from 256 MiB on; at 1 MiB they are {lo:.0%}-{hi:.0%} apart",
        machines_apart,
        "multi-h200x4/allreduce-nccl-{2,4}.json, multi-h200x8/allreduce-nccl-{2,4}.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "took {med:.1f} us (median; {lo:.1f}-{hi:.1f} us), this call {this:.1f} us",
        allreduce_8b,
        "comm-h200x2/spmd-allreduce-nccl.txt, multi-h200x{4,8}/allreduce-nccl-2.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "float32 every_element {f32:.2f} s ({f32lo:.2f}-{f32hi:.2f}) against the GEMM's "
        "{g32:.1f} ms; float64 {f64:.2f} s ({f64lo:.2f}-{f64hi:.2f}) against {g64:.1f} ms",
        verify_full_cost,
        "corrupt-h100x1/verify-full-*.json",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "float32 n = 8192: {c8192:.1f} ms ({lo8192:.1f}-{hi8192:.1f}) against the GEMM's "
        "{g8192:.1f} ms; n = 16384: {c16384:.1f} ms ({lo16384:.1f}-{hi16384:.1f}) against {g16384:.1f} ms",
        grouped_check_cost,
        "verify-h100x1/verify_cost-run*.json (bench/verify_cost.py)",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "the run's timed read of A alone is {r32:.2f} s",
        verify_full_cost,
        "corrupt-h100x1/verify-full-float32-*.json",
    ),
]


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text)


# -- issue 24 (one H200) and issue 26 (two H200s), 2026-11-23 -------------------------------------------

IO_H200 = "io-h200x2 (bench/io_gpu.sh: bench io 3 runs x 5 rounds per layout, reduce 3 runs per engine)"
IO_WAYS = [
    ("h5py (one hyperslab read into the page-locked buffer)", "h5py"),
    ("direct, to host memory ({threads} threads)", "direct"),
    ("one plain pread", "pread1"),
    ("pread, {threads} threads, 8 MiB pieces (limit)", "pread"),
    ("host to device from page-locked memory (limit)", "pinned"),
    ("host to device from pageable memory", "pageable"),
]


def io_way_row(label: str, key: str) -> Callable[[], dict]:
    def values() -> dict:
        c, k = io_gpu("contiguous"), io_gpu("chunked")
        return {"c": c[key], "k": k[key], "threads": c["threads"]}

    return values


def io_both() -> dict:
    c, k = io_gpu("contiguous"), io_gpu("chunked")
    return {**c, **{f"k_{key}": value for key, value in k.items()}}


def train_two_rows(folder: str = f"{TWO}/train") -> list[str]:
    rows = [r for r in against_torch(RESULTS / folder) if r["precision"] == "float32"]
    names = sorted({n for r in rows for n in r["torch"]})
    return [one_gpu_row(r, names) for r in rows]


def speedup_rows(folder: str = f"{TWO}/train") -> list[str]:
    return [
        f"| {u['model']} | {u['batch']} | {u['speedup']:.2f}x ({u['min']:.2f}-{u['max']:.2f}) | {u['torch_speedup']:.2f}x |"
        for u in speedups(RESULTS / folder)
    ]


def io_two_row(workload: str, mode: str, engine: str) -> Callable[[], dict]:
    def values() -> dict:
        a, b = io_two(workload, engine, mode, 1), io_two(workload, engine, mode, 2)
        return {"a": a["ms"], "b": b["ms"], "eff": b["eff"], "ra": a["read"], "rb": b["read"]}

    return values


def reduce_two() -> dict:
    w, h, one = (
        io_two("reduce", "direct", "weak", 2),
        io_two("reduce", "h5py", "weak", 2),
        io_two("reduce", "direct", "weak", 1),
    )
    p1, p2 = bench_io_two(1, "pread, 8 threads"), bench_io_two(2, "pread, 8 threads")
    d1, d2 = bench_io_two(1, "direct"), bench_io_two(2, "direct")
    return {
        "eff": w["eff"],
        "h_eff": h["eff"],
        "times": h["ms"] / w["ms"],
        "h_ms": h["ms"],
        "ms": w["ms"],
        "p1": p1["slowest"],
        "p2": p2["slowest"],
        "p2_all": p2["together"],
        "d1": d1["slowest"],
        "d2": d2["slowest"],
        "d2_all": d2["together"],
        "limit_eff": p2["together"] / 2 / p1["slowest"],
        "r1": one["rate"],
        "r2": w["rate"],
        "l1": one["limit"],
        "l2": w["limit"],
    }


def one_gpu_io_gain() -> dict:
    return {f"{w}_{e}": io_two(w, e, "strong", 1)["ms"] for w in ("matmul", "stencil") for e in ("h5py", "direct")}


TWO_SRC = f"{TWO} (bench/train_two_gpu.sh, bench/multi_gpu.sh parts io, plugins, corrupt)"
CLAIMS += [
    Claim(
        "docs/benchmarks-earlier.md",
        "**File to GPU: {vs_today:.2f}x today's path on the contiguous file** ({k_vs_today:.2f}x "
        "chunked; target 3x) **and {vs_limit:.0%} of the smaller limit** measured in the same run ({k_vs_limit:.0%} chunked;",
        io_both,
        IO_H200,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "| **file to GPU, direct, each piece copied as it lands** | **{gpu:.2f}** ({gpu_lo:.2f}-"
        "{gpu_hi:.2f}) | **{k_gpu:.2f}** ({k_gpu_lo:.2f}-{k_gpu_hi:.2f}) |",
        io_both,
        IO_H200,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "the page-locked copy, faster than the pageable one the old path made) | {today:.2f} | {k_today:.2f} |",
        io_both,
        IO_H200,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "| file to GPU, KvikIO (its default pool: 1 thread) | {kvikio:.2f} | {k_kvikio:.2f} |",
        io_both,
        IO_H200,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "KvikIO read at {kvikio:.2f} GB/s because its thread pool defaults to one thread",
        io_both,
        IO_H200,
    ),
    *(
        Claim("docs/benchmarks-earlier.md", "| " + label + " | {c:.2f} | {k:.2f} |", io_way_row(label, key), IO_H200)
        for label, key in IO_WAYS
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "**`reduce`'s whole repeat at 4 GiB: {h5py:.1f} ms ({h5py_lo:.1f}-{h5py_hi:.1f}) with h5py, "
        "{direct:.1f} ms ({direct_lo:.1f}-{direct_hi:.1f}) with direct, {speedup:.2f}x** (target 3x)",
        io_reduce,
        IO_H200,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "{h5py_read:.1f} ms read and a {h5py_h2d:.1f} ms copy after it; with direct the read takes "
        "{direct_read:.1f} ms and {hidden:.1f} ms of copies ran inside it, leaving {exposed:.3f} ms exposed",
        io_reduce,
        IO_H200,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "file to GPU at {vs_today:.2f}x the old path's rate on one H200 ({vs_limit:.0%} of the 8-thread "
        "pread limit measured beside it), `reduce`'s whole 4 GiB repeat {speedup:.2f}x faster",
        lambda: {**io_gpu("contiguous"), **io_reduce()},
        IO_H200,
    ),
    *(
        Claim("docs/benchmarks-earlier.md", row.replace("{", "{{").replace("}", "}}"), dict, TWO_SRC)
        for row in train_two_rows()
    ),
    *(
        Claim("docs/benchmarks-earlier.md", row.replace("{", "{{").replace("}", "}}"), dict, TWO_SRC)
        for row in speedup_rows()
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "**spmd against the strongest PyTorch setup on 2 GPUs: {lo:.2f}x-{hi:.2f}x** (the DDP "
        "whole-step CUDA graph at every batch; target 1.2x, met at every batch; spmd's slowest run at least {worst:.2f}x "
        "the strongest's fastest)",
        lambda: train_two(2),
        TWO_SRC,
    ),
    Claim("docs/benchmarks-earlier.md", "On one H200: {lo:.2f}x-{hi:.2f}x.", lambda: train_two(1), TWO_SRC),
    Claim(
        "docs/benchmarks-earlier.md",
        "**`large` at batch 512: {spmd:.2f}x ({lo:.2f}-{hi:.2f}) on 2 GPUs, under the 1.7x target**; "
        "PyTorch's strongest setup {torch:.2f}x in the same call",
        lambda: train_two_speedup("large", 512),
        TWO_SRC,
    ),
    *(
        Claim(
            "docs/benchmarks-earlier.md",
            f"| {w} | {m} | {e} | " + "{a:.1f} | {b:.1f} | {eff:.1%} | {ra:.1f} / {rb:.1f} |",
            io_two_row(w, m, e),
            TWO_SRC,
        )
        for w in ("reduce", "matmul", "stencil")
        for m in ("strong", "weak")
        for e in ("direct", "h5py")
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "**`reduce`'s whole-repeat weak efficiency at 2 GPUs: {eff:.1%} with the direct engine, "
        "under the 95% target** ({h_eff:.1%} with h5py, whose repeat is {times:.1f}x longer: {h_ms:.1f} against {ms:.1f} ms)",
        reduce_two,
        TWO_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "8-thread pread limit at {p1:.1f} GB/s for one rank alone and {p2:.1f} GB/s per rank with "
        "two reading at once ({p2_all:.1f} GB/s together); the direct engine {d1:.1f} and {d2:.1f} GB/s ({d2_all:.1f} "
        "together)",
        reduce_two,
        TWO_SRC,
    ),
    Claim("docs/benchmarks-earlier.md", "limit's own weak efficiency is {limit_eff:.0%}", reduce_two, TWO_SRC),
    Claim(
        "docs/benchmarks-earlier.md",
        "Weak `reduce` read {r1:.1f} GB/s per rank at 1 GPU and {r2:.1f} at 2, against {l1:.1f} "
        "and {l2:.1f} GB/s of preads",
        reduce_two,
        TWO_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "whole repeats at one GPU fell from {matmul_h5py:.1f} to {matmul_direct:.1f} ms and from "
        "{stencil_h5py:.1f} to {stencil_direct:.1f} ms",
        one_gpu_io_gain,
        TWO_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "`reduce`'s weak efficiency at 2 GPUs is {eff:.0%} (h5py: {h_eff:.0%}, at {times:.1f}x the time), "
        "and the pread limit itself only keeps {limit_eff:.0%}",
        reduce_two,
        TWO_SRC,
    ),
    *(
        Claim(
            "docs/benchmarks-earlier.md",
            f"| {x} | {m} | " + "{one:.2f} | {two:.2f} | {eff:.1%} | {read1:.2f} / {read2:.2f} |",
            (lambda x=x, m=m: plugins_two(x, m)),
            TWO_SRC,
        )
        for x in ("histogram", "kmeans", "pca")
        for m in ("strong", "weak")
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "compute + comm {a:.3f} ms against {b:.3f} ms by hand ({ratio:.3f}x; compute alone {ca:.3f} "
        "against {cb:.3f} ms), while the whole repeat took {ta:.1f} against {tb:.1f} ms ({tratio:.3f}x",
        lambda: plugin_overhead(f"{TWO}/plugins"),
        TWO_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "compute phase took {h5py_c:.3f} ms with `io.engine: h5py` (the kernel queued behind the "
        "copy) and {direct_c:.3f} ms with direct",
        io_reduce,
        IO_H200,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "The plug-in's remaining {extra:.2f} ms over the hand-written calls",
        lambda: plugin_overhead(f"{TWO}/plugins"),
        TWO_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "on 2 H200s, after the new input engine, at {ratio:.3f}x ({extra:.2f} ms more per repeat",
        lambda: plugin_overhead(f"{TWO}/plugins"),
        TWO_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "2 seeds: **all {n} runs exit 3 with no report**",
        lambda: corrupt_gpu(f"{TWO}/corrupt/corrupt.md"),
        TWO_SRC,
    ),
]


# -- issue 26 continued: the mapped engine and large-512 on 2 x H200, 2026-11-23 ---------------------------------

MAPPED_WAYS = [
    ("direct (pread into page-locked memory)", "direct"),
    ("pread, 8 threads", "pread, 8 threads"),
    ("file to GPU, direct (copies as pieces land)", "file to GPU (direct, copies as pieces land)"),
    ("host to device, page-locked", "host to device, page-locked"),
    ("**file to GPU, mapped (locked at set-up)**", "file to GPU (mapped, locked at set-up)"),
    ("file to GPU, mapped: lock + copy + unlock in each read", "file to GPU (mapped, lock + copy + unlock)"),
    ("file to GPU, KvikIO (its pool set to io.threads)", "file to GPU (kvikio)"),
]
LARGE512 = [
    (1, "default"),
    (1, "split"),
    (1, "simple-channels32"),
    (3, "default"),
    (3, "perbucket"),
    (3, "perbucket-split"),
]


def mapped_weak() -> dict:
    w, one, d = mapped_io("mapped", "weak", 2), mapped_io("mapped", "weak", 1), mapped_io("direct", "weak", 2)
    d3 = mapped_io("direct", "weak", 2, "io-before-barrier")
    return {
        "eff": w["eff"],
        "lo": w["eff_lo"],
        "hi": w["eff_hi"],
        "ms": w["ms"],
        "one": one["ms"],
        "d": d["eff"],
        "d3": d3["eff"],
        "d3_lo": d3["eff_lo"],
        "d3_hi": d3["eff_hi"],
        "times": d["ms"] / w["ms"],
    }


def gpu_tests() -> dict:
    counts = [int(n) for n in re.findall(r"(\d+) passed", (RESULTS / MAPPED / "tests-mpi-gpu-2ranks.txt").read_text())]
    io = re.search(r"(\d+) passed", (RESULTS / MAPPED / "io" / "tests-io.log").read_text())
    if (
        len(counts) != 2
        or len(set(counts)) != 1
        or "failed" in (RESULTS / MAPPED / "tests-mpi-gpu-2ranks.txt").read_text()
    ):
        raise ValueError(f"{MAPPED}: the MPI GPU tests did not pass alike on both ranks")
    return {"mpi": counts[0], "io": int(io.group(1))}


CLAIMS += [
    Claim(
        "docs/benchmarks-earlier.md",
        "| lock 4 GiB (s) | {1_whole_register_median_s:.3f} | {2_whole_register_median_s:.3f} |",
        mapped_h2d,
        MAPPED_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "| copy 4 GiB to the GPU (GB/s) | {1_whole_copy_gbps_per_rank:.2f} | {2_whole_copy_gbps_per_rank:.2f} |",
        mapped_h2d,
        MAPPED_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "| unlock (s) | {1_whole_unregister_median_s:.3f} | {2_whole_unregister_median_s:.3f} |",
        mapped_h2d,
        MAPPED_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "| 8 threads of pread into page-locked memory, then one copy (GB/s) | "
        "{1_pread_gbps_per_rank:.2f} | {2_pread_gbps_per_rank:.2f} |",
        mapped_h2d,
        MAPPED_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "| the same file in 128 MiB pieces: lock, copy, unlock on 8 threads (GB/s) | "
        "{1_pieces128_gbps_per_rank:.2f} | {2_pieces128_gbps_per_rank:.2f} |",
        mapped_h2d,
        MAPPED_SRC,
    ),
    *(
        Claim(
            "docs/benchmarks-earlier.md",
            f"| {e} | {m} | " + "{runs} | {a:.1f} ({a_lo:.1f}-{a_hi:.1f}) | {b:.1f} ({b_lo:.1f}-"
            "{b_hi:.1f}) | {eff:.1%} ({eff_lo:.1%}-{eff_hi:.1%}) | {ra:.1f} / {rb:.1f} |",
            mapped_io_row(e, m),
            MAPPED_SRC,
        )
        for e in ("mapped", "direct")
        for m in ("strong", "weak")
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "**`reduce`'s whole-repeat weak efficiency at 2 GPUs: {eff:.1%} ({lo:.1%}-{hi:.1%}) with "
        "the mapped engine** (target 95%: met), 3 runs; the repeat {ms:.1f} ms at 2 GPUs against {one:.1f} at 1. The "
        "direct engine in the same call: {d:.1%} (one run; its 3 runs of the second call {d3:.1%}, {d3_lo:.1%}-"
        "{d3_hi:.1%}), at {times:.1f}x the mapped repeat.",
        mapped_weak,
        MAPPED_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "got {eff:.1%} ({eff_lo:.1%}-{eff_hi:.1%}) for mapped weak at 2 GPUs: one rank's `wait` (the "
        "barrier after the read) reached {wait:.1f} ms",
        mapped_before_barrier,
        MAPPED_SRC,
    ),
    *(
        Claim(
            "docs/benchmarks-earlier.md",
            f"| {label} | " + "{one:.2f} | {two:.2f} | {all:.2f} |",
            mapped_bench_row(way),
            MAPPED_SRC,
        )
        for label, way in MAPPED_WAYS
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "KvikIO, {slowest:.2f} GB/s in the last session with its pool's default single thread",
        lambda: bench_io_two(1, "file to GPU (kvikio)"),
        TWO_SRC,
    ),
    Claim("docs/benchmarks-earlier.md", "`tests/gpu/test_io_gpu.py` {io} passed", gpu_tests, MAPPED_SRC),
    Claim(
        "docs/benchmarks-earlier.md",
        "after every change of this session: {mpi} passed on each rank",
        gpu_tests,
        MAPPED_SRC,
    ),
    *(
        Claim(
            "docs/benchmarks-earlier.md",
            f"| {call} | {setting} | " + "{speedup:.3f}x ({min:.3f}-{max:.3f}) | {step2_us:.1f} | "
            "{backward_us:.1f} | {comm_us:.1f} | {optimizer_us:.1f} |",
            large512_row(call, setting),
            MAPPED_SRC,
        )
        for call, setting in LARGE512
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "**None reaches 1.7x: the target stays missed at {speedup:.2f}x.** Each overlap costs about "
        "what it hides: splitting cut the exposed all-reduce by {split_hid:.1f} us and made backward {split_cost:.1f} us "
        "longer",
        large512_effects,
        MAPPED_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "updating early cut the optimizer phase by {early_hid:.1f} us and lengthened the exposed "
        "all-reduce by {early_cost:.1f} us",
        large512_effects,
        MAPPED_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "What is left is the {mb:.1f} MB all-reduce of layer 0's gradient, which backward can start "
        "only at its end: {exposed:.1f} us exposed, {busbw:.1f} GB/s of bus bandwidth. Alone on this machine, NCCL "
        "all-reduces 16 MiB in {t16:.2f} us and 32 MiB in {t32:.2f} us",
        large512_effects,
        MAPPED_SRC + ", comm-h200x2",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "1.7x needs a 2-GPU step of at most {need:.1f} us ({one:.1f} us on one GPU), {short:.1f} us less than today's",
        large512_effects,
        MAPPED_SRC,
    ),
    Claim("docs/benchmarks-earlier.md", "the first, {overlapped:.1f} us beside backward", large512_effects, MAPPED_SRC),
    Claim(
        "docs/benchmarks-earlier.md",
        "page cache, {one:.2f} GB/s on one GPU and {two:.2f} per GPU with two, so `reduce`'s weak efficiency "
        "at 2 GPUs is {eff:.1%}",
        lambda: {**mapped_bench_row("file to GPU (mapped, locked at set-up)")(), "eff": mapped_weak()["eff"]},
        MAPPED_SRC,
    ),
]


# -- issue 26, third session: backward order, L2 window, NCCL graph mixing, 2 x H200, 2026-11-24 --------------------

ORDER = "order-h200x2"
ORDER_SRC = (
    f"{ORDER} (bench/train_nccl_env.sh 3 runs per setting in each of calls 2-5; bench/backward_order.py; "
    f"bench/train_two_gpu.sh)"
)
ORDER_CALLS = {2: "call2-inputs-first", 3: "call3-window", 4: "call4-split", 5: "call5-nomix"}
ORDER_ROWS = [
    (2, "default"),
    (2, "inputsfirst"),
    (2, "inputsfirst-perbucket"),
    (3, "default"),
    (3, "inputsfirst"),
    (3, "inputsfirst-perbucket"),
    (4, "inputsfirst-split"),
    (4, "inputsfirst-split-perbucket"),
    (5, "default"),
    (5, "nomix"),
    (5, "inputsfirst-perbucket"),
    (5, "inputsfirst-perbucket-nomix"),
]


def order_setting(call: int, setting: str) -> dict:
    """One setting of one call (us), with its speedup against the default order's 1-GPU step of the same call
    (``strict``: the fastest one-GPU setting there, so an order that slows one GPU gains nothing from it)."""
    rows = {r["setting"]: r for r in settings(RESULTS / ORDER / ORDER_CALLS[call])}
    r, d = rows[setting], rows["default"]
    if r["runs"] < 3 or d["runs"] < 3:
        raise ValueError(f"{ORDER}/{ORDER_CALLS[call]}: {setting} or default has fewer than 3 runs")
    out = {k.replace("_ms", "_us"): (v * 1e3 if k.endswith("_ms") else v) for k, v in r.items()}
    return {**out, "strict": 2 * d["step1_ms"] / r["step2_ms"], "default1_us": d["step1_ms"] * 1e3}


def order_row(call: int, setting: str) -> Callable[[], dict]:
    return lambda: order_setting(call, setting)


def order_timeline() -> dict:
    """Call 1's timeline of the default step (one run: where the two all-reduces sit, us from the step's start)."""
    r = next(r for r in jsonl(f"{ORDER}/call1-timeline/default-run1.jsonl") if r["gpus"] == 2)
    (a0, a1), (b0, b1) = r["timeline_us"]["allreduce"]
    return {"first_end": a1, "last_start": b0, "last_end": b1, "b0": r["timeline_us"]["marks"]["b0"], "last": b1 - b0}


def backward_ops() -> dict:
    """bench/backward_order.py at batch 512 (medians of 40 replays): each order's backward and the weight
    gradients of layers 1-3 (us)."""
    rows = jsonl(f"{ORDER}/backward-order/bo-512.jsonl")
    out = {}
    for order in ("layers", "inputs_first", "layers_flushed", "inputs_first_persist"):
        ops = [r for r in rows if r.get("order") == order and "op" in r]
        total = next(r for r in rows if r.get("order") == order and "backward_us" in r)
        grads = {r["op"].split(" ", 2)[2]: r["us"] for r in ops if "weight_gradient" in r["op"]}
        key = order.replace("inputs_first", "if")
        out[f"{key}_bw"] = total["backward_us"]
        out[f"{key}_l123"] = sum(
            grads[shape] for shape in ("(512, 1024)x(512, 1024)", "(512, 512)x(512, 1024)", "(512, 512)x(512, 512)")
        )
    return out


def order_tests() -> dict:
    def counts(name):
        text = (RESULTS / ORDER / name).read_text()
        found = [int(n) for n in re.findall(r"(\d+) passed", text)]
        if not found or "failed" in text:
            raise ValueError(f"{ORDER}/{name}: not every test passed")
        return found

    mpi, mpi_final = counts("tests-mpi-gpu-2ranks-call1.txt"), counts("tests-mpi-train-gpu-2ranks-final.txt")
    if len(set(mpi)) != 1 or len(set(mpi_final)) != 1:
        raise ValueError(f"{ORDER}: the ranks' MPI test counts differ")
    return {
        "gpu": counts("tests-gpu-call1.txt")[0],
        "mpi": mpi[0],
        "gpu_train": counts("tests-gpu-train-final.txt")[0],
        "mpi_train": mpi_final[0],
    }


def order_costs() -> dict:
    """What the new order cost one GPU without the window (call 2), what graph mixing cost the default step (call 5),
    what splitting layer 0 added to backward (call 4), the window's bytes (call 3), the one-GPU step of the table
    call, and the persisting-L2 limits read on the device (limit.txt), in MiB."""
    c2, c4, c5 = (
        (lambda c: {r["setting"]: r for r in settings(RESULTS / ORDER / ORDER_CALLS[c])})(2),
        {r["setting"]: r for r in settings(RESULTS / ORDER / ORDER_CALLS[4])},
        {r["setting"]: r for r in settings(RESULTS / ORDER / ORDER_CALLS[5])},
    )
    window = {
        json.dumps(r["l2_window"])
        for path in (RESULTS / ORDER / "call3-window").glob("inputsfirst-run*.jsonl")
        for r in jsonl(str(path.relative_to(RESULTS)))
    }
    if len(window) != 1:
        raise ValueError(f"{ORDER}/call3-window: the runs' L2 windows differ")
    one = statistics.median(
        r["step_ms"]
        for n in (1, 2, 3)
        for r in jsonl(f"{ORDER}/train/train-spmd-run{n}.jsonl")
        if (r["model"], r["batch"], r["gpus"]) == ("large", 512, 1)
    )
    limit = (RESULTS / ORDER / "call4-split" / "limit.txt").read_text()
    start = int(re.search(r"limit at start (\d+)", limit).group(1))
    steps = [int(n) for n in re.findall(r"get (\d+)", limit)]
    most, l2 = (int(n) for n in re.search(r"max persisting (\d+) max window \d+ L2 (\d+)", limit).groups())
    return {
        "order_1gpu": (c2["inputsfirst"]["step1_ms"] - c2["default"]["step1_ms"]) * 1e3,
        "mixing": (c5["default"]["step2_ms"] - c5["nomix"]["step2_ms"]) * 1e3,
        "split": (c4["inputsfirst-split-perbucket"]["backward_ms"] - c4["inputsfirst-perbucket"]["backward_ms"]) * 1e3,
        "arena": json.loads(window.pop())["bytes"] / 1e6,
        "one": one * 1e3,
        "start": start / 2**20,
        "step": steps[0] / 2**20,
        "most": most / 2**20,
        "l2": l2 / 2**20,
    }


CLAIMS += [
    Claim("docs/benchmarks-earlier.md", "it cost one GPU {order_1gpu:.1f} us a step", order_costs, ORDER_SRC),
    Claim("docs/benchmarks-earlier.md", "it cost every captured step's replay {mixing:.1f} us", order_costs, ORDER_SRC),
    Claim(
        "docs/benchmarks-earlier.md",
        "span, on 2 GPUs only: {mixing:.1f} us of the default step",
        order_costs,
        ORDER_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "made backward {split:.1f} us longer than inputsfirst-perbucket's",
        order_costs,
        ORDER_SRC,
    ),
    Claim("docs/benchmarks-earlier.md", "(`Network.arena`, {arena:.1f} MB for `large` at 512)", order_costs, ORDER_SRC),
    Claim("docs/benchmarks-earlier.md", "where the one-GPU step was {one:.1f} us", order_costs, ORDER_SRC),
    Claim(
        "docs/benchmarks-earlier.md",
        "The persisting L2 carve-out of a fresh process on this machine is {start:.2f} MiB (set in "
        "steps of {step:.2f} MiB, at most {most:.1f} MiB of the {l2:.0f} MiB L2",
        order_costs,
        ORDER_SRC,
    ),
    *(
        Claim(
            "docs/benchmarks-earlier.md",
            f"| {call} | {setting} | " + "{speedup:.3f}x ({min:.3f}-{max:.3f}) | {strict:.3f}x | "
            "{step1_us:.1f} | {step2_us:.1f} | {backward_us:.1f} | {comm_us:.1f} | {optimizer_us:.1f} |",
            order_row(call, setting),
            ORDER_SRC,
        )
        for call, setting in ORDER_ROWS
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "the first all-reduce (7.9 MB, layers 1-5) ended at {first_end:.1f} us, before layer 0's "
        "started at {last_start:.1f} us",
        order_timeline,
        f"{ORDER}/call1-timeline (one run)",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "layer 0's took {last:.1f} us on its own",
        order_timeline,
        f"{ORDER}/call1-timeline (one run)",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "backward took {layers_bw:.1f} us in the default order and {if_bw:.1f} us inputs-first; the "
        "weight gradients of layers 1-3 {layers_l123:.1f} against {if_l123:.1f} us. With L2 overwritten before every "
        "weight gradient, the default order's took {layers_flushed_l123:.1f} us; inputs-first with the window, "
        "{if_persist_l123:.1f} us (backward {if_persist_bw:.1f} us)",
        backward_ops,
        f"{ORDER}/backward-order/bo-512.jsonl",
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "**`large` at batch 512, 2 GPUs: {speedup:.3f}x ({min:.3f}-{max:.3f}) with the defaults, "
        "{strict:.3f}x against the fastest one-GPU step of the call**",
        order_row(5, "nomix"),
        ORDER_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "with `backward_order: inputs_first` and `update_per_bucket`, {speedup:.3f}x "
        "({min:.3f}-{max:.3f}), {strict:.3f}x against the default order's one-GPU step",
        order_row(5, "inputsfirst-perbucket-nomix"),
        ORDER_SRC,
    ),
    *(
        Claim("docs/benchmarks-earlier.md", row.replace("{", "{{").replace("}", "}}"), dict, ORDER_SRC)
        for row in train_two_rows(f"{ORDER}/train") + speedup_rows(f"{ORDER}/train")
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "**spmd against the strongest PyTorch setup on 2 GPUs: {lo:.2f}x-{hi:.2f}x** (DDP with "
        "the whole step in a CUDA graph at every batch; target 1.2x: met; spmd's slowest run at least {worst:.2f}x the "
        "strongest's fastest)",
        lambda: train_two(2, f"{ORDER}/train"),
        ORDER_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md", "one H200: {lo:.2f}x-{hi:.2f}x", lambda: train_two(1, f"{ORDER}/train"), ORDER_SRC
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "**`large` at batch 512 in this call: {spmd:.3f}x ({lo:.3f}-{hi:.3f})**, PyTorch's strongest {torch:.3f}x",
        lambda: train_two_speedup("large", 512, f"{ORDER}/train"),
        ORDER_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "On 2 x H200 against PyTorch's strongest setup under DDP (the whole step in a CUDA graph), {lo:.2f}x-{hi:.2f}x",
        lambda: train_two(2, f"{ORDER}/train"),
        ORDER_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "a 2-GPU speedup of {spmd:.2f}x for `large` at batch 512 (PyTorch's strongest {torch:.2f}x in the same call",
        lambda: train_two_speedup("large", 512, f"{ORDER}/train"),
        ORDER_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "`backward_order: inputs_first` with `update_per_bucket` {speedup:.2f}x",
        order_row(5, "inputsfirst-perbucket-nomix"),
        ORDER_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "tests/gpu in full: {gpu} passed; tests/mpi with `--gpu` at 2 ranks: {mpi} passed on each rank",
        order_tests,
        ORDER_SRC,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "`tests/gpu/test_train_gpu.py` {gpu_train} passed and `tests/mpi/test_train.py --gpu` "
        "{mpi_train} passed on each rank",
        order_tests,
        ORDER_SRC,
    ),
]


# -- workload torch (docs/torch.md, README.md) ------------------------------------------------------------

TORCH_H200 = "h200/torch/torch-overhead/torch-overhead-large-b256.json"


def torch_overhead() -> dict:
    """spmd's torch workload against the plain DDP script, per run (interleaved), medians and ranges."""
    runs = load(TORCH_H200)["runs"]

    def ratios(variant: str) -> list[float]:
        return [r[f"spmd_{variant}"]["samples_per_s"] / r["plain_ddp"]["samples_per_s"] for r in runs]

    def rates(key: str) -> list[float]:
        return [r[key]["samples_per_s"] for r in runs]

    on, off = ratios("ddp"), ratios("ddp-no-phases")
    plain, graph, comp = rates("plain_ddp"), rates("spmd_ddp-graph"), rates("spmd_compile")
    return {
        "n": len(runs),
        "on": statistics.median(on),
        "on_lo": min(on),
        "on_hi": max(on),
        "off": statistics.median(off),
        "off_lo": min(off),
        "off_hi": max(off),
        "plain": statistics.median(plain) / 1e3,
        "plain_lo": min(plain) / 1e3,
        "plain_hi": max(plain) / 1e3,
        "graph": statistics.median(graph) / 1e3,
        "graph_x": statistics.median(g / p for g, p in zip(graph, plain)),
        "compile": statistics.median(comp) / 1e3,
    }


CLAIMS += [
    Claim(
        "docs/benchmarks-earlier.md",
        "spmd's `ddp` ran at {on:.2f}x the plain DDP script (median of {n} runs, range {on_lo:.2f}-{on_hi:.2f}x)",
        torch_overhead,
        TORCH_H200,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "with `phases: false` at {off:.2f}x ({off_lo:.2f}-{off_hi:.2f}x)",
        torch_overhead,
        TORCH_H200,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "the plain script itself ranged {plain_lo:.0f}K-{plain_hi:.0f}K samples/s",
        torch_overhead,
        TORCH_H200,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "`ddp-graph` ran {graph:.0f}K samples/s, {graph_x:.1f}x the plain eager DDP script, and "
        "`compile` {compile:.0f}K",
        torch_overhead,
        TORCH_H200,
    ),
    Claim(
        "docs/benchmarks-earlier.md",
        "`ddp-graph` trains the 6.9M-parameter MLP at {graph_x:.1f}x a plain eager DDP script on one H200",
        torch_overhead,
        TORCH_H200,
    ),
]


def check(claims: list[Claim], show: bool) -> list[str]:
    """The failures: each claim whose document does not hold its fragment as the raw files make it."""
    failures, docs = [], {}
    for claim in claims:
        try:
            expected = claim.text.format(**claim.values())
        except (OSError, KeyError, StopIteration, ValueError) as exc:
            failures.append(
                f"{claim.doc}: {claim.text!r}: its source ({claim.source}) cannot be read: {type(exc).__name__}: {exc}"
            )
            continue
        if claim.doc not in docs:
            docs[claim.doc] = normalise((ROOT / claim.doc).read_text())
        found = normalise(expected) in docs[claim.doc]
        if show:
            print(f"{'ok  ' if found else 'DIFF'} {claim.doc}: {expected}   [{claim.source}]")
        if not found:
            failures.append(f"{claim.doc} should say {expected!r} (from {claim.source})")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every claim with its value and source")
    args = parser.parse_args()
    failures = check(CLAIMS, args.list)
    for line in failures:
        print(f"claims: {line}", file=sys.stderr)
    print(f"claims: {len(CLAIMS) - len(failures)} of {len(CLAIMS)} figures match their raw files")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
