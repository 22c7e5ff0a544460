"""The sbatch templates in jobscripts/: every job step is started so that one failing rank ends it (srun
--kill-on-bad-exit=1), through the MPI plug-in the script is given; tests/slurm runs them under a real SLURM."""

import re
from pathlib import Path

import pytest

TEMPLATES = sorted((Path(__file__).parents[2] / "jobscripts").glob("*.sbatch"))


def test_there_are_templates():
    assert {p.name for p in TEMPLATES} >= {"run.sbatch", "scale.sbatch", "array.sbatch"}


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_every_srun_names_the_mpi_plugin_and_ends_the_step_when_a_rank_fails(template):
    steps = [line for line in template.read_text().splitlines() if re.match(r"\s*srun\b", line)]
    assert steps, f"{template.name} starts no job step"
    for line in steps:
        assert '--mpi="$MPI_PLUGIN"' in line and "--kill-on-bad-exit=1" in line, line


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_without_mpi_plugin_set_the_template_asks_spmd_srun_mpi(template):
    text = template.read_text()
    assert "MPI_PLUGIN=${MPI_PLUGIN:-}" in text and "choice=$($SPMD srun-mpi) || exit 2" in text
    first_step = re.search(r"^\s*srun ", text, re.M).start()
    assert text.index("srun-mpi") < first_step  # chosen before the first step starts
