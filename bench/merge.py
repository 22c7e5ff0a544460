"""``python -m bench merge SRC DST``: a suite's folder that came back from another machine (``bench run --only``
there) brought into ``docs/results/KIND/SUITE``. Each case SRC measured replaces that case's records in DST, or
with ``--add-runs`` joins them as further runs (a case whose run takes minutes gets its three runs from several
10-minute calls); the predictions' inputs come along (an incoming name that a kept record uses is given the next
free ``-runK``), inputs no record names any more are removed, and the manifest's case entries and commands follow.
The commit credited is the one whose tree ran: a GPU machine's copy of the checkout has a git HEAD that can lag its
files, so where SRC's manifest lists changes its tree is looked up among this repository's commits."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from spmd.core.errors import InputError
from spmd.core.files import write_bytes_atomic

from .env import ROOT
from .manifest import write_manifest
from .records import Record, median_run, read_records, rewrite_records, run_params
from .suites.predict import INPUTS


def ran_commit(manifest: dict, root: Path = ROOT, depth: int = 500) -> str:
    """The commit whose files ran: the manifest's own where it lists no changes, else the recent commit whose tree
    is the manifest's ``tree``. Refuses (InputError) a tree no commit here has: commit what ran first."""
    if not manifest.get("changes"):
        return manifest["commit"]
    log = subprocess.run(
        ["git", "log", f"-{depth}", "--format=%H %T"], capture_output=True, text=True, timeout=60, cwd=root, check=True
    ).stdout
    for line in log.splitlines():
        commit, tree = line.split()
        if tree == manifest.get("tree"):
            return commit
    raise InputError(
        f"bench merge: the run's files (tree {manifest.get('tree')}, on {manifest['commit'][:12]} with changes) are "
        f"no commit of the last {depth} here: commit the code that ran, then merge"
    )


def merge(src: Path, dst: Path, add_runs: bool = False, root: Path = ROOT) -> int:
    """SRC's measured cases into DST (see the module); returns how many records DST gained or replaced."""
    facts = json.loads((src / "manifest.json").read_text())
    commit = ran_commit(facts, root)
    cases = {c["case"]: c for c in facts.get("cases", []) if "records" in c}
    incoming = [r for r in read_records(src / "records.jsonl") if r.bench_case in cases]
    dst.mkdir(parents=True, exist_ok=True)
    earlier = read_records(dst / "records.jsonl") if (dst / "records.jsonl").exists() else []
    kept = [r for r in earlier if r.bench_case not in cases]
    joined = [r for r in earlier if r.bench_case in cases] if add_runs else []
    renamed = _bring_inputs(src / INPUTS, dst / INPUTS, _inputs_of(kept + joined), _stems(incoming))
    for r in incoming:
        r.params = _renamed(r.params, renamed)
    merged = _in_place(earlier, _joined(joined, incoming))
    rewrite_records(dst / "records.jsonl", merged)
    _remove_unnamed_inputs(dst / INPUTS, _inputs_of(merged))
    _update_manifest(dst, facts, commit, cases, merged, add_runs)
    return len(incoming)


def _in_place(earlier: list[Record], new: list[Record]) -> list[Record]:
    """DST's records with each merged case's new records where its earlier ones stood (a new case's at the end)."""
    cases = {r.bench_case for r in new}
    out, placed = [], set()
    for r in earlier:
        if r.bench_case not in cases:
            out.append(r)
        elif r.bench_case not in placed:
            placed.add(r.bench_case)
            out += [n for n in new if n.bench_case == r.bench_case]
    return out + [n for n in new if n.bench_case not in placed]


def _inputs_of(records: list[Record]) -> set[str]:
    """Every inputs path (``inputs/NAME``) the records' runs name."""
    out = set()
    for r in records:
        for params in [r.params, *r.params.get("runs", [])]:
            out.update((params.get("inputs") or {}).values())
    return out


def _stems(records: list[Record]) -> dict[str, str]:
    """{an input's file name: its prediction's stem}: what the names of one run's inputs share, up to a hyphen (the
    files' roles may hold hyphens and digits: ``links-fit``, ``links-4``)."""
    out = {}
    for r in records:
        for params in [r.params, *r.params.get("runs", [])]:
            names = [Path(path).name for path in (params.get("inputs") or {}).values()]
            shared = os.path.commonprefix(names) if len(names) > 1 else ""
            if "-" in shared:
                out.update(dict.fromkeys(names, shared[: shared.rindex("-")]))
    return out


