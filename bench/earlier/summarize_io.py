"""Issue 24's targets from bench/io_gpu.sh's folder: ``io_targets(folder)`` (bench/claims.py quotes it) and a
markdown summary on stdout.

- file to GPU: the direct engine with its pipelined copies (``file to GPU`` of spmd bench io) against today's
  path (h5py's read, then the copy from page-locked memory: their times added), and against the smaller of the
  N-thread pread rate and the page-locked copy rate measured in the same run;
- reduce's whole repeat (report.json ``timings.total`` median) with io.engine h5py against direct.
Medians over the runs, with their ranges.

    python3 bench/summarize_io.py DIR > DIR/summary.md

With ``--scaling DIR`` (bench/multi_gpu.sh's io part, issue 26): per workload, engine, mode and GPU count, the
whole repeat, its efficiency and its read phase (``scaling``), and spmd bench io at 1 and N ranks.
"""

import json
import statistics
import sys
from pathlib import Path

GPU_WAY = "file to GPU (direct, copies as pieces land)"
PINNED = "host to device, page-locked"


def way_rates(record: dict) -> dict[str, float]:
    """GB/s of every way of one rank's spmd bench io record (medians of its rounds)."""
    return {way: record["bytes"] / statistics.median(t) / 1e9 for way, t in record["seconds"].items()}


def io_targets(folder) -> dict:
    folder = Path(folder)
    out = {}
    for layout in ("contiguous", "chunked"):
        runs = [json.loads(p.read_text())["per_rank"][0] for p in sorted(folder.glob(f"bench-io-{layout}-run*.json"))]
        if not runs:
            continue
        rates = [way_rates(r) for r in runs]
        pread_n = next(w for w in runs[0]["seconds"] if w.startswith("pread, ") and not w.endswith("1 thread"))
        row = {"runs": len(runs), "bytes": runs[0]["bytes"], "threads": runs[0]["threads"], "pread_n": pread_n}
        for way in runs[0]["seconds"]:
            values = [r[way] for r in rates]
            row[way] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
        if GPU_WAY in row:
            today = [1 / (1 / r["h5py"] + 1 / r[PINNED]) for r in rates]  # read, then copy: times add
            limit = [min(r[pread_n], r[PINNED]) for r in rates]
            row["today"] = {"median": statistics.median(today), "min": min(today), "max": max(today)}
            row["limit"] = {"median": statistics.median(limit), "min": min(limit), "max": max(limit)}
            row["vs_today"] = statistics.median(r[GPU_WAY] / t for r, t in zip(rates, today))
            row["vs_limit"] = statistics.median(r[GPU_WAY] / lim for r, lim in zip(rates, limit))
        out[layout] = row
    totals = {}
    for engine in ("h5py", "direct"):
        reports = [json.loads(p.read_text()) for p in sorted(folder.glob(f"reduce-{engine}-run*.json"))]
        if reports:
            t = [r["timings"]["total"]["median"] for r in reports]
            phases = {
                k: statistics.median(r["timings"][k]["median"] for r in reports)
                for k in reports[0]["timings"]
                if k != "total"
            }
            totals[engine] = {
                "median": statistics.median(t),
                "min": min(t),
                "max": max(t),
                "phases": phases,
                "engines": [e["engine"] for e in reports[0]["io"]["per_rank"][0]],
            }
    if len(totals) == 2:
        totals["speedup"] = totals["h5py"]["median"] / totals["direct"]["median"]
    out["reduce"] = totals
    return out


def scaling(folder) -> list[dict]:
    """Rows of DIR/io-<workload>-<engine>[-run<N>]/scaling.json: the whole repeat (median), efficiency, the read
    phase (slowest rank's median) and the N-thread pread limit measured after the run (slowest rank, GB/s)."""
    rows = []
    for path in sorted(Path(folder).glob("io-*-*/scaling.json")):
        workload, engine, *suffix = path.parent.name.split("-")[1:]
        sc = json.loads(path.read_text())
        runs = {(r["mode"], r["ranks"]): r for r in sc["runs"]}
        for mode in sc["modes"]:
            for row in sc["series"][mode]:
                run = runs.get((mode, row["ranks"]), {})
                limit = run.get("read_limit") or []
                rows.append(
                    {
                        "workload": workload,
                        "engine": engine,
                        "run": suffix[0] if suffix else "run1",
                        "mode": mode,
                        "ranks": row["ranks"],
                        "total": row["time"],
                        "efficiency": row["efficiency"],
                        "read": row["timings"].get("read", {}).get("max"),
                        "h2d": row["timings"].get("h2d", {}).get("max"),
                        "bytes_per_rank": row.get("bytes_per_rank"),
                        "limit_GBps": (
                            min(x["bytes"] / x["seconds"] for x in limit) / 1e9 if limit and all(limit) else None
                        ),
                    }
                )
    return rows


