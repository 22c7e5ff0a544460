"""``python -m bench run``: every case of the named suites, each run ``--runs`` times, its records written as soon
as it ends, and a manifest per suite, rewritten after every case, saying what ran, what was skipped and why, and what
failed. A SIGTERM (``timeout``'s, a batch system's time limit) stops the case in progress, which the manifest names
as stopped; what finished before it stays."""

from __future__ import annotations

import json
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Callable

from .env import CaseFailed, Env, gpu_count
from .manifest import manifest, write_manifest
from .records import collect, write_records
from .suites import expand, suites


class Stopped(BaseException):
    """A SIGTERM arrived: not an Exception, so that no case's error handling swallows it."""


def _stop(signum, frame):
    raise Stopped(signal.Signals(signum).name)


def run(
    names: list[str],
    out: Path,
    runs: int,
    quick: bool,
    ranks: int | None,
    argv: list[str],
    only: str | list[str] | None = None,
    max_minutes: float | None = None,
) -> int:
    """Run the suites; 0 when every case that could run did, 1 when one failed."""
    gpus = gpu_count()
    env = Env(
        out=out,
        work=Path(tempfile.mkdtemp(prefix="spmd-bench-")),
        quick=quick,
        ranks=ranks or (gpus if gpus else 2),
        gpus=gpus,
    )
    deadline = time.monotonic() + 60 * max_minutes if max_minutes else None
    failed = False
    facts = manifest(argv, env.ranks)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _stop) if main else None
    try:
        for name in expand(names):
            module = suites()[name]
            folder = out / name
            folder.mkdir(parents=True, exist_ok=True)
            status, commands = [], [facts["command"]]
            cases = module.cases(env)
            chosen = _chooser(only, [case.name for case in cases])
            if only:  # the other cases' records and status, and the commands that ran them, stay as they were
                earlier = _earlier_manifest(folder)
                status = [c for c in earlier.get("cases", []) if not chosen(c["case"])]
                commands = [*earlier.get("commands", [earlier["command"]] if "command" in earlier else []), *commands]
                _drop_records(folder / "records.jsonl", chosen)
            else:
                (folder / "records.jsonl").unlink(missing_ok=True)
            about = (module.__doc__ or "").strip()
            suite_facts = {**facts, "commands": commands, "suite": name, "about": about, "runs": runs, "quick": quick}
            for case in cases:
                if not chosen(case.name):
                    continue
                entry = {"case": case.name, "command": facts["command"], "commit": facts.get("commit")}  # --only merges
                why = env.missing(case.needs)
                if why or (deadline and time.monotonic() > deadline):
                    entry["skipped"] = why or "the run's --max-minutes were spent"
                    status.append(entry)
                    print(f"bench {name}: {case.name}: skipped ({entry['skipped']})", flush=True)
                    continue
                t0 = time.monotonic()
                count = case.runs or runs
                try:
                    measures = case.measure(env, count) if case.batched else [case.measure(env) for _ in range(count)]
                except Stopped as stop:
                    entry["failed"] = f"stopped by {stop} after {time.monotonic() - t0:.0f} s: the run's time limit"
                    entry["seconds"] = round(time.monotonic() - t0, 1)
                    _write_manifest(folder, suite_facts, [*status, entry])
                    print(f"bench {name}: {case.name}: {entry['failed']}; the run ends here", flush=True)
                    return 1
                except (CaseFailed, Exception) as exc:  # noqa: BLE001 - a failed case is recorded, the rest goes on
                    failed = True
                    entry["failed"] = f"{type(exc).__name__}: {exc}"[:2000]
                    if not isinstance(exc, CaseFailed):
                        entry["traceback"] = traceback.format_exc()[-3000:]
                    print(f"bench {name}: {case.name}: FAILED: {entry['failed'][:500]}", flush=True)
                else:
                    records = collect(name, measures, case.name)
                    write_records(folder / "records.jsonl", records)
                    entry["records"] = len(records)
                    print(f"bench {name}: {case.name}: {len(measures)} run(s), {len(records)} record(s)", flush=True)
                entry["seconds"] = round(time.monotonic() - t0, 1)
                status.append(entry)
                _write_manifest(folder, suite_facts, status)  # a run stopped later keeps this case
                _free_device_memory()  # the next case (often another process) gets the GPU's memory
            _write_manifest(folder, suite_facts, status)
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(env.work, ignore_errors=True)
    return 1 if failed else 0


def _write_manifest(folder: Path, facts: dict, status: list[dict]) -> None:
    """The suite's manifest as it stands: its facts and every case's status."""
    write_manifest(folder, {**facts, "cases": status})


def _free_device_memory() -> None:
    if "cupy" in sys.modules:
        from spmd.core.xp import release_memory

        release_memory()


def _earlier_manifest(folder: Path) -> dict:
    path = folder / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _chooser(only: str | list[str] | None, names: list[str]) -> Callable[[str], bool]:
    """Whether ``--only`` picks a case of this name: every case when not given; the case named exactly ``only``
    when there is one (``batch sweep``, not also ``examples, batch sweep``); else every case whose name holds it.
    Given several times, a case any of them picks."""
    if not only:
        return lambda name: True
    if not isinstance(only, str):
        picks = [_chooser(one, names) for one in only]
        return lambda name: any(pick(name) for pick in picks)
    if only in names:
        return lambda name: name == only
    return lambda name: only in name


def _drop_records(path: Path, chosen: Callable[[str], bool]) -> None:
    """Remove from ``path`` the records of the cases about to run again."""
    if path.exists():
        kept = [line for line in path.read_text().splitlines() if not chosen(json.loads(line).get("bench_case", ""))]
        path.write_text("".join(line + "\n" for line in kept))
