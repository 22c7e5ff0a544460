"""Which srun --mpi plugin a job's ranks start with (spmd.core.srun), a run's --cpus-per-task and why
(spmd.scale.jobscript.cpus_per_task), and the job script's own shell choosing the plugin where it runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import small

from spmd.core.errors import ConfigError
from spmd.core.srun import choose_plugin, library_family, offered_plugins
from spmd.scale import jobscript
from spmd.scale.jobscript import JobOptions, cpus_per_task, write_jobscripts
from spmd.workloads.registry import load_job_config

# `srun --mpi=list` of SLURM 23-24, and of SLURM 20 (one "srun: mpi/NAME" line each)
LISTING = (
    "MPI plugin types are...\n\tpmix\n\tnone\n\tcray_shasta\n\tpmi2\n"
    "specific pmix plugin versions available: pmix_v4,pmix_v5\n"
)

OLD_LISTING = "srun: MPI types are...\nsrun: mpi/none\nsrun: mpi/pmi2\nsrun: mpi/openmpi\n"

OPENMPI5 = "Open MPI v5.0.3, package: Open MPI builder Distribution, ident: 5.0.3, repo rev: v5.0.3, Apr 08, 2024"

OPENMPI4 = "Open MPI v4.1.6, package: Debian OpenMPI, ident: 4.1.6, repo rev: v4.1.6, Sep 30, 2023"

MPICH = "MPICH Version:      4.2.0\nMPICH Release date: Fri Feb  9 12:29:21 CST 2024\nMPICH ABI:          16:0:4"


def test_the_listing_of_either_slurm_is_read():
    assert offered_plugins(LISTING) == ["pmix", "none", "cray_shasta", "pmi2", "pmix_v4", "pmix_v5"]
    assert offered_plugins(OLD_LISTING) == ["none", "pmi2", "openmpi"]
    assert offered_plugins("") == [] and offered_plugins("srun: error: Invalid MPI type 'list'") == []


def test_the_library_is_named_from_its_version_text():
    assert library_family(OPENMPI5) == ("openmpi", 5) and library_family(OPENMPI4) == ("openmpi", 4)
    assert library_family(MPICH) == ("mpich", 4)
    assert library_family("Intel(R) MPI Library 2021.11 for Linux* OS") == ("mpich", None)
    assert library_family("something else") == ("other", None)


@pytest.mark.parametrize(
    "listing, version, plugin, why",
    [
        (LISTING, OPENMPI5, "pmix", "PMIx only"),
        (LISTING, OPENMPI4, "pmix", "speaks PMIx"),
        (OLD_LISTING, OPENMPI4, "pmi2", "no PMIx"),
        (LISTING, MPICH, "pmi2", "speaks PMI-2"),
        ("MPI plugin types are...\n\tnone\n\tpmix\n", MPICH, "pmix", "no PMI-2"),
        (LISTING, "something else", "pmix", "the first of PMIx, PMI-2"),
        ("", MPICH, None, "lists no MPI plugin"),
        ("MPI plugin types are...\n\tnone\n\tcray_shasta\n", MPICH, None, "neither PMIx nor PMI-2"),
    ],
)
def test_the_plugin_follows_the_library_and_what_srun_offers(listing, version, plugin, why):
    chosen, reason = choose_plugin(offered_plugins(listing), version)
    assert chosen == plugin and why in reason, (chosen, reason)


def test_open_mpi_5_without_pmix_is_refused_naming_what_srun_has():
    with pytest.raises(ConfigError, match="PMIx only, and this srun offers none, pmi2, openmpi"):
        choose_plugin(offered_plugins(OLD_LISTING), OPENMPI5)


def config(tmp_path: Path, threads="auto"):
    return load_job_config(small("reduce.yaml", tmp_path, **{"generate.shape": [1000], "io": {"threads": threads}}))


@pytest.mark.parametrize(
    "node, threads, given, cpus, why",
    [
        (64, "auto", None, 16, "a rank's share of the partition gpu's nodes: 64 CPUs over 4 rank(s)"),
        (64, 6, None, 6, "io.threads: 6 reader threads, within a rank's share"),
        (8, 6, None, 2, "io.threads: 6 reader threads, within a rank's share of the partition gpu's nodes (8 CPUs"),
        (None, "auto", None, 8, "sinfo could not say what a node has, so 8"),
        (None, 3, None, 3, "io.threads: 3 reader threads (sinfo could not say"),
        (64, "auto", 5, 5, "as --cpus-per-task gave it"),
    ],
)
def test_cpus_per_task_follow_what_a_rank_needs_and_the_node_has(
    tmp_path, monkeypatch, node, threads, given, cpus, why
):
    monkeypatch.setattr(jobscript, "node_cpus", lambda partition: node)
    options = JobOptions(gpus_per_node=4, cpus_per_task=given, partition="gpu")
    got, reason = cpus_per_task(options, config(tmp_path, threads), 4)
    assert got == cpus and why in reason, (got, reason)


def test_sinfo_is_asked_for_the_partitions_fewest_cpus(tmp_path, monkeypatch):
    (tmp_path / "sinfo").write_text('#!/bin/bash\n[[ "$*" == "-h -o %c -p gpu" ]] && printf "64\\n48+\\n64\\n"\n')
    (tmp_path / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert jobscript.node_cpus("gpu") == 48 and jobscript.node_cpus("cpu") is None


@pytest.mark.parametrize(
    "answer, flag, said",
    [
        ("pmix\\tOpen MPI v5.0.3 speaks PMIx only", "--mpi=pmix", "spmd: srun --mpi=pmix: Open MPI v5.0.3"),
        ("-\\tsrun lists no MPI plugin here: its default", "", "spmd: srun --mpi=-: srun lists no MPI plugin"),
    ],
)
def test_the_run_script_starts_srun_with_the_plugin_chosen_where_it_runs(tmp_path, monkeypatch, answer, flag, said):
    """The script itself, run by bash with stand-ins for spmd (its srun-mpi answer) and srun (its arguments)."""
    monkeypatch.setattr(jobscript, "node_cpus", lambda partition: 8)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text('#!/bin/bash\necho "srun $*"\n')
    (bin_dir / "fake-spmd").write_text(f'#!/bin/bash\n[[ "$1" == srun-mpi ]] && printf -- "{answer}\\n"; exit 0\n')
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    options = JobOptions(gpus_per_node=2, spmd=str(bin_dir / "fake-spmd"))
    cwd = Path.cwd()
    monkeypatch.chdir(tmp_path)
    write_jobscripts(config(tmp_path), "job.yaml", [1, 2], tmp_path / "jobs", options, ("strong",))
    monkeypatch.chdir(cwd)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(tmp_path / "jobs/strong-2n.sbatch")], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    srun = next(line for line in done.stdout.splitlines() if line.startswith("srun "))
    assert srun.startswith(f"srun {flag} --kill-on-bad-exit=1 ".replace("  ", " ")), srun
    assert said in done.stdout, done.stdout


def test_a_plugin_name_that_is_not_one_is_refused(tmp_path):
    for bad in ("pmi2; rm -rf ~", "PMIX", "pmi2\n"):
        with pytest.raises(ConfigError, match="--mpi"):
            write_jobscripts(config(tmp_path), "job.yaml", [1], tmp_path / "j", JobOptions(2, mpi=bad), ("strong",))


@pytest.mark.parametrize(
    "options, why",
    [
        ({"cpu_partition": "cpu\ntouch pwned"}, "--partition"),
        ({"cpu_time": "$(touch pwned)"}, "--time"),
        ({"partition": "gpu\n#SBATCH --mem=1T"}, "--partition"),
    ],
)
def test_the_cpu_jobs_values_are_refused_like_the_runs(tmp_path, monkeypatch, options, why):
    monkeypatch.setattr(jobscript, "node_cpus", lambda partition: None)
    with pytest.raises(ConfigError, match=why):
        write_jobscripts(config(tmp_path), "job.yaml", [1, 2], tmp_path / "j", JobOptions(2, **options), ("strong",))
    assert not (tmp_path / "j").exists() and not list(tmp_path.rglob("pwned"))
