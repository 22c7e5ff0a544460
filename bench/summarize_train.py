"""The train table (markdown) from train-spmd.jsonl and train-ddp.jsonl in DIR, for every GPU count
the runs hold (1, 2, 4, ...)."""

import json
import sys
from pathlib import Path


def load(path):
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")] if path.exists() else []


def rate(r):
    return f"{r['samples_per_s']:,.0f}" if r else "-"


def main(folder):
    runs = load(Path(folder) / "train-spmd.jsonl") + load(Path(folder) / "train-ddp.jsonl")
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


if __name__ == "__main__":
    main(sys.argv[1])
