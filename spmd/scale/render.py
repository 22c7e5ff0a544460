"""scaling.json -> tables -> scaling.md and a self-contained scaling.html (plots inlined).

The same tables feed both formats, so they never disagree.
"""

from __future__ import annotations

import base64
import csv
import html
import io
from dataclasses import dataclass
from pathlib import Path

from ..core.files import MARK, json_text, require_replaceable, write_files_atomic
from ..core.units import fmt_bytes, fmt_seconds
from ..report.breakdown import breakdown
from ..report.svg import stacked_bars
from ..report.table import comm_label
from .analysis import measured_once
from .plots import PLOTS, render_plots


@dataclass
class Table:
    title: str
    header: list[str]
    rows: list[list[str]]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def tables(scaling: dict) -> list[Table]:
    """Every table of the report, in order."""
    out = [
        Table(
            "Runs (intervals: 95% of the median repeat, or the level its repeats reach)",
            [
                "series",
                "ranks",
                "nodes",
                "link",
                "time / repeat",
                "speedup",
                "efficiency",
                "Karp-Flatt",
                "comm share",
                "imbalance",
                "verified",
                "suspect",
            ],
            [
                [
                    row["mode"],
                    str(row["ranks"]),
                    str(len(row["placement"]["hosts"])),
                    row["placement"]["link"],
                    _with_interval(row, "time", fmt_seconds),
                    _with_interval(row, "speedup", "{:.2f}x".format),
                    _with_interval(row, "efficiency", _pct),
                    "-" if row["karp_flatt"] is None else f"{row['karp_flatt']:.3f}",
                    _pct(row["comm_share"]),
                    f"{row['imbalance']:.3f}",
                    "yes" if row["verified"] else "NO",
                    "; ".join(row.get("suspect", [])) or "-",
                ]
                for rows in scaling["series"].values()
                for row in rows
            ],
        )
    ]
    for mode, rows in scaling["series"].items():
        phases = [p for p in rows[0]["timings"] if any(row["timings"][p]["max"] > 0 for row in rows)]
        out.append(
            Table(
                f"Phases, {mode} scaling: median (min - max) over ranks",
                ["ranks", *phases],
                [[str(row["ranks"]), *(_spread(row["timings"].get(p)) for p in phases)] for row in rows],
            )
        )
    out.append(
        Table(
            "Where the ranks ran",
            ["series", "ranks", "ranks per node", "devices", "link"],
            [
                [
                    row["mode"],
                    str(row["ranks"]),
                    ", ".join(f"{h}: {n}" for h, n in row["placement"]["ranks_per_node"].items()),
                    ", ".join(row["placement"]["devices"]),
                    row["placement"]["link"],
                ]
                for rows in scaling["series"].values()
                for row in rows
            ],
        )
    )
    out += rank_tables(scaling)
    out += batch_tables(scaling.get("batch_sweep"))
    out += other_machine_tables(scaling.get("other_machines"))
    model = scaling.get("model")
    if model and not scaling.get("training"):  # a training job's answer is the step model (batch_tables)
        out.append(
            Table(
                "Model: each rank's own work, time = intercept + (bytes per rank) / rate x (1 + node term x (k - 1)),"
                " k ranks on a node",
                ["phase", "fit", "rate", "intercept", "node term"],
                [
                    [
                        p,
                        f"{f['fit']}, {f.get('shares', '?')} share(s)",
                        "-" if not f["rate_Bps"] else f"{f['rate_Bps'] / 1e9:.3g} GB/s",
                        fmt_seconds(f["intercept_s"]),
                        node_term(f),
                    ]
                    for p, f in model["local"].items()
                ],
            )
        )
        c = model["comm"]
        out.append(
            Table(
                "Model: communication, time = overhead + alpha x steps + bytes on link / busbw",
                ["backend", "alpha (latency per step)", "busbw", "overhead", "fitted from"],
                [
                    [
                        c["backend"],
                        fmt_seconds(c["alpha_s"]),
                        "-" if not c["busbw_Bps"] else f"{c['busbw_Bps'] / 1e9:.3g} GB/s",
                        fmt_seconds(c["overhead_s"]),
                        c["source"],
                    ]
                ],
            )
        )
        validated = (
            ""
            if model.get("validated", True)
            else f" (NOT VALIDATED: {model['points_fitted']} point(s) for {model['parameters']} parameters)"
        )
        out.append(
            Table(
                "Model against each measured point" + validated,
                ["series", "ranks", "problem", "measured", "predicted", "error", "in fit"],
                [
                    [
                        str(p["mode"]),
                        str(p["ranks"]),
                        fmt_bytes(p["problem_bytes"]),
                        fmt_seconds(p["measured_s"]),
                        fmt_seconds(p["predicted_s"]),
                        f"{p['error']:+.1%}",
                        "yes" if p["fitted"] else "no (oversubscribed)",
                    ]
                    for p in model["points"]
                ],
            )
        )
        pred = model["predictions"]
        best = pred["best"]
        out.append(
            Table(
                f"Predicted time for the configured problem ({fmt_bytes(best['problem_bytes'])})",
                ["ranks", "predicted", ""],
                [
                    [
                        str(r["ranks"]),
                        fmt_seconds(r["predicted_s"]),
                        ("best" if r["ranks"] == best["best_ranks"] else "")
                        + (" (extrapolated)" if r["ranks"] > pred["measured_max_ranks"] else ""),
                    ]
                    for r in best["by_ranks"]
                ],
            )
        )
        out.append(
            Table(
                "Break-even: problem size per rank above which n ranks beat one",
                ["ranks", "above"],
                [
                    [str(e["ranks"]), fmt_bytes(e["bytes_per_rank"]) if e["status"] == "above" else e["status"]]
                    for e in pred["break_even"]
                ],
            )
        )
    return out


