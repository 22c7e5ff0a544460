"""Workload ``stencil``: a 2-D field filtered ``iterations`` times, with halo exchange.

Each rank holds its block of the field (row blocks, or 2-D blocks on a process grid) in a
buffer padded by the filter radius r on every side, and a second one to write into
(Jacobi: every iteration reads only the previous field). Each iteration exchanges the r
rows/columns next to each neighbour through the communicator's ``sendrecv`` (columns
first, then rows over the full padded width, which also fills the corners); a global edge
is handled by the boundary mode instead.

On a GPU the filter is one fused kernel (``kernel.py``). With ``overlap`` the
interior, which needs no halo, is computed on one stream while the halos travel on
another; the strips next to neighbours follow once they have arrived. ``comm`` is then
the exchange time left exposed, ``comm_overlapped`` the part hidden behind the interior.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ...core import faults
from ...core import xp as xpmod
from ...core.config import SaveConfig
from ...core.errors import ConfigError, InputError, VerificationError
from ...core.memory import require_memory
from ...io.blocks import read_block, save_blocks
from ...io.hdf5 import dataset_info, open_h5
from ...io.plan import Grid, choose_grid, grid_block
from ..base import Workload, read_then_wait, require_one_dataset, same_every_repeat
from .filters import error_bound, reference_filter, stencil_weights
from .kernel import FusedStencil, aligned_layout

SIDES = ("top", "bottom", "left", "right")


@dataclass(frozen=True)
class StencilParams:
    """``params`` of the stencil workload (see docs/configs.md).

    Attributes:
        kernel: 'box', 'gaussian', 'laplacian' (5-point), or explicit weights (odd square rows).
        size: width of a named kernel (odd).
        sigma: the gaussian's standard deviation, in cells.
        boundary: 'reflect', 'constant' or 'wrap', as scipy.ndimage means them.
        cval: the value beyond the edge for 'constant'.
        iterations: filter applications (each reads the previous field).
        decomposition: 'rows' (row blocks) or 'blocks' (2-D blocks on a process grid).
        grid: [rows, cols] of ranks for 'blocks' (default: the most nearly square).
        overlap: on a GPU, compute the interior while the halos travel.
        method: 'fused' (one CUDA kernel per region), 'xp' (array slicing, any device), 'auto'.
        save: write the filtered field (path, dataset) to HDF5, each rank its own block.
    """

    kernel: str | tuple[tuple[float, ...], ...] = "laplacian"
    size: int = 3
    sigma: float = 1.0
    boundary: Literal["reflect", "constant", "wrap"] = "reflect"
    cval: float = 0.0
    iterations: int = 1
    decomposition: Literal["rows", "blocks"] = "rows"
    grid: tuple[int, ...] | None = None
    overlap: bool = True
    method: Literal["auto", "fused", "xp"] = "auto"
    save: SaveConfig | None = None

    def __post_init__(self):
        stencil_weights(self.kernel, self.size, self.sigma)  # raises ConfigError naming the key
        if self.iterations < 1:
            raise ConfigError(f"params.iterations: must be >= 1, got {self.iterations}")
        if self.grid is not None and self.decomposition == "rows":
            raise ConfigError("params.grid: only decomposition: blocks uses a process grid")

    @property
    def weights(self) -> np.ndarray:
        return stencil_weights(self.kernel, self.size, self.sigma)


class StencilWorkload(Workload):
    name = "stencil"
    Params = StencilParams
    COMM_GROWTH = 0.0  # a halo's size does not depend on how many rows a rank holds
    OUTPUT_FILES = ("save",)
    DTYPES = ("float32", "float64")

    # -- setup ---------------------------------------------------------------------------

    def setup(self, ctx, cfg, comm):
        self.ctx, self.cfg, self.comm, self.params = ctx, cfg, comm, cfg.params
        p = self.params
        require_one_dataset(cfg, "stencil", "a single-process float64 filter of the whole field")
        self.source = (cfg.input.path, cfg.input.dataset)
        self.weights = p.weights
        self.r = self.weights.shape[0] // 2
        self.shape, self.dtype = ctx.agree(self._field_info)
        self.grid = ctx.agree(choose_grid, ctx.size, p.grid) if p.decomposition == "blocks" else Grid(ctx.size, 1)
        self.blocks = [grid_block(self.shape, self.grid, rank) for rank in range(ctx.size)]
        ctx.agree(self._check_sizes)
        self.block = self.blocks[ctx.rank]
        self.h, self.w = self.block.shape
        self.neighbours = self.grid.neighbours(ctx.rank, periodic=p.boundary == "wrap")
        self.gpu = ctx.device == "gpu"
        self.fused = ctx.agree(self._choose_method)
        self.regions = self._regions() if p.overlap else [(0, self.h, 0, self.w)]
        ctx.agree(self._allocate)
        self.sums, self._ran = [], False

    def _field_info(self):
        rows, (cols,), dtype = dataset_info(*self.source, self.DTYPES, (2,))
        return (rows, cols), np.dtype(dtype)

    def _check_sizes(self):
        need = max(self.r, 1)
        for rank, blk in enumerate(self.blocks):
            h, w = blk.shape
            if h < need or w < need:
                raise InputError(
                    f"{self.source[0]}:{self.source[1]}: a {self.shape[0]}x{self.shape[1]} field "
                    f"on a {self.grid.rows}x{self.grid.cols} grid gives rank {rank} a {h}x{w} "
                    f"block; each block needs at least {need} row(s) and column(s) (the filter "
                    f"radius) — use fewer ranks or a larger field"
                )

    def _choose_method(self):
        method = self.params.method
        if method == "fused" and not self.gpu:
            raise ConfigError("params.method: fused is a CUDA kernel and needs device: gpu; use auto or xp")
        if method == "xp" or not self.gpu:
            return None
        return FusedStencil(self.weights, self.params.boundary, self.dtype, self.params.cval)

    def _regions(self) -> list[tuple[int, int, int, int]]:
        """The interior (needs no halo), then a strip along each side that has a neighbour."""
        r, h, w, nb = self.r, self.h, self.w, self.neighbours
        i0, i1 = (r if nb["top"] is not None else 0), h - (r if nb["bottom"] is not None else 0)
        j0, j1 = (r if nb["left"] is not None else 0), w - (r if nb["right"] is not None else 0)
        regions = [(i0, max(i0, i1), j0, max(j0, j1))]
        if nb["top"] is not None:
            regions.append((0, min(r, h), 0, w))
        if nb["bottom"] is not None:
            regions.append((max(h - r, 0), h, 0, w))
        if nb["left"] is not None:
            regions.append((i0, i1, 0, min(r, w)))
        if nb["right"] is not None:
            regions.append((i0, i1, max(w - r, 0), w))
        return regions

    def _allocate(self):
        xp, r, h, w = self.ctx.xp, self.r, self.h, self.w
        padded, self.c0 = aligned_layout(h, w, r, self.dtype)
        require_memory(
            2 * padded[0] * padded[1] * self.dtype.itemsize,
            "device",
            self.ctx,
            f"stencil: two padded {padded[0]}x{padded[1]} {self.dtype} fields",
        )
        if self.gpu:
            require_memory(h * w * self.dtype.itemsize, "host", self.ctx, f"stencil: the {h}x{w} host staging block")
        self.fields = [xp.empty(padded, self.dtype), xp.empty(padded, self.dtype)]
        # array slicing's one term at a time: a fresh block a tap would be returned to the OS and faulted in again on
        # every iteration where glibc's malloc had not yet seen a larger block freed (a rank that ran a larger share
        # earlier in the launch had), so each rank's speed followed its history (docs/validation.md, fifth CPU round)
        self.term = xp.empty(h * w, self.dtype) if self.fused is None else None
        self.host = xpmod.empty_host((h, w), self.dtype, pinned=True) if self.gpu else None
        cols = self.grid.cols > 1 and r > 0
        self.col_send = xp.empty((h, r), self.dtype) if cols else None
        self.col_recv = xp.empty((h, r), self.dtype) if cols else None
        if self.gpu:
            cupy = xpmod.cupy
            # The halo's stream gets the highest priority (CUDA clamps -100 to the device's
            # highest): otherwise its NCCL kernel waits for SMs until the interior kernel,
            # launched at the same moment, has drained.
            self.compute_stream = cupy.cuda.Stream(non_blocking=True)
            self.comm_stream = cupy.cuda.Stream(non_blocking=True, priority=-100)

    # -- one repeat ----------------------------------------------------------------------

    def prepare(self):
        if self._ran:  # the previous repeat's checksum, outside the timed repeat
            self.sums.append(float(self.result_block().sum(dtype=np.float64)))
        self._ran = True
        for buf in (*self.fields, self.host):  # ghosts included: a ghost never filled shows as NaN
            if buf is not None:
                buf.fill(np.nan)

    def run(self, timer):
        r, h, w, p = self.r, self.h, self.w, self.params

        def read():
            if self.gpu:
                self.read_input_block(self.source, self.block, self.host)
            else:
                self.read_input_block(self.source, self.block, self.fields[0], np.s_[r : r + h, self.c0 : self.c0 + w])

        read_then_wait(self.ctx, timer, read)
        with self._on(self._compute_stream()):
            if self.gpu:
                with timer.phase("h2d"):
                    self._upload(self.fields[0])
            for t in range(p.iterations):
                src, dst = self.fields[t % 2], self.fields[(t + 1) % 2]
                if self.fused is not None and p.overlap:
                    self._step_overlapped(timer, src, dst)
                else:
                    with timer.phase("comm"):
                        self._exchange(src, fill=self.fused is None)
                    with timer.phase("compute"):
                        for region in self.regions:
                            self._apply(src, dst, region)
        if self.gpu:
            self.compute_stream.synchronize()  # the timer waits on the default stream only
        faults.corrupt(self.result_block(), "field block")

    def _compute_stream(self):
        return self.compute_stream if self.gpu else None

    @staticmethod
    def _on(stream):
        return stream if stream is not None else contextlib.nullcontext()

    def _upload(self, field):
        """Host block -> the interior of the padded device field (one strided 2-D copy)."""
        rt, r = xpmod.cupy.cuda.runtime, self.r
        item = self.dtype.itemsize
        dst = field.data.ptr + (r * field.shape[1] + self.c0) * item
        rt.memcpy2DAsync(
            dst,
            field.shape[1] * item,
            self.host.ctypes.data,
            self.w * item,
            self.w * item,
            self.h,
            rt.memcpyHostToDevice,
            self.compute_stream.ptr,
        )

    def _step_overlapped(self, timer, src, dst):
        """One iteration on two streams: halos on the comm stream, the interior meanwhile."""
        compute, comm = self.compute_stream, self.comm_stream
        ready = compute.record()  # src is complete: the halo may be sent
        comm.wait_event(ready)
        halo_start = comm.record()
        with comm:
            self._exchange(src, fill=False)
        halo_end = comm.record()
        start = compute.record()
        self._apply(src, dst, self.regions[0])
        interior_end = compute.record()
        compute.wait_event(halo_end)
        edges_start = compute.record()
        for region in self.regions[1:]:
            self._apply(src, dst, region)
        end = compute.record()
        timer.span("compute", start, interior_end)
        timer.span("compute", edges_start, end)
        timer.span("comm", interior_end, edges_start)  # waiting for the halo: exposed
        timer.span("comm_overlapped", halo_start, halo_end, track="gpu comm stream")
        timer.span("comm_overlapped", interior_end, edges_start, weight=-1)

    def _exchange(self, u, fill: bool) -> None:
        """Fill the ghost cells of ``u``: from the neighbours, and (``fill``) on global edges."""
        r, h, w, c0, nb = self.r, self.h, self.w, self.c0, self.neighbours
        if r == 0:
            return
        if self.col_send is not None:  # columns, interior rows only; packed (they are strided)
            for send_cols, dest, recv_cols, source in (
                (slice(c0 + w - r, c0 + w), "right", slice(c0 - r, c0), "left"),
                (slice(c0, c0 + r), "left", slice(c0 + w, c0 + w + r), "right"),
            ):
                if nb[dest] is None and nb[source] is None:
                    continue
                self.col_send[...] = u[r : r + h, send_cols]
                self.comm.sendrecv(self.col_send, nb[dest], self.col_recv, nb[source])
                if nb[source] is not None:
                    u[r : r + h, recv_cols] = self.col_recv
        if fill:
            self._fill_columns(u)
        # rows over the full padded width (ghost columns included: that fills the corners)
        if nb["top"] is not None or nb["bottom"] is not None:
            self.comm.sendrecv(u[h : h + r], nb["bottom"], u[0:r], nb["top"])  # shift down
            self.comm.sendrecv(u[r : 2 * r], nb["top"], u[h + r : h + 2 * r], nb["bottom"])  # shift up
        if fill:
            self._fill_rows(u)

    def _fill_columns(self, u):
        r, h, w, c0, nb, mode = self.r, self.h, self.w, self.c0, self.neighbours, self.params.boundary
        rows, first, last = slice(r, r + h), slice(c0, c0 + r), slice(c0 + w - r, c0 + w)
        if nb["left"] is None:
            u[rows, c0 - r : c0] = self._edge(u[rows, first][:, ::-1], u[rows, last], mode)
        if nb["right"] is None:
            u[rows, c0 + w : c0 + w + r] = self._edge(u[rows, last][:, ::-1], u[rows, first], mode)

    def _fill_rows(self, u):
        r, h, nb, mode = self.r, self.h, self.neighbours, self.params.boundary
        if nb["top"] is None:
            u[0:r] = self._edge(u[r : 2 * r][::-1], u[h : h + r], mode)
        if nb["bottom"] is None:
            u[h + r : h + 2 * r] = self._edge(u[h : h + r][::-1], u[r : 2 * r], mode)

    def _edge(self, mirrored, wrapped, mode):
        """What lies beyond a global edge: the mirror image, the opposite edge, or cval."""
        if mode == "reflect":
            return mirrored.copy()  # a copy: source and target may overlap when r > block size / 2
        if mode == "wrap":
            return wrapped.copy()
        return self.params.cval

    def _apply(self, src, dst, region):
        if self.fused is not None:
            self.fused.apply(src, dst, self.h, self.w, self.c0, region, [self.neighbours[s] is not None for s in SIDES])
            return
        i0, i1, j0, j1 = region
        if i1 <= i0 or j1 <= j0:
            return
        xp, r, c = self.ctx.xp, self.r, self.c0 - self.r  # c: buffer column of the leftmost tap of block column 0
        out = dst[r + i0 : r + i1, self.c0 + j0 : self.c0 + j1]  # the sum builds up in place: no block allocated
        term = self.term[: out.size].reshape(out.shape)
        first = True
        for a in range(2 * r + 1):
            for b in range(2 * r + 1):
                weight = self.weights[a, b]
                if weight == 0:
                    continue
                tap = src[i0 + a : i1 + a, c + j0 + b : c + j1 + b]
                xp.multiply(self.dtype.type(weight), tap, out=out if first else term)
                if not first:
                    xp.add(out, term, out=out)
                first = False
        if first:  # no tap weighs anything
            out[...] = 0

    def result_block(self):
        """This rank's block of the filtered field (a view into its padded buffer)."""
        r = self.r
        return self.fields[self.params.iterations % 2][r : r + self.h, self.c0 : self.c0 + self.w]

    # -- verification and results ---------------------------------------------------------

    def verify(self):
        ctx = self.ctx
        sums = [*self.sums, float(self.result_block().sum(dtype=np.float64))]
        ctx.agree(same_every_repeat, sums, "fields")
        bound = ctx.agree(self._reference, root_only=True)
        failure, worst = None, 0.0
        mine = xpmod.to_host(self.result_block())
        if ctx.rank == 0:
            for rank, blk in enumerate(self.blocks):
                got = mine if rank == 0 else np.empty(blk.shape, self.dtype)
                if rank:
                    ctx.comm.Recv(got, source=rank, tag=7)
                error, worst = self._compare(rank, blk, got, bound, worst)
                failure = failure or error
        else:
            ctx.comm.Send(np.ascontiguousarray(mine), dest=0, tag=7)
        self._reference_field = None

        def outcome():
            if failure:
                raise VerificationError(failure)
            return worst

        worst = ctx.agree(outcome, root_only=True)
        stats = np.array([float(mine.sum(dtype=np.float64)), float(np.abs(mine).sum(dtype=np.float64))])
        lo_hi = np.array([float(mine.min()), -float(mine.max())])
        ctx.allreduce_host(stats)
        ctx.allreduce_host(lo_hi, op="min")
        self.stats = {"sum": stats[0], "abs_sum": stats[1], "min": lo_hi[0], "max": -lo_hi[1]}
        return {
            "reference": "single-process float64 filter of the whole field (padding + shifted sums)",
            "compared": "every element, block edges included",
            "error_bound": bound,
            "max_abs_error": worst,
        }

    def _reference(self):
        """Rank 0: the whole field filtered by the plain reference; returns the error bound."""
        with open_h5(self.source[0]) as f:
            field = f[self.source[1]][...]
        xp = self.ctx.xp
        p = self.params
        self._reference_field = xpmod.to_host(
            reference_filter(field, self.weights, p.boundary, p.cval, p.iterations, xp)
        )
        peak = float(np.abs(field.astype(np.float64)).max()) if field.size else 0.0
        return error_bound(self.weights, p.iterations, self.dtype, max(peak, abs(p.cval)))

    def _compare(self, rank, blk, got, bound, worst):
        want = self._reference_field[blk.r0 : blk.r1, blk.c0 : blk.c1]
        err = np.abs(got.astype(np.float64) - want)
        bad = ~np.isfinite(got) | (err > bound)
        if bad.any():
            i, j = np.unravel_index(int(np.argmax(bad)), bad.shape)
            rows = np.flatnonzero(bad.any(axis=1)) + blk.r0
            return (
                f"rank {rank}'s block ({blk.describe()}): {int(bad.sum())} element(s) differ from the "
                f"single-process filter, in rows {_ranges(rows)}; first at ({blk.r0 + i}, {blk.c0 + j}): "
                f"{float(got[i, j])!r} instead of {float(want[i, j])!r} (bound {bound:.3g})"
            ), worst
        return None, max(worst, float(err.max()) if err.size else 0.0)

    def check_input_finite(self):
        read_block(*self.source, self.block, np.empty((self.h, self.w), self.dtype), check_finite=True)

    def result(self):
        p = self.params
        out = {
            "shape": list(self.shape),
            "dtype": self.dtype.name,
            "iterations": p.iterations,
            "kernel": p.kernel if isinstance(p.kernel, str) else "explicit",
            "radius": self.r,
            "boundary": p.boundary,
            "decomposition": p.decomposition,
            "grid": [self.grid.rows, self.grid.cols],
            "method": "fused" if self.fused else "xp",
            "overlap": bool(p.overlap and self.fused is not None),
            **self.stats,
        }
        if p.save is not None:
            out["saved"] = f"{p.save.path}:{p.save.dataset}"
        return out

    def save(self):
        s = self.params.save
        if s is None:
            return None
        return save_blocks(
            self.ctx,
            s.path,
            s.dataset,
            self.shape,
            self.dtype,
            self.block,
            xpmod.to_host(self.result_block()),
            self.cfg.overwrite,
        )

    def metrics(self, rank_medians):
        it, item = self.params.iterations, self.dtype.itemsize
        moved = [2 * b.shape[0] * b.shape[1] * item * it for b in self.blocks]  # read once, written once
        compute = [m.get("compute", 0.0) for m in rank_medians]
        cells = self.shape[0] * self.shape[1] * it
        hidden = [m.get("comm_overlapped", 0.0) for m in rank_medians]
        exposed = [m.get("comm", 0.0) for m in rank_medians]
        return {
            "effective_GBps_per_rank": [b / t / 1e9 if t > 0 else None for b, t in zip(moved, compute)],
            "cell_updates_per_s": cells / max(compute) if max(compute) > 0 else None,
            "ms_per_iteration": [t / it * 1e3 for t in compute],
            "comm_hidden_fraction": [x / (x + e) if x + e > 0 else 0.0 for x, e in zip(hidden, exposed)],
        }

    def problem(self):
        r, item, it = self.r, self.dtype.itemsize, self.params.iterations
        comm = []
        # a rank alone lists the row halos that two ranks of it would exchange (either decomposition splits rows
        # first): a sweep fitted on one GPU has them to price at more ranks, where listing none would price none
        if self.grid.rows > 1 or self.grid.size == 1:
            comm.append({"op": "sendrecv", "bytes": r * (self.w + 2 * r) * item, "calls": 2 * it, "growth": 0.0})
        if self.grid.cols > 1:
            comm.append({"op": "sendrecv", "bytes": self.h * r * item, "calls": 2 * it, "growth": 0.5})
        return {"bytes": self.shape[0] * self.shape[1] * item, "comm": comm}

    def close(self):
        self.fields = []
        self.host = self.col_send = self.col_recv = None


def _ranges(rows: np.ndarray) -> str:
    """[3, 4, 5, 9] -> '3-5, 9'."""
    parts, start = [], None
    for i, row in enumerate(rows):
        if start is None:
            start = row
        if i + 1 == len(rows) or rows[i + 1] != row + 1:
            parts.append(f"{start}" if start == row else f"{start}-{row}")
            start = None
    return ", ".join(parts[:8]) + (", ..." if len(parts) > 8 else "")
