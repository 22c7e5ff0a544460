"""The table of docs/reliability.md: every injected fault and bad input, run as a user would
(``mpiexec -n N python -m spmd run``), with its exit code, time to exit and final message.

    python bench/reliability.py --ranks 3 --device cpu --out docs/results/reliability-cpu
    python bench/reliability.py --ranks 2 --device gpu --mpiexec "$MPI" --out /tmp/rel-gpu

Writes reliability.json and reliability.md in --out. Each case must exit non-zero and leave no
report; a case that does not is marked FAIL (and the script exits 1).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
import yaml

TIMEOUT_S = 5  # the watchdog's timeout_s in these runs


def cases(ranks: int, gpu: bool):
    """(name, SPMD_FAULT or None, config changes, how to prepare the folder or None)."""
    last = ranks - 1
    faults = [(f"raise at {phase} on rank {r}", f"rank={r},phase={phase},kind=raise")
              for phase, r in (("read", last), ("h2d", 1), ("compute", 1), ("comm", 0), ("report", 1))
              if gpu or phase != "h2d"]
    faults += [("exit at compute on rank 1", "rank=1,phase=compute,kind=exit")]
    faults += [(f"hang at {phase} on rank {r}", f"rank={r},phase={phase},kind=hang")
               for phase, r in (("read", 0), ("compute", 1), ("comm", last), ("report", 1))]
    faults += [("nan at read on rank 1 (verification)", "rank=1,phase=read,kind=nan"),
               ("oom at read on rank 1 (host buffers)", "rank=1,phase=read,kind=oom"),
               ("oom at h2d on rank 1 (device buffers)", "rank=1,phase=h2d,kind=oom")]
    out = [(name, fault, {}, None) for name, fault in faults]
    out.append(("nan at read on rank 1, check_finite: true", "rank=1,phase=read,kind=nan", {"check_finite": True}, None))

    def write(name, maker):
        return lambda d: maker(d / name)

    out += [
        ("missing file", None, {"input": {"path": "nope.h5", "dataset": "x"}}, None),
        ("not an HDF5 file", None, {"input": {"path": "text.h5", "dataset": "x"}},
         write("text.h5", lambda p: p.write_text("not HDF5\n" * 100))),
        ("truncated HDF5 file", None, {"input": {"path": "cut.h5", "dataset": "x"}},
         write("cut.h5", lambda p: (_dataset(p, np.arange(100_000, dtype=np.float32)),
                                    os.truncate(p, os.path.getsize(p) // 2)))),
        ("wrong dtype (int32)", None, {"input": {"path": "int.h5", "dataset": "x"}},
         write("int.h5", lambda p: _dataset(p, np.arange(100, dtype=np.int32)))),
        ("wrong rank of array (3-D)", None, {"input": {"path": "cube.h5", "dataset": "x"}},
         write("cube.h5", lambda p: _dataset(p, np.zeros((4, 2, 2), np.float32)))),
        ("more ranks than rows", None, {"input": {"path": "two.h5", "dataset": "x"}},
         write("two.h5", lambda p: _dataset(p, np.zeros(ranks - 1, np.float32)))),
        ("config that is not YAML", None, "workload: [reduce\n", None),
        ("unknown key", None, {"repeatz": 2}, None),
        ("wrong type", None, {"repeats": "three"}, None),
        ("zero repeats", None, {"repeats": 0}, None),
        ("negative timeout_s", None, {"timeout_s": -5}, None),
        ("zero-size generate.shape", None, {"generate": {"shape": [0]}}, None),
    ]
    return out


def _dataset(path, data):
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data)


def message(err: str) -> str:
    """The lines a user reads: the error (and, for the watchdog, where every rank is)."""
    lines = err.splitlines()
    keep = [i for i, line in enumerate(lines) if line.startswith("spmd: error:")]
    if not keep:
        tail = [line for line in lines if line.strip() and "=====" not in line]
        return " / ".join(tail[-3:])
    first = keep[0]
    block = [lines[first]] + [line.strip() for line in lines[first + 1:first + 8] if line.startswith("  rank ")]
    return " / ".join(block)


def run_case(folder: Path, mpiexec: list[str], ranks: int, device: str, case) -> dict:
    name, fault, changes, prepare = case
    work = folder / name.replace(" ", "_").replace(":", "").replace(",", "")
    work.mkdir()
    (work / "x.h5").symlink_to(folder / "x.h5")
    if prepare:
        prepare(work)
    config = work / "job.yaml"
    if isinstance(changes, str):
        config.write_text(changes)
    else:
        cfg = {"workload": "reduce", "device": device, "repeats": 2, "timeout_s": TIMEOUT_S,
               "input": {"path": "x.h5", "dataset": "x"}, "output": "out", **changes}
        config.write_text(yaml.safe_dump(cfg))
    env = dict(os.environ)
    env.pop("SPMD_FAULT", None)
    if fault:
        env["SPMD_FAULT"] = fault
    start = time.monotonic()
    proc = subprocess.run([*mpiexec, "-n", str(ranks), sys.executable, "-m", "spmd", "run", str(config), "-q"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S + 120)
    seconds = time.monotonic() - start
    report_left = (work / "out" / "report.json").exists()
    ok = proc.returncode != 0 and not report_left and seconds < TIMEOUT_S + 30
    return {"case": name, "fault": fault, "exit": proc.returncode, "seconds": round(seconds, 1),
            "report_left": report_left, "ok": ok, "message": message(proc.stderr)}


def markdown(rows: list[dict], header: str) -> str:
    out = [header, "", "| case | SPMD_FAULT | exit | time to exit | message |", "|---|---|---|---|---|"]
    for r in rows:
        text = r["message"].replace("|", "\\|")
        flag = "" if r["ok"] else " **FAIL**"
        out.append(f"| {r['case']}{flag} | {r['fault'] or '-'} | {r['exit']} | {r['seconds']} s | {text} |")
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--mpiexec", default=os.environ.get("SPMD_MPIEXEC", "mpiexec"))
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    mpiexec = shlex.split(args.mpiexec)
    if os.path.exists(mpiexec[0]):  # a relative path must survive the cases' own working folders
        mpiexec[0] = os.path.abspath(mpiexec[0])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _dataset(folder / "x.h5", np.random.default_rng(0).standard_normal(args.rows).astype(np.float32))
        for case in cases(args.ranks, args.device == "gpu"):
            rows.append(run_case(folder, mpiexec, args.ranks, args.device, case))
            print(f"{rows[-1]['case']}: exit {rows[-1]['exit']} in {rows[-1]['seconds']} s", flush=True)
    header = (f"{args.ranks} ranks, device {args.device}, reduce of {args.rows} float32 rows, timeout_s: {TIMEOUT_S}, "
              f"{' '.join(mpiexec[:1])}")
    (out / "reliability.json").write_text(json.dumps({"setup": header, "rows": rows}, indent=2) + "\n")
    (out / "reliability.md").write_text(markdown(rows, header))
    print(markdown(rows, header))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
