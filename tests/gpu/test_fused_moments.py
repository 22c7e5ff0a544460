"""The fused one-pass moments kernel against NumPy float64 (needs a GPU: run with --gpu)."""

import numpy as np
import pytest
from helpers import reference

from spmd.core import xp as xpmod
from spmd.workloads.reduce import moments as mom
from spmd.workloads.reduce.workload import finalize

pytestmark = pytest.mark.gpu


VARIANTS = {
    "default": {},  # the ring or registers, as ring_stages chooses for this device
    "registers": {"async_stages": 0},
    "registers, select": {"async_stages": 0, "fast_minmax": False},
    "registers, bounded": {"async_stages": 0, "loads": 2, "min_blocks": 4, "blocks_per_sm": 6},  # two waves
    "ring": {"async_stages": 2},  # rounds copied into shared memory, one in flight
    "ring, 4 stages, 2 loads": {"async_stages": 4, "loads": 2},  # 3 in flight
    "ring, 5 stages, 1 load, select": {"async_stages": 5, "loads": 1, "fast_minmax": False},
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def fused(request):
    """The kernel as spmd runs it (min/max instructions and a NaN flag, the resident grid, the ring where the device
    gets it) and variants that bench/tools/fused_kernel.py measures: all must give the same answers, NaN included."""
    return mom.FusedMoments(**VARIANTS[request.param])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_default_grid_is_the_resident_blocks(dtype):
    shape = mom.FusedMoments().shape(dtype)
    assert shape["resident_per_sm"] >= 1 and shape["registers"] >= 1, "the driver's occupancy (cuda-bindings)"
    assert shape["blocks_per_sm"] == shape["resident_per_sm"]
    assert shape["stages"] == mom.ring_stages(mom.device_facts())
    assert shape["loads"] == (mom.RING_LOADS if shape["stages"] else mom.DEFAULT_LOADS[np.dtype(dtype)])


def test_the_device_says_what_the_ring_is_chosen_by():
    """The choice rests on the device's compute capability, memory clock, bus width, SMs and clock: each must come
    from the device itself, not a fallback (CuPy's attributes once lacked the compute capability the choice
    looked up there, and a device that has the ring's cp.async got registers, silently)."""
    facts = mom.device_facts()
    assert str(facts["ComputeCapability"]) == xpmod.cupy.cuda.Device().compute_capability
    per_clock = mom.memory_bytes_per_sm_clock(facts)
    assert per_clock is not None and 1 < per_clock < 100
    want = mom.RING_STAGES if facts["ComputeCapability"] >= 80 and per_clock >= mom.RING_BYTES_PER_SM_CLOCK else 0
    assert mom.FusedMoments().shape(np.float32)["stages"] == want


# sizes around every boundary: scalar tail, vector tail, one round of a block, many blocks
SIZES = [1, 3, 4, 5, 15, 16, 17, 255, 4095, 4096, 4097, 65536 * 16 + 7, 10_000_019]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", SIZES)
def test_fused_matches_numpy(fused, dtype, size):
    cupy = xpmod.cupy
    host = (np.random.default_rng(size).standard_normal(size) * 5 + 3).astype(dtype)
    x = cupy.asarray(host)
    assert fused.supports(x)
    got = finalize(xpmod.to_host(fused(x)), ddof=0, scalar=True)
    want = reference(host)
    assert got["min"] == want["min"] and got["max"] == want["max"]
    for key in ("sum", "mean", "var", "std"):
        assert got[key] == pytest.approx(want[key], rel=1e-11, abs=1e-11 * np.abs(host).sum()), key


def test_fused_is_deterministic_and_sees_nan(fused):
    cupy = xpmod.cupy
    x = cupy.random.standard_normal(5_000_001, dtype=np.float32)
    first = xpmod.to_host(fused(x))
    for _ in range(3):
        np.testing.assert_array_equal(xpmod.to_host(fused(x)), first)
    x[1234567] = np.nan
    m = xpmod.to_host(fused(x))
    assert np.isnan(m[mom.MEAN]).all() and np.isnan(m[mom.MIN]).all() and np.isnan(m[mom.MAX]).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stages, loads", [(2, 4), (3, 3)])
def test_async_copies_fold_in_the_same_order(dtype, stages, loads):
    """The ring changes where a round waits, not what is folded or in which order: on the same grid and loads the
    moments are the default's, bit for bit (a ring slot read before its copy landed, or a copy into a slot not yet
    read, would not be)."""
    cupy = xpmod.cupy
    x = cupy.random.standard_normal(3_000_017, dtype=np.float64).astype(dtype) * 7 + 2
    ring = mom.FusedMoments(blocks_per_sm=2, loads=loads, async_stages=stages)
    plain = mom.FusedMoments(blocks_per_sm=2, loads=loads, async_stages=0)
    np.testing.assert_array_equal(xpmod.to_host(ring(x)), xpmod.to_host(plain(x)))


def test_unaligned_or_2d_input_goes_to_the_array_path(fused):
    cupy = xpmod.cupy
    x = cupy.arange(101, dtype=np.float32)
    assert not fused.supports(x[1:])  # 4-byte offset: not 16-byte aligned
    assert not fused.supports(x[:100].reshape(50, 2))
    got = finalize(xpmod.to_host(mom.moments_xp(x[1:], cupy)), 0, True)
    assert got["sum"] == pytest.approx(sum(range(1, 101)))
