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

# The launch shape: the fastest of bench/tools/stencil_kernel.py's sweep (more rows per thread leave fewer blocks
# in flight); its figures against a device copy are in docs/benchmarks.md.
BLOCK = (64, 4)  # threads per block along (columns, rows)
ROWS_PER_THREAD = 2  # rows per thread: the window rolls down 2 rows, reading 2 + 2r rows for 2 results
VECTOR = None  # columns per thread: 16 bytes' worth (4 floats, 2 doubles)

_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def kernel_source(weights: np.ndarray, boundary: str, dtype, rows_per_thread: int = 1, vector: int = 1) -> str:
    """CUDA source of the ``stencil`` kernel for these weights, boundary mode and dtype.

    Each thread computes ``rows_per_thread`` rows of ``vector`` adjacent columns. With ``vector`` > 1 (16-byte
    loads: 4 floats or 2 doubles) a thread whose tile and its filter's reach lie inside the buffer (the usual
    case) reads each row once into a window of registers that rolls down its rows, the side taps by scalar loads
    of the neighbours' lines (cache hits), and stores its columns with one vector store; a tile on an edge of
    the domain or the region takes the per-element path, whose boundary tests map each index.
    """
    t = _TYPES[np.dtype(dtype)]
    r = weights.shape[0] // 2
    taps = [
        (a - r, b - r, f"static_cast<{t}>({float(weights[a, b])!r})")  # rounded to the field's type, once
        for a in range(2 * r + 1)
        for b in range(2 * r + 1)
        if weights[a, b] != 0
    ]
    body = "\n".join(_tap(di, dj, weight, boundary) for di, dj, weight in taps)
    per_element = f"""
    #pragma unroll
    for (int k = 0; k < {rows_per_thread}; ++k) {{
        const int i = first + k;
        if (i >= i1) return;
        #pragma unroll
        for (int c = 0; c < {vector}; ++c) {{
        const int j = jv + c;
        if (j >= j1) break;
        {t} acc = 0;
{body}
        dst[(long long)i * pitch + j] = acc;
        }}
    }}"""
    fast = _rolling_window(taps, t, r, rows_per_thread, vector) if vector > 1 else ""
    return f"""
extern "C" __global__ void stencil(const {t}* __restrict__ in, {t}* __restrict__ out,
                                   const int h, const int w, const long long pitch, const int col0,
                                   const int i0, const int i1, const int j0, const int j1,
                                   const int top_nb, const int bottom_nb, const int left_nb, const int right_nb,
                                   const {t} cval) {{
    const int jv = j0 + (blockIdx.x * blockDim.x + threadIdx.x) * {vector};
    const int first = i0 + (blockIdx.y * blockDim.y + threadIdx.y) * {rows_per_thread};
    if (jv >= j1) return;
    const {t}* base = in + (long long){r} * pitch + col0;  // element (0, 0) of the unpadded block
    {t}* dst = out + (long long){r} * pitch + col0;
{fast}
{per_element}
}}
"""


_LANES = ("x", "y", "z", "w")


def _rolling_window(taps, t: str, r: int, rows: int, vector: int) -> str:
    """The fast path of the vector kernel: rows first-r .. first+rows-1+r read once each into ``win``, a
    (2r+1) x (vector+2r) register window; returns after storing, so the per-element path after it only runs
    for tiles on an edge."""
    vt = f"{t}{vector}"
    width = vector + 2 * r

    def load(row: str, slot: int) -> str:
        lines = [
            f"        {{ const {t}* p = base + (long long)({row}) * pitch + jv;",
            f"          const {vt} v = *reinterpret_cast<const {vt}*>(p);",
        ]
        lines += [f"          win[{slot}][{r + c}] = v.{_LANES[c]};" for c in range(vector)]
        for s in range(1, r + 1):
            lines.append(
                f"          win[{slot}][{r - s}] = p[-{s}]; win[{slot}][{r + vector - 1 + s}] = p[{vector - 1 + s}];"
            )
        return "\n".join(lines) + " }"

    sums = []
    for c in range(vector):
        terms = " ".join(f"acc{c} += win[{di + r}][{r + c + dj}] * {weight};" for di, dj, weight in taps)
        sums.append(f"            {t} acc{c} = 0; {terms}")
    store = " ".join(f"o.{_LANES[c]} = acc{c};" for c in range(vector))
    shift = "\n".join(f"            win[{a}][q] = win[{a + 1}][q];" for a in range(2 * r))
    prime = "\n".join(load(f"first - {r} + {a}", a) for a in range(2 * r))
    return f"""
    const bool inside = first + {rows} <= i1 && jv + {vector} <= j1
        && (first - {r} >= 0 || top_nb) && (first + {rows - 1 + r} < h || bottom_nb)
        && (jv - {r} >= 0 || left_nb) && (jv + {vector - 1 + r} < w || right_nb);
    if (inside) {{
        {t} win[{2 * r + 1}][{width}];
{prime}
        #pragma unroll
        for (int k = 0; k < {rows}; ++k) {{
{load(f"first + k + {r}", 2 * r)}
{chr(10).join(sums)}
            {{ {vt} o; {store}
              *reinterpret_cast<{vt}*>(dst + (long long)(first + k) * pitch + jv) = o; }}
            #pragma unroll
            for (int q = 0; q < {width}; ++q) {{
{shift}
            }}
        }}
        return;
    }}"""


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


