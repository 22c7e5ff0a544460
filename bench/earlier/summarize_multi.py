"""Markdown summary of bench/multi_gpu.sh's folder: per workload, mode and GPU count, the time,
speedup and efficiency in total and without the file read (total - read - wait), and each
workload's rate beside its ceiling.

    python3 bench/summarize_multi.py DIR [--hbm-TBps 4.49]
"""

import argparse
import json
from pathlib import Path

from summarize_workloads import after_read, load

# the per-rank rate of each workload, and what to hold it against
RATE = {
    "reduce": ("compute_GBps_per_rank", "TB/s", 1e-3, "HBM read"),
    "matmul": ("tflops_per_rank", "TFLOP/s", 1.0, "cuBLAS fp32, local shape"),
    "stencil": ("effective_GBps_per_rank", "TB/s", 1e-3, "HBM read"),
    "train": ("samples_per_s", "samples/s", 1.0, ""),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--hbm-TBps", type=float, default=4.49, help="HBM read ceiling (CuPy sum), TB/s")
    args = parser.parse_args()
    d = Path(args.folder)
    gemm = load(d / "gemm_ceiling.json") or {}  # bench/gemm_ceiling.py, same call
    print(
        "| workload | mode | GPUs | time / repeat | efficiency | total-read-wait | its efficiency | "
        "rate per GPU (min) | ceiling | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in ("reduce", "matmul", "stencil", "train"):
        path = d / name / "scaling.json"
        if not path.exists():
            continue
        sc = json.loads(path.read_text())
        for mode in sc["modes"]:
            rows = sc["series"][mode]
            reports = {r["ranks"]: r["report"] for r in sc["runs"] if r["mode"] == mode}
            base = after_read(reports[1])
            for row in rows:
                n, rep = row["ranks"], reports[row["ranks"]]
                gpu = after_read(rep)
                ideal = base / n if mode == "strong" else base
                key, unit, scale, what = RATE[name]
                value = rep["metrics"][key]
                rate = (min(value) if isinstance(value, list) else value) * scale
                if name == "train":
                    rate = value / n  # samples/s per GPU
                ceiling = None
                if name in ("reduce", "stencil"):
                    ceiling = args.hbm_TBps
                elif name == "matmul":
                    m = 16384 // n if mode == "strong" else 16384
                    ceiling = gemm.get(f"{m}x16384x16384 float32")
                print(
                    f"| {name} | {mode} | {n} | {row['time'] * 1e3:.1f} ms | {row['efficiency']:.1%} | "
                    f"{gpu * 1e3:.1f} ms | {ideal / gpu:.1%} | {rate:,.2f} {unit} | "
                    f"{f'{ceiling:.2f} ({what})' if ceiling else '-'} | {f'{rate / ceiling:.1%}' if ceiling else '-'} |"
                )


if __name__ == "__main__":
    main()
