"""Test helpers: small HDF5 inputs and their float64 reference answers."""

from __future__ import annotations

import os

import h5py
import numpy as np

# The environment as the user gave it, taken when tests/conftest.py imports this module,
# before any test starts MPI in pytest's own process. Open MPI's singleton start adds
# OMPI_*/PMIX_* variables; an mpirun that inherits them thinks it is nested in a job and
# fails. Launch jobs with this snapshot (it keeps the user's own OMPI_MCA_* settings).
LAUNCH_ENV = dict(os.environ)


def write_dataset(path, data, name="x", **kwargs) -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset(name, data=data, **kwargs)


def reference(data: np.ndarray, ddof: int = 0) -> dict:
    """The reduce answer by plain NumPy float64 over the whole array."""
    x = np.asarray(data, dtype=np.float64)
    scalar = x.ndim == 1
    x2 = x.reshape(x.shape[0], -1)
    out = {
        "sum": x2.sum(0),
        "mean": x2.mean(0),
        "min": x2.min(0),
        "max": x2.max(0),
        "var": x2.var(0, ddof=ddof),
        "std": x2.std(0, ddof=ddof),
    }
    return {k: float(v[0]) if scalar else v.tolist() for k, v in out.items()}


def assert_result_close(result: dict, expected: dict, rtol: float = 1e-12) -> None:
    assert set(result) == {"sum", "mean", "min", "max", "var", "std"}
    for key, want in expected.items():
        got = np.asarray(result[key])
        want = np.asarray(want)
        if key in ("min", "max"):
            np.testing.assert_array_equal(got, want, err_msg=key)
        else:
            scale = 1e-12 if key != "sum" else 1e-12 * max(1.0, float(np.abs(want).max()))
            np.testing.assert_allclose(got, want, rtol=rtol, atol=scale, err_msg=key)
