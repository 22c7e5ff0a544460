"""Summarize bench/comm_gpu.sh's results against PyTorch's NCCL measured in the same call (nccl-tests is not run
there, so it is no reference: figures typed in from another call would not be comparable)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def main(folder: str) -> None:
    d = Path(folder)
    spmd = load(d / "spmd-allreduce-nccl.json")
    torch = load(d / "torch-allreduce.json")
    out = ["## allreduce over NCCL, 2 ranks: spmd (CuPy NCCL) against torch.distributed", ""]
    if spmd:
        s_rows = {r["size"]: r for r in spmd["results"]["nccl"]}
        t_rows = {r["size"]: r for r in (torch or {"results": []})["results"]}
        out += [
            "| size (B) | spmd us | spmd busbw GB/s | torch us | torch busbw GB/s | spmd / torch |",
            "|---|---|---|---|---|---|",
        ]
        for size, r in s_rows.items():
            t = t_rows.get(size)
            ratio = f"{r['busbw_GBps'] / t['busbw_GBps']:.3f}" if t and t["busbw_GBps"] > 0 else "-"
            out.append(
                f"| {size} | {r['time_us']:.2f} | {r['busbw_GBps']:.2f} | "
                f"{t['time_us'] if t else float('nan'):.2f} | {t['busbw_GBps'] if t else float('nan'):.2f} | "
                f"{ratio} |"
            )
        big = [s for s in s_rows if (128 << 20) <= s <= (1 << 30) and s in t_rows]
        if big:
            worst = min(s_rows[s]["busbw_GBps"] / t_rows[s]["busbw_GBps"] for s in big)
            out.append(
                f"\nTarget busbw >= 0.97 x torch from 128 MiB to 1 GiB: worst ratio {worst:.3f} "
                f"-> {'met' if worst >= 0.97 else 'NOT met'}"
            )
        small = s_rows.get(8)
        if small:
            out.append(
                f"Target 8-byte allreduce <= 15 us: {small['time_us']:.2f} us -> "
                f"{'met' if small['time_us'] <= 15 else 'NOT met'}"
            )
        out.append(f"#wrong over all sizes: {spmd['wrong']}")
    for op in ("allreduce", "allgather", "reduce_scatter", "bcast", "sendrecv"):
        a = load(d / f"all-{op}.json")
        if not a or "nccl" not in a["results"] or "mpi" not in a["results"]:
            continue
        out += ["", f"## {op}: host-staged MPI against NCCL (time ratio mpi / nccl)", ""]
        for rn, rm in zip(a["results"]["nccl"], a["results"]["mpi"]):
            if rn["size"] in (8, 1 << 10, 1 << 20, 16 << 20, 64 << 20) or rn is a["results"]["nccl"][-1]:
                out.append(
                    f"- {rn['size']} B: nccl {rn['time_us']:.1f} us ({rn['busbw_GBps']:.1f} GB/s), "
                    f"mpi {rm['time_us']:.1f} us ({rm['busbw_GBps']:.2f} GB/s): "
                    f"{rm['time_us'] / rn['time_us']:.1f}x"
                )
        if a["skipped"]:
            out.append(f"- skipped: {a['skipped']}")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench-out/comm")
