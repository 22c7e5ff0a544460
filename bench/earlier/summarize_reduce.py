"""Markdown table of the reduce benchmark: bandwidth against the HBM ceiling, weak scaling.

python bench/summarize_reduce.py DIR   (DIR holds ceiling.json and */report.json)
"""

import json
import statistics
import sys
from pathlib import Path


def excluding_read(report) -> float:
    """The job's time without file input: slowest rank's median of (total - read - wait).

    ``wait`` is the barrier after the read, i.e. waiting for the slowest rank's read."""
    return max(
        statistics.median(r["total"] - r["read"] - r.get("wait", 0.0) for r in rank["repeats"])
        for rank in report["per_rank"]
    )


def main(folder: str) -> None:
    folder = Path(folder)
    ceiling = json.loads((folder / "ceiling.json").read_text())
    hbm = ceiling["sum_read_TBps"] * 1e12
    reports = {p.parent.name: json.loads(p.read_text()) for p in sorted(folder.glob("*/report.json"))}
    print(
        f"HBM read ceiling measured in this session ({ceiling['device']}, CuPy sum of 4 GiB float32): "
        f"{hbm / 1e12:.2f} TB/s; device-to-device copy {ceiling['copy_read_plus_write_TBps']:.2f} TB/s\n"
    )
    print(
        "| run | ranks | comm | method | GiB/rank | h2d ms | compute ms | comm ms | compute TB/s per GPU "
        "| / HBM ceiling | total-read-wait ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in reports.items():
        t = r["timings"]
        rates = [x for x in r["metrics"]["compute_GBps_per_rank"] if x]
        rate = min(rates) * 1e9
        print(
            f"| {name} | {r['ranks']} | {r['comm']} | {r['config']['params']['method']} "
            f"| {max(r['metrics']['bytes_per_rank']) / 2**30:.2f} | {t['h2d']['median'] * 1e3:.2f} "
            f"| {t['compute']['median'] * 1e3:.3f} | {t['comm']['median'] * 1e3:.3f} | {rate / 1e12:.2f} "
            f"| {rate / hbm:.1%} | {excluding_read(r) * 1e3:.2f} |"
        )
    if "1gpu-fused" in reports:
        base = reports["1gpu-fused"]
        for name in ("2gpu-nccl", "2gpu-mpi"):
            if name in reports:
                other = reports[name]
                eff = excluding_read(base) / excluding_read(other)
                compute_eff = base["timings"]["compute"]["max"] / other["timings"]["compute"]["max"]
                print(
                    f"\nweak-scaling efficiency 1 -> 2 GPUs, {name}: total-read-wait {eff:.1%}, "
                    f"compute alone {compute_eff:.1%}"
                )


if __name__ == "__main__":
    main(sys.argv[1])
