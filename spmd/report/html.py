"""report.html of ``spmd run``: one self-contained page (inline SVG, no script, no network) from report.json: the
phase table with intervals, the per-rank breakdown, each rank's time per repeat, and a timeline of the last
repeats of every rank. ``spmd report render report.json`` writes it again from the JSON alone."""

from __future__ import annotations

import html

from ..core.files import MARK
from ..core.units import fmt_seconds
from .breakdown import per_repeat
from .svg import repeat_lines, stacked_bars, timeline
from .table import comm_label
from .trace import rank_devices, track_ids, track_name

MAX_TIMELINE_RANKS = 32  # beyond this a page of rows helps nobody: the trace (--trace) has them all

STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:76em;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #bbb;padding:0.25em 0.6em;
text-align:right;white-space:nowrap}th{background:#eee}td:first-child,th:first-child{text-align:left}
.wide{overflow-x:auto}li{margin:0.3em 0}figure{margin:0.5em 0 1.5em}figcaption{color:#555;font-size:0.9em}
.result td{white-space:normal;overflow-wrap:anywhere;text-align:left;max-width:50em}"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _table(header: list[str], rows: list[list[str]]) -> str:
    return (
        '<div class="wide"><table><tr>'
        + "".join(f"<th>{_e(h)}</th>" for h in header)
        + "</tr>"
        + "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
        + "</table></div>"
    )


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else fmt_seconds(seconds).strip()


def _us(microseconds: float) -> str:
    return _s(microseconds / 1e6)


def phase_rows(report: dict) -> list[list[str]]:
    """The phase table: across ranks (min, median, max of each rank's median), and the job's view (per repeat the
    slowest rank: median and its interval)."""
    rows = []
    intervals = report.get("intervals") or {}
    nested = NESTED if "step" in report["timings"] else {}  # a torch step's parts sit inside its compute and comm

    def order(kv):
        return (kv[0] == "total", kv[0] in nested, kv[0] == "step")

    for phase, t in sorted(report["timings"].items(), key=order):
        if t["max"] <= 0 and phase != "total":
            continue
        iv = intervals.get(phase)
        job = f"{_s(iv['median'])} [{_s(iv['low'])} - {_s(iv['high'])}] ({iv['level']:.0%})" if iv else "-"
        name = f"{phase} (within {nested[phase]})" if phase in nested else phase
        rows.append([name, _s(t["min"]), _s(t["median"]), _s(t["max"]), f"{t['imbalance']:.3f}", job])
    return rows


# a torch step's phases, timed inside the repeat's compute and comm (never more than the repeat: step.py caps them)
NESTED = {
    "step": "compute + comm",
    "data": "step",
    "comm_buffers": "step",
    "comm_syncbn": "step",
    "forward": "step",
    "backward": "step",
    "comm_exposed": "step",
    "comm_overlapped": "step, beside backward",
    "optimizer": "step",
}


def rank_label(entry: dict) -> str:
    return f"rank {entry['rank']} ({entry['host']})"


def breakdown_section(breakdown: dict) -> str:
    """The per-rank breakdown: a stacked bar per rank and its table."""
    cats = breakdown["categories"]
    rows = [(rank_label(r), r["share"], f"{_s(r['total'])} per repeat") for r in breakdown["per_rank"]]
    table = _table(
        ["rank", "host", *(f"{c}" for c in cats), "overlap", "per repeat"],
        [
            [
                str(r["rank"]),
                r["host"],
                *(f"{_s(r['seconds'][c])} ({r['share'][c]:.0%})" for c in cats),
                "-" if r["overlap"] is None else f"{r['overlap']:.0%}",
                _s(r["total"]),
            ]
            for r in breakdown["per_rank"]
        ],
    )
    return (
        f"<figure>{stacked_bars(rows, cats)}<figcaption>Share of each rank's repeats: compute, communication "
        f"(the fastest rank's), data movement (read, h2d), waiting for the slowest rank, other (untimed host "
        f"work). Seconds are means over repeats, so each is its share of the mean repeat.</figcaption></figure>{table}"
    )


def busy(records_by_rank: list[list[dict]]) -> list[list[float]]:
    """Per rank, per repeat: the repeat less the time it waited for the other ranks (its own work)."""
    if not records_by_rank or not all(records_by_rank):
        return [[] for _ in records_by_rank]
    return [[p["total"] - p["wait"] for p in parts] for parts in per_repeat(records_by_rank)]


def repeats_section(report: dict) -> str:
    """Each rank's own work per repeat (the repeat less its waiting), warm-ups first."""
    warm = busy([r.get("warmup_repeats", []) for r in report["per_rank"]])
    timed = busy([r["repeats"] for r in report["per_rank"]])
    series = [(rank_label(r), w + t) for r, w, t in zip(report["per_rank"], warm, timed)]
    return (
        f"<figure>{repeat_lines(series, len(warm[0]))}<figcaption>Each rank's own work per repeat: the repeat "
        f"less the time it waited for the others (collectives end together, so whole repeats would draw one "
        f"line). Warm-ups shaded: warm-up effects, drift, and a rank that is slow in some repeats only."
        f"</figcaption></figure>"
    )


def timeline_rows(report: dict) -> list[tuple[str, list]]:
    """Rows (rank, track) of the timeline of report.json's last repeats, on the shared clock."""
    tl = report.get("timeline") or {}
    per_rank = tl.get("per_rank") or []
    ids = track_ids(per_rank)
    devices = rank_devices(report)
    rows = []
    for rank, repeats in enumerate(per_rank[:MAX_TIMELINE_RANKS]):
        tracks: dict[str, list] = {}
        for rep in repeats:
            for name, track, a, b in rep["spans"]:
                tip = (
                    f"rank {rank}, repeat {rep['index']}{' (warm-up)' if rep['warmup'] else ''}: {name} "
                    f"{fmt_seconds(b - a).strip()}"
                )
                tracks.setdefault(track, []).append((name, track, rep["start"] + a, rep["start"] + b, tip))
        for track in sorted(tracks, key=ids.get):
            rows.append((f"rank {rank} · {track_name(track, devices.get(rank))}", tracks[track]))
    return rows


def timeline_section(report: dict) -> str:
    rows = timeline_rows(report)
    if not rows:
        return "<p>No timeline in this report.</p>"
    tl = report["timeline"]
    shown = sorted({rep["index"] for repeats in tl["per_rank"] for rep in repeats})
    unc = max(tl.get("clock", {}).get("uncertainty_s") or [0.0])
    more = len(tl["per_rank"]) - MAX_TIMELINE_RANKS
    return (
        f"<figure>{timeline(rows)}<figcaption>Repeats {', '.join(map(str, shown))} of every rank on one clock "
        f"(rank 0's; offsets agreed through MPI, uncertain by up to {_s(unc)}); outlines are whole repeats. "
        + (f"{more} more rank(s) are in the trace, not drawn here. " if more > 0 else "")
        + "The whole run opens in Perfetto from <code>spmd run --trace FILE.json</code>.</figcaption></figure>"
    )


def summary_lines(report: dict) -> list[str]:
    rule = report.get("repeat_rule") or {}
    total = (report.get("intervals") or {}).get("total")
    lines = [
        f"{report['ranks']} rank(s) on {len(report['nodes'])} node(s), device {report['device']}, comm "
        f"{comm_label(report)}; {'verified' if report['verified'] else 'NOT verified'} "
        f"({(report.get('verification') or {}).get('reference', '-')})",
        f"{len(report['per_rank'][0]['repeats'])} repeat(s) after {report.get('warmup', '?')} warm-up"
        + (f" (repeats: auto, stopped: {rule['stopped']})" if rule.get("rule") == "auto" else ""),
    ]
    if total:
        lines.append(
            f"time per repeat (slowest rank): {_s(total['median'])}, {total['level']:.0%} interval "
            f"{_s(total['low'])} - {_s(total['high'])}"
        )
    metrics = report.get("metrics") or {}
    if metrics:
        lines.append("; ".join(f"{k}: {_brief(v)}" for k, v in metrics.items()))
    host = host_line(report.get("host"))
    if host:
        lines.append(host)
    lines.append(f"NVTX ranges: {report.get('nvtx', 'off')}; spmd {report['spmd_version']}; {report['created']}")
    return lines


def host_line(host: dict | None) -> str | None:
    """The host as a fact, in one line: each rank's compute threads and how they were chosen, and what other
    processes took of each node's CPU time beside the ranks (report.json ``host``)."""
    if not host or not host.get("per_rank"):
        return None
    threads = host["per_rank"][0]["threads"]
    chosen = (
        f"{threads['chosen']} compute thread(s) a rank ({threads['how']})"
        if threads.get("chosen")
        else f"compute threads {threads['how']}"
    )
    loads = [
        f"other processes on {name} took {node['others_share']:.0%} of the CPU time its ranks could use"
        for name, node in sorted(host.get("nodes", {}).items())
        if node.get("others_share") is not None
    ]
    return "host: " + "; ".join([chosen, *loads])


def run_html(report: dict) -> str:
    """report.html of one run (report.json's content)."""
    title = f"spmd run: {report['workload']}"
    findings = list(report.get("findings") or []) + [f"Warning: {w}" for w in report.get("warnings", [])]
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><meta name="generator" '
        f'content="{_e(MARK)}"><title>{_e(title)}</title><style>{STYLE}</style></head><body>',
        f"<h1>{_e(title)}</h1>",
        "<ul>" + "".join(f"<li>{_e(x)}</li>" for x in summary_lines(report)) + "</ul>",
        "<h2>Findings</h2>"
        + (
            "<ul>" + "".join(f"<li>{_e(x)}</li>" for x in findings) + "</ul>"
            if findings
            else "<p>Nothing stands out: no straggler, timings within their bound.</p>"
        ),
        "<h2>Phases</h2>"
        + _table(
            ["phase", "min", "median", "max", "imbalance", "slowest rank per repeat: median [95% interval] (level)"],
            phase_rows(report),
        ),
        "<h2>Per rank</h2>" + breakdown_section(report["breakdown"]),
        "<h2>Each repeat</h2>" + repeats_section(report),
        "<h2>Timeline of the last repeats</h2>" + timeline_section(report),
        kernels_section(report.get("kernels")),
        '<h2>Result</h2><div class="result">'
        + _table(["key", "value"], [[k, _brief(v)] for k, v in report["result"].items() if v is not None])
        + "</div>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _brief(value) -> str:
    """A result value as one short cell: a long list as its first and last values and its length, a mapping as its
    keys (report.json holds the whole)."""
    if isinstance(value, (list, tuple)) and len(value) > 6:
        head = ", ".join(_brief(v) for v in value[:3])
        return f"[{head}, ..., {_brief(value[-1])}] ({len(value)} values)"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict) and len(str(value)) > 120:
        return f"{{{', '.join(map(str, list(value)[:6]))}{', ...' if len(value) > 6 else ''}}} (in report.json)"
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def kernels_section(kernels: dict | None) -> str:
    """Inside each rank's captured steps (report.json ``kernels``): the device's busy and idle time a step, what
    the idle waited for, the collectives' wait, the overlap, the kernels and the one that took most."""
    if not kernels:
        return ""
    gpu = kernels.get("device") == "gpu"
    waits = (kernels.get("collectives") or {}).get("wait_us") or []
    rows = []
    for r in kernels["per_rank"]:
        if not r.get("steps"):
            rows.append([str(r["rank"]), r.get("why", "not captured")] + ["-"] * 6)
            continue
        m = r["median"]
        top = (r.get("top") or [{"name": "-", "share_of_busy": 0}])[0]
        rows.append(
            [
                str(r["rank"]),
                _us(m["span_us"]),
                f"{_us(m['busy_us'])} ({m['busy_us'] / m['span_us']:.0%})",
                (
                    f"host {_us(m['idle']['host'])}, launch {_us(m['idle']['launch'])}, other {_us(m['idle']['other'])}"
                    if gpu
                    else f"between operators {_us(m['idle_us'])}"
                ),
                _us(waits[r["rank"]]) if r["rank"] < len(waits) else "-",
                "-" if r.get("overlap") is None else f"{r['overlap']:.0%}",
                f"{m['kernels']:.0f}" + (f" ({m['launches']:.0f} launches)" if gpu else ""),
                f"{top['name'][:60]} ({top['share_of_busy']:.0%})",
            ]
        )
    what = "kernels" if gpu else "operators"
    cost = kernels.get("capture_cost")
    note = (
        f" A captured step took {cost['ratio']:.2f}x a timed one (the profiler's own cost, most of it on the host)."
        if cost
        else ""
    )
    return (
        f"<h2>Inside each rank's step ({kernels['steps']} captured steps, median)</h2>"
        + _table(
            [
                "rank",
                "step",
                "busy",
                "idle: waiting for",
                "wait in collectives",
                "comm hidden",
                what,
                f"top {what[:-1]}",
            ],
            rows,
        )
        + f"<p>From each rank's torch.profiler trace (kernels/rankR.trace.json.gz beside this report).{note}</p>"
    )
