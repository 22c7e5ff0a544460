"""What the held-out design tools share: the ``--engines`` option (a links file whose host's reads by engine stand in
where a round's stored links file predates them), a round's stored runs with their inputs unpacked (the links given
them), a round's records derived again in a copy under a design's patches, by the model as it is or as it was at a
commit (``derived_at``, ``module_at``: so that a design's rendered table stays that design's when the model moves on),
and whether a checked prediction's measured time fell inside its interval.

    python -m bench.tools.heldout_inputs FOLDER [--patches MODULE:NAME]   (derives FOLDER's records again in place)
"""

import argparse
import contextlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

from bench.env import ROOT
from bench.records import read_records
from bench.suites import heldout
from bench.suites.predict import recheck


def parsed(parser: argparse.ArgumentParser) -> tuple[argparse.Namespace, dict | None]:
    """A design tool's arguments with ``--engines`` added, and the host's reads by engine of the file it names (None
    where none is given)."""
    parser.add_argument("--engines", type=Path, help="a links file whose host_read engines stand in where missing")
    args = parser.parse_args()
    return args, json.loads(args.engines.read_text())["host_read"]["engines"] if args.engines else None


def give_engines(links: Path, engines: dict | None) -> None:
    """The unpacked links file ``links`` given ``engines`` where its host's reads have none (a copy: stored inputs are
    never edited)."""
    data = json.loads(links.read_text())
    if engines and data.get("host_read") and "engines" not in data["host_read"]:
        data["host_read"]["engines"] = engines
        links.write_text(json.dumps(data))


def stored_runs(folder: Path, tmp: Path, engines: dict | None, keep: Callable) -> Iterator[tuple]:
    """The suite's stored runs (heldout.stored_runs) of ``folder`` that ``keep(record)`` holds, each links file (an
    unpacked copy) given ``engines``."""
    for record, run, files in heldout.stored_runs(folder, tmp, keep):
        if "links" in files:
            give_engines(files["links"], engines)
        yield record, run, files


def workload_of(record) -> str:
    """The workload a held-out record's case names (its first word: reduce, matmul, stencil, train, ...)."""
    return record.case.removeprefix("held-out ").split(",")[0].split()[0]


def inside(row: dict) -> bool:
    """Whether a checked prediction's measured time fell inside its interval."""
    return row["interval"][0] <= row["measured_s"] <= row["interval"][1]


@contextlib.contextmanager
def patched(patches: tuple) -> Iterator[None]:
    """``patches``, each (module, name, replacement), applied for the block."""
    with contextlib.ExitStack() as stack:
        for module, name, new in patches:
            stack.enter_context(mock.patch.object(module, name, new))
        yield


def derived_records(folder: Path, patches: tuple = ()) -> list:
    """The folder's records derived again (bench recheck, in a copy) by the model as it is, under ``patches``."""
    with tempfile.TemporaryDirectory() as tmp, patched(patches):
        copy = Path(shutil.copytree(folder, Path(tmp) / folder.name))
        recheck(copy)
        return read_records(copy / "records.jsonl")


def derived_at(folder: Path, commit: str, patches: str | None = None) -> list:
    """The folder's records derived again (bench recheck, in a copy) by the model as it was at ``commit``, under the
    tuple of patches that ``patches`` names (``module:NAME``, imported there): ``module_at``'s run of this module."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(shutil.copytree(folder, Path(tmp) / folder.name))
        module_at(commit, "bench.tools.heldout_inputs", [str(copy), *(["--patches", patches] if patches else [])])
        return read_records(copy / "records.jsonl")


def module_at(commit: str, module: str, args: list[str]) -> str:
    """The standard output of ``python -m module args`` with the spmd package as it was at ``commit`` (taken from git),
    this checkout's bench around it, in a process of its own: what a design's table derives by the model it was."""
    with tempfile.TemporaryDirectory() as tmp:
        code = Path(tmp) / "code"
        code.mkdir()
        tree = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "spmd"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(code)], input=tree.stdout, check=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(code), str(ROOT)))}
        done = subprocess.run([sys.executable, "-m", module, *args], cwd=tmp, env=env, text=True, capture_output=True)
        if done.returncode:
            raise RuntimeError(f"{module} at {commit[:7]} failed: {done.stderr[-2000:]}")
        return done.stdout


def table_main(table: Callable[[list[Path]], str]) -> None:
    """A design tool's command line: ``table`` over the folders it names, printed (the table ``bench report`` renders
    from the same function: report.design_table)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    print(table(parser.parse_args().folders), end="")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--patches", help="module:NAME, a tuple of (module, name, replacement) patches")
    args = parser.parse_args()
    patches = ()
    if args.patches:
        module, name = args.patches.split(":")
        patches = getattr(importlib.import_module(module), name)
    with patched(patches):
        recheck(args.folder)


if __name__ == "__main__":
    main()
