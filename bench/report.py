"""``python -m bench report``: the documents' figures rendered from the raw results (Jinja2 templates in
bench/templates), never typed by hand.

Raw results live in docs/results/<machine-kind>/<suite>/ (records.jsonl and manifest.json, as ``bench run``
wrote them). ``render`` writes docs/benchmarks.md whole, docs/commands.md whole from spmd's parsers, and every
block of a document between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->`` (README's results, a figure in
a doc) from templates/NAME.md.j2. ``--check`` renders in memory and fails (exit 1), naming the document, where a
committed one differs: re-rendering the committed results must change nothing.
"""

from __future__ import annotations

import gzip
import importlib
import json
import math
import re
import statistics
import sys
import textwrap
from pathlib import Path

import jinja2

from .commands import markdown as commands_markdown
from .env import ROOT
from .records import Record, launch_times, ratios, read_records, strongest, summary
from .suites import suites
from .targets import notes as target_notes
from .targets import rows as target_rows

RESULTS = ROOT / "docs/results"
LINKS = ROOT / "tests/fixtures/links"  # `spmd bench comm --links` files as recorded on the lent machines
TEMPLATES = Path(__file__).resolve().parent / "templates"
WHOLE = {"benchmarks.md.j2": ROOT / "docs/benchmarks.md"}
# <!-- bench:NAME key=value ... --> ... <!-- /bench:NAME -->: a block rendered from templates/NAME.md.j2 with the keys
BLOCK = re.compile(
    r"(<!-- bench:(?P<name>[\w-]+)(?P<args>(?: [\w-]+=[\w.,/-]+)*) -->\n)(?P<body>.*?)(<!-- /bench:(?P=name) -->)", re.S
)


def fmt(value: float, unit: str = "") -> str:
    """Three significant digits, thousands grouped: 2.75 TB/s, 829,000 samples/s, 0.0453 s."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    digits = 3 - len(str(int(magnitude))) if magnitude >= 1 else 3
    if magnitude < 1:
        text = f"{value:#.3g}".rstrip(".")
        return text if "e" not in text else f"{value:.2e}"
    return f"{value:.{max(digits, 0)}f}"


def spread(values: list[float]) -> str:
    s = summary(values)
    if s["n"] == 1:
        return f"{fmt(s['median'])} (1 run)"
    return f"{fmt(s['median'])} ({fmt(s['min'])} - {fmt(s['max'])}, {s['n']} runs)"


def rows_of(records: list[Record]) -> list[dict]:
    """A table's rows: per case and metric, each result subject with the ceiling and the strongest peer measured
    beside it, and spmd's margin against each (the median of the run-by-run ratios, above 1: spmd ahead)."""
    groups: dict[tuple, list[Record]] = {}
    for r in records:
        groups.setdefault((r.case, r.metric), []).append(r)
    out = []
    for (case, metric), members in groups.items():
        ceilings = [r for r in members if r.role == "ceiling"]
        peers = [r for r in members if r.role == "peer"]
        peer = strongest(peers)
        for result in (r for r in members if r.role == "result"):
            row = {
                "case": case,
                "metric": metric,
                "unit": result.unit,
                "subject": result.subject,
                # a subject named "the same, ..." is spmd's own changed one way, timed beside it (not what it runs)
                "variant": result.subject.startswith("the same"),
                "value": spread(result.values),
                "better": result.better,
            }
            for name, ref in (("ceiling", ceilings[0] if ceilings else None), ("peer", peer)):
                if ref is None:
                    row[name] = row[f"{name}_ratio"] = "-"
                    continue
                row[name] = f"{ref.subject}: {fmt(summary(ref.values)['median'])}"
                paired = ratios(result, ref)
                row[f"{name}_ratio"] = spread(paired) if paired else "-"
            out.append(row)
    return out


def fault_rows(records: list[Record]) -> list[dict]:
    """The faults suite's table: per case its fault, exit code, time to exit and message (its records' params)."""
    return [
        {
            "case": r.case,
            "fault": r.params.get("fault"),
            "exit": r.params.get("exit"),
            "seconds": f"{summary(r.values)['median']:.1f} s",
            "message": r.params.get("message", ""),
        }
        for r in records
        if r.suite == "faults" and r.role == "result" and "exit" in r.params
    ]


