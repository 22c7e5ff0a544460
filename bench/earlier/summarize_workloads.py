"""Markdown summary of bench/workloads_gpu.sh's output folder: each figure beside its ceiling."""

import json
import statistics
import sys
from pathlib import Path


def load(path):
    p = Path(path)
    return json.loads(p.read_text()) if p.exists() else None


def after_read(report) -> float:
    """Median over repeats of the slowest rank's total minus its read and wait (the file
    system is not what these workloads measure; the h2d copy, compute and comm are)."""
    per_rank = [r["repeats"] for r in report["per_rank"]]
    return statistics.median(
        max(rep[i]["total"] - rep[i].get("read", 0) - rep[i].get("wait", 0) for rep in per_rank)
        for i in range(len(per_rank[0]))
    )


def runs(scaling, mode):
    return {
        row["ranks"]: run["report"]
        for row in scaling["series"][mode]
        for run in scaling["runs"]
        if run["mode"] == mode and run["ranks"] == row["ranks"]
    }


def main(folder):
    d = Path(folder)
    lines = []
    gemm = load(d / "gemm_ceiling.json") or {}
    kern = load(d / "stencil_kernel.json") or {}
    lines += ["## GEMM ceilings (CuPy/cuBLAS, same GPU, same call)", ""]
    lines += [f"- {k}: {v:.1f} TFLOP/s" for k, v in gemm.items()]
    for name in ("matmul-allgather", "matmul-read"):
        sc = load(d / name / "scaling.json")
        if not sc:
            continue
        lines += [
            "",
            f"## {name}: 16384^2 float32, gather none",
            "",
            "| GPUs | total s | total-read s | compute s | comm s | h2d s | TFLOP/s per rank | cuBLAS same shape | ratio |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        reps = runs(sc, "strong")
        for n, rep in sorted(reps.items()):
            shape = "16384x16384x16384" if n == 1 else f"{16384 // n}x16384x16384"
            ceiling = gemm.get(f"{shape} float32")
            rate = min(rep["metrics"]["tflops_per_rank"])
            t = rep["timings"]
            lines.append(
                f"| {n} | {sc['series']['strong'][[r['ranks'] for r in sc['series']['strong']].index(n)]['time']:.3f} "
                f"| {after_read(rep):.3f} | {t['compute']['max']:.4f} | {t['comm']['max']:.4f} "
                f"| {t['h2d']['max']:.4f} | {rate:.1f} | {ceiling or float('nan'):.1f} "
                f"| {rate / ceiling if ceiling else float('nan'):.1%} |"
            )
        if 1 in reps and 2 in reps:
            lines.append(
                f"\nstrong speedup 2 vs 1 GPU: total {reps[1]['timings']['total']['max'] / reps[2]['timings']['total']['max']:.2f}x, "
                f"total-read {after_read(reps[1]) / after_read(reps[2]):.2f}x, "
                f"compute {reps[1]['timings']['compute']['max'] / reps[2]['timings']['compute']['max']:.2f}x"
            )
    for name in ("matmul-summa-2x1", "matmul-tf32-allgather"):
        rep = load(d / name / "report.json")
        if rep:
            lines.append(
                f"\n{name}: total {rep['timings']['total']['median']:.3f} s, compute "
                f"{rep['timings']['compute']['max']:.4f} s, comm {rep['timings']['comm']['max']:.4f} s, "
                f"TFLOP/s per rank {rep['metrics']['tflops_per_rank']}, verification {rep['verification']}"
            )
    if kern:
        lines += ["", "## stencil kernel, one H200, 16384^2 float32 5-point step", ""]
        lines += [f"- {k}: {v:.4g}" if isinstance(v, float) else f"- {k}: {v}" for k, v in kern.items()]
    for name in ("stencil-overlap", "stencil-no-overlap"):
        sc = load(d / name / "scaling.json")
        if not sc:
            continue
        reps = runs(sc, "weak")
        lines += [
            "",
            f"## {name}: weak, 16384^2 float32 per GPU, 200 iterations",
            "",
            "| GPUs | total s | total-read s | compute s | comm (exposed) s | comm hidden s | GB/s per rank | vs HBM read |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for n, rep in sorted(reps.items()):
            t = rep["timings"]
            bw = min(rep["metrics"]["effective_GBps_per_rank"])
            lines.append(
                f"| {n} | {t['total']['max']:.3f} | {after_read(rep):.3f} | {t['compute']['max']:.4f} "
                f"| {t['comm']['max']:.4f} | {t.get('comm_overlapped', {}).get('max', 0):.4f} | {bw:.0f} "
                f"| {bw / 1e3 / kern['hbm_read_TBps'] if kern else float('nan'):.1%} |"
            )
        if 1 in reps and 2 in reps:
            it1 = reps[1]["timings"]["compute"]["max"] + reps[1]["timings"]["comm"]["max"]
            it2 = max(r["median"]["compute"] + r["median"]["comm"] for r in reps[2]["per_rank"])
            lines.append(
                f"\nweak efficiency 2 GPUs: total {reps[1]['timings']['total']['max'] / reps[2]['timings']['total']['max']:.1%}, "
                f"total-read {after_read(reps[1]) / after_read(reps[2]):.1%}, "
                f"iterations (compute + exposed comm) {it1 / it2:.1%}"
            )
    rep = load(d / "stencil-xp" / "report.json")
    if rep:
        lines.append(
            f"\nstencil method xp (array slicing), 1 GPU: {rep['metrics']['ms_per_iteration'][0]:.2f} ms per iteration"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
