"""The MLP's primitives, twice: NumPy (CPU, and the float64 reference) and CuPy (GPU).

Both run the same arithmetic in the same order of steps, so a GPU result can be checked
against a NumPy float64 one. On the GPU every primitive is one launch on the current stream:
cuBLAS GEMMs called directly on a handle of our own (CuPy's matmul costs Python time on every
call, and a step has dozens), and small fused CUDA kernels (kernels.cu). Nothing allocates, and per-step
values (the step counter for dropout and Adam, the batch cursor) are read from device memory,
so a whole step can be captured in a CUDA graph and replayed.

Dropout masks come from a counter-based hash of (seed, step, layer, micro-batch, rank, element):
no mask is stored, and the CPU and GPU draw the same masks.
"""

from __future__ import annotations

import ctypes
from importlib import resources

import numpy as np

from ...core import xp as xpmod
from ...core.libraries import loaded_libraries
from .lt import LtGemms, load_cublaslt

# counters[0]: steps into the current window's batch indices; counters[1]: optimizer steps so far.
CURSOR, STEP = 0, 1


def dropout_salt(layer: int, micro: int, rank: int) -> int:
    """The hash key of one layer's mask in one micro-batch on one rank."""
    return (layer & 0xFF) | (micro & 0xFFF) << 8 | (rank & 0xFFF) << 20


def _mix32(x: np.ndarray) -> np.ndarray:
    """A 32-bit integer hash (lowbias32), on uint32 arrays; kernels.cu has its twin (mix32)."""
    with np.errstate(over="ignore"):  # multiplication modulo 2**32 is the point
        x = x ^ (x >> np.uint32(16))
        x = x * np.uint32(0x7FEB352D)
        x = x ^ (x >> np.uint32(15))
        x = x * np.uint32(0x846CA68B)
        return x ^ (x >> np.uint32(16))


def keep_mask(shape, keep: float, seed: int, step: int, salt: int) -> np.ndarray:
    """Which elements dropout keeps (True) for one layer and micro-batch."""
    key = _mix32(
        np.uint32(seed & 0xFFFFFFFF) ^ _mix32(np.uint32(step & 0xFFFFFFFF) ^ _mix32(np.array(salt, np.uint32)))
    )
    h = _mix32(key ^ np.arange(int(np.prod(shape)), dtype=np.uint32))
    return ((h >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24) < np.float32(keep)).reshape(shape)


