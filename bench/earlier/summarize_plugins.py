"""Markdown tables from bench/plugins_gpu.sh's DIR: the examples against the HBM ceiling measured in the
same call, and reduce's sum as a plug-in against the same calls written by hand.

Each figure is the median over the runs (3) of each run's median repeat, with the runs' range.

    python3 bench/summarize_plugins.py docs/results/plugins-h100x1
"""

import json
import statistics
import sys
from pathlib import Path

PHASES = ("read", "wait", "h2d", "compute", "comm", "total")


def runs(folder: Path, prefix: str) -> list[dict]:
    """The report.json (or inline JSON) of every run named ``prefix-N``."""
    found = sorted(p for p in folder.glob(f"{prefix}-[0-9]*") if p.is_dir() or p.suffix == ".json")
    return [json.loads((p / "report.json").read_text() if p.is_dir() else p.read_text()) for p in found]


def med(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def ms(values: list[float]) -> str:
    m, lo, hi = med([v * 1e3 for v in values])
    return f"{m:.3f} ({lo:.3f}-{hi:.3f})"


def examples(folder: Path, hbm_TBps: float) -> list[str]:
    lines = [
        "| example | input | runs | verified | compute ms | compute GB/s | / HBM read | comm ms | repeat ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("histogram", "kmeans", "pca"):
        reports = runs(folder, name)
        if not reports:
            continue
        nbytes = reports[0]["problem"]["bytes"]
        compute = [r["timings"]["compute"]["median"] for r in reports]
        rate = med([nbytes / c / 1e9 for c in compute])
        lines.append(
            f"| {name} | {nbytes / 2**20:.0f} MiB {reports[0]['config']['generate']['dtype']} "
            f"{reports[0]['config']['generate']['shape']} | {len(reports)} | "
            f"{all(r['verified'] for r in reports)} | {ms(compute)} | {rate[0]:.4g} ({rate[1]:.4g}-{rate[2]:.4g}) "
            f"| {rate[0] / (hbm_TBps * 1e3):.1%} | {ms([r['timings']['comm']['median'] for r in reports])} "
            f"| {ms([r['timings']['total']['median'] for r in reports])} |"
        )
    return lines


def overhead(folder: Path) -> list[str]:
    plugin, inline = runs(folder, "plugin-sum"), runs(folder, "inline-sum")
    if not plugin or not inline:
        return []
    lines = ["| phase | plug-in ms (spmd run) | by hand ms (inline_sum.py) | plug-in / by hand |", "|---|---|---|---|"]
    for phase in PHASES:
        if any(phase not in r["timings"] for r in plugin) or any(phase not in r["median_s"] for r in inline):
            continue  # h2d: only on a GPU
        a = [r["timings"][phase]["median"] for r in plugin]
        b = [r["median_s"][phase] for r in inline]
        lines.append(f"| {phase} | {ms(a)} | {ms(b)} | {med(a)[0] / med(b)[0]:.3f} |")
    a = [r["timings"]["compute"]["median"] + r["timings"]["comm"]["median"] for r in plugin]
    b = [r["median_s"]["compute"] + r["median_s"]["comm"] for r in inline]
    lines.append(f"| compute + comm | {ms(a)} | {ms(b)} | {med(a)[0] / med(b)[0]:.3f} |")
    same = all(abs(r["result"]["value"] - i["sum"]) <= 1e-9 * abs(i["sum"]) for r, i in zip(plugin, inline))
    lines.append("")
    lines.append(
        f"Runs: {len(plugin)} + {len(inline)}, {plugin[0]['repeats']} kept repeats each; the two sums agree: "
        f"{same}; the plug-in verified: {all(r['verified'] for r in plugin)}."
    )
    return lines


def scaling(folder: Path) -> list[dict]:
    """The examples' spmd scale sweeps (scale-<name>/scaling.json, bench/multi_gpu.sh's plugins part): per mode
    and GPU count the whole repeat, efficiency, compute and comm (slowest rank's medians), and verification."""
    rows = []
    for path in sorted(folder.glob("scale-*/scaling.json")):
        sc = json.loads(path.read_text())
        verified = {(r["mode"], r["ranks"]): r["report"]["verified"] for r in sc["runs"]}
        for mode in sc["modes"]:
            for row in sc["series"][mode]:
                t = row["timings"]
                rows.append(
                    {
                        "example": path.parent.name.removeprefix("scale-"),
                        "mode": mode,
                        "ranks": row["ranks"],
                        "total": row["time"],
                        "efficiency": row["efficiency"],
                        "compute": t["compute"]["max"],
                        "comm": t.get("comm", {}).get("max", 0.0),
                        "read": t.get("read", {}).get("max", 0.0),
                        "verified": verified.get((mode, row["ranks"])),
                    }
                )
    return rows


def scaling_lines(folder: Path) -> list[str]:
    rows = scaling(folder)
    if not rows:
        return []
    lines = [
        "| example | mode | GPUs | repeat ms | efficiency | read ms | compute ms | comm ms | verified |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['example']} | {r['mode']} | {r['ranks']} | {r['total'] * 1e3:.2f} | {r['efficiency']:.1%} | "
        f"{r['read'] * 1e3:.2f} | {r['compute'] * 1e3:.3f} | {r['comm'] * 1e3:.3f} | {r['verified']} |"
        for r in rows
    ]
    return lines


def main(folder: str) -> int:
    folder = Path(folder)
    hbm = json.loads((folder / "hbm_ceiling.json").read_text())
    print(
        f"Device: {hbm['device']}; HBM read ceiling (CuPy sum over 4 GiB float32): {hbm['sum_read_TBps']:.2f} TB/s, "
        f"device copy {hbm['copy_read_plus_write_TBps']:.2f} TB/s (read + write).\n"
    )
    print("\n".join(examples(folder, hbm["sum_read_TBps"])))
    print()
    print("\n".join(scaling_lines(folder)))
    print()
    print("\n".join(overhead(folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
