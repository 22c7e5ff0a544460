"""The fused stencil kernel: one CUDA kernel applies every tap of a filter to a region.

The source is generated per filter: weights, radius and boundary mode are compile-time
constants, so zero taps vanish and each tap's boundary test exists only on the side it
can cross. Fields live in padded buffers (ghost width r); a side with a neighbour rank
reads the ghost cells the halo exchange filled, a side on the global edge maps the index
(reflect, wrap) or takes cval (constant) instead, so no ghost-filling kernels run.
CuPy caches the compiled module per source.
"""

from __future__ import annotations

import numpy as np

BLOCK = (32, 4)  # threads per block along (columns, rows): 32 coalesced columns per warp
ROWS_PER_THREAD = 4  # 32x4 threads x 4 rows: fastest of the shapes bench/tools/stencil_kernel.py sweeps

_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def kernel_source(weights: np.ndarray, boundary: str, dtype, rows_per_thread: int = 1) -> str:
    """CUDA source of the ``stencil`` kernel for these weights, boundary mode and dtype; each
    thread computes ``rows_per_thread`` rows of one column (amortising its index arithmetic)."""
    t = _TYPES[np.dtype(dtype)]
    r = weights.shape[0] // 2
    taps = []
    for a in range(2 * r + 1):
        for b in range(2 * r + 1):
            if weights[a, b] != 0:
                weight = f"static_cast<{t}>({float(weights[a, b])!r})"  # rounded to the field's type, once
                taps.append(_tap(a - r, b - r, weight, boundary))
    body = "\n".join(taps)
    return f"""
extern "C" __global__ void stencil(const {t}* __restrict__ in, {t}* __restrict__ out,
                                   const int h, const int w, const long long pitch, const int col0,
                                   const int i0, const int i1, const int j0, const int j1,
                                   const int top_nb, const int bottom_nb, const int left_nb, const int right_nb,
                                   const {t} cval) {{
    const int j = j0 + blockIdx.x * blockDim.x + threadIdx.x;
    const int first = i0 + (blockIdx.y * blockDim.y + threadIdx.y) * {rows_per_thread};
    if (j >= j1) return;
    const {t}* base = in + (long long){r} * pitch + col0;  // element (0, 0) of the unpadded block
    {t}* dst = out + (long long){r} * pitch + col0;
    #pragma unroll
    for (int k = 0; k < {rows_per_thread}; ++k) {{
        const int i = first + k;
        if (i >= i1) return;
        {t} acc = 0;
{body}
        dst[(long long)i * pitch + j] = acc;
    }}
}}
"""


def _tap(di: int, dj: int, weight: str, boundary: str) -> str:
    lines = [f"        {{ int ii = i + ({di}), jj = j + ({dj}); bool outside = false;"]
    if di < 0:
        lines.append(f"          if (ii < 0 && !top_nb) {{ {_map('ii', 'h', 'low', boundary)} }}")
    if di > 0:
        lines.append(f"          if (ii >= h && !bottom_nb) {{ {_map('ii', 'h', 'high', boundary)} }}")
    if dj < 0:
        lines.append(f"          if (jj < 0 && !left_nb) {{ {_map('jj', 'w', 'low', boundary)} }}")
    if dj > 0:
        lines.append(f"          if (jj >= w && !right_nb) {{ {_map('jj', 'w', 'high', boundary)} }}")
    lines.append(f"          acc += (outside ? cval : base[(long long)ii * pitch + jj]) * {weight}; }}")
    return "\n".join(lines)


def _map(index: str, n: str, side: str, boundary: str) -> str:
    if boundary == "constant":
        return "outside = true;"
    if boundary == "reflect":  # scipy's reflect: the edge element repeats (d c b a | a b c d)
        return f"{index} = -1 - {index};" if side == "low" else f"{index} = 2 * {n} - 1 - {index};"
    return f"{index} += {n};" if side == "low" else f"{index} -= {n};"  # wrap within this rank


def aligned_layout(h: int, w: int, r: int, dtype) -> tuple[tuple[int, int], int]:
    """(shape of the padded buffer, column of the block's first element): r ghost rows above
    and below; ghost columns left and right, with every row's first block element on a
    128-byte boundary so warps load and store whole cache lines."""
    step = max(1, 128 // np.dtype(dtype).itemsize)
    col0 = -(-r // step) * step  # at least r ghost columns, rounded up to the alignment
    pitch = -(-(col0 + w + r) // step) * step
    return (h + 2 * r, pitch), col0


class FusedStencil:
    """The compiled kernel for one filter; ``apply`` launches it on a region of a padded field.

    Args:
        block: threads per block along (columns, rows).
        rows_per_thread: rows each thread computes.
    """

    def __init__(
        self,
        weights: np.ndarray,
        boundary: str,
        dtype,
        cval: float,
        block=BLOCK,
        rows_per_thread: int = ROWS_PER_THREAD,
    ):
        import cupy

        self.radius = weights.shape[0] // 2
        self.dtype = np.dtype(dtype)
        self.cval = self.dtype.type(cval)
        self.block = tuple(block)
        self.rows_per_thread = rows_per_thread
        self.source = kernel_source(weights, boundary, dtype, rows_per_thread)
        self.kernel = cupy.RawKernel(self.source, "stencil")

    def apply(self, src, dst, h: int, w: int, col0: int, region, neighbours) -> None:
        """dst[region] = filter(src) on the current stream; region = (i0, i1, j0, j1) in block
        coordinates; col0: buffer column of block column 0; neighbours = (top, bottom, left,
        right) present or not."""
        i0, i1, j0, j1 = region
        if i1 <= i0 or j1 <= j0:
            return
        bx, by = self.block
        rows = by * self.rows_per_thread
        grid = ((j1 - j0 + bx - 1) // bx, (i1 - i0 + rows - 1) // rows)
        args = (
            src,
            dst,
            np.int32(h),
            np.int32(w),
            np.int64(src.shape[1]),
            np.int32(col0),
            np.int32(i0),
            np.int32(i1),
            np.int32(j0),
            np.int32(j1),
            *(np.int32(bool(n)) for n in neighbours),
            self.cval,
        )
        self.kernel(grid, self.block, args)