def _bring_inputs(src: Path, dst: Path, taken: set[str], stems: dict[str, str]) -> dict[str, str]:
    """Copy SRC's inputs into DST; a prediction's files (those of one stem: ``stems``, else the name up to its last
    hyphen) whose names a kept record uses get the next free ``-runK``. Returns {old path: new path} of those
    renamed."""
    if not src.is_dir():
        return {}
    dst.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[Path]] = {}
    for path in sorted(src.glob("*.json.gz")):
        groups.setdefault(stems.get(path.name) or path.name[: path.name.rindex("-")], []).append(path)
    renamed = {}
    for stem, paths in groups.items():
        new = stem
        if any(f"{INPUTS}/{p.name}" in taken for p in paths):
            base = re.sub(r"-run\d+$", "", stem)
            k = 2
            while any(dst.glob(f"{base}-run{k}-*.json.gz")) or any(f"{INPUTS}/{base}-run{k}-" in t for t in taken):
                k += 1
            new = f"{base}-run{k}"
        for p in paths:
            name = new + p.name[len(stem) :]
            write_bytes_atomic(dst / name, p.read_bytes(), overwrite=True, what="a prediction's input")
            if name != p.name:
                renamed[f"{INPUTS}/{p.name}"] = f"{INPUTS}/{name}"
    return renamed


def _renamed(params: dict, renamed: dict[str, str]) -> dict:
    def one(p: dict) -> dict:
        if "inputs" not in p:
            return p
        return {**p, "inputs": {role: renamed.get(path, path) for role, path in p["inputs"].items()}}

    out = one(params)
    if "runs" in out:
        out["runs"] = [one(p) for p in out["runs"]]
    return out


def _joined(earlier: list[Record], incoming: list[Record]) -> list[Record]:
    """``incoming`` with each record's earlier runs (same case, subject and metric) before its own: values joined,
    and where a run kept its own evidence (inputs: a prediction's, a miss's report), every run's params kept and the
    median run's shown."""
    by_key = {(r.case, r.subject, r.metric): r for r in earlier}
    out = []
    for r in incoming:
        before = by_key.pop((r.case, r.subject, r.metric), None)
        if before is not None:
            values = before.values + r.values
            runs = [*run_params(before), *run_params(r)]
            if len(runs) == len(values) and any("inputs" in p for p in runs):  # a run that kept its evidence
                r.params = median_run(runs, values)
            else:
                r.params = before.params  # a record's params are its first run's
            r.values = values
        out.append(r)
    return out + list(by_key.values())


def _remove_unnamed_inputs(folder: Path, named: set[str]) -> None:
    for path in folder.glob("*.json.gz") if folder.is_dir() else []:
        if f"{INPUTS}/{path.name}" not in named:
            path.unlink()


def _update_manifest(dst: Path, facts: dict, commit: str, cases: dict, merged: list[Record], add_runs: bool) -> None:
    path = dst / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {**facts, "cases": [], "commands": []}
    entries = {c["case"]: c for c in manifest.setdefault("cases", [])}
    for name, case in cases.items():
        entry = {
            "case": name,
            "command": case.get("command", facts.get("command")),
            "commit": commit,
            "records": sum(r.bench_case == name for r in merged),
            "seconds": case.get("seconds"),
            "tree": facts.get("tree"),
            "date": facts.get("date"),
        }
        before = entries.get(name)
        if before is not None and add_runs and "records" in before:
            previous = {k: before[k] for k in ("commit", "date", "command") if k in before}
            entry["earlier"] = [*before.get("earlier", []), previous]
        if before is None:
            manifest["cases"].append(entry)
        else:
            before.clear()
            before.update(entry)
    if not any(c.get("commit") == manifest.get("commit") for c in manifest["cases"] if "records" in c):
        # no case stands on the suite's own commit any more: the newest merge's is the suite's
        manifest.update({k: facts[k] for k in ("command", "tree", "date") if k in facts}, commit=commit, changes=[])
    manifest["commands"] = _commands(manifest["cases"])
    write_manifest(dst, manifest)


def _commands(entries: list[dict]) -> list[str]:
    """The commands behind the cases' standing records, each once, earlier calls first: a replaced case's old
    commands go with its records."""
    out: list[str] = []
    for entry in entries:
        for command in [*(e.get("command") for e in entry.get("earlier", [])), entry.get("command")]:
            if command and command not in out:
                out.append(command)
    return out
