"""``spmd jobscript``: the sbatch files of a strong/weak series across node counts.

One job per (series, node count) runs ``spmd run`` on its own config (the workload's
``strong_config`` / ``weak_config`` of the given one, written beside the scripts), after one job
that generates every input; a last job merges the reports into one scaling report. ``submit.sh``
submits them in that order with ``--dependency``, which SLURM enforces.
"""

from __future__ import annotations

import shlex
from fractions import Fraction
from pathlib import Path

import yaml

from .errors import ConfigError
from .files import write_bytes_atomic
from .workloads.registry import workload_class

MPI_PLUGINS = ("pmi2", "pmix")


def parse_nodes(text: str) -> list[int]:
    try:
        nodes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigError(f"--nodes {text!r}: expected comma-separated integers, e.g. 1,2,4") from None
    if not nodes or nodes[0] < 1:
        raise ConfigError(f"--nodes {text!r}: node counts must be >= 1")
    return nodes


def write_jobscripts(cfg, config_path: str, nodes: list[int], out: Path, *, gpus_per_node: int,
                     tasks_per_node: int | None = None, modes=("strong", "weak"), partition: str | None = None,
                     account: str | None = None, time: str = "00:30:00", mpi: str = "pmi2",
                     spmd: str = "python3 -m spmd") -> list[Path]:
    """Write the series' configs and sbatch files under ``out``; the paths written."""
    tasks = tasks_per_node or gpus_per_node
    if tasks < 1:
        raise ConfigError("--tasks-per-node: give it (>= 1) when --gpus-per-node is 0 (a CPU series)")
    if gpus_per_node and tasks > gpus_per_node:
        raise ConfigError(f"--tasks-per-node {tasks} > --gpus-per-node {gpus_per_node}: spmd runs one rank per GPU")
    if mpi not in MPI_PLUGINS:
        raise ConfigError(f"--mpi {mpi!r}: one of {', '.join(MPI_PLUGINS)}")
    cls = workload_class(cfg.workload)
    out = Path(out).resolve()
    header = _header(gpus_per_node, partition, account, time)
    launch = f"srun --mpi={mpi} {spmd}"
    written, jobs, configs = [], [], []
    for mode in modes:
        for n in nodes:
            if mode == "weak" and "strong" in modes and n == nodes[0]:
                continue  # the same run as strong at the base: spmd report merge puts it in both series
            factor = Fraction(n, nodes[0])
            scaled = cls.scaled_config(cfg, mode, factor)
            name = f"{mode}-{n}n"
            conf = out / "configs" / f"{name}.yaml"
            data = {**scaled.to_dict(), "output": str(out / "results" / name)}
            written.append(_write(conf, f"# {mode} scaling, {n} node(s) x {tasks} rank(s), from {config_path}\n"
                                  + yaml.safe_dump(data, sort_keys=False)))
            configs.append(conf)
            body = [f"#SBATCH --job-name=spmd-{cfg.workload}-{name}", f"#SBATCH --nodes={n}",
                    f"#SBATCH --ntasks-per-node={tasks}", *header,
                    f"#SBATCH --output={out}/logs/%x-%j.out", "#SBATCH --signal=B:USR1@120", "",
                    "# 120 s before the time limit SLURM signals this script; srun passes USR1 on to the ranks",
                    "# (train checkpoints and stops cleanly; the other workloads end with the step)",
                    "trap 'kill -USR1 $step 2>/dev/null' USR1", "",
                    f"{launch} run {shlex.quote(str(conf))} &", "step=$!",
                    "wait $step; rc=$?", "[[ $rc -gt 128 ]] && { wait $step; rc=$?; }  # wait again after the trap",
                    "exit $rc"]
            jobs.append(_write(out / f"{name}.sbatch", _script(body)))
    gen = ["#SBATCH --job-name=spmd-generate", "#SBATCH --nodes=1", "#SBATCH --ntasks=1",
           *(h for h in header if "gpus" not in h), f"#SBATCH --output={out}/logs/%x-%j.out", "",
           "# every series' input once, before the runs (files already up to date are skipped)"]
    gen += [f"{spmd} generate {shlex.quote(str(c))}" for c in configs]
    written.append(_write(out / "generate.sbatch", _script(gen)))
    merge = ["#SBATCH --job-name=spmd-merge", "#SBATCH --nodes=1", "#SBATCH --ntasks=1",
             *(h for h in header if "gpus" not in h), f"#SBATCH --output={out}/logs/%x-%j.out", "",
             "shopt -s nullglob", f"reports=({out}/results/*/report.json)",
             f"{spmd} report merge \"${{reports[@]}}\" --out {out}/scaling"]
    written.append(_write(out / "merge.sbatch", _script(merge)))
    submit = ["#!/usr/bin/env bash", "# Submit the series: inputs first, then every run, then the merge (sbatch --dependency).",
              "set -euo pipefail", f"dir={shlex.quote(str(out))}", "mkdir -p \"$dir/logs\"",
              "gen=$(sbatch --parsable \"$dir/generate.sbatch\")", "runs=()"]
    submit += [f"runs+=($(sbatch --parsable --dependency=afterok:$gen \"$dir/{j.name}\"))" for j in jobs]
    submit += ["merge=$(sbatch --parsable --dependency=afterany:$(IFS=:; echo \"${runs[*]}\") \"$dir/merge.sbatch\")",
               "echo \"generate $gen; runs ${runs[*]}; merge $merge\"",
               f"echo \"the scaling report will be in {out}/scaling (squeue -u ${{USER:-$(id -un)}} to follow)\""]
    written.append(_write(out / "submit.sh", "\n".join(submit) + "\n", mode=0o755))
    (out / "logs").mkdir(parents=True, exist_ok=True)
    return written


def _header(gpus: int, partition, account, time) -> list[str]:
    # the jobs start where `spmd jobscript` ran, so the config's relative paths mean the same there
    lines = [f"#SBATCH --time={time}", f"#SBATCH --chdir={Path.cwd()}"]
    if gpus:
        # every GPU of the node to every task: spmd binds rank -> GPU by node-local rank
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if account:
        lines.append(f"#SBATCH --account={account}")
    return lines


def _script(lines: list[str]) -> str:
    return "#!/bin/bash\n# written by spmd jobscript\n" + "\n".join(lines) + "\n"


def _write(path: Path, text: str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, text.encode())
    path.chmod(mode)
    return path