def scaling_runs(folder) -> list[dict]:
    """scaling()'s rows of every run, as medians with their ranges per (workload, engine, mode, GPUs)."""
    groups: dict[tuple, list[dict]] = {}
    for r in scaling(folder):
        groups.setdefault((r["workload"], r["engine"], r["mode"], r["ranks"]), []).append(r)
    out = []
    for (workload, engine, mode, ranks), rows in groups.items():
        item = {"workload": workload, "engine": engine, "mode": mode, "ranks": ranks, "runs": len(rows)}
        for key in ("total", "efficiency", "read"):
            values = [r[key] for r in rows if r[key] is not None]
            item[key] = (
                {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else None
            )
        out.append(item)
    return out


def print_scaling(folder) -> None:
    if any(r["runs"] > 1 for r in scaling_runs(folder)):
        print("| workload | engine | mode | GPUs | runs | whole repeat (min-max) | efficiency (min-max) | read |")
        print("|---|---|---|---|---|---|---|---|")
        for r in scaling_runs(folder):
            t, e, rd = r["total"], r["efficiency"], r["read"]
            print(
                f"| {r['workload']} | {r['engine']} | {r['mode']} | {r['ranks']} | {r['runs']} | "
                f"{t['median'] * 1e3:.1f} ms ({t['min'] * 1e3:.1f}-{t['max'] * 1e3:.1f}) | {e['median']:.1%} "
                f"({e['min']:.1%}-{e['max']:.1%}) | {rd['median'] * 1e3 if rd else 0:.1f} ms |"
            )
        print()
    _print_scaling_rows(folder)


def _print_scaling_rows(folder) -> None:
    rows = scaling(folder)
    print(
        "| workload | engine | run | mode | GPUs | whole repeat | efficiency | read (slowest rank) | read GB/s per "
        "rank | pread N threads GB/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        rate = (
            f"{r['bytes_per_rank'] / r['read'] / 1e9:.2f}"
            if r["read"] and r["bytes_per_rank"] and r["workload"] == "reduce"
            else "-"
        )
        limit = f"{r['limit_GBps']:.2f}" if r["limit_GBps"] else "-"
        print(
            f"| {r['workload']} | {r['engine']} | {r['run']} | {r['mode']} | {r['ranks']} | {r['total'] * 1e3:.1f} ms | "
            f"{r['efficiency']:.1%} | {(r['read'] or 0) * 1e3:.1f} ms | {rate} | {limit} |"
        )
    for path in sorted(Path(folder).glob("bench-io-*.json")):
        result = json.loads(path.read_text())
        ranks = result["per_rank"]
        print(
            f"\nspmd bench io, {len(ranks)} rank(s), {ranks[0]['bytes'] / 2**30:.2f} GiB each "
            f"({path.name}): GB/s per rank (all ranks together)\n"
        )
        print("| way | " + " | ".join(f"rank {r['rank']}" for r in ranks) + " | together |")
        print("|---" * (len(ranks) + 2) + "|")
        per_rank = [way_rates(r) for r in ranks]
        for way in ranks[0]["seconds"]:
            print(
                f"| {way} | "
                + " | ".join(f"{x[way]:.2f}" for x in per_rank)
                + f" | {sum(x[way] for x in per_rank):.2f} |"
            )


def main(folder: str) -> None:
    t = io_targets(folder)
    for layout in ("contiguous", "chunked"):
        row = t.get(layout)
        if not row:
            continue
        print(
            f"\n{layout}: {row['bytes'] / 2**30:.2f} GiB, {row['threads']} reader threads, medians of "
            f"{row['runs']} runs (min-max), GB/s\n"
        )
        print("| way | GB/s |\n|---|---|")
        for way, v in row.items():
            if isinstance(v, dict):
                print(f"| {way} | {v['median']:.2f} ({v['min']:.2f}-{v['max']:.2f}) |")
        if "vs_today" in row:
            print(
                f"\nfile to GPU: {row['vs_today']:.2f}x today's path (target 3x), {row['vs_limit']:.0%} of "
                f"min({row['pread_n']}, page-locked copy) (target 80%)"
            )
    red = t["reduce"]
    if "speedup" in red:
        print(
            f"\nreduce's whole repeat: h5py {red['h5py']['median'] * 1e3:.1f} ms, direct "
            f"{red['direct']['median'] * 1e3:.1f} ms: {red['speedup']:.2f}x (target 3x)"
        )
        for engine in ("h5py", "direct"):
            phases = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in red[engine]["phases"].items())
            print(f"- {engine} ({'/'.join(red[engine]['engines'])}): {phases}")


if __name__ == "__main__":
    if sys.argv[1] == "--scaling":
        print_scaling(sys.argv[2])
    else:
        main(sys.argv[1])
