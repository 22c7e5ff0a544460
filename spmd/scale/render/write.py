"""scaling.json -> scaling.md, a self-contained scaling.html (plots inlined) and scaling.csv, written together.

The same tables (``tables``) feed both md and html, so they never disagree.
"""

from __future__ import annotations

import base64
import csv
import html
import io
from pathlib import Path

from ...core.files import MARK, json_text, require_replaceable, write_files_atomic
from ...core.units import fmt_seconds
from ...report.svg import stacked_bars
from ...report.table import comm_label
from .plots import PLOTS, render_plots
from .tables import run_breakdown, tables, unique_runs


def _summary(scaling: dict) -> list[str]:
    cfg = scaling["config"]
    source = cfg["input"]["path"] or ", ".join(cfg["input"]["shards"])
    repeats = (
        f"repeats until the 95% interval is within +-5% or {cfg.get('max_seconds', '?')} s (repeats: auto)"
        if cfg["repeats"] == "auto"
        else f"{cfg['repeats']} repeat(s)"
    )
    first = (scaling.get("runs") or [{}])[0].get("report") or {"comm": scaling["comm"]}
    return [
        f"workload {scaling['workload']} on {scaling['device']}, comm {comm_label(first)}, "
        f"{scaling['world_size']} rank(s) launched, sizes {', '.join(map(str, scaling['ranks']))}",
        f"input {source}; {repeats} after {cfg['warmup']} warm-up per size",
        f"MPI: {scaling['mpi_library']}; spmd {scaling['spmd_version']}; {scaling['created']}",
    ]


def _md(text: str) -> str:
    """Text as Markdown shows it, whatever it holds: a path or host name with < or & is not HTML to a Markdown
    renderer (a > alone opens no tag, so "1 -> 2" stays as written), and a newline would end a list item or a
    table row."""
    return " ".join(str(text).splitlines()).replace("&", "&amp;").replace("<", "&lt;")


def _findings(scaling: dict) -> list[str]:
    """The findings under the verdict (which leads scaling.json's advice and is shown once, above them)."""
    advice = scaling["advice"]
    return advice[1:] if advice and advice[0] == scaling.get("verdict") else advice


def to_markdown(scaling: dict, images: list[str]) -> str:
    lines = [f"<!-- {MARK}: spmd scale or spmd report -->", f"# Scaling report: {_md(scaling['workload'])}", ""]
    lines += [f"- {_md(line)}" for line in _summary(scaling)] + [""]
    if scaling.get("verdict"):
        lines += [f"**{_md(scaling['verdict'])}**", ""]
    lines += ["## Findings", ""] + [f"- {_md(line)}" for line in _findings(scaling)] + [""]
    for t in tables(scaling):
        lines += [
            f"## {_md(t.title)}",
            "",
            "| " + " | ".join(t.header) + " |",
            "|" + "|".join("---" for _ in t.header) + "|",
        ]
        lines += ["| " + " | ".join(_md(cell).replace("|", "/") for cell in row) + " |" for row in t.rows]
        lines.append("")
    if images:
        lines += ["## Plots", ""] + [f"![{Path(name).stem}]({name})" for name in images] + [""]
    return "\n".join(lines)


STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:80em;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #bbb;padding:0.25em 0.6em;
text-align:right;white-space:nowrap}th{background:#eee}td:first-child,th:first-child{text-align:left}
.wide{overflow-x:auto}img{max-width:48%;margin:0.5%;border:1px solid #ddd}li{margin:0.3em 0}"""


def to_html(scaling: dict, images: dict[str, bytes]) -> str:
    """One page, no external resources: plots are data: URIs."""
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><meta name="generator" content="{MARK}">',
        f"<title>Scaling report: {e(scaling['workload'])}</title><style>{STYLE}</style></head><body>",
        f"<h1>Scaling report: {e(scaling['workload'])}</h1>",
        "<ul>" + "".join(f"<li>{e(line)}</li>" for line in _summary(scaling)) + "</ul>",
        f'<p class="verdict"><strong>{e(scaling["verdict"])}</strong></p>' if scaling.get("verdict") else "",
        "<h2>Findings</h2><ul>" + "".join(f"<li>{e(line)}</li>" for line in _findings(scaling)) + "</ul>",
    ]
    if images:
        parts.append(
            "<h2>Plots</h2><div>"
            + "".join(
                f'<img alt="{e(Path(name).stem)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
                for name, png in images.items()
            )
            + "</div>"
        )
    parts.append("<h2>Per rank, each run</h2>" + "".join(rank_figure(run) for run in unique_runs(scaling)))
    for t in tables(scaling):
        parts.append(
            f'<h2>{e(t.title)}</h2><div class="wide"><table><tr>'
            + "".join(f"<th>{e(h)}</th>" for h in t.header)
            + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in t.rows)
            + "</table></div>"
        )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def rank_figure(run: dict) -> str:
    """One run's stacked bar per rank (inline SVG), titled by its series and size, with its straggler."""
    b = run_breakdown(run["report"])
    s = b["straggler"]
    rows = [
        (f"rank {r['rank']} ({r['host']})", r["share"], f"{fmt_seconds(r['total']).strip()} per repeat")
        for r in b["per_rank"]
    ]
    note = f": rank {s['rank']} is the straggler ({s['phase']})" if s else ""
    label = f"batch {run['report']['result'].get('batch_per_rank')}, " if run["mode"] == "batch" else ""
    return (
        f"<figure><figcaption>{html.escape(run['mode'])} at {label}{run['ranks']} rank(s){html.escape(note)}"
        f"</figcaption>{stacked_bars(rows, b['categories'])}</figure>"
    )


def to_csv(scaling: dict) -> str:
    """One row per series and size: the figures, then each phase's median seconds."""
    rows = [row for rows in scaling["series"].values() for row in rows]
    phases = list(rows[0]["timings"]) if rows else []
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        [
            "series",
            "ranks",
            "nodes",
            "link_class",
            "time_s",
            "speedup",
            "efficiency",
            "karp_flatt",
            "comm_share",
            "imbalance",
            "problem_bytes",
            *(f"{p}_median_s" for p in phases),
            "suspect",
        ]
    )
    for row in rows:
        writer.writerow(
            [
                row["mode"],
                row["ranks"],
                len(row["placement"]["hosts"]),
                row["placement"]["link_class"],
                row["time"],
                row["speedup"],
                row["efficiency"],
                "" if row["karp_flatt"] is None else row["karp_flatt"],
                row["comm_share"],
                row["imbalance"],
                row["problem_bytes"] or "",
                *(row["timings"][p]["median"] for p in phases),
                "; ".join(row.get("suspect", [])),
            ]
        )
    return buffer.getvalue()


OUTPUTS = ("scaling.json", "scaling.md", "scaling.csv", "scaling.html", *PLOTS)


def require_scaling_outputs(out_dir: str | Path) -> None:
    """Refuse (InputError) an output folder holding a file of a scaling report's names that spmd did not
    write: before a sweep, not after it."""
    for name in OUTPUTS:
        require_replaceable(Path(out_dir) / name, fix="remove it or choose another --out")


def write_scaling(scaling: dict, out_dir: str | Path) -> list[Path]:
    """Write the plots, scaling.md, scaling.csv, scaling.html and scaling.json as one set (``write_files_atomic``:
    all of them, or, on a full disk, none changed)."""
    out = Path(out_dir)
    images = render_plots(scaling)
    texts = {
        "scaling.csv": to_csv(scaling),
        "scaling.md": to_markdown(scaling, list(images)),
        "scaling.html": to_html(scaling, images),
        "scaling.json": json_text(scaling),
    }
    files = [(out / name, png, 0o666) for name, png in images.items()]
    files += [(out / name, text.encode(), 0o666) for name, text in texts.items()]
    return write_files_atomic(files)
