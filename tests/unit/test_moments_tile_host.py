"""The reduce kernel's per-tile math (moments.cu up to its loads), compiled for the CPU and run here.

A tile's count, mean, M2, min and max and Chan's merge of two tiles are checked against NumPy float64 for every
compile-time variant of the tile the host can ask for (FAST_MINMAX), without a GPU (tests/gpu run the whole kernel on
the device). The host compiler's warnings about a value read before it is set are errors: a tile sum left
uninitialized in one variant once passed a static check of the SASS and gave wrong variances on the GPU.
"""

import ctypes
import shutil
import subprocess
from importlib import resources

import numpy as np
import pytest

COMPILER = shutil.which("g++") or shutil.which("c++")
PRELUDE = """#include <cstring>
#include <math.h>
#define __device__
#define __forceinline__ inline
static inline double __longlong_as_double(long long x) { double d; std::memcpy(&d, &x, sizeof d); return d; }
"""
DRIVER = """
template <typename T> static Moments tile(const T* x) {
    T v[16];
    for (int i = 0; i < 16; ++i) v[i] = x[i];
    return tile_moments<T, 16>(v);
}
static void put(const Moments& m, double* out) {
    out[0] = m.n; out[1] = m.mean; out[2] = m.m2; out[3] = m.lo; out[4] = m.hi;
}
extern "C" void tile32(const float* x, double* out) { put(tile(x), out); }
extern "C" void tile64(const double* x, double* out) { put(tile(x), out); }
extern "C" void two_tiles32(const float* x, double* out) { put(combine(tile(x), tile(x + 16)), out); }
"""
TILE = 16  # values a tile: 4 float4 or 8 double2 loads into registers (moments.py's DEFAULT_LOADS)


def build(tmp_path, fast_minmax):
    source = resources.files("spmd.workloads.reduce").joinpath("moments.cu").read_text()
    tile_part = source[: source.index("template <typename T> struct Vec;")].replace("#pragma unroll", "")
    path = tmp_path / f"tile{fast_minmax}.cpp"
    path.write_text(PRELUDE + tile_part + DRIVER)
    flags = ["-O2", "-Wall", "-Werror=uninitialized", "-Werror=maybe-uninitialized", "-shared", "-fPIC"]
    defines = [f"-DFAST_MINMAX={fast_minmax}"]
    built = subprocess.run(
        [COMPILER, *flags, *defines, "-o", str(path.with_suffix(".so")), str(path)], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr
    lib = ctypes.CDLL(str(path.with_suffix(".so")))
    for name in ("tile32", "tile64", "two_tiles32"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return lib


def run(fn, x):
    out = np.full(5, -7.0)  # poisoned: every field must be written
    x = np.ascontiguousarray(x)
    fn(x.ctypes.data, out.ctypes.data)
    return dict(zip(("n", "mean", "m2", "lo", "hi"), out))


def reference(x):
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean()
    return {"n": x.size, "mean": mean, "m2": ((x - mean) ** 2).sum(), "lo": x.min(), "hi": x.max()}


def tiles(dtype):
    rng = np.random.default_rng(11)
    yield "centred", rng.standard_normal(TILE).astype(dtype)
    yield "offset 1e4", (1e4 + rng.standard_normal(TILE)).astype(dtype)  # M2 small against the mean: exactness
    yield "constant", np.full(TILE, 3.25, dtype)
    yield "one outlier", np.r_[np.zeros(TILE - 1), 1e6].astype(dtype)


@pytest.mark.skipif(COMPILER is None, reason="no C++ compiler on this machine")
@pytest.mark.parametrize("fast_minmax", [0, 1])
def test_tile_moments_match_numpy_in_every_variant(tmp_path, fast_minmax):
    lib = build(tmp_path, fast_minmax)
    for dtype, fn in ((np.float32, lib.tile32), (np.float64, lib.tile64)):
        for name, x in tiles(dtype):
            got, want = run(fn, x), reference(x)
            assert got["n"] == want["n"] and got["lo"] == want["lo"] and got["hi"] == want["hi"], (dtype, name)
            scale = np.abs(x.astype(np.float64)).sum()
            assert got["mean"] == pytest.approx(want["mean"], rel=1e-14, abs=1e-15 * scale), (dtype, name)
            assert got["m2"] == pytest.approx(want["m2"], rel=1e-12, abs=1e-14 * scale**2 / TILE), (dtype, name)
    x = np.random.default_rng(5).standard_normal(2 * TILE).astype(np.float32) * 3 + 2
    got, want = run(lib.two_tiles32, x), reference(x)  # Chan's merge of two tiles
    assert got["n"] == 2 * TILE and got["lo"] == want["lo"] and got["hi"] == want["hi"]
    assert got["mean"] == pytest.approx(want["mean"], rel=1e-14) and got["m2"] == pytest.approx(want["m2"], rel=1e-12)


@pytest.mark.skipif(COMPILER is None, reason="no C++ compiler on this machine")
@pytest.mark.parametrize("fast_minmax", [0, 1])  # NaN-propagating compares; min/max instructions and a NaN flag
def test_nan_and_inf_in_a_tile_come_out_as_numpy_says(tmp_path, fast_minmax):
    lib = build(tmp_path, fast_minmax)
    x = np.arange(TILE, dtype=np.float32)
    x[5] = np.nan
    got = run(lib.tile32, x)
    assert np.isnan(got["mean"]) and np.isnan(got["m2"]) and np.isnan(got["lo"]) and np.isnan(got["hi"])
    x[5] = np.inf
    got = run(lib.tile32, x)
    assert got["hi"] == np.inf and got["lo"] == 0 and got["mean"] == np.inf and np.isnan(got["m2"])
    x[7] = -np.inf  # +inf and -inf: a NaN sum and mean, no NaN value, so min and max stay the infinities
    got = run(lib.tile32, x)
    assert np.isnan(got["mean"]) and got["lo"] == -np.inf and got["hi"] == np.inf