def machine(manifest: dict) -> str:
    """'2 x NVIDIA H200 (driver 580.159.04), 32 CPUs' or 'Intel Xeon ..., 2 CPUs, no GPU'."""
    gpus = manifest.get("gpus") or []
    cpus = f"{manifest['cpus']} CPUs"
    if manifest.get("cpus_total", manifest["cpus"]) != manifest["cpus"]:
        cpus = f"{manifest['cpus']} of its {manifest['cpus_total']} CPUs"
    bound = manifest.get("rank_cpus") or []
    if len(bound) > 1:  # how the launcher bound the ranks: one CPU each is what a launch-bound step measures
        each = f"{min(bound)}" if min(bound) == max(bound) else f"{min(bound)}-{max(bound)}"
        cpus += f" ({len(bound)} ranks on {each} CPU(s) each)"
    if gpus:
        return f"{len(gpus)} x {gpus[0]['name']} (driver {gpus[0]['driver']}), {cpus}"
    return f"{manifest['cpu']}, {cpus}, no GPU"


def kinds() -> list[str]:
    return sorted(p.name for p in RESULTS.iterdir() if p.is_dir() and any(p.glob("*/manifest.json")))


def load() -> dict:
    """{suite: [{kind, manifest, rows, raw, skipped, failed}]} of every committed result, suites in runner order."""
    out: dict[str, list] = {name: [] for name in suites()}
    for kind in kinds():
        for name in out:
            folder = RESULTS / kind / name
            if not (folder / "manifest.json").exists():
                continue
            manifest = json.loads((folder / "manifest.json").read_text())
            records = read_records(folder / "records.jsonl") if (folder / "records.jsonl").exists() else []
            cases = manifest.get("cases", [])
            out[name].append(
                {
                    "kind": kind,
                    "manifest": manifest,
                    "folder": folder,
                    "records": records,
                    "rows": rows_of(records),
                    "raw": f"results/{kind}/{name}/records.jsonl",
                    "faults": fault_rows(records),
                    "skipped": [c for c in cases if "skipped" in c],
                    "failed": [c for c in cases if "failed" in c],
                }
            )
    return out


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.filters["spread"] = spread
    env.filters["cell"] = lambda text: str(text).replace("|", "/").replace("\n", " ")
    env.filters["machine"] = machine
    # every command that measured a suite's cases (bench run --only adds to an earlier run's), in order
    env.filters["commands"] = lambda m: ", then ".join(f"`{c}`" for c in m.get("commands", [m["command"]]))
    env.filters["provenance"] = provenance
    env.filters["prediction_error"] = prediction_error
    env.filters["interval_coverage"] = interval_coverage
    env.filters["launch_spread"] = launch_spread
    env.filters["by_input_kind"] = by_input_kind
    env.filters["speedup_coverage"] = speedup_coverage
    env.filters["oneline"] = lambda text: " ".join(str(text).split())
    env.filters["wrap"] = lambda text, width=112, indent="": "\n".join(
        textwrap.wrap(str(text), width, initial_indent=indent, subsequent_indent=indent)
    )
    return env


def each_run(records) -> list[dict]:
    """Every run's check over the records: a record's ``runs``, or its own params where it keeps one run's."""
    return [p for r in records for p in (r.params.get("runs") or [r.params])]


def interval_coverage(records) -> str:
    """How often a measured time fell inside its prediction's interval, over every run of every record: 'k of n
    (Wilson 95% interval low - high%)', or '' where no run kept both."""
    inside = [
        p["interval"][0] <= p["measured_s"] <= p["interval"][1]
        for p in each_run(records)
        if "interval" in p and "measured_s" in p
    ]
    if not inside:
        return ""
    low, high = wilson(sum(inside), len(inside))
    return f"{sum(inside)} of {len(inside)} ({100 * low:.0f} - {100 * high:.0f}%, Wilson 95% interval)"


