"""train's GEMMs through cuBLASLt: each distinct GEMM on the algorithm measured fastest for it, with the
bias + ReLU of a hidden layer and the bias gradient fused into the GEMM's epilogue.

Why: cuBLAS's own heuristic picks badly for some of train's tiny shapes (one such GEMM can take many times its
neighbours' time, a large share of a small step: bench/tools/train_ops.py shows it). So each distinct GEMM
(shapes, transposes, epilogue, alignment) asks cuBLASLt's heuristic for its candidates once, times each on scratch
output, and keeps the fastest. The fused epilogues remove one kernel per layer and pass.

Called through ctypes on the libcublasLt that CuPy's libcublas loaded (CuPy wraps no cuBLASLt). Capture-safe:
a workspace of our own, nothing allocated per call, the stream passed on every call, tuning only outside a
capture (inside one the heuristic's first choice is used).
"""

from __future__ import annotations

import ctypes

import numpy as np

from ...core import xp as xpmod
from ...core.libraries import loaded_libraries

# cublasLt.h / library_types.h values
_COMPUTE = {"float32": 68, "tf32": 77, "float64": 70}  # CUBLAS_COMPUTE_32F, _32F_FAST_TF32, _64F
# CUDA_R_32F, CUDA_R_64F, CUDA_R_16BF (bfloat16, held in uint16 arrays: CuPy has no bfloat16 dtype)
_DATA = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.uint16): 14}
_DESC_TRANSA, _DESC_TRANSB, _DESC_EPILOGUE, _DESC_BIAS_POINTER = 3, 4, 7, 8
_PREF_MAX_WORKSPACE = 1
EPILOGUES = {"none": 1, "bias_relu": 6, "bias_grad": 512}  # DEFAULT, RELU_BIAS, BGRADB
CANDIDATES = 16  # heuristic results timed per GEMM
TUNE_REPS = 20
TUNE_ROUNDS = 3
_PREF_MIN_ALIGNMENT = (5, 6, 7, 8)  # A, B, C, D bytes


# (device, compute type, GEMM key with its types) -> (algorithm bytes, its time, every candidate's time): one choice
# per GEMM per process, so two jobs of one process (a sweep, a test) round alike and tune once.
_CHOSEN: dict[tuple, tuple] = {}


class _Heuristic(ctypes.Structure):
    _fields_ = [
        ("algo", ctypes.c_uint64 * 8),
        ("workspace_size", ctypes.c_size_t),
        ("state", ctypes.c_int),
        ("waves", ctypes.c_float),
        ("reserved", ctypes.c_int * 4),
    ]


def load_cublaslt():
    """The libcublasLt loaded into this process (by CuPy's cuBLAS), or None."""
    for path in loaded_libraries("libcublasLt.so"):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if hasattr(lib, "cublasLtMatmul"):
            lib.cublasLtMatmul.argtypes = [ctypes.c_void_p] * 14 + [ctypes.c_size_t, ctypes.c_void_p]
            lib.cublasLtMatmul.restype = ctypes.c_int
            return lib
    return None


def _alignment(ptr: int) -> int:
    """The largest power of two up to 256 dividing ``ptr``: algorithms depend on it."""
    return min(256, ptr & -ptr) if ptr else 256