class HostOps:
    """NumPy primitives (the CPU path and the reference)."""

    xp = np

    def __init__(self, dtype, precision: str | None = None, max_rows: int = 0):
        self.dtype = self.storage = np.dtype(dtype)
        self.precision = None  # the host reference computes in its dtype
        self._spare = None  # the optimizers' and an accumulating GEMM's scratch (``_scratch``)

    def _scratch(self, like, k: int) -> list:
        """``k`` scratch arrays shaped like ``like``, kept between steps and only grown. Fresh arrays a step were
        faulted in again on a rank whose malloc had seen no larger block freed (docs/validation.md, fifth CPU round)."""
        n, spare = like.size, self._spare
        if spare is None or spare.dtype != like.dtype or spare.shape[0] < k or spare.shape[1] < n:
            rows, width = (0, 0) if spare is None or spare.dtype != like.dtype else spare.shape
            self._spare = spare = np.empty((max(rows, k), max(width, n)), like.dtype)
        return [spare[i, :n].reshape(like.shape) for i in range(k)]

    def gemm(self, a, b, out, trans_a=False, trans_b=False, beta=0.0):
        """out = op(a) @ op(b) + beta * out (row-major 2-D arrays), the product written in place (``_scratch``)."""
        a, b = (a.T if trans_a else a), (b.T if trans_b else b)
        if beta == 0:
            np.matmul(a, b, out=out)
            return
        (product,) = self._scratch(out, 1)
        np.matmul(a, b, out=product)
        out *= beta
        out += product

    def column_sums(self, x, out, beta=0.0):
        """out = sum of x's rows + beta * out."""
        if beta == 0:
            np.sum(x, axis=0, out=out)
        else:
            out *= beta
            out += x.sum(axis=0)

    def linear_relu(self, x, w, bias, out):
        """out = relu(x w^T + bias): a hidden layer's forward without dropout."""
        self.gemm(x, w, out, trans_b=True)
        out += bias
        np.maximum(out, 0, out=out)

    def weight_gradient(self, delta, x, dw, db, accumulate: bool):
        """dw (+)= delta^T x and db (+)= the column sums of delta (added when ``accumulate``)."""
        beta = 1.0 if accumulate else 0.0
        self.gemm(delta, x, dw, trans_a=True, beta=beta)
        self.column_sums(delta, db, beta=beta)

    def gather(self, xs, ys, idx, counters, per_step, offset, xb, yb):
        """Rows of this micro-batch: xb, yb = xs[rows], ys[rows] for the cursor's step."""
        start = int(counters[CURSOR]) * per_step + offset
        rows = idx[start : start + xb.shape[0]]
        np.take(xs, rows, axis=0, out=xb)
        np.take(ys, rows, axis=0, out=yb)

    def act_forward(self, z, bias, keep, seed, salt, counters):
        """In place: z = dropout(relu(z + bias))."""
        z += bias
        np.maximum(z, 0, out=z)
        if keep < 1:
            mask = keep_mask(z.shape, keep, seed, int(counters[STEP]), salt)
            z *= mask
            z *= self.dtype.type(1.0 / keep)

    def act_backward(self, d, a, keep):
        """In place: d = d * [a > 0] / keep (a: the layer's output after dropout)."""
        d *= a > 0
        if keep < 1:
            d *= self.dtype.type(1.0 / keep)

    def softmax_xent(self, z, bias, y, scale, dz, loss_acc, correct_acc):
        """Softmax cross-entropy of logits z + bias against labels y: dz = (p - onehot) * scale;
        per-row loss and hits are added to loss_acc and correct_acc."""
        logits = z + bias
        top = logits.max(axis=1, keepdims=True)
        e = np.exp(logits - top)
        total = e.sum(axis=1, keepdims=True)
        rows = np.arange(len(y))
        loss_acc += (np.log(total[:, 0]) + top[:, 0] - logits[rows, y]).astype(np.float64)
        correct_acc += (np.argmax(logits, axis=1) == y).astype(correct_acc.dtype)
        np.divide(e, total, out=dz)
        dz[rows, y] -= 1
        dz *= self.dtype.type(scale)

    def sgd(self, w, g, v, lr, momentum, counters):
        """v = momentum * v + g; w -= lr * v (PyTorch's SGD, dampening 0)."""
        v *= self.dtype.type(momentum)
        v += g
        (step,) = self._scratch(w, 1)
        np.multiply(self.dtype.type(lr), v, out=step)
        w -= step

    def adam(self, w, g, m, v, lr, beta1, beta2, eps, counters):
        """Adam with bias correction (PyTorch's), t = the step being taken (1-based)."""
        t = int(counters[STEP]) + 1
        T = self.dtype.type
        term, step = self._scratch(w, 2)  # each operation as w -= lr * mhat / (sqrt(vhat) + eps) takes them
        m *= T(beta1)
        np.multiply(T(1 - beta1), g, out=term)
        m += term
        v *= T(beta2)
        np.multiply(T(1 - beta2), g, out=term)
        term *= g
        v += term
        np.divide(m, T(1 - beta1**t), out=step)  # mhat
        np.divide(v, T(1 - beta2**t), out=term)  # vhat
        np.sqrt(term, out=term)
        term += T(eps)
        np.multiply(T(lr), step, out=step)
        step /= term
        w -= step

    def advance(self, counters):
        counters += 1

    def stage(self, host):
        return np.asarray(host, dtype=self.dtype)

    def bind(self, stream):
        pass

    def close(self):
        pass


WORKSPACE_BYTES = 32 << 20


def _loaded_cublas():
    """The libcublas CuPy loaded into this process (ctypes), or None."""
    paths = loaded_libraries("libcublas.so")
    try:
        lib = ctypes.CDLL(paths[0]) if paths else None
    except OSError:
        return None
    return lib if lib is not None and hasattr(lib, "cublasSetWorkspace_v2") else None


