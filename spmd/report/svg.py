"""Inline SVG drawings for the HTML reports (no script, no network): a timeline of repeats per rank and track,
a stacked bar per rank, and each rank's time per repeat. Each figure sits on a panel of its own background colour
(``PANELS``), so a screenshot can tell them apart."""

from __future__ import annotations

import html
import math
import zlib

from ..core.units import fmt_seconds

PHASE_COLORS = {
    "read": "#4e79a7",
    "h2d": "#f28e2b",
    "h2d_overlapped": "#ffbe7d",
    "compute": "#59a14f",
    "comm": "#e15759",
    "comm_overlapped": "#ff9d9a",
    "wait": "#c9b18f",
    "forward": "#76b7b2",
    "backward": "#edc948",
    "optimizer": "#b07aa1",
    "data": "#9c755f",
    "allreduce": "#e15759",
    "other": "#ddd8ea",
    "step (graph replay)": "#59a14f",
    "repeat": "#ffffff",
}
CATEGORY_COLORS = {"compute": "#59a14f", "comm": "#e15759", "data": "#4e79a7", "wait": "#c9b18f", "other": "#ddd8ea"}
RANK_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#ff7f0e")
EXTRA_COLORS = ("#8cd17d", "#b6992d", "#499894", "#86bcb6", "#f1ce63", "#d37295", "#fabfd2", "#79706e")
PANELS = {"timeline": "#f4f6fb", "ranks": "#f7f4ee", "repeats": "#f1f7f1"}
FONT = 'font-family="system-ui,sans-serif" font-size="11"'