class _Plan:
    """One GEMM's descriptors and chosen algorithm (a heuristic result, as bytes)."""

    def __init__(self, lt, m, n, k, op_a, op_b, lda, ldb, ldc, epilogue, types):
        self.lt, self.epilogue = lt, epilogue
        self.desc = lt.call_create("cublasLtMatmulDescCreate", ctypes.c_int(lt.compute), ctypes.c_int(lt.scale_type))
        self.set(_DESC_TRANSA, ctypes.c_int32(op_a))
        self.set(_DESC_TRANSB, ctypes.c_int32(op_b))
        self.set(_DESC_EPILOGUE, ctypes.c_uint32(EPILOGUES[epilogue]))
        rows_a, cols_a = (m, k) if op_a == 0 else (k, m)
        rows_b, cols_b = (k, n) if op_b == 0 else (n, k)
        type_a, type_b, type_c = types
        self.layouts = [
            lt.layout(rows_a, cols_a, lda, type_a),
            lt.layout(rows_b, cols_b, ldb, type_b),
            lt.layout(m, n, ldc, type_c),
        ]
        self.algo = None
        self.candidates = []
        self.tuned_us = None  # the chosen algorithm's time, once measured
        self.timings: list[float] = []  # every candidate's, in the heuristic's order (inf: did not run)

    def set(self, attr: int, value) -> None:
        self.lt.check(
            self.lt.lib.cublasLtMatmulDescSetAttribute(
                self.desc, attr, ctypes.byref(value), ctypes.c_size_t(ctypes.sizeof(value))
            ),
            "cublasLtMatmulDescSetAttribute",
        )

    def heuristics(self, alignments) -> list:
        """cuBLASLt's candidates for pointers of these alignments (A, B, C) in bytes."""
        lt = self.lt
        for attr, align in zip(_PREF_MIN_ALIGNMENT, (*alignments, alignments[2])):
            value = ctypes.c_uint32(align)
            lt.check(
                lt.lib.cublasLtMatmulPreferenceSetAttribute(lt.pref, attr, ctypes.byref(value), ctypes.c_size_t(4)),
                "cublasLtMatmulPreferenceSetAttribute",
            )
        results = (_Heuristic * CANDIDATES)()
        count = ctypes.c_int(0)
        a, b, c = self.layouts
        status = lt.lib.cublasLtMatmulAlgoGetHeuristic(
            lt.handle, self.desc, a, b, c, c, lt.pref, CANDIDATES, results, ctypes.byref(count)
        )
        if status:
            return []
        return [r for r in results[: count.value] if r.state == 0 and r.workspace_size <= lt.workspace_bytes]

    def run(self, algo, a_ptr, b_ptr, out_ptr, beta_ptr, stream) -> int:
        lt = self.lt
        la, lb, lc = self.layouts
        return lt.lib.cublasLtMatmul(
            lt.handle,
            self.desc,
            lt.one,
            a_ptr,
            la,
            b_ptr,
            lb,
            beta_ptr,
            out_ptr,
            lc,
            out_ptr,
            lc,
            ctypes.byref(algo),
            lt.workspace_ptr,
            ctypes.c_size_t(lt.workspace_bytes),
            stream,
        )