def launch_grid(region, col0: int, pitch: int, vector: int, block, rows_per_thread: int, aligned: bool = True):
    """(columns per thread, grid) of a launch on ``region``: ``vector`` columns where the region's first column
    and the pitch sit on the 16-byte grid (and the buffers do: ``aligned``), else one column per thread."""
    i0, i1, j0, j1 = region
    if not (aligned and (col0 + j0) % vector == 0 and pitch % vector == 0):
        vector = 1
    bx, by = block
    rows = by * rows_per_thread
    return vector, ((j1 - j0 + bx * vector - 1) // (bx * vector), (i1 - i0 + rows - 1) // rows)


class FusedStencil:
    """The compiled kernel for one filter; ``apply`` launches it on a region of a padded field.

    Args:
        block: threads per block along (columns, rows).
        rows_per_thread: rows each thread computes.
        vector: columns each thread computes with 16-byte loads and stores (1: one column, scalar accesses;
            None: 16 bytes' worth of the dtype). A region whose first column is not 16-byte aligned in the
            buffer runs a one-column kernel instead.
    """

    def __init__(
        self,
        weights: np.ndarray,
        boundary: str,
        dtype,
        cval: float,
        block=BLOCK,
        rows_per_thread: int = ROWS_PER_THREAD,
        vector: int | None = VECTOR,
    ):
        import cupy

        self.radius = weights.shape[0] // 2
        self.dtype = np.dtype(dtype)
        self.cval = self.dtype.type(cval)
        self.block = tuple(block)
        self.rows_per_thread = rows_per_thread
        self.vector = 16 // self.dtype.itemsize if vector is None else vector
        self.source = kernel_source(weights, boundary, dtype, rows_per_thread, self.vector)
        self.kernel = cupy.RawKernel(self.source, "stencil")
        self._args = (weights, boundary, dtype)
        self._scalar = None if self.vector > 1 else self.kernel

    def _one_column(self):
        """The kernel for regions that do not start on a 16-byte boundary (compiled on first use)."""
        import cupy

        if self._scalar is None:
            self._scalar = cupy.RawKernel(kernel_source(*self._args, self.rows_per_thread, 1), "stencil")
        return self._scalar

    def apply(self, src, dst, h: int, w: int, col0: int, region, neighbours) -> None:
        """dst[region] = filter(src) on the current stream; region = (i0, i1, j0, j1) in block
        coordinates; col0: buffer column of block column 0; neighbours = (top, bottom, left,
        right) present or not."""
        if region[1] <= region[0] or region[3] <= region[2]:
            return
        aligned = src.data.ptr % 16 == 0 and dst.data.ptr % 16 == 0
        vector, grid = launch_grid(region, col0, src.shape[1], self.vector, self.block, self.rows_per_thread, aligned)
        kernel = self.kernel if vector == self.vector else self._one_column()
        i0, i1, j0, j1 = region
        pitch = src.shape[1]
        args = (
            src,
            dst,
            np.int32(h),
            np.int32(w),
            np.int64(pitch),
            np.int32(col0),
            np.int32(i0),
            np.int32(i1),
            np.int32(j0),
            np.int32(j1),
            *(np.int32(bool(n)) for n in neighbours),
            self.cval,
        )
        kernel(grid, self.block, args)
