"""train's L2Window (backward_order: inputs_first on a GPU) against a stand-in CUDA driver that keeps what it is
told: the carve-out and the stream's access-policy window set as asked, and put back on close; refusals named."""

import numpy as np
import pytest

from spmd.workloads.train import l2
from spmd.workloads.train.model import PRESETS, Layout
from spmd.workloads.train.network import ARENA_ALIGN, Network
from spmd.workloads.train.ops import HostOps

MiB = 1 << 20


class Driver:
    """libcuda's calls L2Window makes, on a state it can inspect; ``refuse``: names that return CUresult 1."""

    def __init__(self, persisting=30 * MiB, window=128 * MiB, limit=0, refuse=()):
        self.attributes = {
            l2.CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: persisting,
            l2.CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: window,
        }
        self.limit, self.window, self.resets, self.refuse = limit, None, 0, refuse

    def __getattr__(self, name):
        method = getattr(self, "_" + name)

        def call(*args):
            return 1 if name in self.refuse else method(*args) or 0

        return call

    def _cuCtxGetDevice(self, device):
        device._obj.value = 0

    def _cuDeviceGetAttribute(self, value, attribute, device):
        value._obj.value = self.attributes[attribute.value]

    def _cuCtxGetLimit(self, value, limit):
        assert limit.value == l2.CU_LIMIT_PERSISTING_L2_CACHE_SIZE
        value._obj.value = self.limit

    def _cuCtxSetLimit(self, limit, value):
        assert limit.value == l2.CU_LIMIT_PERSISTING_L2_CACHE_SIZE
        self.limit = value.value

    def _cuStreamSetAttribute(self, stream, attribute, value):
        assert stream.value == 0xABC and attribute.value == l2.CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW
        w = value._obj.accessPolicyWindow
        self.window = (w.base_ptr, w.num_bytes, round(w.hitRatio, 6), w.hitProp, w.missProp)

    def _cuCtxResetPersistingL2Cache(self):
        self.resets += 1


class Stream:
    ptr = 0xABC


@pytest.fixture
def driver(monkeypatch):
    def use(**kwargs):
        fake = Driver(**kwargs)
        monkeypatch.setattr(l2, "cuda_driver", lambda: fake)
        return fake

    return use


def test_the_window_persists_the_buffer_and_close_puts_everything_back(driver):
    fake = driver(limit=5 * MiB)
    window = l2.L2Window(Stream(), 0x10000, 12 * MiB)
    assert window.failure is None and window.persisting_bytes == 12 * MiB
    assert fake.limit == 12 * MiB
    assert fake.window == (0x10000, 12 * MiB, 1.0, l2.CU_ACCESS_PROPERTY_PERSISTING, l2.CU_ACCESS_PROPERTY_STREAMING)
    assert window.describe() == {"bytes": 12 * MiB, "persisting_bytes": 12 * MiB, "failure": None}
    window.close()
    assert fake.limit == 5 * MiB and fake.resets == 1  # the carve-out as it was, the lines released
    assert fake.window == (None, 0, 0.0, l2.CU_ACCESS_PROPERTY_NORMAL, l2.CU_ACCESS_PROPERTY_NORMAL)
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
        ({"refuse": ("cuCtxSetLimit",)}, "cuCtxSetLimit failed with CUresult 1"),
        ({"refuse": ("cuStreamSetAttribute",)}, "cuStreamSetAttribute failed with CUresult 1"),
    ],
)
def test_a_device_or_driver_that_refuses_leaves_nothing_set_and_says_why(driver, kwargs, message):
    fake = driver(limit=3 * MiB, **kwargs)
    window = l2.L2Window(Stream(), 0x10000, 8 * MiB)
    assert message in window.failure and window.persisting_bytes == 0
    assert fake.limit == 3 * MiB and fake.window is None
    assert window.describe()["persisting_bytes"] == 0


def test_without_the_driver_library_the_window_is_a_named_no_op(monkeypatch):
    monkeypatch.setattr(l2, "cuda_driver", lambda: None)
    window = l2.L2Window(Stream(), 0x10000, 8 * MiB)
    assert "libcuda.so.1" in window.failure
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
