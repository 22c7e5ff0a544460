"""Which tenant makes a steady slower device under GPT-2 tiny: 2 ranks, rank 1's GPU shared with another process
running one of four tenants, a clean run and each tenant by turns, 3 turns, every run captured. Prints one JSON line a
run: its step against the first clean run's, the straggler named, and rank 0's wait in each repeat (probe.jsonl).

    mpirun --allow-run-as-root --bind-to none -n 2 -x NCCL_NVLS_ENABLE=0 python3 probe_busy.py
"""

import json
import subprocess
import sys
from pathlib import Path

from mpi4py import MPI

import bench.programs.straggler_matrix as sm
from spmd.report.breakdown import per_repeat

world = MPI.COMM_WORLD
folder = Path("/tmp/pb")
folder.mkdir(exist_ok=True)
if world.rank == 0:
    (folder / "models.py").write_text(sm.MODELS_PY.replace('"EXAMPLE"', repr(str(sm.ROOT / "examples/torch/gpt2.py"))))
    sm.write_data(folder)
world.Barrier()
import torch  # noqa: E402

device = world.rank % torch.cuda.device_count()


def tenant(size: int, queued: int, wait: str) -> str:
    """bf16 products of ``size`` squared, ``queued`` at a time, then ``wait`` (a synchronize, or polling an event)."""
    head = "import sys, time, torch\ntorch.cuda.set_device(int(sys.argv[1]))\n"
    body = f"a = torch.randn({size}, {size}, device='cuda', dtype=torch.bfloat16)\nb = a @ a\n"
    body += "torch.cuda.synchronize()\nprint('busy', flush=True)\nwhile True:\n"
    body += f"    for _ in range({queued}):\n        b = a @ a\n"
    if wait == "sync":
        return head + body + "    torch.cuda.synchronize()\n"
    return (
        head
        + body
        + "    e = torch.cuda.Event()\n    e.record()\n    while not e.query():\n        time.sleep(0.0005)\n"
    )


TENANTS = {
    "A8sync": tenant(4096, 8, "sync"),  # the matrix's tenant until then
    "deep64": tenant(4096, 64, "sync"),
    "big8k": tenant(8192, 8, "sync"),
    "evpoll": tenant(4096, 16, "poll"),
}


def occupy(code: str):
    child = subprocess.Popen([sys.executable, "-c", code, str(device)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "busy"
    return child


clean = None
for turn in range(3):
    for name in ["clean", *TENANTS]:
        other = occupy(TENANTS[name]) if name != "clean" and world.rank == 1 else None
        try:
            report = sm.run(world, sm.config(folder, "gpt2-tiny", True))
        finally:
            if other:
                other.kill()
                other.wait()
        if world.rank == 0:
            s = report["breakdown"]["straggler"] or {}
            step = sm.repeat_seconds(report) / sm.STEPS
            clean = clean or step
            waits = [round(1e3 * p["wait"], 1) for p in per_repeat([r["repeats"] for r in report["per_rank"]])[0]]
            row = {"turn": turn, "occ": name, "cap": True, "step_ms": round(1e3 * step, 2)}
            row.update(vs_clean=round(step / clean, 3), named=s.get("rank"), cause=s.get("cause"))
            row.update(rank0_wait_ms=waits, finding=(report["findings"] or [""])[0][:160])
            print(json.dumps(row), flush=True)
