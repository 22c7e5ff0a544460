"""``spmd jobscript``: the sbatch files of a strong/weak series across node counts.

One job per (series, node count) runs ``spmd run`` on its own config (the workload's
``strong_config`` / ``weak_config`` of the given one, written beside the scripts), after one job
that generates every input; with two node counts or more a last job merges the reports into one
scaling report. ``submit.sh`` submits them in that order with ``--dependency``, which SLURM enforces.

Scripts a cluster user can submit as they are: ``set -euo pipefail``; srun's MPI plugin chosen where the job
runs from what its srun offers and the MPI the ranks load (``spmd srun-mpi``), unless ``--mpi`` names one;
``--cpus-per-task`` derived from what a rank needs and the node offers (``sinfo``), its reason written beside it,
unless given; the generate and merge jobs on their own partition and time limit, without GPUs; the threads
environment, the NCCL settings of jobscripts/run.sbatch; the user's ``--prologue`` files (``module load ...``)
and ``--env KEY=VALUE``.

Every value a user gave reaches the scripts quoted or not at all: shell lines quote each word
(``shlex``), and ``#SBATCH`` lines, which sbatch reads up to the end of the line without a shell,
take only values of a plain character set (anything else, a newline above all, is refused); a prologue is
the user's own shell, checked with ``bash -n``. Every job writes its own files
(``Workload.with_output_tag``): the jobs of a series may run at once. The whole series is built, then
written as one set (``files.write_files_atomic``): a refused series, one that would replace a file spmd
did not write, or one that fails while being written, leaves nothing changed.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import yaml

from ..core.config import int_list
from ..core.errors import ConfigError, brief, one_line
from ..core.files import MARK, write_files_atomic
from ..core.srun import PLUGIN
from ..workloads.registry import workload_class

FALLBACK_CPUS = 8  # a rank's CPUs where neither the user nor sinfo says (readers and BLAS want several)
SLURM_NAME = re.compile(r"[A-Za-z0-9_.+-]+(,[A-Za-z0-9_.+-]+)*")  # partitions (a list too), accounts
SLURM_TIME = re.compile(r"\d+(:\d\d){0,2}|\d+-\d+(:\d\d){0,2}|unlimited|infinite", re.IGNORECASE)
SBATCH_PATH = re.compile(r"[A-Za-z0-9_./+,:@=~-]+")  # no space, quote, $, %, ; or newline
ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_PROLOGUE_BYTES = 64 << 10


def parse_nodes(text: str) -> list[int]:
    return int_list(text, "--nodes", "node counts")


@dataclass(frozen=True)
class JobOptions:
    """What every job of a series shares, as the user gave it (``spmd jobscript``'s options)."""

    gpus_per_node: int
    tasks_per_node: int | None = None
    cpus_per_task: int | None = None  # default: from what a rank needs and the node offers (cpus_per_task())
    partition: str | None = None
    account: str | None = None
    time: str = "00:30:00"
    mpi: str = "auto"  # srun's --mpi plugin; auto: chosen where the job runs (spmd srun-mpi)
    spmd: str | None = None  # default: this Python with -m spmd
    prologue: tuple[str, ...] = ()  # files of shell lines (module load ...) every job runs first
    env: tuple[str, ...] = ()  # KEY=VALUE every job exports
    cpu_partition: str | None = None  # the generate and merge jobs' (default: the runs' partition, no GPUs)
    cpu_time: str = "00:10:00"  # the generate and merge jobs' time limit


def write_jobscripts(
    cfg, config_path: str, nodes: list[int], out: Path, options: JobOptions, modes=("strong", "weak")
) -> list[Path]:
    """Write the series' configs and sbatch files under ``out`` (all or nothing); the paths written."""
    tasks = options.tasks_per_node or options.gpus_per_node
    if tasks < 1:
        raise ConfigError("--tasks-per-node: give it (>= 1) when --gpus-per-node is 0 (a CPU series)")
    if options.gpus_per_node and tasks > options.gpus_per_node:
        raise ConfigError(
            f"--tasks-per-node {tasks} > --gpus-per-node {options.gpus_per_node}: spmd runs one rank per GPU"
        )
    if not PLUGIN.fullmatch(options.mpi):
        raise ConfigError(f"--mpi {brief(options.mpi)}: auto, or a plugin of `srun --mpi=list` (pmix, pmi2, ...)")
    cpus, cpus_why = cpus_per_task(options, cfg, tasks)
    out = Path(out).resolve()
    setup = DEFAULT_ENVIRONMENT + _prologue(options.prologue) + _environment(options.env)  # the user's last: they win
    runs = _header(options.gpus_per_node, cpus, options.partition, options.account, options.time, out)
    cpu_jobs = _header(0, 1, options.cpu_partition or options.partition, options.account, options.cpu_time, out)
    files = _series(
        cfg,
        config_path,
        nodes,
        out,
        tasks,
        modes,
        (runs, [f"# --cpus-per-task={cpus}: {cpus_why}"]),
        (cpu_jobs, ["# one process on one CPU, no GPU: the partition and time limit of --cpu-partition, --cpu-time"]),
        setup,
        _command(options.spmd or default_spmd()),
        options.mpi,
    )
    written = write_files_atomic([(path, text.encode(), mode) for path, text, mode in files])
    (out / "logs").mkdir(exist_ok=True)
    return written


def cpus_per_task(options: JobOptions, cfg, tasks: int) -> tuple[int, str]:
    """A run's ``--cpus-per-task`` and why: the user's; else what a rank needs (``io.threads`` reader threads where
    it is a number; under ``auto`` the rank's share of the node, which its readers then use) within its share of
    the node's CPUs (``sinfo`` asked for the partition's nodes, where it answers)."""
    if options.cpus_per_task is not None:
        if not 1 <= options.cpus_per_task <= 4096:
            raise ConfigError(f"--cpus-per-task {options.cpus_per_task}: from 1 to 4096")
        return options.cpus_per_task, "as --cpus-per-task gave it"
    node = node_cpus(options.partition)
    threads = cfg.io.threads if isinstance(cfg.io.threads, int) else None
    if node is None:
        if threads:
            return threads, f"io.threads: {threads} reader threads (sinfo could not say what a node has)"
        return FALLBACK_CPUS, (
            f"sinfo could not say what a node has, so {FALLBACK_CPUS} (give --cpus-per-task: the node's CPUs "
            f"over its {tasks} rank(s))"
        )
    share = max(1, node // tasks)
    where = f"the partition {options.partition}'s" if options.partition else "the default partition's"
    if threads:
        return min(threads, share), (
            f"io.threads: {threads} reader threads, within a rank's share of {where} nodes ({node} CPUs over "
            f"{tasks} rank(s), sinfo)"
        )
    return share, f"a rank's share of {where} nodes: {node} CPUs over {tasks} rank(s) (sinfo; io.threads: auto)"


def node_cpus(partition: str | None) -> int | None:
    """The fewest CPUs a node of ``partition`` (default: the cluster's default) has, as sinfo says; None where
    sinfo is not there or does not answer."""
    if shutil.which("sinfo") is None:
        return None
    command = ["sinfo", "-h", "-o", "%c", *(["-p", partition] if partition else [])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    counts = [int(word.rstrip("+")) for word in done.stdout.split() if word.rstrip("+").isdigit()]
    return min(counts) if done.returncode == 0 and counts and min(counts) > 0 else None


def default_spmd() -> str:
    """``spmd`` as this process runs it: its interpreter with ``-m spmd``."""
    return shlex.join([sys.executable, "-m", "spmd"])


def _series(
    cfg, config_path, nodes, out, tasks, modes, runs, cpu_jobs, setup, spmd, mpi
) -> list[tuple[Path, str, int]]:
    """(path, text, file mode) of every file of the series, nothing written yet; ``runs`` and ``cpu_jobs``: the
    #SBATCH lines of the runs and of the generate and merge jobs, each with the comment that says why."""
    (header, header_why), (one_task, one_task_why) = runs, cpu_jobs
    cls = workload_class(cfg.workload)
    workload = re.sub(r"[^A-Za-z0-9_.-]", "_", cfg.workload)  # a job name is a label: made plain
    # every config is scaled from the base job's, output included: copies of a user's own input for weak scaling
    # go beside the base job's results, where spmd report merge, starting from the base report, expects them
    base = dataclasses.replace(cfg, output=str(out / "results" / f"{modes[0]}-{nodes[0]}n"))
    files, jobs, configs = [], [], []
    for mode in modes:
        for n in nodes:
            if mode == "weak" and "strong" in modes and n == nodes[0]:
                continue  # the same run as strong at the base: spmd report merge puts it in both series
            name = f"{mode}-{n}n"
            scaled = cls.with_output_tag(cls.scaled_config(base, mode, Fraction(n, nodes[0])), name)
            conf = out / "configs" / f"{name}.yaml"
            data = {**scaled.to_dict(), "output": str(out / "results" / name)}
            files.append(
                (
                    conf,
                    f"# {MARK}: spmd jobscript; {mode} scaling, {n} node(s) x {tasks} rank(s), from "
                    f"{brief(one_line(config_path))}\n" + yaml.safe_dump(data, sort_keys=False),
                    0o666,
                )
            )
            configs.append((conf, scaled))
            body = [
                f"#SBATCH --job-name=spmd-{workload}-{name}",
                f"#SBATCH --nodes={n}",
                f"#SBATCH --ntasks-per-node={tasks}",
                *header,
                "#SBATCH --signal=B:USR1@120",
                "",
                *header_why,
                *setup,
                *_mpi_choice(mpi, spmd),
                "# 120 s before the time limit SLURM signals this script; srun passes USR1 on to the ranks",
                "# (train checkpoints and stops cleanly; the other workloads end with the step)",
                "trap 'kill -USR1 $step 2>/dev/null' USR1",
                "",
                f"srun {SRUN_MPI} --kill-on-bad-exit=1 {spmd} run {shlex.quote(str(conf))} &",
                "step=$!",
                "rc=0; wait $step || rc=$?",
                "if (( rc > 128 )); then rc=0; wait $step || rc=$?; fi  # the trap interrupted wait: again",
                "exit $rc",
            ]
            jobs.append(out / f"{name}.sbatch")
            files.append((jobs[-1], _script(body), 0o666))
    gen = [
        "#SBATCH --job-name=spmd-generate",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        *one_task,
        "",
        *one_task_why,
        *setup,
        "# every series' input once, before the runs: missing files and spmd's own out-of-date ones; your own",
        "# files are left as they are (a strong run reads them, a weak run copies of them)",
    ]
    steps = [
        f"{spmd} generate --skip-user-files {shlex.quote(str(conf))}"
        for conf, scaled in configs
        if scaled.generate is not None or any(g for _, g in cls.extra_inputs(scaled))
    ]
    files.append(
        (
            out / "generate.sbatch",
            _script(gen + (steps or ["echo 'nothing to generate: no config of the series has a generate section'"])),
            0o666,
        )
    )
    merge = None
    if len(nodes) > 1:  # a scaling report needs two node counts
        merge = [
            "#SBATCH --job-name=spmd-merge",
            "#SBATCH --nodes=1",
            "#SBATCH --ntasks=1",
            *one_task,
            "",
            *one_task_why,
            *setup,
            "shopt -s nullglob",
            f"reports=({shlex.quote(str(out / 'results'))}/*/report.json)",
            'if (( ${#reports[@]} < 2 )); then echo "spmd merge: ${#reports[@]} report(s) written, a scaling '
            "report needs two (see the runs' logs)\" >&2; exit 1; fi",
            f'{spmd} report merge "${{reports[@]}}" --out {shlex.quote(str(out / "scaling"))}',
        ]
        files.append((out / "merge.sbatch", _script(merge), 0o666))
    submit = [
        "#!/usr/bin/env bash",
        f"# {MARK}: spmd jobscript",
        "# Submit the series: inputs first, then every run"
        + (", then the merge" if merge else "")
        + " (sbatch --dependency).",
        "set -euo pipefail",
        f"dir={shlex.quote(str(out))}",
        'mkdir -p "$dir/logs"',
        'gen=$(sbatch --parsable "$dir/generate.sbatch")',
        "runs=()",
    ]
    submit += [f'runs+=($(sbatch --parsable --dependency=afterok:$gen "$dir/{j.name}"))' for j in jobs]
    if merge:
        submit += [
            'merge=$(sbatch --parsable --dependency=afterany:$(IFS=:; echo "${runs[*]}") "$dir/merge.sbatch")',
            'echo "generate $gen; runs ${runs[*]}; merge $merge"',
            'echo "the scaling report will be in $dir/scaling (squeue -u ${USER:-$(id -un)} to follow)"',
        ]
    else:
        submit += [
            'echo "generate $gen; runs ${runs[*]}"',
            'echo "one node count: each run\'s report.json is in $dir/results (no scaling report)"',
        ]
    files.append((out / "submit.sh", "\n".join(submit) + "\n", 0o777))
    return files


SRUN_MPI = '${mpi_flag[@]+"${mpi_flag[@]}"}'  # srun's --mpi=PLUGIN, or nothing for the cluster's default


def _mpi_choice(mpi: str, spmd: str) -> list[str]:
    """The lines that set ``mpi_flag``: the plugin --mpi named, or (auto) the one ``spmd srun-mpi`` chooses where
    the job runs, said in the job's log with its reason."""
    if mpi != "auto":
        return [f"mpi_flag=(--mpi={mpi})  # as --mpi gave it", ""]
    return [
        "# srun's MPI plugin, chosen here where the job runs: what this srun offers (srun --mpi=list) and the MPI",
        "# library the ranks load (Open MPI 5: PMIx only; MPICH: PMI-2); --mpi PLUGIN fixes it instead",
        f"choice=$({spmd} srun-mpi)",
        "IFS=$'\\t' read -r mpi why <<< \"$choice\"",
        '[[ -n "$mpi" ]] || { echo "spmd: srun-mpi chose no plugin (its output: $choice)" >&2; exit 2; }',
        'mpi_flag=(); if [[ "$mpi" != "-" ]]; then mpi_flag=(--mpi="$mpi"); fi',
        'echo "spmd: srun --mpi=$mpi: $why"',
        "",
    ]


def series_summary(nodes: list[int], modes) -> str:
    """Which job runs each series' sizes (weak at the base node count is the strong job's run)."""
    parts = []
    for mode in modes:
        sizes = [
            f"{n} (strong-{n}n)" if mode == "weak" and "strong" in modes and n == nodes[0] else str(n) for n in nodes
        ]
        parts.append(f"{mode}: {', '.join(sizes)} node(s)")
    merge = (
        "; spmd report merge makes the scaling report"
        if len(nodes) > 1
        else "; one node count: no scaling report (give --nodes two or more counts for one)"
    )
    return "; ".join(parts) + merge


def _prologue(paths: tuple[str, ...]) -> list[str]:
    """The lines of every ``--prologue`` file, checked: UTF-8 text of at most MAX_PROLOGUE_BYTES, no #SBATCH
    line (sbatch would not read it there) and valid shell (``bash -n``). They run with ``set +u``: scripts such
    as ``module`` read variables that may be unset."""
    lines = []
    for path in paths:
        where = f"--prologue {brief(one_line(path))}"
        try:
            if not Path(path).is_file():
                raise ConfigError(f"{where}: not a regular file")
            data = Path(path).read_bytes()[: MAX_PROLOGUE_BYTES + 1]
        except OSError as exc:
            raise ConfigError(f"{where}: cannot read it ({exc.strerror})") from None
        if len(data) > MAX_PROLOGUE_BYTES:
            raise ConfigError(f"{where}: more than {MAX_PROLOGUE_BYTES} bytes; a prologue is a few lines")
        try:
            text = data.decode()
        except UnicodeDecodeError:
            raise ConfigError(f"{where}: not UTF-8 text") from None
        if "\0" in text or "\r" in text:
            raise ConfigError(f"{where}: holds a NUL or carriage return")
        if any(line.lstrip().startswith("#SBATCH") for line in text.splitlines()):
            raise ConfigError(
                f"{where}: an #SBATCH line there would be ignored (sbatch reads them only at the top); "
                f"use spmd jobscript's options"
            )
        checked = (
            subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True) if shutil.which("bash") else None
        )
        if checked is not None and checked.returncode != 0:
            raise ConfigError(f"{where}: not valid shell ({one_line(checked.stderr.strip())})")
        lines += [f"# from --prologue {one_line(path)}", "set +u", *text.rstrip("\n").splitlines(), "set -u", ""]
    return lines


# the threads and NCCL settings every job gets first (values already in the environment win)
DEFAULT_ENVIRONMENT = [
    "# threads: a rank's BLAS and reader threads on the CPUs SLURM gave its task; srun (SLURM >= 22.05) does",
    "# not pass --cpus-per-task on by itself",
    'export SRUN_CPUS_PER_TASK="${SLURM_CPUS_PER_TASK:-1}"',
    'export OMP_NUM_THREADS="${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}"',
    'export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"  # no NVLink multicast unless the node is known to allow it',
    "",
]


def _environment(items: tuple[str, ...]) -> list[str]:
    """An ``export`` line for each ``--env KEY=VALUE``, its value quoted."""
    lines = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not ENV_KEY.fullmatch(key):
            raise ConfigError(
                f"--env '{one_line(item)[:60]}': KEY=VALUE, KEY of letters, digits and _ (not first a digit)"
            )
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise ConfigError(f"--env '{one_line(item)[:60]}': a value of one line without control characters")
        lines.append(f"export {key}={shlex.quote(value)}")
    return ["# from --env", *lines, ""] if lines else []


def _header(gpus: int, cpus: int, partition, account, time, out: Path) -> list[str]:
    """The #SBATCH lines every job shares, each value checked (sbatch reads them without a shell)."""
    if not SLURM_TIME.fullmatch(str(time)):
        raise ConfigError(f"--time {brief(time)}: a SLURM time limit (minutes, H:MM:SS, D-HH:MM:SS, ...)")
    for option, value in (("--partition", partition), ("--account", account)):
        if value is not None and not SLURM_NAME.fullmatch(value):
            raise ConfigError(f"{option} {brief(value)}: a SLURM name (letters, digits, _ . + -, a comma list)")
    # the jobs start where `spmd jobscript` ran, so the config's relative paths mean the same there
    lines = [
        f"#SBATCH --time={time}",
        f"#SBATCH --cpus-per-task={cpus}",
        f"#SBATCH --chdir={_sbatch_path(Path.cwd(), 'the working directory')}",
        f"#SBATCH --output={_sbatch_path(out, 'the output folder')}/logs/%x-%j.out",
    ]
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
        raise ConfigError(
            f"{what} {brief(text)}: an #SBATCH line cannot carry it safely (a space, quote, $, %, "
            f"; or newline); choose a folder of letters, digits and _ . / + , : @ = ~ -"
        )
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
    """A job script: sbatch reads the #SBATCH lines up to the first command, then bash runs it, stopping at the
    first command that fails."""
    header = [line for line in lines if line.startswith("#SBATCH")]
    body = lines[len(header) :]
    return "\n".join(["#!/bin/bash", f"# {MARK}: spmd jobscript", *header, "", "set -euo pipefail", *body]) + "\n"
