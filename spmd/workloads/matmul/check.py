"""Verifying a distributed C = A @ B without forming A @ B again.

Two independent checks, both in float64:
- Freivalds: C x against A (B x) for random x, every rank contributing its blocks; a wrong
  row or block of C shows in C x with overwhelming probability.
- Sampled rows: a few rows of C (the first and last of every block among them) recomputed
  exactly on rank 0 from A's rows and B as stored in the files.
- ``verify: full`` adds every element: each rank recomputes its block of C in float64 on its device from A's
  rows and B's columns as stored in the files, element by element against the bound below. Freivalds' bound
  sums n element errors, so for float32 at large k it can let one element that is 1% off through; this cannot.

Tolerances follow from the dtype and k. With u_in the unit roundoff of the inputs as the
GEMM sees them (float32 2^-24, TF32 2^-11, float64 2^-53) and u_acc that of the
accumulation, one element's error is at most about
``tau * ||a_i|| * ||b_j||`` with ``tau = 2 u_in + 4 sqrt(k) u_acc`` (input rounding is
bounded outright; accumulation error grows like sqrt(k) for rounding that does not
conspire). Freivalds sums n such errors with random signs: ``8 tau ||a_i|| ||B diag(x)||_F``.
"""

from __future__ import annotations

import math

import numpy as np

from ... import xp as xpmod
from ...errors import VerificationError
from ...io.hdf5 import open_h5

CHUNK_ROWS = 2048  # float64 copies of this many rows at a time bound verification memory
FREIVALDS_VECTORS = 2

UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "tf32": 2.0 ** -11, "float64": 2.0 ** -53}


def tau(dtype: str, k: int, tf32: bool) -> float:
    """Relative error scale of one element of C, in units of ||a_i|| ||b_j||."""
    u_in = UNIT_ROUNDOFF["tf32" if tf32 and dtype == "float32" else dtype]
    u_acc = UNIT_ROUNDOFF[dtype]
    return 2 * u_in + 4 * math.sqrt(k) * u_acc


def matvec64(xp, m, x: np.ndarray) -> np.ndarray:
    """``m @ x`` in float64 on ``m``'s device, by row chunks; a host array."""
    xd = xp.asarray(x)
    out = np.empty((m.shape[0], x.shape[1]))
    for i in range(0, m.shape[0], CHUNK_ROWS):
        out[i:i + CHUNK_ROWS] = xpmod.to_host(m[i:i + CHUNK_ROWS].astype(xp.float64) @ xd)
    return out


def squares64(xp, m, axis: int) -> np.ndarray:
    """Sums of squares of ``m`` along ``axis`` (1: per row, 0: per column), float64, host."""
    out = np.zeros(m.shape[1 - axis])
    for i in range(0, m.shape[0], CHUNK_ROWS):
        part = xpmod.to_host((m[i:i + CHUNK_ROWS].astype(xp.float64) ** 2).sum(axis=axis))
        if axis == 1:
            out[i:i + CHUNK_ROWS] = part
        else:
            out += part
    return out


def freivalds(ctx, xp, shapes, blocks, local, seed: int, tol_scale: float) -> float:
    """Check C x == A (B x) over every rank's blocks; collective.

    Args:
        shapes: (m, k, n).
        blocks: {'a', 'b', 'c'} -> Block each rank contributes (B's counted once over ranks).
        local: {'a', 'b', 'c'} -> this rank's arrays of those blocks.
        tol_scale: ``tau`` for this dtype and k.

    Returns:
        The largest |C x - A (B x)| over its bound (<= 1 when correct).
    """
    m, k, n = shapes
    a, b, c = blocks["a"], blocks["b"], blocks["c"]
    x = np.random.default_rng([seed, 1]).standard_normal((n, FREIVALDS_VECTORS))
    bx = np.zeros((k, FREIVALDS_VECTORS))
    col_sq = np.zeros(n)
    bx[b.r0:b.r1] = matvec64(xp, local["b"], x[b.c0:b.c1])
    col_sq[b.c0:b.c1] = squares64(xp, local["b"], axis=0)
    ctx.allreduce_host(bx, col_sq)
    abx = np.zeros((m, FREIVALDS_VECTORS))
    row_sq = np.zeros(m)
    cx = np.zeros((m, FREIVALDS_VECTORS))
    abx[a.r0:a.r1] = matvec64(xp, local["a"], bx[a.c0:a.c1])
    row_sq[a.r0:a.r1] = squares64(xp, local["a"], axis=1)
    cx[c.r0:c.r1] = matvec64(xp, local["c"], x[c.c0:c.c1])
    ctx.allreduce_host(abx, row_sq, cx)

    def check():
        scaled_b = np.sqrt((x ** 2 * col_sq[:, None]).sum(axis=0))  # ||B diag(x)||_F per vector
        bound = 8 * tol_scale * np.sqrt(row_sq)[:, None] * scaled_b[None, :] + np.finfo(np.float64).tiny
        err = np.abs(cx - abx)
        bad = ~np.isfinite(cx) | (err > bound)
        if bad.any():
            i, v = np.unravel_index(int(np.argmax(bad)), bad.shape)
            rows = np.flatnonzero(bad.any(axis=1))
            raise VerificationError(f"Freivalds check failed in {len(rows)} row(s) of C, first row {i}: "
                                    f"(C x)[{i}] = {float(cx[i, v])!r}, A (B x)[{i}] = {float(abx[i, v])!r} "
                                    f"(bound {bound[i, v]:.3g})")
        return float((err / bound).max())

    return ctx.agree(check, root_only=True)


