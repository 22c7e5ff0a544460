"""The train table (markdown) from train-spmd.jsonl and train-ddp.jsonl in DIR."""

import json
import sys
from pathlib import Path


def load(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.startswith("{")]


def main(folder):
    runs = load(Path(folder) / "train-spmd.jsonl") + load(Path(folder) / "train-ddp.jsonl")
    at = {(r["model"], r["batch"], r["variant"], r["gpus"]): r for r in runs}
    print("| model | batch/GPU | spmd 1 GPU | spmd 2 GPUs | speedup | eager 1 / 2 GPUs | DDP 1 GPU | DDP 2 GPUs | "
          "DDP speedup | spmd / DDP (1 GPU, 2 GPUs) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model in ("medium", "large"):
        for batch in sorted({r["batch"] for r in runs if r["model"] == model}):
            g1, g2 = at.get((model, batch, "graph", 1)), at.get((model, batch, "graph", 2))
            e1, e2 = at.get((model, batch, "eager", 1)), at.get((model, batch, "eager", 2))
            d1, d2 = at.get((model, batch, "ddp", 1)), at.get((model, batch, "ddp", 2))
            if not (g1 and g2):
                continue

            def rate(r):
                return f"{r['samples_per_s']:,.0f}" if r else "-"

            ddp = f"{d2['samples_per_s'] / d1['samples_per_s']:.2f}x" if d1 and d2 else "-"
            ratio = (f"{g1['samples_per_s'] / d1['samples_per_s']:.2f}x, {g2['samples_per_s'] / d2['samples_per_s']:.2f}x"
                     if d1 and d2 else "-")
            print(f"| {model} | {batch} | {rate(g1)} | {rate(g2)} | {g2['samples_per_s'] / g1['samples_per_s']:.2f}x | "
                  f"{rate(e1)} / {rate(e2)} | {rate(d1)} | {rate(d2)} | {ddp} | {ratio} |")
    print("\nPhases per step at 2 GPUs (ms; graph: the last replayed step of each window, eager: every step):\n")
    print("| model | batch/GPU | variant | step | forward | backward | exposed comm | overlapped comm | optimizer |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        if r["gpus"] == 2 and r["variant"] != "ddp" and r.get("phase_ms_per_step"):
            p = r["phase_ms_per_step"]
            print(f"| {r['model']} | {r['batch']} | {r['variant']} | {r['step_ms']:.3f} | {p['forward']:.3f} | "
                  f"{p['backward']:.3f} | {p['comm']:.3f} | {p['comm_overlapped']:.3f} | {p['optimizer']:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1])
