"""Keeping one device buffer resident in the GPU's L2 cache for the kernels of one stream.

Under params.backward_order: inputs_first, backward computes layer 0's weight gradient (for `large` at batch 512
the largest GEMM: it reads the 9.9 MB batch and writes 19.7 MB) before the other layers', and it evicts their
operands (each layer's output and output gradient, a few MB) from L2, costing as much as flushing L2 before each
of them (bench/tools/backward_order.py measures it). A persisting
access-policy window over the buffer holding those arrays (Network.arena) keeps them resident. The window is a
stream attribute, which the kernels captured on that stream into a CUDA graph keep.
"""

from __future__ import annotations

import contextlib

from ...core.libraries import cuda_driver, driver_call, require_driver


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
        self._limit_before = None  # the carve-out to put back, once changed
        try:
            self._open(base, nbytes)
        except OSError as exc:  # a CUDA driver call that failed: the run goes on without the window
            self.failure = str(exc)
            with contextlib.suppress(OSError):
                self.close()

    @staticmethod
    def _attribute(name: str) -> int:
        attribute = getattr(cuda_driver().CUdevice_attribute, name)
        return driver_call("cuDeviceGetAttribute", attribute, driver_call("cuCtxGetDevice"))

    def _open(self, base: int, nbytes: int) -> None:
        driver = require_driver()
        most = self._attribute("CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE")
        window = min(nbytes, self._attribute("CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE"))
        if most <= 0 or window <= 0:
            raise OSError("this device has no persisting L2 lines")
        carve = min(window, most)
        limit = driver.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE
        before = driver_call("cuCtxGetLimit", limit)
        driver_call("cuCtxSetLimit", limit, carve)
        self._limit_before = before
        access = driver.CUaccessProperty
        self._set(
            base, window, carve / window, access.CU_ACCESS_PROPERTY_PERSISTING, access.CU_ACCESS_PROPERTY_STREAMING
        )
        self.persisting_bytes = carve

    def _set(self, base: int, nbytes: int, hit_ratio: float, hit, miss) -> None:
        """The stream's access-policy window (a CUaccessPolicyWindow in a CUstreamAttrValue)."""
        driver = cuda_driver()
        value = driver.CUstreamAttrValue()
        window = value.accessPolicyWindow  # a view into value: set in place
        window.base_ptr, window.num_bytes, window.hitRatio = base, nbytes, hit_ratio
        window.hitProp, window.missProp = hit, miss
        attribute = driver.CUstreamAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
        driver_call("cuStreamSetAttribute", driver.CUstream(self.stream.ptr), attribute, value)

    def describe(self) -> dict:
        """For report.json: the window's bytes, the persisting bytes set, and why none were where so."""
        return {"bytes": self.nbytes, "persisting_bytes": self.persisting_bytes, "failure": self.failure}

    def close(self) -> None:
        """The stream back to normal caching, the persisting lines released, the carve-out as it was."""
        before, self._limit_before = self._limit_before, None
        if before is None:
            return
        driver = cuda_driver()
        if self.persisting_bytes:
            self.persisting_bytes = 0
            normal = driver.CUaccessProperty.CU_ACCESS_PROPERTY_NORMAL
            self._set(0, 0, 0.0, normal, normal)
        driver_call("cuCtxResetPersistingL2Cache")
        driver_call("cuCtxSetLimit", driver.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE, before)