def sample_rows(m: int, c_blocks, count: int, seed: int) -> list[int]:
    """Rows of C to recompute: the first and last row of every block, and ``count`` random ones."""
    rows = {r for blk in c_blocks for r in (blk.r0, blk.r1 - 1)}
    rows |= set(np.random.default_rng([seed, 2]).choice(m, size=min(count, m), replace=False).tolist())
    return sorted(rows)


def sampled_rows(ctx, xp, rows: list[int], c_block, c_local, n: int, a_source, b_source,
                 tol_scale: float) -> float:
    """Compare ``rows`` of the distributed C with float64 rows from A and B as stored; collective.

    Args:
        rows: global row indices (sorted).
        c_block, c_local: this rank's block of C and its array.
        a_source, b_source: (path, dataset) of A and B.

    Returns:
        The largest |C_ij - (A B)_ij| / (||a_i|| ||b_j||) over the sampled elements.
    """
    mine = [(i, c_block.c0, xpmod.to_host(c_local[i - c_block.r0]))
            for i in rows if c_block.r0 <= i < c_block.r1]
    parts = ctx.comm.gather(mine, root=0)

    def check():
        got = np.full((len(rows), n), np.nan)
        where = {r: j for j, r in enumerate(rows)}
        for part in parts:
            for i, c0, values in part:
                got[where[i], c0:c0 + len(values)] = values
        want, a_norm, b_norm = _reference_rows(rows, a_source, b_source)
        scale = np.outer(a_norm, b_norm) + np.finfo(np.float64).tiny
        err = np.abs(got - want)
        bad = ~np.isfinite(got) | (err > tol_scale * scale)
        if bad.any():
            j, col = np.unravel_index(int(np.argmax(bad)), bad.shape)
            raise VerificationError(f"C[{rows[j]}, {col}] = {float(got[j, col])!r}, float64 recomputation gives "
                                    f"{float(want[j, col])!r} (tolerance {tol_scale * scale[j, col]:.3g}); "
                                    f"{int(bad.sum())} of {bad.size} sampled elements wrong")
        return float((err / scale).max())

    return ctx.agree(check, root_only=True)


def _reference_rows(rows: list[int], a_source, b_source):
    """Rows ``rows`` of A @ B in float64 from the files, with the norms of A's rows and B's columns."""
    with open_h5(a_source[0]) as f:
        a_rows = f[a_source[1]][rows, :].astype(np.float64)
    with open_h5(b_source[0]) as f:
        b = f[b_source[1]]
        out = np.zeros((len(rows), b.shape[1]))
        col_sq = np.zeros(b.shape[1])
        for start in range(0, b.shape[0], CHUNK_ROWS):
            part = b[start:start + CHUNK_ROWS].astype(np.float64)
            out += a_rows[:, start:start + part.shape[0]] @ part
            col_sq += (part ** 2).sum(axis=0)
    return out, np.sqrt((a_rows ** 2).sum(axis=1)), np.sqrt(col_sq)


def every_element(xp, c_block, c_local, a_source, b_source, tol_scale: float) -> float:
    """Every element of this rank's block of C against float64 A @ B from the files, on its device.

    Returns:
        The largest |C_ij - (A B)_ij| / (||a_i|| ||b_j||) (VerificationError naming the first element above
        ``tol_scale``).
    """
    tiny = np.finfo(np.float64).tiny
    with open_h5(b_source[0]) as f:
        b = xp.asarray(f[b_source[1]][:, c_block.c0:c_block.c1].astype(np.float64))
    b_norm = xp.sqrt((b * b).sum(axis=0))
    worst = 0.0
    with open_h5(a_source[0]) as f:
        a_rows = f[a_source[1]]
        for start in range(c_block.r0, c_block.r1, CHUNK_ROWS):
            stop = min(start + CHUNK_ROWS, c_block.r1)
            a = xp.asarray(a_rows[start:stop, :].astype(np.float64))
            want = a @ b
            got = c_local[start - c_block.r0:stop - c_block.r0].astype(xp.float64)
            scale = xp.sqrt((a * a).sum(axis=1))[:, None] * b_norm[None, :] + tiny
            err = xp.abs(got - want)
            bad = ~xp.isfinite(got) | (err > tol_scale * scale)
            count = int(bad.sum())
            if count:
                i, j = (int(v) for v in np.unravel_index(int(bad.argmax()), bad.shape))
                raise VerificationError(
                    f"C[{start + i}, {c_block.c0 + j}] = {float(got[i, j])!r}, float64 recomputation gives "
                    f"{float(want[i, j])!r} (tolerance {tol_scale * float(scale[i, j]):.3g}); {count} element(s) "
                    f"of rows {start}-{stop} wrong")
            worst = max(worst, float((err / scale).max()))
    return worst
