"""The human-readable summary printed on stdout after a run."""

from __future__ import annotations


def format_report(report: dict, path: str) -> str:
    """A few lines: what ran where, the phase table, the result, where the report is."""
    nodes = report["nodes"]
    lines = [f"spmd run: {report['workload']} on {report['ranks']} rank(s), {len(nodes)} node(s), "
             f"device={report['device']}, comm={report['comm']}, "
             f"{report['repeats']} repeat(s) after {report['warmup']} warm-up: "
             f"{'verified' if report['verified'] else 'NOT verified'} ({report['verification']['reference']})",
             "",
             f"{'phase':<10}{'min [s]':>12}{'median [s]':>12}{'max [s]':>12}{'imbalance':>11}"]
    for phase, t in report["timings"].items():
        lines.append(f"{phase:<10}{t['min']:>12.6f}{t['median']:>12.6f}{t['max']:>12.6f}{t['imbalance']:>11.3f}")
    lines.append("")
    for key, value in report["result"].items():
        lines.append(f"  {key:<5} = {_shown(value)}")
    for key, value in report.get("metrics", {}).items():
        if key.startswith(("tflops", "effective_", "compute_GBps")):
            lines.append(f"  {key} = {_shown(value)}")
    lines.append(f"report: {path}")
    return "\n".join(lines)


def _shown(value, depth: int = 0) -> str:
    """A value of the result in a line or so: floats to 10 (in lists 6) digits, lists to 8 items, 2 levels."""
    if isinstance(value, float):
        return f"{value:.10g}" if depth == 0 else f"{value:.6g}"
    if isinstance(value, list):
        if depth >= 2:
            return "[...]"
        items = [_shown(v, depth + 1) for v in value[:8]]
        return "[" + ", ".join(items) + (", ...]" if len(value) > 8 else "]")
    return str(value)
