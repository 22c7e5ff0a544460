"""Every case of the failure catalogue (bench/failures/, the rows of docs/reliability.md), run by
the same ``run_case`` as bench's faults suite, under a real mpiexec of 3 ranks as the table was: each ends with
its exit code (any non-zero one where the catalogue names none), within timeout_s + 30 s, leaves no report and
passes its own check. test_faults.py and test_hostile.py look closer at some of the same cases."""

from __future__ import annotations

import numpy as np
import pytest
from mpi_job import mpiexec

from bench.failures.case import run_case, write_dataset
from bench.failures.catalogue import every_case

RANKS = 3
CASES = {case.name: case for case in every_case(RANKS, False, mpiexec())}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("catalogue")
    write_dataset(root / "x.h5", np.random.default_rng(0).standard_normal(30_000).astype(np.float32))
    return root


def test_the_catalogue_names_each_case_once():
    assert len(CASES) == len(every_case(RANKS, False, mpiexec())) >= 80


@pytest.mark.parametrize("name", CASES)
def test_a_case_of_the_catalogue_ends_as_it_must(folder, name):
    row = run_case(folder, mpiexec(), RANKS, "cpu", CASES[name])
    assert row["ok"], row