def speedup_coverage(records) -> str:
    """How often a measured speedup (one launch's runs against each other) fell inside its predicted interval, and
    the intervals' median half-width (relative to the predicted speedup), over every run of every record that kept
    one: '' where none did."""
    kept = [p for p in each_run(records) if p.get("speedup_interval") and p.get("measured_speedup")]
    if not kept:
        return ""
    # an interval open above (its time could reach zero: no upper end) holds every speedup over its lower end
    spans = [(p["speedup_interval"][0], p["speedup_interval"][1] or math.inf) for p in kept]
    inside = [lo <= p["measured_speedup"] <= hi for p, (lo, hi) in zip(kept, spans)]
    halves = [(hi - lo) / 2 / (p["measured_speedup"] * (1 + p["speedup_error"])) for p, (lo, hi) in zip(kept, spans)]
    low, high = wilson(sum(inside), len(inside))
    open_above = sum(hi == math.inf for _, hi in spans)
    return (
        f"{sum(inside)} of {len(inside)} ({100 * low:.0f} - {100 * high:.0f}%, Wilson 95% interval), their "
        f"intervals' median half-width {100 * statistics.median(halves):.1f}% of the predicted speedup"
        + (f" ({open_above} of them open above: no upper end)" if open_above else "")
    )


def by_input_kind(records) -> list[tuple[str, list]]:
    """The records grouped by the kind of input their predictions were made from (params ``kind``), in first-seen
    order."""
    groups: dict[str, list] = {}
    for r in records:
        groups.setdefault(r.params.get("kind", "unnamed"), []).append(r)
    return list(groups.items())


