"""Keeping one device buffer resident in the GPU's L2 cache for the kernels of one stream.

Under params.backward_order: inputs_first, backward computes layer 0's weight gradient (for `large` at batch 512
the largest GEMM: it reads the 9.9 MB batch and writes 19.7 MB) before the other layers', and it evicts their
operands (each layer's output and output gradient, a few MB) from L2: on an H200 that cost about 15 us a
step, as much as when L2 was flushed before each of them (bench/backward_order.py). A persisting
access-policy window over the buffer holding those arrays (Network.arena) keeps them resident. The window is a
stream attribute, which the kernels captured on that stream into a CUDA graph keep.
"""

from __future__ import annotations

import contextlib
import ctypes

from ...libraries import cuda_driver

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1
CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE = 108
CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE = 109
CU_ACCESS_PROPERTY_NORMAL, CU_ACCESS_PROPERTY_STREAMING, CU_ACCESS_PROPERTY_PERSISTING = 0, 1, 2


class _Window(ctypes.Structure):  # CUaccessPolicyWindow
    _fields_ = [
        ("base_ptr", ctypes.c_void_p),
        ("num_bytes", ctypes.c_size_t),
        ("hitRatio", ctypes.c_float),
        ("hitProp", ctypes.c_int),
        ("missProp", ctypes.c_int),
    ]


class _StreamAttribute(ctypes.Union):  # CUstreamAttrValue (a CUlaunchAttributeValue: 64 bytes)
    _fields_ = [("accessPolicyWindow", _Window), ("pad", ctypes.c_char * 64)]


class L2Window:
    """Persisting L2 lines for [base, base + nbytes) on ``stream`` (a CuPy stream), for as long as it is open.

    Sets the device's persisting carve-out to the window's size (at most what the device allows, the hit ratio
    scaled down where the window is larger) and the stream's access-policy window; ``close`` puts both back.

    Attributes:
        persisting_bytes: the carve-out set (0: nothing was set).
        failure: why nothing was set (no driver, a device without persisting L2, a refused call), or None.
    """

    def __init__(self, stream, base: int, nbytes: int):
        self.stream, self.persisting_bytes, self.failure = stream, 0, None
        self.nbytes = nbytes
        self._lib = cuda_driver()
        self._limit_before = None  # the carve-out to put back, once changed
        try:
            self._open(base, nbytes)
        except OSError as exc:  # a CUDA driver call that failed: the run goes on without the window
            self.failure = str(exc)
            with contextlib.suppress(OSError):
                self.close()

    def _call(self, name: str, *args) -> None:
        status = getattr(self._lib, name)(*args)
        if status:
            raise OSError(f"{name} failed with CUresult {status}")

    def _attribute(self, attribute: int) -> int:
        device, value = ctypes.c_int(), ctypes.c_int()
        self._call("cuCtxGetDevice", ctypes.byref(device))
        self._call("cuDeviceGetAttribute", ctypes.byref(value), ctypes.c_int(attribute), device)
        return value.value

    def _open(self, base: int, nbytes: int) -> None:
        if self._lib is None:
            raise OSError("the CUDA driver library (libcuda.so.1) did not load")
        most = self._attribute(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE)
        window = min(nbytes, self._attribute(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE))
        if most <= 0 or window <= 0:
            raise OSError("this device has no persisting L2 lines")
        carve = min(window, most)
        before = ctypes.c_size_t(0)
        self._call("cuCtxGetLimit", ctypes.byref(before), ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE))
        self._call("cuCtxSetLimit", ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE), ctypes.c_size_t(carve))
        self._limit_before = before
        self._set(_Window(base, window, carve / window, CU_ACCESS_PROPERTY_PERSISTING, CU_ACCESS_PROPERTY_STREAMING))
        self.persisting_bytes = carve

    def _set(self, window: _Window) -> None:
        value = _StreamAttribute()
        value.accessPolicyWindow = window
        self._call(
            "cuStreamSetAttribute",
            ctypes.c_void_p(self.stream.ptr),
            ctypes.c_int(CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW),
            ctypes.byref(value),
        )

    def describe(self) -> dict:
        """For report.json: the window's bytes, the persisting bytes set, and why none were where so."""
        return {"bytes": self.nbytes, "persisting_bytes": self.persisting_bytes, "failure": self.failure}

    def close(self) -> None:
        """The stream back to normal caching, the persisting lines released, the carve-out as it was."""
        before, self._limit_before = self._limit_before, None
        if before is None:
            return
        if self.persisting_bytes:
            self.persisting_bytes = 0
            self._set(_Window(None, 0, 0.0, CU_ACCESS_PROPERTY_NORMAL, CU_ACCESS_PROPERTY_NORMAL))
        self._call("cuCtxResetPersistingL2Cache")
        self._call("cuCtxSetLimit", ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE), before)
