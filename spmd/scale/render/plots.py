"""A scaling sweep's PNG plots (matplotlib, no display needed): speedup, efficiency, phases, the model.

Figures are drawn on ``matplotlib.figure.Figure`` objects, never pyplot's global state.
"""

from __future__ import annotations

from ...report.png import available, png_bytes
from ..models.scaling_model import predict

PLOTS = ("speedup.png", "efficiency.png", "phases.png", "model.png")  # a scaling report's, by name


def render_plots(scaling: dict) -> dict[str, bytes]:
    """{file name: PNG bytes} of every plot; empty when matplotlib is not installed."""
    if not available():
        return {}
    series = scaling["series"]
    others = scaling.get("other_machines") or []
    out = {
        "speedup.png": _speedup(series, others),
        "efficiency.png": _efficiency(series, others),
        "phases.png": _phases(series),
    }
    if scaling.get("model") and not scaling.get("training"):  # the array model's problem bytes: not a training job's
        out["model.png"] = _model(scaling)
    return out


def _figure(title: str):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.2, 4.2), dpi=100, layout="constrained")
    ax = fig.subplots()
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return fig, ax


SUSPECT = "suspect (see the Runs table)"


def _mark_suspect(ax, rows: list[dict], x, y) -> None:
    """Ring the points of suspect runs (the Runs table says why), labelled once per plot."""
    marked = [r for r in rows if r.get("suspect")]
    if marked:
        label = SUSPECT if SUSPECT not in ax.get_legend_handles_labels()[1] else "_nolegend_"
        ax.plot(
            [x(r) for r in marked],
            [y(r) for r in marked],
            "o",
            markersize=13,
            markerfacecolor="none",
            markeredgecolor="red",
            label=label,
        )


def _ranks_axis(ax, ranks):
    ax.set_xlabel("ranks (one per GPU or CPU process)")
    ax.set_xticks(ranks)


# strong: filled circles; weak: larger hollow squares, so a point both share (the base size) shows both
STYLES = {
    "strong": {"marker": "o", "markersize": 6, "linestyle": "-"},
    "weak": {"marker": "s", "markersize": 11, "markerfacecolor": "none", "markeredgewidth": 1.5, "linestyle": "--"},
}


def _series(ax, rows: list[dict], key: str, scale: float, label: str, mode: str) -> None:
    """One series with its intervals as error bars (where the rows carry them)."""
    x = [r["ranks"] for r in rows]
    y = [scale * r[key] for r in rows]
    intervals = [r.get(f"{key}_interval") for r in rows]
    if all(intervals):
        err = [
            [max(0.0, v - scale * iv[0]) for v, iv in zip(y, intervals)],
            [max(0.0, scale * iv[1] - v) for v, iv in zip(y, intervals)],
        ]
        ax.errorbar(x, y, yerr=err, label=label, capsize=3, **STYLES.get(mode, {}))
    else:
        ax.plot(x, y, label=label, **STYLES.get(mode, {}))


PREDICTED = {"marker": "D", "markersize": 8, "markerfacecolor": "none", "linestyle": "none"}


def _predicted(ax, others: list[dict], key: str, scale: float) -> None:
    """The predicted points of ``spmd predict`` (hollow diamonds, labelled as predicted), per target and series."""
    for p in others:
        for mode in sorted({r["mode"] for r in p["rows"]}):
            rows = [r for r in p["rows"] if r["mode"] == mode and r[key] is not None]
            if rows:
                label = f"predicted: {p['target']['name']}, {mode}"
                ax.plot([r["ranks"] for r in rows], [scale * r[key] for r in rows], label=label, **PREDICTED)


def _all_ranks(series: dict, others: list[dict]) -> list[int]:
    return sorted(
        {row["ranks"] for rows in series.values() for row in rows} | {r["ranks"] for p in others for r in p["rows"]}
    )