def other_machine_tables(predictions: list[dict] | None) -> list[Table]:
    """On other machines (``spmd predict``): per target, the predicted runs, measured ones beside them, the
    break-even and what the prediction rests on."""
    from .predict import break_even_words

    out = []
    for p in predictions or []:
        t = p["target"]
        checked = {(c["mode"], c["ranks"]): c for c in p.get("checked") or []}
        links = "; ".join(
            f"{level}: {fmt_seconds(link['latency_s'])} a step, {link['busbw_Bps'] / 1e9:.3g} GB/s bus bandwidth "
            f"({link['source']})"
            for level, link in (("inside a node", t["intra"]), ("between nodes", t["inter"]))
            if link
        )
        rows = []
        for r in p["rows"]:
            c = checked.get((r["mode"], r["ranks"]))
            rows.append(
                [
                    r["mode"],
                    str(r["ranks"]),
                    str(r["nodes"]),
                    f"{fmt_seconds(r['predicted_s'])} ({fmt_seconds(r['interval'][0])} - {fmt_seconds(r['interval'][1])})",
                    "-" if r["speedup"] is None else f"{r['speedup']:.2f}x",
                    _pct(r["efficiency"]),
                    fmt_seconds(r["comm_s"]),
                    fmt_seconds(c["measured_s"]) if c else "-",
                    f"{c['error']:+.1%}" if c else "-",
                ]
            )
        rows += [
            ["break-even", str(e["ranks"]), str(e["nodes"]), break_even_words(e), "", "", "", "", ""]
            for e in p["break_even"]
        ]
        rows += [["note", "", "", n, "", "", "", "", ""] for n in [links, *p["notes"]] if n]
        out.append(
            Table(
                f"On other machines: {t['name']} (predicted, {t['gpus_per_node']} a node)",
                [
                    "series",
                    "ranks",
                    "nodes",
                    "time / repeat (interval)",
                    "speedup",
                    "efficiency",
                    "collectives",
                    "measured",
                    "error",
                ],
                rows,
            )
        )
    return out


