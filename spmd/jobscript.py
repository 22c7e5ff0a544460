"""``spmd jobscript``: the sbatch files of a strong/weak series across node counts.

One job per (series, node count) runs ``spmd run`` on its own config (the workload's
``strong_config`` / ``weak_config`` of the given one, written beside the scripts), after one job
that generates every input; a last job merges the reports into one scaling report. ``submit.sh``
submits them in that order with ``--dependency``, which SLURM enforces.

Every value a user gave reaches the scripts quoted or not at all: shell lines quote each word
(``shlex``), and ``#SBATCH`` lines, which sbatch reads up to the end of the line without a shell,
take only values of a plain character set (anything else, a newline above all, is refused). Every
job writes its own files (``Workload.with_output_tag``): the jobs of a series may run at once. The
whole series is built, then written into a staging folder beside ``out``, and only then renamed into place: a
refused series, or one that fails while being written, leaves nothing behind.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import yaml

from .errors import ConfigError, brief
from .workloads.registry import workload_class

MPI_PLUGINS = ("pmi2", "pmix")
SLURM_NAME = re.compile(r"[A-Za-z0-9_.+-]+(,[A-Za-z0-9_.+-]+)*")  # partitions (a list too), accounts
SLURM_TIME = re.compile(r"\d+(:\d\d){0,2}|\d+-\d+(:\d\d){0,2}|unlimited|infinite", re.IGNORECASE)
SBATCH_PATH = re.compile(r"[A-Za-z0-9_./+,:@=~-]+")  # no space, quote, $, %, ; or newline


def parse_nodes(text: str) -> list[int]:
    try:
        nodes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigError(f"--nodes {brief(text)}: expected comma-separated integers, e.g. 1,2,4") from None
    if not nodes or nodes[0] < 1:
        raise ConfigError(f"--nodes {brief(text)}: node counts must be >= 1")
    return nodes


def write_jobscripts(cfg, config_path: str, nodes: list[int], out: Path, *, gpus_per_node: int,
                     tasks_per_node: int | None = None, modes=("strong", "weak"), partition: str | None = None,
                     account: str | None = None, time: str = "00:30:00", mpi: str = "pmi2",
                     spmd: str | None = None) -> list[Path]:
    """Write the series' configs and sbatch files under ``out``; the paths written. ``spmd``: how the jobs call
    spmd (default: the interpreter running this, so a virtual environment's spmd is the one the jobs get)."""
    spmd = spmd or default_spmd()
    tasks = tasks_per_node or gpus_per_node
    if tasks < 1:
        raise ConfigError("--tasks-per-node: give it (>= 1) when --gpus-per-node is 0 (a CPU series)")
    if gpus_per_node and tasks > gpus_per_node:
        raise ConfigError(f"--tasks-per-node {tasks} > --gpus-per-node {gpus_per_node}: spmd runs one rank per GPU")
    if mpi not in MPI_PLUGINS:
        raise ConfigError(f"--mpi {brief(mpi)}: one of {', '.join(MPI_PLUGINS)}")
    out = Path(out).resolve()
    files = _series(cfg, config_path, nodes, out, gpus_per_node, tasks, modes,
                    _header(gpus_per_node, partition, account, time, out), _command(spmd), mpi)
    return _write_all(out, files)


def default_spmd() -> str:
    """``spmd`` as this process runs it: its interpreter with ``-m spmd``."""
    return shlex.join([sys.executable, "-m", "spmd"])


def _write_all(out: Path, files: list[tuple[Path, str, int]]) -> list[Path]:
    """Every file into a staging folder beside ``out``, then each renamed into place (all or nothing)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.staging-", dir=out.parent))
    try:
        for path, text, mode in files:
            staged = stage / path.relative_to(out)
            staged.parent.mkdir(parents=True, exist_ok=True)
            staged.write_bytes(text.encode())
            staged.chmod(mode)
        for path, _, _ in files:  # renames on one file system: nothing left to fail half-way
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / path.relative_to(out), path)
        (out / "logs").mkdir(exist_ok=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return [path for path, _, _ in files]


def _series(cfg, config_path, nodes, out, gpus, tasks, modes, header, spmd, mpi) -> list[tuple[Path, str, int]]:
    """(path, text, file mode) of every file of the series, nothing written yet."""
    cls = workload_class(cfg.workload)
    workload = re.sub(r"[^A-Za-z0-9_.-]", "_", cfg.workload)  # a job name is a label: made plain
    files, jobs, configs = [], [], []
    for mode in modes:
        for n in nodes:
            if mode == "weak" and "strong" in modes and n == nodes[0]:
                continue  # the same run as strong at the base: spmd report merge puts it in both series
            name = f"{mode}-{n}n"
            scaled = cls.with_output_tag(cls.scaled_config(cfg, mode, Fraction(n, nodes[0])), name)
            conf = out / "configs" / f"{name}.yaml"
            data = {**scaled.to_dict(), "output": str(out / "results" / name)}
            files.append((conf, f"# {mode} scaling, {n} node(s) x {tasks} rank(s), from {brief(str(config_path))}\n"
                          + yaml.safe_dump(data, sort_keys=False), 0o644))
            configs.append(conf)
            body = [f"#SBATCH --job-name=spmd-{workload}-{name}", f"#SBATCH --nodes={n}",
                    f"#SBATCH --ntasks-per-node={tasks}", *header, "#SBATCH --signal=B:USR1@120", "",
                    "# 120 s before the time limit SLURM signals this script; srun passes USR1 on to the ranks",
                    "# (train checkpoints and stops cleanly; the other workloads end with the step)",
                    "trap 'kill -USR1 $step 2>/dev/null' USR1", "",
                    f"srun --mpi={mpi} --kill-on-bad-exit=1 {spmd} run {shlex.quote(str(conf))} &", "step=$!",
                    "wait $step; rc=$?", "[[ $rc -gt 128 ]] && { wait $step; rc=$?; }  # wait again after the trap",
                    "exit $rc"]
            jobs.append(out / f"{name}.sbatch")
            files.append((jobs[-1], _script(body), 0o644))
    one_task = [h for h in header if "gpus" not in h]
    gen = ["#SBATCH --job-name=spmd-generate", "#SBATCH --nodes=1", "#SBATCH --ntasks=1", *one_task, "",
           "# every series' input once, before the runs (files already up to date are skipped)"]
    gen += [f"{spmd} generate {shlex.quote(str(c))}" for c in configs]
    files.append((out / "generate.sbatch", _script(gen), 0o644))
    merge = ["#SBATCH --job-name=spmd-merge", "#SBATCH --nodes=1", "#SBATCH --ntasks=1", *one_task, "",
             "shopt -s nullglob", f"reports=({shlex.quote(str(out / 'results'))}/*/report.json)",
             f"{spmd} report merge \"${{reports[@]}}\" --out {shlex.quote(str(out / 'scaling'))}"]
    files.append((out / "merge.sbatch", _script(merge), 0o644))
    submit = ["#!/usr/bin/env bash", "# Submit the series: inputs first, then every run, then the merge (sbatch --dependency).",
              "set -euo pipefail", f"dir={shlex.quote(str(out))}", "mkdir -p \"$dir/logs\"",
              "gen=$(sbatch --parsable \"$dir/generate.sbatch\")", "runs=()"]
    submit += [f"runs+=($(sbatch --parsable --dependency=afterok:$gen \"$dir/{j.name}\"))" for j in jobs]
    submit += ["merge=$(sbatch --parsable --dependency=afterany:$(IFS=:; echo \"${runs[*]}\") \"$dir/merge.sbatch\")",
               "echo \"generate $gen; runs ${runs[*]}; merge $merge\"",
               "echo \"the scaling report will be in $dir/scaling (squeue -u ${USER:-$(id -un)} to follow)\""]
    files.append((out / "submit.sh", "\n".join(submit) + "\n", 0o755))
    return files


def _header(gpus: int, partition, account, time, out: Path) -> list[str]:
    """The #SBATCH lines every job shares, each value checked (sbatch reads them without a shell)."""
    if not SLURM_TIME.fullmatch(str(time)):
        raise ConfigError(f"--time {brief(time)}: a SLURM time limit (minutes, H:MM:SS, D-HH:MM:SS, ...)")
    for option, value in (("--partition", partition), ("--account", account)):
        if value is not None and not SLURM_NAME.fullmatch(value):
            raise ConfigError(f"{option} {brief(value)}: a SLURM name (letters, digits, _ . + -, a comma list)")
    # the jobs start where `spmd jobscript` ran, so the config's relative paths mean the same there
    lines = [f"#SBATCH --time={time}", f"#SBATCH --chdir={_sbatch_path(Path.cwd(), 'the working directory')}",
             f"#SBATCH --output={_sbatch_path(out, 'the output folder')}/logs/%x-%j.out"]
    if gpus:
        # every GPU of the node to every task: spmd binds rank -> GPU by node-local rank
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if account:
        lines.append(f"#SBATCH --account={account}")
    return lines


def _sbatch_path(path: Path, what: str) -> str:
    text = str(path)
    if not SBATCH_PATH.fullmatch(text):
        raise ConfigError(f"{what} {brief(text)}: an #SBATCH line cannot carry it safely (a space, quote, $, %, "
                          f"; or newline); choose a folder of letters, digits and _ . / + , : @ = ~ -")
    return text


def _command(spmd: str) -> str:
    """``--spmd`` as shell words, each quoted: what it names runs, nothing it contains is evaluated."""
    try:
        words = shlex.split(spmd)
    except ValueError as exc:
        raise ConfigError(f"--spmd {brief(spmd)}: {exc}") from None
    if not words or any(c in spmd for c in "\n\r\0"):
        raise ConfigError(f"--spmd {brief(spmd)}: one command line, e.g. '/path/to/venv/bin/python -m spmd'")
    return shlex.join(words)


def _script(lines: list[str]) -> str:
    return "#!/bin/bash\n# written by spmd jobscript\n" + "\n".join(lines) + "\n"