def _speedup(series: dict, others: list[dict] = ()) -> bytes:
    fig, ax = _figure("Speedup (bars: intervals; diamonds: predicted)" if others else "Speedup (bars: intervals)")
    ranks = _all_ranks(series, others)
    n0 = ranks[0]
    ax.plot(ranks, [n / n0 for n in ranks], "k:", label="ideal")
    for mode, rows in series.items():
        label = "strong (fixed problem)" if mode == "strong" else "weak (scaled speedup)"
        _series(ax, rows, "speedup", 1.0, label, mode)
        _mark_suspect(ax, rows, lambda r: r["ranks"], lambda r: r["speedup"])
    _predicted(ax, others, "speedup", 1.0)
    _ranks_axis(ax, ranks)
    ax.set_ylabel(f"speedup over {n0} rank(s) (x)")
    ax.legend()
    return png_bytes(fig)


def _efficiency(series: dict, others: list[dict] = ()) -> bytes:
    fig, ax = _figure("Parallel efficiency (bars: intervals)" + ("; diamonds: predicted" if others else ""))
    ranks = _all_ranks(series, others)
    ax.axhline(100, color="k", linestyle=":", label="ideal")
    for mode, rows in series.items():
        _series(ax, rows, "efficiency", 100.0, mode, mode)
        _mark_suspect(ax, rows, lambda r: r["ranks"], lambda r: 100 * r["efficiency"])
    _predicted(ax, others, "efficiency", 100.0)
    _ranks_axis(ax, ranks)
    ax.set_ylabel("efficiency (%)")
    ax.set_ylim(bottom=0)
    ax.legend()
    return png_bytes(fig)


def _phases(series: dict) -> bytes:
    fig, ax = _figure("Time per repeat by phase (median over ranks)")
    rows = [row for mode in series for row in series[mode]]
    labels = [f"{row['mode']}\n{row['ranks']}" for row in rows]
    phases = [
        p
        for p in stacked_phases(rows[0]["timings"])
        if any(row["timings"].get(p, {"max": 0})["max"] > 0 for row in rows)
    ]
    bottom = [0.0] * len(rows)
    for phase in phases:
        heights = [1e3 * row["timings"].get(phase, {"median": 0.0})["median"] for row in rows]
        ax.bar(labels, heights, bottom=bottom, label=phase)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.plot(labels, [1e3 * row["time"] for row in rows], "k_", markersize=20, label="measured repeat")
    _mark_suspect(ax, rows, lambda r: f"{r['mode']}\n{r['ranks']}", lambda r: 1e3 * r["time"])
    ax.set_xlabel("series / ranks")
    ax.set_ylabel("time per repeat (ms)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars, never over one
    return png_bytes(fig)


def stacked_phases(names) -> list[str]:
    """The phases a stacked bar may add up: none that holds another (a training step's compute and step hold its
    forward and backward, comm holds comm_exposed) or runs hidden under another (the overlapped ones)."""
    names = [p for p in names if p != "total" and not p.endswith("_overlapped")]
    nested = set()
    if "forward" in names:
        nested |= {"compute", "step"}
    if "comm_exposed" in names:
        nested.add("comm")
    return [p for p in names if p not in nested]


def _model(scaling: dict) -> bytes:
    model = scaling["model"]
    fig, ax = _figure("Measured and modelled time per repeat")
    upto = max(r["ranks"] for r in model["predictions"]["best"]["by_ranks"])
    grid = list(range(1, upto + 1))
    for mode, rows in scaling["series"].items():
        base = rows[0]
        s0, n0 = base["problem_bytes"], base["ranks"]
        if not s0:
            continue
        sizes = [s0 if mode == "strong" else s0 * n / n0 for n in grid]
        (line,) = ax.plot(
            grid, [1e3 * predict(model, n, s)["total"] for n, s in zip(grid, sizes)], "-", label=f"{mode}: model"
        )
        ax.plot(
            [r["ranks"] for r in rows],
            [1e3 * r["time"] for r in rows],
            "o",
            color=line.get_color(),
            label=f"{mode}: measured",
        )
        _mark_suspect(ax, rows, lambda r: r["ranks"], lambda r: 1e3 * r["time"])
    ax.set_xlabel("ranks (one per GPU or CPU process)")
    ax.set_ylabel("time per repeat (ms)")
    ax.set_ylim(bottom=0)
    ax.legend()
    return png_bytes(fig)
