"""train's L2Window (backward_order: inputs_first on a GPU) against a stand-in CUDA driver that keeps what it is
told: the carve-out and the stream's access-policy window set as asked, and put back on close; refusals named."""

import numpy as np
import pytest

from spmd.core import libraries
from spmd.workloads.train import l2
from spmd.workloads.train.layout import PRESETS, Layout
from spmd.workloads.train.network import ARENA_ALIGN, Network
from spmd.workloads.train.ops import HostOps

real = pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is in the test extra")
MiB = 1 << 20
ACCESS = real.CUaccessProperty


class Driver:
    """cuda.bindings.driver as L2Window sees it: its own types and enums, and the calls L2Window makes on a
    state the test can inspect; ``refuse``: calls that answer CUDA_ERROR_INVALID_VALUE."""

    def __init__(self, persisting=30 * MiB, window=128 * MiB, limit=0, refuse=()):
        attribute = real.CUdevice_attribute
        self.attributes = {
            attribute.CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: persisting,
            attribute.CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: window,
        }
        self.limit, self.window, self.resets, self.refuse = limit, None, 0, refuse

    def __getattr__(self, name):
        if not name.startswith("cu"):
            return getattr(real, name)  # types and enums: the real ones
        method = getattr(self, "_" + name)

        def call(*args):
            if name in self.refuse:
                return (real.CUresult.CUDA_ERROR_INVALID_VALUE,)
            return (real.CUresult.CUDA_SUCCESS, *method(*args))

        return call

    def _cuCtxGetDevice(self):
        return (real.CUdevice(0),)

    def _cuDeviceGetAttribute(self, attribute, device):
        return (self.attributes[attribute],)

    def _cuCtxGetLimit(self, limit):
        assert limit == real.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE
        return (self.limit,)

    def _cuCtxSetLimit(self, limit, value):
        assert limit == real.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE
        self.limit = value
        return ()

    def _cuStreamSetAttribute(self, stream, attribute, value):
        assert int(stream) == 0xABC and attribute == real.CUstreamAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
        w = value.accessPolicyWindow
        self.window = (int(w.base_ptr), w.num_bytes, round(w.hitRatio, 6), w.hitProp, w.missProp)
        return ()

    def _cuCtxResetPersistingL2Cache(self):
        self.resets += 1
        return ()


class Stream:
    ptr = 0xABC


@pytest.fixture
def driver(monkeypatch):
    def use(**kwargs):
        fake = Driver(**kwargs)
        monkeypatch.setattr(libraries, "cuda_driver", lambda: fake)
        monkeypatch.setattr(l2, "cuda_driver", lambda: fake)
        return fake

    return use


def test_the_window_persists_the_buffer_and_close_puts_everything_back(driver):
    fake = driver(limit=5 * MiB)
    window = l2.L2Window(Stream(), 0x10000, 12 * MiB)
    assert window.failure is None and window.persisting_bytes == 12 * MiB
    assert fake.limit == 12 * MiB
    assert fake.window == (
        0x10000,
        12 * MiB,
        1.0,
        ACCESS.CU_ACCESS_PROPERTY_PERSISTING,
        ACCESS.CU_ACCESS_PROPERTY_STREAMING,
    )
    assert window.describe() == {"bytes": 12 * MiB, "persisting_bytes": 12 * MiB, "failure": None}
    window.close()
    assert fake.limit == 5 * MiB and fake.resets == 1  # the carve-out as it was, the lines released
    assert fake.window == (0, 0, 0.0, ACCESS.CU_ACCESS_PROPERTY_NORMAL, ACCESS.CU_ACCESS_PROPERTY_NORMAL)
    window.close()  # twice: nothing more
    assert fake.resets == 1


def test_a_buffer_larger_than_the_device_allows_gets_a_proportional_hit_ratio(driver):
    fake = driver(persisting=20 * MiB, window=64 * MiB)
    window = l2.L2Window(Stream(), 0x10000, 100 * MiB)
    assert window.persisting_bytes == 20 * MiB and fake.limit == 20 * MiB
    assert fake.window[1:3] == (64 * MiB, round(20 / 64, 6))  # the window capped, a share of it persisting


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"persisting": 0}, "no persisting L2 lines"),
        ({"refuse": ("cuCtxSetLimit",)}, "cuCtxSetLimit failed with CUDA_ERROR_INVALID_VALUE"),
        ({"refuse": ("cuStreamSetAttribute",)}, "cuStreamSetAttribute failed with CUDA_ERROR_INVALID_VALUE"),
    ],
)
def test_a_device_or_driver_that_refuses_leaves_nothing_set_and_says_why(driver, kwargs, message):
    fake = driver(limit=3 * MiB, **kwargs)
    window = l2.L2Window(Stream(), 0x10000, 8 * MiB)
    assert message in window.failure and window.persisting_bytes == 0
    assert fake.limit == 3 * MiB and fake.window is None
    assert window.describe()["persisting_bytes"] == 0


def test_without_the_driver_bindings_the_window_is_a_named_no_op(monkeypatch):
    monkeypatch.setattr(libraries, "cuda_driver", lambda: None)
    window = l2.L2Window(Stream(), 0x10000, 8 * MiB)
    assert "cuda-bindings" in window.failure
    window.close()


def test_a_driver_that_cannot_load_names_the_call_and_why(driver):
    fake = driver()

    def unloadable(*args):  # what cuda.pathfinder raises on a machine without libcuda
        raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via system search')

    fake._cuCtxGetDevice = unloadable
    window = l2.L2Window(Stream(), 0x10000, 8 * MiB)
    assert window.failure.startswith("cuCtxGetDevice: ") and "NVIDIA driver library" in window.failure
    assert window.persisting_bytes == 0 and fake.limit == 0
    window.close()


@pytest.mark.parametrize("widths,rows", [(PRESETS["large"], 512), ((7, 6, 5, 4), 3)])
def test_the_networks_activations_and_their_gradients_are_disjoint_aligned_views_of_one_arena(widths, rows):
    net = Network(Layout(widths), HostOps(np.float32), rows)
    arrays = [*net.acts, *net.deltas, net.dlogits]
    base = net.arena.ctypes.data
    spans = sorted((a.ctypes.data - base, a.ctypes.data - base + a.nbytes) for a in arrays)
    assert all(a.base is not None and np.shares_memory(a, net.arena) for a in arrays)
    assert all(start % ARENA_ALIGN == 0 for start, _ in spans)
    assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:]))  # disjoint
    assert spans[0][0] == 0 and spans[-1][1] <= net.arena.nbytes < spans[-1][1] + ARENA_ALIGN
    assert [a.shape for a in net.acts] == [(rows, w) for w in widths[1:]]
    assert net.dlogits.shape == (rows, widths[-1]) and net.dlogits.dtype == np.float32
