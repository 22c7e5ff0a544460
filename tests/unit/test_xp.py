"""spmd.core.xp where CuPy is installed but sees no GPU (a CPU node of the same software, or CUDA_VISIBLE_DEVICES
empty): a CPU sweep frees no GPU memory between its runs rather than raising from CuPy's pools."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from spmd.core import xp


class NoDevice(RuntimeError):
    """What CuPy raises without a device (cudaErrorNoDevice)."""


def fake_cupy(devices: int, freed: list) -> SimpleNamespace:
    def count():
        if not devices:
            raise NoDevice("cudaErrorNoDevice: no CUDA-capable device is detected")
        return devices

    def pool(name):
        def get():
            if not devices:
                raise NoDevice("cudaErrorNoDevice: no CUDA-capable device is detected")
            return SimpleNamespace(free_all_blocks=lambda: freed.append(name))

        return get

    return SimpleNamespace(
        cuda=SimpleNamespace(runtime=SimpleNamespace(getDeviceCount=count)),
        get_default_memory_pool=pool("device"),
        get_default_pinned_memory_pool=pool("pinned"),
    )


@pytest.mark.parametrize("devices", [0, 1, 2])
def test_release_memory_frees_the_pools_only_where_cupy_sees_a_device(monkeypatch, devices):
    freed = []
    monkeypatch.setattr(xp, "cupy", fake_cupy(devices, freed))
    assert xp.gpu_count() == devices
    xp.release_memory()
    assert freed == (["device", "pinned"] if devices else [])


def test_release_memory_without_cupy_does_nothing(monkeypatch):
    monkeypatch.setattr(xp, "cupy", None)
    xp.release_memory()
    assert xp.gpu_count() == 0
