"""The train table (markdown) from train-spmd.jsonl and train-ddp.jsonl in DIR, for every GPU count
the runs hold (1, 2, 4, ...); or, from a folder of bench/train_one_gpu.sh or bench/train_two_gpu.sh
(train-spmd-run*.jsonl and train-torch*.jsonl), spmd against every PyTorch setup (DDP above one GPU) at each GPU
count: medians of the runs with their range, the margin against the strongest (``against_torch``, ``one_gpu``)
and the speedups over one GPU (``speedups``), which bench/claims.py quotes from."""

import json
import statistics
import sys
from pathlib import Path

PRECISIONS = {
    "float32": ("graph", ""),
    "tf32": ("graph-tf32", "-tf32"),  # spmd variant, torch variant suffix
    "bf16": ("graph-bf16", "-bf16"),
}


def load(path):
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")] if path.exists() else []


def rate(r):
    return f"{r['samples_per_s']:,.0f}" if r else "-"


def main(folder):
    runs = load(Path(folder) / "train-spmd.jsonl") + load(Path(folder) / "train-ddp.jsonl")
    if not runs:
        return print_one_gpu(folder)
    at = {(r["model"], r["batch"], r["variant"], r["gpus"]): r for r in runs}
    counts = sorted({r["gpus"] for r in runs})
    many = [n for n in counts if n > 1]
    print(
        "| model | batch/GPU | "
        + " | ".join(f"spmd {n} GPU" for n in counts)
        + " | "
        + " | ".join(f"speedup {n}" for n in many)
        + " | "
        + " | ".join(f"DDP {n} GPU" for n in counts)
        + " | "
        + " | ".join(f"DDP speedup {n}" for n in many)
        + " | spmd / DDP at "
        + ", ".join(map(str, counts))
        + " |"
    )
    print("|---" * (2 + 2 * len(counts) + 2 * len(many) + 1) + "|")
    for model in ("medium", "large"):
        for batch in sorted({r["batch"] for r in runs if r["model"] == model}):
            g = {n: at.get((model, batch, "graph", n)) for n in counts}
            d = {n: at.get((model, batch, "ddp", n)) for n in counts}
            if not g[1]:
                continue

            def speedup(x, n):
                return f"{x[n]['samples_per_s'] / x[1]['samples_per_s']:.2f}x" if x[n] and x[1] else "-"

            ratio = ", ".join(
                f"{g[n]['samples_per_s'] / d[n]['samples_per_s']:.1f}x" if g[n] and d[n] else "-" for n in counts
            )
            print(
                f"| {model} | {batch} | "
                + " | ".join(rate(g[n]) for n in counts)
                + " | "
                + " | ".join(speedup(g, n) for n in many)
                + " | "
                + " | ".join(rate(d[n]) for n in counts)
                + " | "
                + " | ".join(speedup(d, n) for n in many)
                + f" | {ratio} |"
            )
    print("\nEager steps (samples/s):\n")
    print("| model | batch/GPU | " + " | ".join(f"{n} GPU" for n in counts) + " |")
    print("|---" * (2 + len(counts)) + "|")
    for model in ("medium", "large"):
        for batch in sorted({r["batch"] for r in runs if r["model"] == model}):
            e = [at.get((model, batch, "eager", n)) for n in counts]
            if any(e):
                print(f"| {model} | {batch} | " + " | ".join(rate(r) for r in e) + " |")
    top = counts[-1]
    print(f"\nPhases per step at {top} GPUs (ms; graph: the last replayed step of each window, eager: every step):\n")
    print("| model | batch/GPU | variant | step | forward | backward | exposed comm | overlapped comm | optimizer |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        if r["gpus"] == top and r["variant"] != "ddp" and r.get("phase_ms_per_step"):
            p = r["phase_ms_per_step"]
            print(
                f"| {r['model']} | {r['batch']} | {r['variant']} | {r['step_ms']:.3f} | {p['forward']:.3f} | "
                f"{p['backward']:.3f} | {p['comm']:.3f} | {p['comm_overlapped']:.3f} | {p['optimizer']:.3f} |"
            )


def _precision(variant: str) -> str:
    """A PyTorch variant's precision suffix ("" for float32)."""
    return next((suffix for _, suffix in PRECISIONS.values() if suffix and variant.endswith(suffix)), "")


def against_torch(folder) -> list[dict]:
    """Per (precision, GPUs, model, batch): spmd's median samples/s over its runs (each run the median of its
    windows) with min and max; every PyTorch setup's median over its timed runs (DDP on more than one GPU); the
    strongest setup; the margin (spmd's median over the strongest's) and the worst case (spmd's slowest run over
    the strongest's fastest). spmd's lines from train-spmd-run*.jsonl, PyTorch's from train-torch*.jsonl."""
    folder = Path(folder)
    spmd: dict[tuple, list[float]] = {}
    for path in sorted(folder.glob("train-spmd-run*.jsonl")):
        for r in load(path):
            spmd.setdefault((r["variant"], r.get("gpus", 1), r["model"], r["batch"]), []).append(r["samples_per_s"])
    torch_runs = [r for path in sorted(folder.glob("train-torch*.jsonl")) for r in load(path)]
    rows = []
    for precision, (mine, suffix) in PRECISIONS.items():
        for gpus in sorted({g for v, g, m, b in spmd if v == mine}):
            for model in ("medium", "large"):
                for batch in sorted({b for v, g, m, b in spmd if v == mine and g == gpus and m == model}):
                    rates = spmd[(mine, gpus, model, batch)]
                    peers = {
                        r["variant"].removesuffix(suffix): r
                        for r in torch_runs
                        if r["model"] == model
                        and r["batch"] == batch
                        and r.get("gpus", 1) == gpus
                        and _precision(r["variant"]) == suffix
                    }
                    ran = {name: r for name, r in peers.items() if "samples_per_s" in r}
                    if not ran:
                        continue
                    best = max(ran, key=lambda name: ran[name]["samples_per_s"])
                    rows.append(
                        {
                            "precision": precision,
                            "gpus": gpus,
                            "model": model,
                            "batch": batch,
                            "runs": len(rates),
                            "spmd": statistics.median(rates),
                            "spmd_min": min(rates),
                            "spmd_max": max(rates),
                            "spmd_runs": rates,
                            "torch": {name: r.get("samples_per_s") for name, r in peers.items()},
                            "failed": {name: r["error"] for name, r in peers.items() if "error" in r},
                            "strongest": best,
                            "strongest_rate": ran[best]["samples_per_s"],
                            "margin": statistics.median(rates) / ran[best]["samples_per_s"],
                            "worst_margin": min(rates) / max(ran[best]["runs_samples_per_s"]),
                        }
                    )
    return rows


def one_gpu(folder) -> list[dict]:
    """against_torch's rows on one GPU."""
    return [r for r in against_torch(folder) if r["gpus"] == 1]


def speedups(folder, precision: str = "float32") -> list[dict]:
    """Per (model, batch) with runs on 1 and more GPUs: spmd's speedup, the median over its runs of each run's
    N-GPU rate over the same run's 1-GPU rate (both measured in one launch), with min and max; and the strongest
    PyTorch setup's at N GPUs over the strongest's at 1."""
    rows = against_torch(folder)
    at = {(r["gpus"], r["model"], r["batch"]): r for r in rows if r["precision"] == precision}
    out = []
    for (gpus, model, batch), r in sorted(at.items()):
        one = at.get((1, model, batch))
        if gpus == 1 or one is None or len(one["spmd_runs"]) != len(r["spmd_runs"]):
            continue
        ratios = [n / o for n, o in zip(r["spmd_runs"], one["spmd_runs"])]
        out.append(
            {
                "gpus": gpus,
                "model": model,
                "batch": batch,
                "speedup": statistics.median(ratios),
                "min": min(ratios),
                "max": max(ratios),
                "torch_speedup": r["strongest_rate"] / one["strongest_rate"],
                "torch_strongest": r["strongest"],
            }
        )
    return out


def one_gpu_row(r: dict, names: list[str]) -> str:
    """One row of the one-GPU table (docs/benchmarks.md quotes it; bench/claims.py checks it)."""
    cells = [f"{r['torch'][n]:,.0f}" if r["torch"].get(n) else ("failed" if n in r["failed"] else "-") for n in names]
    return (
        f"| {r['model']} | {r['batch']} | {r['spmd']:,.0f} ({r['spmd_min']:,.0f}-{r['spmd_max']:,.0f}) | "
        + " | ".join(cells)
        + f" | {r['strongest']} | {r['margin']:.2f}x | {r['worst_margin']:.2f}x |"
    )


def print_one_gpu(folder) -> None:
    """spmd against PyTorch's setups per precision and GPU count (DDP above one GPU), then the speedups."""
    rows = against_torch(folder)
    for precision in PRECISIONS:
        for gpus in sorted({r["gpus"] for r in rows}):
            mine = [r for r in rows if r["precision"] == precision and r["gpus"] == gpus]
            if not mine:
                continue
            names = sorted({n for r in mine for n in r["torch"]})
            ddp = " (PyTorch: DistributedDataParallel)" if gpus > 1 else ""
            print(
                f"\n{precision}, {gpus} GPU{'s' if gpus > 1 else ''}{ddp}: samples/s of all GPUs, spmd the median "
                f"of {mine[0]['runs']} runs (min-max), each PyTorch setup the median of its timed runs; margin = "
                "spmd / the strongest, worst = spmd's slowest run / the strongest's fastest\n"
            )
            print("| model | batch | spmd | " + " | ".join(names) + " | strongest | margin | worst |")
            print("|---" * (6 + len(names)) + "|")
            for r in mine:
                print(one_gpu_row(r, names))
    ups = speedups(folder)
    if ups:
        print(
            "\nfloat32 speedup at N GPUs over 1 (per-GPU batch fixed): spmd the median of its runs' own ratios "
            "(min-max); PyTorch its strongest setup at N over its strongest at 1\n"
        )
        print("| GPUs | model | batch | spmd | PyTorch (strongest at N) |\n|---|---|---|---|---|")
        for u in ups:
            print(
                f"| {u['gpus']} | {u['model']} | {u['batch']} | {u['speedup']:.2f}x ({u['min']:.2f}-{u['max']:.2f}) "
                f"| {u['torch_speedup']:.2f}x ({u['torch_strongest']}) |"
            )
    for name, error in {n: e for r in rows for n, e in r["failed"].items()}.items():
        print(f"\n{name} failed on this machine: {error}")


def settings(folder) -> list[dict]:
    """bench/train_nccl_env.sh's folder (<setting>-run<N>.jsonl, each with 1 and 2 GPUs): per setting, the 2-GPU
    speedup of each run (medians and range), the 2-GPU step and its exposed allreduce (medians, ms)."""
    runs: dict[str, list[dict]] = {}
    for path in sorted(Path(folder).glob("*-run*.jsonl")):
        rows = {r["gpus"]: r for r in load(path)}
        runs.setdefault(path.name.rsplit("-run", 1)[0], []).append(rows)
    out = []
    for name, rs in runs.items():
        ups = [r[2]["samples_per_s"] / r[1]["samples_per_s"] for r in rs]
        out.append(
            {
                "setting": name,
                "variant": rs[0][2]["variant"],
                "runs": len(rs),
                "speedup": statistics.median(ups),
                "min": min(ups),
                "max": max(ups),
                "step1_ms": statistics.median(r[1]["step_ms"] for r in rs),
                "step2_ms": statistics.median(r[2]["step_ms"] for r in rs),
                **{
                    f"{k}_ms": statistics.median(r[2]["phase_ms_per_step"][k] for r in rs)
                    for k in ("backward", "comm", "comm_overlapped", "optimizer")
                },
            }
        )
    return out


def print_settings(folder) -> None:
    print(
        "| setting | variant | runs | 2-GPU speedup (min-max) | 1-GPU step ms | 2-GPU step ms | backward | exposed "
        "allreduce | optimizer |\n|---|---|---|---|---|---|---|---|---|"
    )
    for r in settings(folder):
        print(
            f"| {r['setting']} | {r['variant']} | {r['runs']} | {r['speedup']:.3f}x ({r['min']:.3f}-{r['max']:.3f}) "
            f"| {r['step1_ms']:.4f} | {r['step2_ms']:.4f} | {r['backward_ms']:.4f} | {r['comm_ms']:.4f} | "
            f"{r['optimizer_ms']:.4f} |"
        )


if __name__ == "__main__":
    if sys.argv[1] == "--settings":
        print_settings(sys.argv[2])
    else:
        main(sys.argv[1])
