"""Every program and tool of bench/ answers ``--help`` (exit 0, a usage line) on a machine without a GPU, as
its users start it: a program as a script (``python bench/programs/X.py``, how the suites launch it), a tool as
``python -m bench.tools.X``. A module without a ``__main__`` block (the plug-in bench/programs/plugin_sum.py) is
no command and is left out. tools/traces.sh must at least parse."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def commands(folder: str) -> list[Path]:
    return sorted(
        p
        for p in (REPO / "bench" / folder).glob("*.py")
        if p.name != "__init__.py" and 'if __name__ == "__main__":' in p.read_text()
    )


def answer(argv: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPMD_FAULT": ""}
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("path", commands("programs"), ids=lambda p: p.stem)
def test_every_program_answers_help(path):
    done = answer([sys.executable, str(path), "--help"])
    assert done.returncode == 0 and "usage" in done.stdout.lower(), done.stderr[-2000:]


@pytest.mark.parametrize("path", commands("tools"), ids=lambda p: p.stem)
def test_every_tool_answers_help(path):
    done = answer([sys.executable, "-m", f"bench.tools.{path.stem}", "--help"])
    assert done.returncode == 0 and "usage" in done.stdout.lower(), done.stderr[-2000:]


def test_the_lists_hold_what_bench_has():
    programs, tools = {p.stem for p in commands("programs")}, {p.stem for p in commands("tools")}
    assert {"plain_ddp", "inline_sum", "torch_step_cost"} <= programs and "plugin_sum" not in programs
    assert {"fused_kernel", "extrapolate", "host_profile"} <= tools


def test_the_shell_tool_parses():
    assert subprocess.run(["bash", "-n", str(REPO / "bench/tools/traces.sh")]).returncode == 0
