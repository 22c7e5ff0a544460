"""What verification costs a torch run at its defaults, by turns in one launch, and whether a late change is caught.

For each model config and each rank count (the first n ranks of the launch; the others wait), ``--turns`` turns of the
same job (after ``--warmup`` turns not kept), verified as users run it (``verify: auto``, the default checked steps) and
with ``verify: none``, alternating which goes first. Each job's whole wall time (set-up, repeats, checks, report, NCCL's
teardown) is measured around ``run_job``, and so is its wall time up to the report (report.json ``wall``, the same
without the teardown, which is alike on both sides). ``--steps`` lengthens the job's windows (the example's otherwise).
Then the same job once more with the model's own gradient hook on the last rank changing its largest gradient element by
1% from step ``--late`` on (past the first checked steps): caught or not, and where.

    mpiexec -n 2 python bench/programs/torch_verify_cost.py --config examples/torch/gpt2.yaml --data /tmp/v

Prints one JSON line per config and rank count: every turn's seconds on each side, their medians, the checks' own
seconds and steps, and the late change's outcome.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bench.usage import answer_help

answer_help(
    __doc__,
    "torch_verify_cost.py --config FILE.yaml [--data DIR] [--ranks 1,2] [--turns 3] [--warmup 1] [--late 7] "
    "[--steps N]",
)

import yaml  # noqa: E402
from mpi4py import MPI  # noqa: E402

from spmd.core.errors import VerificationError  # noqa: E402
from spmd.core.runtime import Context  # noqa: E402
from spmd.io.generate import generate  # noqa: E402
from spmd.job import run_job  # noqa: E402
from spmd.workloads.registry import job_config_from_dict  # noqa: E402
from spmd.workloads.torch.workload import TorchWorkload  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# the model's own hook on the last rank: its largest gradient element of the first 2-D parameter times 1.01 from
# step FIRST on (the hook's first call is set-up's trial step, so step s is call s + 2)
LATE = """
import importlib.util
import torch

spec = importlib.util.spec_from_file_location("example", {path!r})
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)
FIRST = {first}


def build(params):
    model = example.build(params)
    if torch.distributed.get_rank() == torch.distributed.get_world_size() - 1:
        weight = [t for t in model.parameters() if t.dim() == 2][0]
        seen = [0]

        def scale_one(grad):
            seen[0] += 1
            if seen[0] - 2 >= FIRST:
                grad = grad.clone()
                grad.view(-1)[grad.abs().argmax()] *= 1.01
            return grad

        weight.register_hook(scale_one)
    return model
"""


def job(base: dict, **changes) -> object:
    spec = json.loads(json.dumps(base))
    for key, value in changes.items():
        if key == "verify":
            spec["verify"] = value
        else:
            spec["params"][key] = value
    return job_config_from_dict(spec)


def timed(comm, cfg) -> tuple[float, dict | None, str | None]:
    comm.Barrier()
    t0 = time.perf_counter()
    ctx = Context(comm)
    try:
        report, failure = run_job(ctx, cfg).report, None
    except VerificationError as exc:
        report, failure = None, str(exc)
    finally:
        ctx.close()
    return time.perf_counter() - t0, report, failure


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", action="append", required=True, help="a torch job's YAML (repeatable)")
    ap.add_argument("--data", default="/tmp/spmd-verify-cost")
    ap.add_argument("--ranks", default=None, help="rank counts (default 1 and the launch's)")
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="turns first, not kept (the process's first jobs warm up)")
    ap.add_argument("--late", type=int, default=7)
    ap.add_argument("--rows", type=int, default=1024, help="rows generated (the example's shape otherwise)")
    ap.add_argument("--steps", type=int, default=None, help="steps a window (the example's params.steps otherwise)")
    a = ap.parse_args()
    world = MPI.COMM_WORLD
    counts = [int(n) for n in a.ranks.split(",")] if a.ranks else sorted({1, world.size})
    Path(a.data).mkdir(parents=True, exist_ok=True)
    for config in a.config:
        base = yaml.safe_load(Path(config).read_text())
        name = Path(config).stem
        base["input"]["path"] = f"{a.data}/{name}.h5"
        base["generate"]["shape"][0] = a.rows
        base.pop("output", None)
        if a.steps:
            base["params"]["steps"] = a.steps
        for key in ("model", "loss"):
            if key in base["params"] and ":" in base["params"][key]:
                file, fn = base["params"][key].rsplit(":", 1)
                base["params"][key] = f"{ROOT / file}:{fn}"
        late_file = Path(a.data, f"late-{name}.py")
        if world.rank == 0:
            generate(job(base), TorchWorkload)
            file = base["params"]["model"].rsplit(":", 1)[0]
            late_file.write_text(LATE.format(path=file, first=a.late))
        world.Barrier()
        for n in counts:
            sub = world.Split(0 if world.rank < n else MPI.UNDEFINED, key=world.rank)
            if sub != MPI.COMM_NULL:
                sides: dict[str, list[float]] = {"verified": [], "verify none": []}
                to_report: dict[str, list[float]] = {"verified": [], "verify none": []}
                checks, checked_s, checked, steps, parts, walls, budget = [], [], None, None, None, [], None
                per_check, shares, plain_walls, setups = None, [], [], []
                for turn in range(a.warmup + a.turns):
                    order = ["verified", "verify none"] if turn % 2 == 0 else ["verify none", "verified"]
                    for side in order:
                        seconds, report, failure = timed(
                            sub, job(base, verify="auto" if side == "verified" else "none")
                        )
                        if failure:
                            raise SystemExit(f"clean run failed: {failure}")
                        if turn < a.warmup:
                            continue
                        sides[side].append(seconds)
                        to_report[side].append(sum(report["wall"].values()))
                        if side == "verify none":
                            plain_walls.append(report["wall"])
                        if side == "verified":
                            v = report["verification"]
                            checks.append(v.get("check_seconds"))
                            checked_s.append(v.get("checked_steps_seconds"))
                            parts, budget = v.get("check_parts_seconds"), v.get("budget")
                            walls.append(report["wall"])
                            shares.append(v.get("share_of_wall"))
                            setups.append(v.get("setup_seconds"))
                            per_check = [c.get("seconds") for c in (v.get("gradients") or {}).get("checks", [])]
                            checked, steps = v["checked_steps"], v["steps"]
                            words = v["checked"]
                late_s, report, failure = timed(sub, job(base, model=f"{late_file}:build"))
                medians = {side: statistics.median(s) for side, s in sides.items()}
                if world.rank == 0:
                    print(
                        json.dumps(
                            {
                                "model": name,
                                "ranks": n,
                                "turns_s": sides,
                                "to_report_s": to_report,
                                "median_s": medians,
                                "cost": medians["verified"] / medians["verify none"] - 1,
                                "check_seconds": checks,
                                "checked_steps_seconds": checked_s,
                                "parts": parts,
                                "checked_steps": checked,
                                "steps": steps,
                                "checked_words": words,
                                "budget": budget,
                                "verified_walls_s": walls,
                                "plain_walls_s": plain_walls,
                                "verification_setup_s": setups,
                                "share_of_wall": shares,
                                "per_check_s": per_check,
                                "late": {"from_step": a.late, "caught": failure is not None, "message": failure},
                            }
                        ),
                        flush=True,
                    )
                sub.Free()
            world.Barrier()


if __name__ == "__main__":
    sys.exit(main())