BLOCK = 256
BF16 = np.dtype(np.uint16)  # bfloat16 storage (precision: bf16): CuPy has no bfloat16 dtype


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 values as bfloat16 bit patterns (uint16), rounded to nearest even as the kernels do."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    with np.errstate(over="ignore"):
        rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    rounded[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return rounded


def bf16_values(bits) -> np.ndarray:
    """bfloat16 bit patterns (uint16, host or device) as float32 values."""
    xp = xpmod.cupy if xpmod.is_device_array(bits) else np
    return (bits.astype(xp.uint32) << 16).view(xp.float32)


def _kernel_types(ctype: str, bf16: bool) -> dict:
    """name -> {storage dtype: C++ instantiation} of the templated kernels this precision needs."""
    real = np.dtype(np.float32 if ctype == "float" else np.float64)
    types = {
        "gather_rows": {real: f"gather_rows<{ctype}>"},
        "act_forward": {real: f"act_forward<{ctype}>"},
        "act_backward": {real: f"act_backward<{ctype}>"},
        "softmax_xent": {real: f"softmax_xent<{ctype}, {ctype}, {ctype}>"},
        "sgd": {real: f"sgd<{ctype}>"},
        "adam": {real: f"adam<{ctype}>"},
    }
    if bf16:
        for name in ("gather_rows", "act_forward", "act_backward"):
            types[name][BF16] = f"{name}<unsigned short>"
        types["softmax_xent"][BF16] = "softmax_xent<float, unsigned short, unsigned short>"
    return types


class DeviceOps:
    """CuPy primitives: cuBLAS on our own handle, fused CUDA kernels, all on the current stream.

    ``precision`` is None (GEMMs in ``dtype``), "tf32" (float32 GEMMs on TF32 tensor cores) or "bf16". Under
    bf16 the GEMMs' operands (the parameters' copy, activations and their gradients, in ``storage``) are bfloat16,
    and the accumulation, weight gradients, parameters and optimizer float32 (mixed precision, as autocast)."""

    def __init__(self, dtype, precision: str | None = None, max_rows: int = 1):
        from cupy_backends.cuda.libs import cublas

        cupy = xpmod.cupy
        self.xp = cupy
        self.dtype = np.dtype(dtype)
        self.precision = precision
        self.storage = BF16 if precision == "bf16" else self.dtype
        ctype = "float" if self.dtype == np.float32 else "double"
        self._blas = cublas
        self._gemm = cublas.sgemm if self.dtype == np.float32 else cublas.dgemm
        self._handle = cublas.create()
        self._on_stream = None  # the stream the handle is bound to
        # CuPy's cuBLAS wrappers refuse to run while a stream is captured; cuBLAS itself does
        # not: call it through ctypes, on CuPy's own libcublas, with a workspace of our own
        # (cuBLAS must not allocate one inside a capture).
        self._lib = _loaded_cublas()
        if self._lib is not None:
            self._workspace = cupy.empty(WORKSPACE_BYTES, np.uint8)
            self._lib.cublasSetWorkspace_v2(
                ctypes.c_void_p(self._handle),
                ctypes.c_void_p(self._workspace.data.ptr),
                ctypes.c_size_t(WORKSPACE_BYTES),
            )
            name = "cublasSgemm_v2" if self.dtype == np.float32 else "cublasDgemm_v2"
            self._gemm = getattr(self._lib, name)
            self._gemm.argtypes = (
                ctypes.c_void_p,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_int,
                ctypes.c_void_p,
                ctypes.c_int,
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_int,
            )
            self._gemm.restype = ctypes.c_int
        cublas.setPointerMode(self._handle, getattr(cublas, "CUBLAS_POINTER_MODE_HOST", 0))
        if precision == "tf32":
            cublas.setMathMode(self._handle, getattr(cublas, "CUBLAS_TF32_TENSOR_OP_MATH", 3))
        self._op = {False: getattr(cublas, "CUBLAS_OP_N", 0), True: getattr(cublas, "CUBLAS_OP_T", 1)}
        self._scalars = {}  # host scalars cuBLAS reads through pointers: kept alive here
        types = _kernel_types(ctype, precision == "bf16")
        source = resources.files(__package__).joinpath("kernels.cu").read_text()
        module = cupy.RawModule(
            code=source, options=("--std=c++17",), name_expressions=[n for by in types.values() for n in by.values()]
        )
        # (kernel, storage dtype of its main array) -> function
        self._k = {(k, t): module.get_function(n) for k, by in types.items() for t, n in by.items()}
        for name in ("advance", "sgd_float4", "to_bf16"):
            self._k[name] = module.get_function(name)
        # column sums as a GEMM with a ones row, in the operands' type
        self._ones = (
            cupy.ones(max_rows, self.dtype) if self.storage != BF16 else cupy.full(max_rows, 0x3F80, BF16)
        )  # bfloat16 1.0
        self._no_counters = cupy.zeros(2, np.int64)  # act_forward without dropout never reads them
        self.T = self.dtype.type
        # cuBLASLt where it loads: each GEMM on its measured-fastest algorithm, bias/ReLU/bias-gradient fused
        lib = load_cublaslt() if self._lib is not None else None
        compute = "tf32" if precision == "tf32" else "float32" if self.dtype == np.float32 else "float64"
        self._lt = LtGemms(lib, compute, self._workspace) if lib is not None else None
        if self._lt is None and precision == "bf16":
            raise RuntimeError("params.precision: bf16 needs cuBLASLt, which did not load")

    def _scalar(self, value) -> int:
        ref = self._scalars.get(value)
        if ref is None:
            ref = self._scalars[value] = np.array(value, dtype=self.dtype)
        return ref.ctypes.data

    @staticmethod
    def _stream():
        return xpmod.cupy.cuda.get_current_stream().ptr

    def gemm(self, a, b, out, trans_a=False, trans_b=False, beta=0.0, epilogue="none", bias=None) -> bool:
        """out = op(a) op(b) + beta out, with cuBLASLt's ``epilogue`` (lt.EPILOGUES) on ``bias``; False when
        an epilogue asked for is not available (nothing was run)."""
        # Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
        m, n = out.shape
        k = a.shape[0] if trans_a else a.shape[1]
        lda, ldb = _leading(a), _leading(b)  # a block of columns (split_gradients' row blocks of dZ) keeps its row
        stream = self._stream()
        if (
            self._lt is not None
            and beta in (0.0, 1.0)
            and self._lt.matmul(
                n,
                m,
                k,
                self._op[trans_b],
                self._op[trans_a],
                b,
                ldb,
                a,
                lda,
                out,
                _leading(out),
                beta,
                stream,
                epilogue,
                bias,
            )
        ):
            return True
        if epilogue != "none":
            return False
        if not a.dtype == b.dtype == out.dtype == self.dtype:
            raise RuntimeError(
                f"cuBLASLt has no algorithm for a {a.dtype} x {b.dtype} -> {out.dtype} GEMM "
                f"({m} x {n} x {k}) on this GPU"
            )
        if stream != self._on_stream:
            self._set_stream(stream)
        status = self._gemm(
            self._handle,
            self._op[trans_b],
            self._op[trans_a],
            n,
            m,
            k,
            self._scalar(1.0),
            b.data.ptr,
            ldb,
            a.data.ptr,
            lda,
            self._scalar(beta),
            out.data.ptr,
            _leading(out),
        )
        if status:  # the ctypes path returns the cublasStatus_t (CuPy's raises by itself)
            raise RuntimeError(f"cuBLAS gemm failed with status {status}")
        return True

    def _set_stream(self, stream: int) -> None:
        if self._lib is not None:
            self._lib.cublasSetStream_v2(ctypes.c_void_p(self._handle), ctypes.c_void_p(stream))
        else:
            self._blas.setStream(self._handle, stream)
        self._on_stream = stream

    def bind(self, stream) -> None:
        """Bind cuBLAS to ``stream`` now (before a capture on it starts)."""
        self._set_stream(stream.ptr)

    def column_sums(self, x, out, beta=0.0):
        self.gemm(self._ones[: x.shape[0]].reshape(1, -1), x, out.reshape(1, -1), beta=beta)

    def linear_relu(self, x, w, bias, out):
        if not self.gemm(x, w, out, trans_b=True, epilogue="bias_relu", bias=bias):
            self.gemm(x, w, out, trans_b=True)
            self.act_forward(out, bias, 1.0, 0, 0, self._no_counters)

    def weight_gradient(self, delta, x, dw, db, accumulate: bool):
        # cuBLASLt's bias gradient overwrites: fused on the first micro-batch only
        if accumulate or not self.gemm(delta, x, dw, trans_a=True, epilogue="bias_grad", bias=db):
            beta = 1.0 if accumulate else 0.0
            self.gemm(delta, x, dw, trans_a=True, beta=beta)
            self.column_sums(delta, db, beta=beta)

    @staticmethod
    def _grid(n: int) -> tuple[int]:
        return (-(-n // BLOCK),)

    def gather(self, xs, ys, idx, counters, per_step, offset, xb, yb):
        rows, cols = xb.shape
        pitch = _leading(xb)
        self._k["gather_rows", xb.dtype](
            self._grid(rows * cols),
            (BLOCK,),
            (
                xs,
                ys,
                idx,
                counters,
                np.int32(per_step),
                np.int32(offset),
                np.int32(rows),
                np.int32(cols),
                np.int32(pitch),
                xb,
                yb,
            ),
        )

    def act_forward(self, z, bias, keep, seed, salt, counters):
        rows, cols = z.shape
        self._k["act_forward", z.dtype](
            self._grid(z.size),
            (BLOCK,),
            (
                z,
                bias,
                np.int32(rows),
                np.int32(cols),
                np.float32(keep),
                self.T(1.0 / keep),
                np.uint32(seed & 0xFFFFFFFF),
                np.uint32(salt),
                counters,
            ),
        )

    def act_backward(self, d, a, keep):
        self._k["act_backward", d.dtype](self._grid(d.size), (BLOCK,), (d, a, np.int32(d.size), self.T(1.0 / keep)))

    def softmax_xent(self, z, bias, y, scale, dz, loss_acc, correct_acc):
        rows, classes = z.shape
        self._k["softmax_xent", dz.dtype](
            self._grid(rows),
            (BLOCK,),
            (z, bias, y, np.int32(rows), np.int32(classes), self.T(scale), dz, loss_acc, correct_acc),
        )

    def sgd(self, w, g, v, lr, momentum, counters):
        if self.dtype == np.float32 and w.size % 4 == 0 and all(a.data.ptr % 16 == 0 for a in (w, g, v)):
            n4 = w.size // 4
            self._k["sgd_float4"](self._grid(n4), (BLOCK,), (w, g, v, np.int64(n4), self.T(lr), self.T(momentum)))
            return
        self._k["sgd", w.dtype](self._grid(w.size), (BLOCK,), (w, g, v, np.int64(w.size), self.T(lr), self.T(momentum)))

    def adam(self, w, g, m, v, lr, beta1, beta2, eps, counters):
        self._k["adam", w.dtype](
            self._grid(w.size),
            (BLOCK,),
            (w, g, m, v, np.int64(w.size), self.T(lr), self.T(beta1), self.T(beta2), self.T(eps), counters),
        )

    def advance(self, counters):
        self._k["advance"]((1,), (1,), (counters,))

    def to_storage(self, w, out) -> None:
        """out = w in the GEMMs' operand type (bfloat16 under precision bf16): one pass over the parameters."""
        self._k["to_bf16"](self._grid(w.size), (BLOCK,), (w, out, np.int64(w.size)))

    def stage(self, host):
        """A host array of inputs on the device in the operand type."""
        return self.xp.asarray(bf16_bits(host) if self.storage == BF16 else host.astype(self.dtype, copy=False))

    def close(self):
        if self._lt is not None:
            self._lt.close()
            self._lt = None
        if self._handle is not None:
            self._blas.destroy(self._handle)
            self._handle = None


def make_ops(device: str, dtype, precision: str | None = None, max_rows: int = 1):
    """The primitives for ``device`` ('gpu' or 'cpu') at ``precision``, for batches of up to ``max_rows`` rows."""
    return (DeviceOps if device == "gpu" else HostOps)(dtype, precision, max_rows)


def _leading(x) -> int:
    """The leading dimension of a row-major 2-D array whose rows may be strided (a block of another's columns):
    elements from one row to the next. Its elements within a row must be contiguous."""
    if x.strides[1] != x.itemsize:
        raise ValueError(f"a GEMM operand with strides {x.strides}: its rows must be contiguous")
    return x.strides[0] // x.itemsize
