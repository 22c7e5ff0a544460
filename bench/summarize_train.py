"""The train table (markdown) from train-spmd.jsonl and train-ddp.jsonl in DIR, for every GPU count
the runs hold (1, 2, 4, ...); with train-torch.jsonl (bench/train_torch.py), spmd on one GPU against every
PyTorch setup and the margin against the strongest."""

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
    torch_runs = load(Path(folder) / "train-torch.jsonl")
    if torch_runs:
        variants = sorted({r["variant"] for r in torch_runs})
        print("\nOne GPU: spmd (graph) against PyTorch's setups (samples/s; median of the runs), and the margin "
              "against the strongest that ran:\n")
        print("| model | batch | spmd | " + " | ".join(variants) + " | spmd / strongest |")
        print("|---" * (4 + len(variants)) + "|")
        by = {(r["model"], r["batch"], r["variant"]): r for r in torch_runs}
        for model in ("medium", "large"):
            for batch in sorted({r["batch"] for r in torch_runs if r["model"] == model}):
                mine = at.get((model, batch, "graph", 1))
                cells = [by.get((model, batch, v)) for v in variants]
                ran = [c["samples_per_s"] for c in cells if c and "samples_per_s" in c]
                margin = f"{mine['samples_per_s'] / max(ran):.2f}x" if mine and ran else "-"
                print(f"| {model} | {batch} | {rate(mine)} | "
                      + " | ".join(rate(c) if c and "samples_per_s" in c else ("failed" if c else "-") for c in cells)
                      + f" | {margin} |")
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
