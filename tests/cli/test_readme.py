"""README.md's commands, run as written and in order in a fresh copy of the checkout.

Every line of every ```bash block is a command this test runs, except those it names below with the reason
(each of them is covered elsewhere). ``mpiexec`` and ``spmd`` are the ones of the environment running the tests
(the README's ``. .venv/bin/activate``); under ``SPMD_MPIEXEC`` (the GPU machine's mpirun as root) that launcher
stands in for ``mpiexec``. They are the CPU commands: GPUs are hidden from them.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from mpi_job import mpiexec

ROOT = Path(__file__).resolve().parents[2]
NOT_HERE = {  # a pattern of the commands this test does not run -> why
    r"^make ": "make demo / make test are what CI and a new user run first; this test runs under make test",
    r"^pip install|^python3 -m venv": "what make does to this very environment",
    r"(^|\s)sbatch\s": "needs SLURM: tests/slurm submits these scripts to the SLURM that .ci/run starts",
    r"^bash results/reduce/jobs/submit\.sh": "needs SLURM (sbatch): tests/slurm runs a jobscript series",
    r"^spmd report merge results/reduce/jobs": "merges the reports of the SLURM series above (tests/slurm)",
    r"^mpiexec -hosts": "needs two hosts",
    r"^nsys ": "needs Nsight Systems on a GPU machine: tests/gpu/test_trace_gpu.py runs it where nsys is installed",
}
ACTIVATE = ". .venv/bin/activate"
EXIT_1_MEANS = {"spmd report compare": "slower"}  # exit 1 there is an answer (a regression), not a failure


def readme_commands() -> list[str]:
    """The command lines of README.md's bash blocks, comments removed, in order."""
    text = (ROOT / "README.md").read_text()
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            command = line.split("  #", 1)[0].split(" # ", 1)[0].strip()
            if command and not command.startswith("#"):
                lines.append(command)
    return lines


def test_the_readme_lists_what_it_should():
    commands = readme_commands()
    assert ACTIVATE in commands and "spmd --help" in commands
    assert any(c.startswith("mpiexec -n 4 spmd scale") and "--out results/sweep0" in c for c in commands)
    assert commands.index(next(c for c in commands if "results/sweep0" in c and "scale" in c)) < commands.index(
        next(c for c in commands if c.startswith("spmd report compare"))
    )


def test_every_readme_command_runs_as_written_in_a_fresh_copy(tmp_path):
    here = tmp_path / "checkout"
    for part in ("inputs", "examples", "jobscripts"):
        shutil.copytree(ROOT / part, here / part)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # what activating .venv gives
    env["CUDA_VISIBLE_DEVICES"] = ""  # the README's CPU commands (-n 4 would put 4 ranks on a 2-GPU machine)
    launcher = shlex.join(mpiexec()) if os.environ.get("SPMD_MPIEXEC") else None  # made absolute there
    ran, skipped = [], []
    for command in readme_commands():
        pattern = next((pattern for pattern in NOT_HERE if re.search(pattern, command)), None)
        if pattern:
            skipped.append(pattern)
            continue
        if command == ACTIVATE:
            continue  # PATH above
        if launcher:  # also after a variable set for the command (SPMD_FAULT=... mpiexec ...)
            command = re.sub(r"(^|\s)mpiexec ", lambda m: f"{m.group(1)}{launcher} ", command, count=1)
        out = subprocess.run(["bash", "-c", command], cwd=here, env=env, capture_output=True, text=True, timeout=600)
        allowed = {0, 1} if any(command.startswith(c) for c in EXIT_1_MEANS) else {0}
        assert out.returncode in allowed, (
            f"{command}\nexit {out.returncode}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
        )
        ran.append(command)
    assert len(ran) >= 12, ran
    assert set(skipped) == set(NOT_HERE), "an exception above no README command needs any more"
    # what the commands were for is there
    assert (here / "results/sweep0/scaling.html").exists() and (here / "results/sweep1/scaling.json").exists()
    assert (here / "results/try2/report.json").exists() and (here / "results/try2/report.html").exists()
    assert '"traceEvents"' in (here / "t.json").read_text()  # the straggler run's trace
    assert (here / "results/reduce/jobs/submit.sh").exists()
    assert shlex.quote(sys.executable) in (here / "results/reduce/jobs/generate.sbatch").read_text()