def launch_spread(records) -> str:
    """How much the measured time of one case moved from launch to launch (each run its own launch): over the records
    of several runs, the median and the largest max/min - 1; '' where none has several."""
    spreads = []
    for r in records:
        times = launch_times(r)
        if len(times) > 1:
            spreads.append(max(times) / min(times) - 1)
    if not spreads:
        return ""
    return (
        f"median {100 * statistics.median(spreads):.1f}%, largest {100 * max(spreads):.1f}% over {len(spreads)} cases"
    )


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a binomial share k/n (95% by default)."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def prediction_error(record) -> str:
    """A prediction's error cell: one run's signed error; over several runs the median run's signed error and the
    runs' signed range (noise or a bias, told apart), or, where the runs kept no check of their own, the median
    |error| and its range."""
    values = record.values
    if len(values) == 1:
        return f"{100 * record.params['error']:+.1f}%"
    signed = [run["error"] for run in record.params.get("runs") or []]
    if signed:
        low, high = 100 * min(signed), 100 * max(signed)
        return f"{100 * record.params['error']:+.1f}% ({low:+.1f} to {high:+.1f}%, {len(signed)} runs)"
    median = sorted(values)[len(values) // 2]
    return f"{100 * median:.1f}% ({100 * min(values):.1f} - {100 * max(values):.1f}%, {len(values)} runs)"


def provenance(m: dict) -> str:
    """The date and commit of a suite's run, and each case that a later ``bench run --only`` measured at another
    commit (its own commit and date), so that no figure is credited to a commit that did not run it."""
    top = short_commit(m["commit"])
    measured = [c for c in m.get("cases", []) if c.get("commit") and "records" in c]
    elsewhere = [c for c in measured if {short_commit(x["commit"]) for x in _calls(c) if x.get("commit")} != {top}]
    joined_here = [c for c in measured if c not in elsewhere and c.get("earlier")]
    text = f"{m['date'][:10]}, commit `{top}`"
    if elsewhere:
        text += f" (cases measured at other commits: {', '.join(_case_commits(c, m['date']) for c in elsewhere)})"
    if joined_here:  # several calls of a case, every one at the top commit: counted, not credited elsewhere
        counts = {len(_calls(c)) for c in joined_here}
        if len(joined_here) == len(measured) and len(counts) == 1:
            text += f" (each case in {counts.pop()} calls, all at that commit)"
        else:
            cases = ", ".join(f"`{c['case']}` ({len(_calls(c))} calls)" for c in joined_here)
            text += f" (in several calls, all at that commit: {cases})"
    again = (m.get("rechecked") or [])[-1:]  # bench recheck: the measured inputs, the model of a later commit
    return text + "".join(_rechecked(r) for r in again)


def _rechecked(r: dict) -> str:
    """The last ``bench recheck``: how many of the suite's records it derived again, at which commit (its
    ``+changes`` mark kept: the model that derived them was not a commit's alone); nothing claimed of none."""
    at = f"`{short_commit(r['commit'])}` ({r['date'][:10]})"
    if not r.get("records"):
        count = f" {r['of']}" if "of" in r else ""
        return f"; `bench recheck` at {at} derived none of its{count} records again"
    of = f" of {r['of']}" if "of" in r else ""
    return f"; {r['records']}{of} records derived again from the measured inputs at {at}"


def short_commit(commit: str) -> str:
    """A commit's first 12 hex digits, with its ``+changes`` mark (a tree that differed from it) kept."""
    head, mark, rest = commit.partition("+")
    return head[:12] + mark + rest


def _calls(case: dict) -> list[dict]:
    """A case's calls, the earlier ones ``bench merge --add-runs`` joined first, then its own."""
    return [*case.get("earlier", []), case]


def _case_commits(case: dict, date: str) -> str:
    """A case and the commits and dates its runs were measured at: its own and those of earlier calls that
    ``bench merge --add-runs`` joined (each commit and date once, with the count of calls where several)."""
    calls = _calls(case)
    at = dict.fromkeys(f"`{short_commit(c['commit'])}` ({c.get('date', date)[:10]})" for c in calls if c.get("commit"))
    count = f" ({len(calls)} calls)" if len(calls) > 1 else ""
    return f"`{case['case']}`{count} at {', '.join(at)}"


def decided_again(folder: Path) -> list[dict]:
    """Each sweep a suite's records keep (``params.inputs.scaling``, gzipped), decided again by spmd as it is now:
    {'case', 'verdict', 'cost' (its own cost in words, as measured), 'file'}; the sweep's measurements are the
    stored ones, the decision and its words today's."""
    from spmd.scale.decision.advice import cost_words
    from spmd.scale.sweep.analysis import reanalyse

    seen, out = set(), []
    records = read_records(folder / "records.jsonl") if (folder / "records.jsonl").exists() else []
    for record in records:
        rel = ((record.params or {}).get("inputs") or {}).get("scaling")
        if not rel or rel in seen:
            continue
        seen.add(rel)
        stored = json.loads(gzip.decompress((folder / rel).read_bytes()))
        again = reanalyse(stored)
        out.append(
            {
                "case": record.params.get("sweep") or record.case,
                "verdict": again["verdict"],
                "cost": cost_words(stored["cost"]) if stored.get("cost") else None,
                "file": f"results/{folder.parent.name}/{folder.name}/{rel}",
            }
        )
    return out


def checks_cost(folder: Path) -> list[dict]:
    """Per case of verification's cost by turns (torch_verify_cost.py's records): the checked steps in words,
    report.json's ``share_of_wall`` over the turns (median, low, high, as percentages), the checks' parts summed over
    one run's checks (seconds, largest first), each check's seconds, the draws the budget left out and the late
    change's outcome."""
    records = read_records(folder / "records.jsonl") if (folder / "records.jsonl").exists() else []
    out, seen = [], set()
    for r in records:
        p = r.params or {}
        if not p.get("share_of_wall") or r.case in seen:
            continue
        seen.add(r.case)
        shares = [100 * x for x in p["share_of_wall"]]
        parts = sorted((p.get("parts") or {}).items(), key=lambda kv: -kv[1])
        late = p.get("late") or {}
        out.append(
            {
                "case": r.case,
                "checked": p.get("checked_words"),
                "share": {
                    "median": statistics.median(shares),
                    "low": min(shares),
                    "high": max(shares),
                    "n": len(shares),
                },
                "parts": parts,
                "per_check_s": p.get("per_check_s") or [],
                "left_out": (p.get("budget") or {}).get("draws_left_out"),
                "late": {"from": late.get("from_step"), "caught": late.get("caught"), "at": _caught_at(late)},
            }
        )
    return out


def carried_links(fit: str, target: str, ranks: int) -> dict:
    """The links of ``fit``'s recordings (inside a node, on fewer ranks) carried by spmd's model to the allreduce of
    ``target``'s, recorded on ``ranks`` ranks of one node; each a file ``LINKS/{name}.json``, or ``{name}-N.json``
    one a launch. Per size of the target: the median measured time over its launches, the median carried one over the
    fit's and its error, and how far either side's launches lay apart there (max / min - 1 at the nearest recorded
    size; 0 for one launch)."""
    from spmd.scale.models.links import collective_seconds
    from spmd.scale.prediction.machines import links_from_bench

    fits, targets = _launches(fit), _launches(target)
    links = [links_from_bench(data)["intra"] for _, data in fits]
    rows = []
    for r in targets[0][1]["levels"]["intra"]["rows"]:
        measured = statistics.median(seconds_at(data, r["bytes"]) for _, data in targets)
        carried = statistics.median(collective_seconds("allreduce", r["bytes"], ranks, ranks, k, None) for k in links)
        apart = [_apart([seconds_at(data, r["bytes"]) for _, data in side]) for side in (fits, targets)]
        rows.append(
            {
                "bytes": r["bytes"],
                "size": size_label(r["bytes"]),
                "measured_s": measured,
                "carried_s": carried,
                "error": carried / measured - 1,
                "spread": max(apart),
            }
        )
    return {
        "launches": len(fits),
        "target_launches": len(targets),
        "from_ranks": fits[0][1]["levels"]["intra"]["ranks"],
        "rows": rows,
        "files": [name for name, _ in fits + targets],
        **against_the_goal(rows),
    }


def carried_calls(kind: str, suites: str, ranks: int, commit: str | None = None, op: str = "allreduce") -> dict:
    """``bench.tools.carried_calls``' table of the CPU rounds ``suites``' ``op`` carried to ``ranks`` ranks, by the
    model as it is or, given ``commit``, as it was there (``heldout_inputs.module_at``), so that a table a page reads as
    one model's stays that model's."""
    from .tools import carried_calls as tool

    if commit is None:
        return tool.calls(kind, suites, ranks, op)
    from .tools.heldout_inputs import module_at

    return json.loads(module_at(commit, "bench.tools.carried_calls", [kind, suites, str(ranks), "--op", op]))


def halves(how: str, dirs: str, workloads: str = "") -> str:
    """``bench.tools.rank_halves``'s table ``how`` over ``dirs`` (comma-separated folders under docs/results): the
    rendered twin of the command a page names beside it."""
    from .tools.rank_halves import table  # a tool's own table, imported only where a page renders one

    folders = [RESULTS / d for d in dirs.split(",")]
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        raise FileNotFoundError(f"bench:halves: no folder {', '.join(missing)}")
    return table(how, folders, set(workloads.split(",")) if workloads else None)


# bench.tools modules whose in-sample table a page renders
DESIGN_TOOLS = (
    "interval_design",
    "carried_design",
    "stand_in_design",
    "mpi_steps_design",
    "mpi_bytes_design",
    "per_step_design",
)


def design_table(tool: str, dirs: str) -> str:
    """A design tool's table (``bench.tools.<tool>.table``, one of DESIGN_TOOLS) over ``dirs`` (comma-separated
    folders under docs/results); imported only where a page renders one."""
    if tool not in DESIGN_TOOLS:
        raise ValueError(f"bench: no design tool {tool!r} renders a table (known: {', '.join(DESIGN_TOOLS)})")
    module = importlib.import_module(f"bench.tools.{tool}")
    return module.table([RESULTS / d for d in dirs.split(",")])


def against_the_goal(rows: list[dict]) -> dict:
    """Carried links against the issue's goal: from 1 MiB, how many sizes and the largest |error|; below it, how many
    sizes and how many of them lie within the recordings' own spread."""
    big = [abs(r["error"]) for r in rows if r["bytes"] >= 1 << 20]
    small = [r for r in rows if r["bytes"] < 1 << 20]
    return {
        "large_sizes": len(big),
        "large_worst": max(big, default=0.0),
        "small_sizes": len(small),
        "small_within_spread": sum(abs(r["error"]) <= r["spread"] for r in small),
    }


def _launches(name: str) -> list[tuple[str, dict]]:
    """(file name, parsed) of ``LINKS/{name}.json`` or of each ``{name}-N.json``, one a launch."""
    paths = sorted(p for p in LINKS.glob(f"{name}*.json") if re.fullmatch(rf"{re.escape(name)}(-\d+)?\.json", p.name))
    return [(p.name, json.loads(p.read_text())) for p in paths]


# where a links file keeps each collective's calls inside a node
LINK_ROWS = {"allreduce": "rows", "allgather": "allgather"}


def seconds_at(data: dict, nbytes: int, op: str = "allreduce") -> float:
    """A links file's ``op`` inside a node at its recorded size nearest ``nbytes``."""
    rows = data["levels"]["intra"][LINK_ROWS[op]]
    return min(rows, key=lambda r: abs(math.log(r["bytes"] / nbytes)))["seconds"]


def _apart(times: list[float]) -> float:
    return max(times) / min(times) - 1


def size_label(nbytes: int) -> str:
    """8 B, 512 KiB, 128 MiB: a power of two in its largest whole unit."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def _caught_at(late: dict) -> int | None:
    """The step a late change was caught at, from its message ("... step 39: ...")."""
    found = re.search(r"step (\d+):", late.get("message") or "")
    return int(found[1]) if found else None


TARGET_SUITES = ("kernels", "io", "train")  # the suites bench/targets.py holds to targets


def documents() -> dict[Path, str]:
    """Every rendered document's new text."""
    env, results = environment(), load()
    # per machine kind, {suite: its entry}: what the target rows and notes of that kind are made from
    by_kind = {
        kind: {name: e for name, entries in results.items() for e in entries if e["kind"] == kind} for kind in kinds()
    }
    context = {
        "results": results,
        "suites": {name: (m.__doc__ or "").strip() for name, m in suites().items()},
        "entry": lambda suite, kind: next((e for e in results[suite] if e["kind"] == kind), None),
        "raw": lambda path: json.loads((RESULTS / path).read_text()),
        "sweeps": lambda suite, kind: decided_again(RESULTS / kind / suite),
        "checks_cost": lambda suite, kind: checks_cost(RESULTS / kind / suite),
        "carried": carried_links,
        "carried_calls": carried_calls,
        "halves": halves,
        "design_table": design_table,
        "targets": {kind: target_rows(entries) for kind, entries in by_kind.items()},
        "target_notes": {kind: target_notes(entries) for kind, entries in by_kind.items()},
        # per kind, the suites its target rows come from: (suite, commit, date) of each
        "target_sources": {
            kind: [
                (name, e["manifest"]["commit"][:12], e["manifest"]["date"][:10])
                for name, entries in results.items()
                if name in TARGET_SUITES
                for e in entries
                if e["kind"] == kind
            ]
            for kind in kinds()
        },
    }
    out = {path: env.get_template(name).render(**context) for name, path in WHOLE.items()}
    out[ROOT / "docs/commands.md"] = commands_markdown()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = out.get(path, path.read_text())

        def block(match: re.Match) -> str:
            args = dict(pair.split("=", 1) for pair in match["args"].split())
            body = env.get_template(f"{match['name']}.md.j2").render(**context, **args)
            return f"{match[1]}{body}{match[5]}"

        unmatched(path, text)
        new = BLOCK.sub(block, text)
        if new != text or path in out:
            out[path] = new
    return out


def unmatched(path: Path, text: str) -> None:
    """Fail on a block's opening line that ``BLOCK`` does not take (an argument it cannot parse, no closing line):
    such a block would keep whatever was typed inside it, never rendered."""
    taken = {m.start() for m in BLOCK.finditer(text)}
    for m in re.finditer(r"(?m)^<!-- bench:[\w-]+.*$", text):  # a line of its own: prose may name the syntax
        if m.start() not in taken:
            line = text.count("\n", 0, m.start()) + 1
            raise ValueError(f"{path.name}:{line}: a block bench report cannot render: {m[0]}")


def render(check: bool = False) -> int:
    """Write (or, with ``check``, compare) every rendered document; 1 when a committed one differs."""
    differ = []
    for path, text in documents().items():
        if path.exists() and path.read_text() == text:
            continue
        if check:
            differ.append(path.relative_to(ROOT))
        else:
            path.write_text(text)
            print(f"bench report: wrote {path.relative_to(ROOT)}")
    for path in differ:
        print(f"bench report: {path} is not what its raw results render (python -m bench report)", file=sys.stderr)
    return 1 if differ else 0
