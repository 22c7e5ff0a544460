"""One failure case (``FaultCase``) and how it is run as a user would run it (``run_case``).

A case ends as it must when its exit code is right, it ends within timeout_s + 30 s, it leaves no report, its
output says each of its phrases and its own check passes. bench's faults suite and the launched tests run cases
this way; docs/reliability.md's table is rendered from the suite's records."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import h5py
import yaml

TIMEOUT_S = 5  # the watchdog's timeout_s in these runs
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"  # the repository's examples/


@dataclass
class FaultCase:
    """One row of the table.

    Attributes:
        config: changes to the base config (a reduce of x.h5), or the whole config's text (str or bytes).
        argv: spmd's arguments, ``{config}`` standing for the config (default: run it).
        driver: a Python script run in place of ``-m spmd``, given ``driver_args`` then ``argv``.
        ranks: None: the script's --ranks under mpiexec; 0: a plain command, no mpiexec.
        interrupt: SIGINT goes to mpiexec once this holds (given the case's folder); time counts from it.
        expect: the exit code it must end with (None: any non-zero).
        says: the phrases the output must hold: the cause, and the rank or file where that is the point.
            ``{host}`` stands for this machine's name (as in "rank 1 on {host}").
        check: given the folder afterwards, what is wrong, or None.
    """

    name: str
    fault: str | None = None
    config: dict | str | bytes = field(default_factory=dict)
    prepare: Callable[[Path], object] | None = None
    argv: list[str] | None = None
    driver: str | None = None
    driver_args: list[str] = field(default_factory=list)
    ranks: int | None = None
    interrupt: Callable[[Path], bool] | None = None
    expect: int | None = None
    says: tuple[str, ...] = ()
    check: Callable[[Path], str | None] | None = None


def report_json() -> dict:
    """A small report.json of spmd run's schema (what report compare reads)."""
    stats = {"min": 1.0, "median": 1.0, "max": 1.0}
    return {
        "schema": 1,
        "spmd_version": "0.1.0",
        "workload": "reduce",
        "ranks": 2,
        "device": "cpu",
        "comm": "mpi",
        "verified": True,
        "config": {},
        "result": {},
        "nodes": [],
        "timings": {"total": stats},
        "per_rank": [
            {"rank": r, "median": {"total": 1.0}, "repeats": [{"total": 1.0}, {"total": 1.1}]} for r in range(2)
        ],
    }


def sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_dataset(path, data):
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data)


def message(err: str) -> str:
    """The lines a user reads: spmd's (and, for the watchdog, where every rank is), else the last ones."""
    lines = err.splitlines()
    keep = [i for i, line in enumerate(lines) if line.startswith("spmd") and "SPMD_FAULT:" not in line]
    if not keep:
        tail = [line for line in lines if line.strip() and "=====" not in line]
        return " / ".join(tail[-3:])
    first = keep[0]
    block = [lines[first]] + [line.strip() for line in lines[first + 1 : first + 8] if line.startswith("  rank ")]
    return " / ".join(block)


def run_case(folder: Path, mpiexec: list[str], ranks: int, device: str, case: FaultCase) -> dict:
    work = folder / "".join(c if c.isalnum() else "_" for c in case.name)
    work.mkdir()
    (work / "x.h5").symlink_to(folder / "x.h5")
    config = work / "job.yaml"
    if isinstance(case.config, bytes):
        config.write_bytes(case.config)
    elif isinstance(case.config, str):
        config.write_text(case.config)
    else:
        config.write_text(
            yaml.safe_dump(
                {
                    "workload": "reduce",
                    "device": device,
                    "repeats": 2,
                    "timeout_s": TIMEOUT_S,
                    "input": {"path": "x.h5", "dataset": "x"},
                    "output": "out",
                    **case.config,
                }
            )
        )
    if case.prepare:
        case.prepare(work)
    argv = [a.replace("{config}", str(config)) for a in (case.argv or ["run", "{config}", "-q"])]
    command = [sys.executable, "-m", "spmd", *argv]
    if case.driver:
        (work / "driver.py").write_text(case.driver)
        command = [sys.executable, str(work / "driver.py"), *case.driver_args, *argv]
    n = ranks if case.ranks is None else case.ranks
    if n:
        command = [*mpiexec, "-n", str(n), *command]
    env = {k: v for k, v in os.environ.items() if k != "SPMD_FAULT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(EXAMPLES.parent), env.get("PYTHONPATH", "")) if p)
    if case.fault:
        env["SPMD_FAULT"] = case.fault
    start = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        if case.interrupt:
            while not case.interrupt(work) and proc.poll() is None and time.monotonic() < start + 120:
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            start = time.monotonic()
        out, err = proc.communicate(timeout=TIMEOUT_S + 120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    seconds = time.monotonic() - start
    report_left = any((work / d / "report.json").exists() for d in ("out", "taken"))
    problem = case.check(work) if case.check else None
    said = message(err) if speaks(err) or not speaks(out) else message(out)
    missing = [p for p in phrases(case) if p not in out + err]
    if problem is None and missing:
        problem = f"the output does not say {missing[0]!r}"
    right_code = proc.returncode != 0 if case.expect is None else proc.returncode == case.expect
    ok = right_code and not report_left and seconds < TIMEOUT_S + 30 and problem is None
    return {
        "case": case.name,
        "fault": case.fault,
        "exit": proc.returncode,
        "seconds": round(seconds, 1),
        "report_left": report_left,
        "problem": problem,
        "ok": ok,
        "message": said,
    }  # a success: stdout's


def phrases(case: FaultCase) -> list[str]:
    """The case's phrases as this machine prints them."""
    return [p.replace("{host}", socket.gethostname()) for p in case.says]


def speaks(text: str) -> bool:
    return any(line.startswith("spmd") for line in text.splitlines())