def node_term(fit: dict) -> str:
    """What each further rank on a node adds to a local phase's time per byte ('-' where the fit has no node term)."""
    c = fit.get("node_seconds_per_byte")
    if not c:
        return "-"
    b = fit["seconds_per_byte"]
    return f"+{c / b:.0%} a rank" if b > 0 else f"+{fmt_seconds(c * 2**30)} per GiB a rank"


def _with_interval(row: dict, key: str, fmt) -> str:
    """``value [low - high]`` of a row's figure and its interval (where the row has one)."""
    iv = row.get(f"{key}_interval")
    value = fmt(row[key]).strip()
    return value if not iv else f"{value} [{fmt(iv[0]).strip()} - {fmt(iv[1]).strip()}]"


def rank_tables(scaling: dict) -> list[Table]:
    """Per run, where each rank's repeats went (report.json's breakdown) and the straggler, if any."""
    out = []
    for run in _unique_runs(scaling):
        b = run_breakdown(run["report"])
        s = b["straggler"]
        title = f"Per rank, {run['mode']} at {run['ranks']} rank(s): share of a repeat" + (
            f"; straggler: rank {s['rank']} ({s['phase']})" if s else ""
        )
        out.append(
            Table(
                title,
                ["rank", "host", *b["categories"], "overlap", "per repeat"],
                [
                    [
                        str(r["rank"]),
                        r["host"],
                        *(_pct(r["share"][c]) for c in b["categories"]),
                        _pct(r["overlap"]),
                        fmt_seconds(r["total"]),
                    ]
                    for r in b["per_rank"]
                ],
            )
        )
    return out


def run_breakdown(report: dict) -> dict:
    """A run's breakdown: as its report.json has it, or computed from its repeats (a report of an earlier spmd)."""
    return report.get("breakdown") or breakdown(
        [r["repeats"] for r in report["per_rank"]], [str(r.get("host", "?")) for r in report["per_rank"]]
    )


def _unique_runs(scaling: dict) -> list[dict]:
    """The sweep's runs, each measured once (a weak run reusing its strong twin is left out), batch runs last."""
    runs = measured_once(scaling.get("runs", []))
    return sorted(runs, key=lambda r: (r["mode"] == "batch", r["mode"], r["ranks"]))


def batch_tables(sweep: dict | None) -> list[Table]:
    """The batch sweep: the table of per-GPU batch x {1, N} ranks, and the step model at each batch."""
    if not sweep:
        return []
    n = sweep["ranks"]
    out = [
        Table(
            f"Batch sweep: samples/s at each per-GPU batch, 1 rank and {n}",
            ["batch", "1 rank", f"{n} ranks", "speedup", "verified"],
            [
                [
                    str(r["batch"]),
                    f"{r['samples_per_s_1']:,.0f}",
                    f"{r['samples_per_s_n']:,.0f}",
                    f"{r['speedup']:.2f}x",
                    "yes" if r["verified"] else "NO",
                ]
                for r in sweep["rows"]
            ],
        )
    ]
    model = sweep.get("model")
    if model:
        out.append(
            Table(
                "Batch sweep model against each measured batch",
                ["batch", "measured", "predicted", "error", f"predicted at {model['next_ranks']}"],
                [
                    [
                        str(p["batch"]),
                        f"{p['measured_speedup']:.2f}x",
                        f"{p['predicted_speedup']:.2f}x",
                        f"{p['error']:+.1%}",
                        f"{p['predicted_speedup_next']:.2f}x",
                    ]
                    for p in model["points"]
                ],
            )
        )
    return out


def _spread(t: dict | None) -> str:
    if t is None:
        return "-"
    return f"{fmt_seconds(t['median'])} ({fmt_seconds(t['min'])} - {fmt_seconds(t['max'])})"


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
    parts.append("<h2>Per rank, each run</h2>" + "".join(rank_figure(run) for run in _unique_runs(scaling)))
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
