"""The straggler rules of this checkout applied again to kept runs of the fault matrix: each launch folder holds
``rows.jsonl`` (straggler_matrix.py's printed rows) and the report of every run it kept (``NAME.json`` or
``NAME.json.gz``, ``--keep DIR --keep-every``). Prints, per launch and in all, the slowed runs that named the slowed
rank, the causes named right, the clean runs that named none, and with ``--misses`` every run that named another rank
or cause than expected, or other than it did when it ran. A report keeps what its run measured, not what a later
spmd would: a phase added since (SyncBatchNorm's ``comm_syncbn``) is not in it.

    python -m bench.tools.straggler_replay docs/results/h200x2/stragglers/design/* --misses
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from bench.usage import answer_help

answer_help(__doc__, "python -m bench.tools.straggler_replay LAUNCH_FOLDER... [--misses]")

from spmd.core.host import device_sharing  # noqa: E402
from spmd.report.breakdown import breakdown  # noqa: E402


def report_of(folder: Path, name: str) -> dict:
    plain = folder / f"{name}.json"
    if plain.exists():
        return json.loads(plain.read_text())
    return json.loads(gzip.decompress((folder / f"{name}.json.gz").read_bytes()))


def straggler_now(report: dict) -> dict:
    """The straggler this checkout names from a kept report's repeats and captured steps."""
    records = [r["repeats"] for r in report["per_rank"]]
    hosts = [str(r.get("host", "?")) for r in report["per_rank"]]
    steps = (report.get("result") or {}).get("steps_per_repeat")
    sharing = device_sharing(report.get("host"), hosts)
    return breakdown(records, hosts, report.get("kernels"), steps, sharing)["straggler"] or {}


def replay(folder: Path) -> list[dict]:
    """Each kept run of one launch: its row with ``now_rank`` and ``now_cause`` added."""
    out = []
    for line in (folder / "rows.jsonl").read_text().splitlines():
        row = json.loads(line)
        s = straggler_now(report_of(folder, row["kept"]))
        out.append({**row, "now_rank": s.get("rank"), "now_cause": s.get("cause")})
    return out


def tally(rows: list[dict]) -> dict:
    slowed = [r for r in rows if r["where"]]
    right = [r for r in slowed if r["now_rank"] == r["slow_rank"]]
    caused = [r for r in right if r["now_cause"]]
    clean = [r for r in rows if not r["where"]]
    return {
        "right_rank": f"{len(right)}/{len(slowed)}",
        "right_cause": f"{sum(r['now_cause'] == r['expected_cause'] for r in caused)}/{len(caused)}",
        "clean_naming_none": f"{sum(r['now_rank'] is None for r in clean)}/{len(clean)}",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("launches", nargs="+", type=Path)
    ap.add_argument("--misses", action="store_true", help="print every run that differs from the expected")
    a = ap.parse_args()
    every = []
    launches = [f for f in a.launches if (f / "rows.jsonl").is_file()]  # a glob's manifest.json, a probe: not these
    for folder in launches:
        rows = replay(folder)
        every += rows
        print(folder.name, json.dumps(tally(rows)))
        for r in rows if a.misses else []:
            wrong = r["now_rank"] != r["slow_rank"] or (r["now_cause"] and r["now_cause"] != r["expected_cause"])
            if wrong or (r["now_rank"], r["now_cause"]) != (r["named_rank"], r["cause"]):
                print(
                    f"  {r['model']} {r['where'] or 'clean'} slow={r['slow_rank']} capture={r['capture']}: "
                    f"ran {r['named_rank']} {r['cause']}, now {r['now_rank']} {r['now_cause']}, "
                    f"expected {r['expected_cause']}"
                )
    print("all", json.dumps(tally(every)))


if __name__ == "__main__":
    main()
