"""A sweep's tables: runs, model, other machines, per rank, batches: what scaling.md and scaling.html both show
(``render``), one table builder for both, so they never disagree."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.units import fmt_bytes, fmt_seconds
from ...report.breakdown import breakdown
from ..sweep.analysis import measured_once


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
        if pred.get("withheld"):
            return out
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


def scaling_device(prediction: dict) -> str:
    """'gpu' or 'cpu': the device of the sweep a prediction comes from (its assumptions name it)."""
    return "gpu" if any(a.startswith("each target GPU") for a in prediction.get("assumes") or []) else "cpu"


def other_machine_tables(predictions: list[dict] | None) -> list[Table]:
    """On other machines (``spmd predict``): per target, the predicted runs, measured ones beside them, the
    break-even and what the prediction rests on."""
    from ..decision.prediction_words import break_even_words, input_words, speedup_span

    out = []
    for p in predictions or []:
        t = p["target"]
        checked = {(c["mode"], c["ranks"]): c for c in p.get("checked") or []}
        links = "; ".join(
            f"{level}: {fmt_seconds(link.get('base_s', 0.0))} a call and {fmt_seconds(link['latency_s'])} a "
            f"{'round' if link.get('library') == 'mpi' else 'step'}, "  # MPI's rounds, a doubling each (links.py)
            f"{link['busbw_Bps'] / 1e9:.3g} GB/s bus bandwidth ({link['source']})"
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
                    f"{fmt_seconds(r['predicted_s'])} "
                    f"({fmt_seconds(r['interval'][0])} - {fmt_seconds(r['interval'][1])})",
                    "-"
                    if r["speedup"] is None
                    else f"{r['speedup']:.2f}x{speedup_span(r)}" + (" (beyond ideal)" if r.get("flags") else ""),
                    _pct(r["efficiency"]),
                    fmt_seconds(r["comm_s"]),
                    fmt_seconds(c["measured_s"]) if c else "-",
                    f"{c['error']:+.1%}" if c else "-",
                    f"{c['measured_speedup']:.2f}x ({c['speedup_error']:+.1%})" if c and "speedup_error" in c else "-",
                ]
            )
        device = scaling_device(p)
        rows += [
            ["break-even", str(e["ranks"]), str(e["nodes"]), break_even_words(e, device), "", "", "", "", "", ""]
            for e in p["break_even"]
        ]
        rows += [["assumes", "", "", a, "", "", "", "", "", ""] for a in p.get("assumes") or []]
        suspect = (p.get("sweep") or {}).get("suspect") or []
        if suspect:
            rows.append(
                ["note", "", "", f"the sweep had {len(suspect)} suspect point(s), left out of the fit", *[""] * 6]
            )
        priced = [f"priced from {words}" for words in input_words(t)]
        rows += [["note", "", "", n, "", "", "", "", "", ""] for n in [*priced, links, *p["notes"]] if n]
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
                    "measured speedup (error)",
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
    for run in unique_runs(scaling):
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


def unique_runs(scaling: dict) -> list[dict]:
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