def phase_color(name: str) -> str:
    """A phase's colour: the known ones fixed, any other one of EXTRA_COLORS by a hash of its name."""
    return PHASE_COLORS.get(name) or EXTRA_COLORS[zlib.crc32(name.encode()) % len(EXTRA_COLORS)]


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _svg(width: int, height: int, panel: str, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{_e(label)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" {FONT}>'
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="{PANELS[panel]}"/>' + "".join(body) + "</svg>"
    )


def _legend(items: list[tuple[str, str]], x: float, y: float, width: float) -> tuple[list[str], float]:
    """Swatches and names in rows from (x, y) within ``width``; the parts and the height used."""
    parts, cx, cy = [], x, y
    for name, color in items:
        w = 22 + 7.5 * len(name)
        if cx + w > x + width and cx > x:
            cx, cy = x, cy + 16
        parts.append(
            f'<rect x="{cx:.1f}" y="{cy:.1f}" width="11" height="11" fill="{color}" stroke="#666" '
            f'stroke-width="0.5"/><text x="{cx + 15:.1f}" y="{cy + 10:.1f}">{_e(name)}</text>'
        )
        cx += w
    return parts, cy - y + 16


def _ticks(span: float) -> float:
    """A tick step giving 4-10 ticks over ``span`` seconds."""
    step = 10.0 ** (math.floor(math.log10(span)) - 1) if span > 0 else 1.0
    for factor in (1, 2, 5, 10):
        if span / (step * factor) <= 10:
            return step * factor
    return step * 10


def _tick_label(seconds: float) -> str:
    return "0" if seconds == 0 else fmt_seconds(seconds).strip()


def timeline(rows: list[tuple[str, list[tuple[str, str, float, float, str]]]], width: int = 1100) -> str:
    """A timeline: ``rows`` of (label, spans (name, track, start s, end s, tooltip)) on one time axis."""
    spans = [s for _, row in rows for s in row]
    if not spans:
        return ""
    t0, t1 = min(s[2] for s in spans), max(s[3] for s in spans)
    left, right, row_h, top = 230, 20, 16, 24
    scale = (width - left - right) / max(t1 - t0, 1e-9)
    body = []
    step = _ticks(t1 - t0)
    for k in range(int((t1 - t0) / step) + 1):  # time from the first drawn repeat's start
        x = left + k * step * scale
        body.append(
            f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{top + row_h * len(rows)}" '
            f'stroke="#d0d0d0" stroke-width="0.5"/><text x="{x:.1f}" y="{top - 8}" text-anchor="middle">'
            f"{_e(_tick_label(k * step))}</text>"
        )
    for i, (label, row) in enumerate(rows):
        y = top + i * row_h
        body.append(f'<text x="{left - 6}" y="{y + 11}" text-anchor="end">{_e(label)}</text>')
        for name, _track, start, end, tip in row:
            x, w = left + (start - t0) * scale, max((end - start) * scale, 0.6)
            outline = name == "repeat"
            fill = "none" if outline else phase_color(name)
            stroke = ' stroke="#333" stroke-width="0.6"' if outline else ""
            body.append(
                f'<rect x="{x:.2f}" y="{y + 2}" width="{w:.2f}" height="{row_h - 4}" fill="{fill}"{stroke}>'
                f"<title>{_e(tip)}</title></rect>"
            )
    names = sorted({s[0] for s in spans} - {"repeat"})
    legend, height = _legend(
        [(n, phase_color(n)) for n in names], left, top + row_h * len(rows) + 10, width - left - right
    )
    return _svg(width, int(top + row_h * len(rows) + 14 + height), "timeline", body + legend, "timeline of repeats")


def stacked_bars(rows: list[tuple[str, dict[str, float], str]], categories: list[str], width: int = 900) -> str:
    """One bar per row (label, share per category, text at the right end), 0-100%."""
    left, right, bar_h, top = 190, 200, 18, 10
    span = width - left - right
    body = []
    for i, (label, share, note) in enumerate(rows):
        y = top + i * (bar_h + 6)
        body.append(f'<text x="{left - 6}" y="{y + 13}" text-anchor="end">{_e(label)}</text>')
        x = left
        for c in categories:
            w = span * max(0.0, share.get(c, 0.0))
            if w > 0:
                body.append(
                    f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{bar_h}" fill="{CATEGORY_COLORS[c]}">'
                    f"<title>{_e(f'{label}: {c} {share[c]:.1%}')}</title></rect>"
                )
            x += w
        body.append(f'<text x="{left + span + 8}" y="{y + 13}">{_e(note)}</text>')
    height = top + len(rows) * (bar_h + 6) + 6
    legend, extra = _legend([(c, CATEGORY_COLORS[c]) for c in categories], left, height, span)
    return _svg(width, int(height + extra + 6), "ranks", body + legend, "share of a repeat per rank")


def repeat_lines(series: list[tuple[str, list[float]]], warmups: int, width: int = 900, height: int = 260) -> str:
    """Each rank's seconds per repeat (series of (label, values, warm-ups first)); warm-ups shaded."""
    values = [v for _, vs in series for v in vs]
    if not values:
        return ""
    n = max(len(vs) for _, vs in series)
    left, right, top, bottom = 70, 150, 14, 36
    top_v = max(values) * 1.08 or 1.0
    sx = (width - left - right) / max(n - 1, 1)
    sy = (height - top - bottom) / top_v
    body = []
    if warmups:
        body.append(
            f'<rect x="{left - sx / 2 if n > 1 else left:.1f}" y="{top}" width="{sx * warmups:.1f}" '
            f'height="{height - top - bottom}" fill="#e4e4e4"><title>warm-up</title></rect>'
            f'<text x="{left:.1f}" y="{top + 12}">warm-up</text>'
        )
    step = _ticks(top_v)
    for k in range(int(top_v / step) + 1):
        y = height - bottom - k * step * sy
        body.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#d0d0d0" '
            f'stroke-width="0.5"/><text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_e(_tick_label(k * step))}</text>"
        )
    for i in range(n):
        body.append(f'<text x="{left + i * sx:.1f}" y="{height - bottom + 14}" text-anchor="middle">{i}</text>')
    body.append(
        f'<text x="{(left + width - right) / 2:.1f}" y="{height - 6}" text-anchor="middle">repeat '
        f"(warm-ups first)</text>"
    )
    for k, (label, vs) in enumerate(series):
        color = RANK_COLORS[k % len(RANK_COLORS)]
        points = " ".join(f"{left + i * sx:.1f},{height - bottom - v * sy:.1f}" for i, v in enumerate(vs))
        width_k = max(1.5, 2.0 + 1.5 * (min(len(series), 4) - 1 - k))  # the first ranks wider: equal lines all show
        body.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="{width_k:.1f}"/>')
        body += [
            f'<circle cx="{left + i * sx:.1f}" cy="{height - bottom - v * sy:.1f}" r="3" fill="{color}">'
            f"<title>{_e(f'{label}, repeat {i}: {fmt_seconds(v).strip()}')}</title></circle>"
            for i, v in enumerate(vs)
        ]
    legend = [
        f'<rect x="{width - right + 12}" y="{top + 16 * k}" width="11" height="11" '
        f'fill="{RANK_COLORS[k % len(RANK_COLORS)]}"/><text x="{width - right + 27}" y="{top + 16 * k + 10}">'
        f"{_e(label)}</text>"
        for k, (label, _) in enumerate(series[:12])
    ]
    return _svg(width, height, "repeats", body + legend, "own work per repeat per rank")