class LtGemms:
    """Column-major cuBLASLt matmuls D = op(A) op(B) (+ beta D), planned and tuned per distinct GEMM; each
    matrix's type is its array's (float32, float64, or bfloat16 as uint16), the arithmetic ``compute``'s
    (float32, tf32 or float64; bfloat16 inputs accumulate in float32)."""

    def __init__(self, lib, compute: str, workspace):
        self.lib = lib
        self.compute = _COMPUTE[compute]
        scale = np.float64 if compute == "float64" else np.float32  # alpha and beta
        self.scale_type = _DATA[np.dtype(scale)]
        self._one, self._zero = np.array(1, scale), np.array(0, scale)
        self.one = ctypes.c_void_p(self._one.ctypes.data)
        self.betas = {0.0: ctypes.c_void_p(self._zero.ctypes.data), 1.0: self.one}
        self.workspace = workspace
        self.workspace_ptr = ctypes.c_void_p(workspace.data.ptr)
        self.workspace_bytes = workspace.nbytes
        self.handle = self.call_create("cublasLtCreate")
        self.pref = self.call_create("cublasLtMatmulPreferenceCreate")
        size = ctypes.c_uint64(self.workspace_bytes)
        self.check(
            lib.cublasLtMatmulPreferenceSetAttribute(
                self.pref, _PREF_MAX_WORKSPACE, ctypes.byref(size), ctypes.c_size_t(8)
            ),
            "cublasLtMatmulPreferenceSetAttribute",
        )
        self.plans: dict[tuple, _Plan | None] = {}

    @staticmethod
    def check(status: int, what: str) -> None:
        if status:
            raise RuntimeError(f"{what} failed with cuBLAS status {status}")

    def call_create(self, name: str, *args) -> ctypes.c_void_p:
        out = ctypes.c_void_p()
        self.check(getattr(self.lib, name)(ctypes.byref(out), *args), name)
        return out

    def layout(self, rows: int, cols: int, ld: int, dtype) -> ctypes.c_void_p:
        return self.call_create(
            "cublasLtMatrixLayoutCreate",
            ctypes.c_int(dtype),
            ctypes.c_uint64(rows),
            ctypes.c_uint64(cols),
            ctypes.c_int64(ld),
        )

    def matmul(
        self, m, n, k, op_a, op_b, a, lda, b, ldb, out, ldc, beta: float, stream: int, epilogue: str = "none", bias=None
    ) -> bool:
        """D = op(A) op(B) + beta D (column-major, pointers of CuPy arrays), with ``epilogue`` on ``bias``;
        False (nothing run) when cuBLASLt has no algorithm for it, so the caller runs it another way."""
        ptrs = (a.data.ptr, b.data.ptr, out.data.ptr, bias.data.ptr if bias is not None else 256)
        types = tuple(_DATA.get(x.dtype) for x in (a, b, out))
        if None in types:
            return False
        key = (m, n, k, op_a, op_b, lda, ldb, ldc, beta != 0, epilogue, tuple(map(_alignment, ptrs)), types)
        plan = self.plans.get(key, False)
        if plan is False:
            plan = self.plans[key] = self._plan(key, a, b, out, bias, beta, stream)
        if plan is None:
            return False
        if bias is not None:
            plan.set(_DESC_BIAS_POINTER, ctypes.c_void_p(bias.data.ptr))
        self.check(
            plan.run(
                plan.algo,
                ctypes.c_void_p(a.data.ptr),
                ctypes.c_void_p(b.data.ptr),
                ctypes.c_void_p(out.data.ptr),
                self.betas[float(beta)],
                ctypes.c_void_p(stream),
            ),
            "cublasLtMatmul",
        )
        return True

    def _plan(self, key, a, b, out, bias, beta, stream):
        m, n, k, op_a, op_b, lda, ldb, ldc, _, epilogue, alignments, types = key
        plan = _Plan(self, m, n, k, op_a, op_b, lda, ldb, ldc, epilogue, types)
        if bias is not None:
            plan.set(_DESC_BIAS_POINTER, ctypes.c_void_p(bias.data.ptr))
        plan.candidates = plan.heuristics(alignments[:3])
        if not plan.candidates:
            return None
        plan.algo = plan.candidates[0].algo
        cupy = xpmod.cupy
        chosen = (cupy.cuda.runtime.getDevice(), self.compute, key)
        if chosen in _CHOSEN:  # tuned before in this process: the same algorithm, so the same rounding
            algo, plan.tuned_us, plan.timings = _CHOSEN[chosen]
            plan.algo = type(plan.algo).from_buffer_copy(algo)
        elif len(plan.candidates) > 1 and not cupy.cuda.runtime.streamIsCapturing(stream):
            self._tune(plan, a, b, out, bias, beta)
            _CHOSEN[chosen] = (bytes(plan.algo), plan.tuned_us, plan.timings)
        return plan

    def _tune(self, plan, a, b, out, bias, beta) -> None:
        """Time every candidate as the step runs it (TUNE_REPS calls captured in a CUDA graph: launching from
        Python would time the host), on scratch output (the real one may be accumulated into), in TUNE_ROUNDS
        round-robin passes keeping each one's best: a GPU still raising its clock from idle during the first
        pass favours no candidate. Keep the fastest."""
        cupy = xpmod.cupy
        cupy.cuda.Device().synchronize()  # the workspace is shared: nothing else may be using it meanwhile
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            scratch = cupy.zeros_like(out)
            scratch_bias = cupy.zeros_like(bias) if bias is not None else None
        if scratch_bias is not None:
            plan.set(_DESC_BIAS_POINTER, ctypes.c_void_p(scratch_bias.data.ptr))
        args = [ctypes.c_void_p(p) for p in (a.data.ptr, b.data.ptr, scratch.data.ptr)]
        args += [self.betas[float(beta)], ctypes.c_void_p(stream.ptr)]
        graphs = []
        for result in plan.candidates:
            if plan.run(result.algo, *args):
                graphs.append(None)  # a candidate that does not run here is no candidate
                continue
            stream.begin_capture(cupy.cuda.runtime.streamCaptureModeRelaxed)
            try:
                for _ in range(TUNE_REPS):
                    plan.run(result.algo, *args)
            finally:
                graphs.append(stream.end_capture())
        plan.timings = [float("inf")] * len(graphs)
        for _ in range(TUNE_ROUNDS):
            for i, graph in enumerate(graphs):
                if graph is None:
                    continue
                start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                start.record(stream)
                graph.launch(stream)
                stop.record(stream)
                stop.synchronize()
                plan.timings[i] = min(plan.timings[i], cupy.cuda.get_elapsed_time(start, stop) * 1e3 / TUNE_REPS)
        stream.synchronize()
        best = min(range(len(graphs)), key=plan.timings.__getitem__)
        if plan.timings[best] < float("inf"):
            plan.tuned_us, plan.algo = plan.timings[best], plan.candidates[best].algo
        if bias is not None:
            plan.set(_DESC_BIAS_POINTER, ctypes.c_void_p(bias.data.ptr))

    def close(self) -> None:
        for plan in self.plans.values():
            if plan is not None:
                for layout in plan.layouts:
                    self.lib.cublasLtMatrixLayoutDestroy(layout)
                self.lib.cublasLtMatmulDescDestroy(plan.desc)
        self.plans = {}
        if self.handle is not None:
            self.lib.cublasLtMatmulPreferenceDestroy(self.pref)
            self.lib.cublasLtDestroy(self.handle)
            self.handle = None
