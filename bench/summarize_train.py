"""The train table (markdown) from train-spmd.jsonl and train-ddp.jsonl in DIR, for every GPU count
the runs hold (1, 2, 4, ...); or, from a folder of bench/train_one_gpu.sh (train-spmd-run*.jsonl and
train-torch.jsonl), spmd on one GPU against every PyTorch setup: medians of the runs with their range, and the
margin against the strongest (``one_gpu``, which bench/claims.py quotes from)."""

import json
import statistics
import sys
from pathlib import Path

PRECISIONS = {"float32": ("graph", ""), "tf32": ("graph-tf32", "-tf32"),  # spmd variant, torch variant suffix
              "bf16": ("graph-bf16", "-bf16")}


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
    print("| model | batch/GPU | " + " | ".join(f"spmd {n} GPU" for n in counts) + " | "
          + " | ".join(f"speedup {n}" for n in many) + " | " + " | ".join(f"DDP {n} GPU" for n in counts) + " | "
          + " | ".join(f"DDP speedup {n}" for n in many) + " | spmd / DDP at " + ", ".join(map(str, counts)) + " |")
    print("|---" * (2 + 2 * len(counts) + 2 * len(many) + 1) + "|")
    for model in ("medium", "large"):
        for batch in sorted({r["batch"] for r in runs if r["model"] == model}):
            g = {n: at.get((model, batch, "graph", n)) for n in counts}
            d = {n: at.get((model, batch, "ddp", n)) for n in counts}
            if not g[1]:
                continue

            def speedup(x, n):
                return f"{x[n]['samples_per_s'] / x[1]['samples_per_s']:.2f}x" if x[n] and x[1] else "-"

            ratio = ", ".join(f"{g[n]['samples_per_s'] / d[n]['samples_per_s']:.1f}x" if g[n] and d[n] else "-"
                              for n in counts)
            print(f"| {model} | {batch} | " + " | ".join(rate(g[n]) for n in counts) + " | "
                  + " | ".join(speedup(g, n) for n in many) + " | " + " | ".join(rate(d[n]) for n in counts) + " | "
                  + " | ".join(speedup(d, n) for n in many) + f" | {ratio} |")
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
            print(f"| {r['model']} | {r['batch']} | {r['variant']} | {r['step_ms']:.3f} | {p['forward']:.3f} | "
                  f"{p['backward']:.3f} | {p['comm']:.3f} | {p['comm_overlapped']:.3f} | {p['optimizer']:.3f} |")


def _precision(variant: str) -> str:
    """A PyTorch variant's precision suffix ("" for float32)."""
    return next((suffix for _, suffix in PRECISIONS.values() if suffix and variant.endswith(suffix)), "")


def one_gpu(folder) -> list[dict]:
    """Per (precision, model, batch): spmd's median samples/s over its runs (each run the median of its windows)
    with min and max; every PyTorch setup's median over its timed runs; the strongest setup; the margin (spmd's
    median over the strongest's) and the worst case (spmd's slowest run over the strongest's fastest)."""
    folder = Path(folder)
    spmd: dict[tuple, list[float]] = {}
    for path in sorted(folder.glob("train-spmd-run*.jsonl")):
        for r in load(path):
            spmd.setdefault((r["variant"], r["model"], r["batch"]), []).append(r["samples_per_s"])
    torch_runs = load(folder / "train-torch.jsonl")
    rows = []
    for precision, (mine, suffix) in PRECISIONS.items():
        for model in ("medium", "large"):
            for batch in sorted({b for v, m, b in spmd if v == mine and m == model}):
                rates = spmd[(mine, model, batch)]
                peers = {r["variant"].removesuffix(suffix): r for r in torch_runs
                         if r["model"] == model and r["batch"] == batch and _precision(r["variant"]) == suffix}
                ran = {name: r for name, r in peers.items() if "samples_per_s" in r}
                if not ran:
                    continue
                best = max(ran, key=lambda name: ran[name]["samples_per_s"])
                rows.append({"precision": precision, "model": model, "batch": batch, "runs": len(rates),
                             "spmd": statistics.median(rates), "spmd_min": min(rates), "spmd_max": max(rates),
                             "torch": {name: r.get("samples_per_s") for name, r in peers.items()},
                             "failed": {name: r["error"] for name, r in peers.items() if "error" in r},
                             "strongest": best, "strongest_rate": ran[best]["samples_per_s"],
                             "margin": statistics.median(rates) / ran[best]["samples_per_s"],
                             "worst_margin": min(rates) / max(ran[best]["runs_samples_per_s"])})
    return rows


def one_gpu_row(r: dict, names: list[str]) -> str:
    """One row of the one-GPU table (docs/benchmarks.md quotes it; bench/claims.py checks it)."""
    cells = [f"{r['torch'][n]:,.0f}" if r["torch"].get(n) else ("failed" if n in r["failed"] else "-") for n in names]
    return (f"| {r['model']} | {r['batch']} | {r['spmd']:,.0f} ({r['spmd_min']:,.0f}-{r['spmd_max']:,.0f}) | "
            + " | ".join(cells) + f" | {r['strongest']} | {r['margin']:.2f}x | {r['worst_margin']:.2f}x |")


def print_one_gpu(folder) -> None:
    rows = one_gpu(folder)
    for precision in PRECISIONS:
        mine = [r for r in rows if r["precision"] == precision]
        if not mine:
            continue
        names = sorted({n for r in mine for n in r["torch"]})
        print(f"\n{precision}: samples/s, spmd the median of {mine[0]['runs']} runs (min-max), each PyTorch setup "
              "the median of its timed runs; margin = spmd / the strongest, worst = spmd's slowest run / the "
              "strongest's fastest\n")
        print("| model | batch | spmd | " + " | ".join(names) + " | strongest | margin | worst |")
        print("|---" * (6 + len(names)) + "|")
        for r in mine:
            print(one_gpu_row(r, names))
    for name, error in {n: e for r in rows for n, e in r["failed"].items()}.items():
        print(f"\n{name} failed on this machine: {error}")


if __name__ == "__main__":
    main(sys.argv[1])
