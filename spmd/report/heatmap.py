"""``spmd topo``'s heat map: the P2P copy bandwidth between a node's GPUs."""

from __future__ import annotations

import numpy as np

from .png import available, png_bytes


def heatmap_png(host: str, topo: dict) -> bytes | None:
    """``spmd topo``'s P2P bandwidth matrix (measure.copies) as a heat map (None without GPUs or
    matplotlib)."""
    if not topo["gpus"] or not available():
        return None
    from matplotlib.figure import Figure

    n = len(topo["gpus"])
    grid = np.array([[np.nan if c is None else c["GBps"] for c in row] for row in topo["p2p"]])
    fig = Figure(figsize=(1.2 * n + 3, 1.0 * n + 2.2), dpi=100, layout="constrained")
    ax = fig.subplots()
    top = float(np.nanmax(grid)) if n > 1 else 1.0
    image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=top)  # from zero: small gaps stay small
    fig.colorbar(image, ax=ax, label="copy bandwidth (GB/s)")
    for i in range(n):
        for j in range(n):
            if i != j:
                ax.text(
                    j, i, f"{grid[i, j]:.0f}", ha="center", va="center", color="k" if grid[i, j] > 0.6 * top else "w"
                )
    ax.set_xticks(range(n), [f"GPU {j}" for j in range(n)])
    ax.set_yticks(range(n), [f"GPU {i}" for i in range(n)])
    ax.set_xlabel("destination")
    ax.set_ylabel("source")
    ax.set_title(f"P2P copy bandwidth on {host}")
    return png_bytes(fig)
