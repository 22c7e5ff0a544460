"""Fixtures of the unit tests."""

import h5py
import numpy as np
import pytest

from spmd.core.config import InputConfig
from spmd.io.hdf5 import plan_rank_input


@pytest.fixture
def ones_plan(tmp_path):
    """make(rows): rank 0 of 1's input plan over a new HDF5 file holding dataset "x", ``rows`` float32 ones."""

    def make(rows: int):
        path = tmp_path / "x.h5"
        with h5py.File(path, "w") as f:
            f.create_dataset("x", data=np.ones(rows, np.float32))
        return plan_rank_input(InputConfig(path=str(path), dataset="x"), None, 0, 1, ("float32",), (1,))

    return make
