"""The human-readable summary printed on stdout after a run."""

from __future__ import annotations

from ..core.errors import one_line


def comm_label(report: dict) -> str:
    """What carried the job's exchange: spmd's communicator, or for workload torch DDP's own backend (gloo, nccl)
    beside the communicator spmd used for its own collectives."""
    backend = (report.get("result") or {}).get("backend")
    if backend and report.get("workload") == "torch":
        return f"{backend} (DDP's allreduce; spmd's own collectives on {report['comm']})"
    return str(report["comm"])


def format_report(report: dict, path: str) -> str:
    """A few lines: what ran where, the phase table, the result, where the report is."""
    nodes = report["nodes"]
    lines = [
        f"spmd run: {one_line(report['workload'])} on {report['ranks']} rank(s), {len(nodes)} node(s), "
        f"device={report['device']}, comm={comm_label(report)}, "
        f"{report['repeats']} repeat(s) after {report['warmup']} warm-up: "
        f"{'verified' if report['verified'] else 'NOT verified'} ({report['verification']['reference']})",
        "",
        f"{'phase':<10}{'min [s]':>12}{'median [s]':>12}{'max [s]':>12}{'imbalance':>11}",
    ]
    width = max(len(p) for p in report["timings"])
    lines[-1] = f"{'phase':<{width}}{'min [s]':>12}{'median [s]':>12}{'max [s]':>12}{'imbalance':>11}"
    for phase, t in sorted(report["timings"].items(), key=lambda item: item[0] == "total"):  # total last
        if t["max"] > 0 or phase == "total":  # a phase this workload does not have (train reads once) is left out
            lines.append(
                f"{phase:<{width}}{t['min']:>12.6f}{t['median']:>12.6f}{t['max']:>12.6f}{t['imbalance']:>11.3f}"
            )
    total = (report.get("intervals") or {}).get("total")
    if total:
        lines.append(
            f"time per repeat (slowest rank): {total['median']:.6f} s, {total['level']:.0%} interval "
            f"{total['low']:.6f} - {total['high']:.6f} s over {total['n']} repeat(s)"
        )
    lines.append("")
    for finding in report.get("findings") or []:
        lines.append(f"finding: {one_line(finding)}")
    shown = {key: value for key, value in report["result"].items() if value is not None}
    shown.update(
        {
            key: value
            for key, value in report.get("metrics", {}).items()
            if key.startswith(SHOWN_METRICS) and value is not None
        }
    )
    pad = max(map(len, shown), default=0)
    lines += [f"  {key:<{pad}} = {_shown(value, key=key)}" for key, value in shown.items()]
    lines.append(f"report: {one_line(path)} (and report.html beside it)")
    return "\n".join(lines)


SHOWN_METRICS = ("tflops", "effective_", "compute_GBps", "samples_per_s", "step_ms")


def _shown(value, depth: int = 0, key: str = "") -> str:
    """A value of the result in a line or so: floats to 10 (in lists 6) digits, lists to 8 items, 2 levels; a
    rate in samples/s as a whole number with thousands separators."""
    if key == "samples_per_s" and isinstance(value, (int, float)):
        return f"{value:,.0f}"
    if isinstance(value, float):
        return f"{value:.10g}" if depth == 0 else f"{value:.6g}"
    if isinstance(value, list):
        if depth >= 2:
            return "[...]"
        items = [_shown(v, depth + 1) for v in value[:8]]
        return "[" + ", ".join(items) + (", ...]" if len(value) > 8 else "]")
    return str(value)
