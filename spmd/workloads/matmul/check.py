"""Verifying a distributed C = A @ B without forming A @ B again.

Two independent checks, both in float64:
- Grouped Freivalds: the columns of C fall into G = min(n, FREIVALDS_GROUPS) groups (column j in group
  j mod G); each group's columns, each times a random sign, are summed per row: C X against A (B X) for the
  n x G matrix X of those signs, every rank contributing its blocks. One wrong element of C changes its row's
  sum in its group, where only the n/G columns of that group add rounding beside it. A rank holding whole rows
  of A and C (the rows algorithm) checks them on its device, only B X crossing ranks.
- Sampled rows: a few rows of C (the first and last of every block among them) recomputed
  exactly on rank 0 from A's rows and B as stored in the files.
- ``verify: full`` adds every element: each rank recomputes its block of C in float64 on its device from A's
  rows and B's columns as stored in the files, element by element against the bound below.

Tolerances follow from the dtype and k. With u_in the unit roundoff of the inputs as the
GEMM sees them (float32 2^-24, TF32 2^-11, float64 2^-53) and u_acc that of the
accumulation, one element's error is at most about
``tau * ||a_i|| * ||b_j||`` with ``tau = 2 u_in + 4 sqrt(k) u_acc`` (input rounding is
bounded outright; accumulation error grows like sqrt(k) for rounding that does not
conspire). A group's sum of q = n/G such errors is at most ``tau ||a_i|| sqrt(q) ||B_g||_F`` (Cauchy-Schwarz;
B_g: the group's columns of B); the check allows ``min(8, sqrt(q))`` times ``tau ||a_i|| ||B_g||_F``.

What the default catches, exactly: an element of C off by more than twice its group's bound,
``2 min(8, sqrt(q)) tau ||a_i|| ||B_g||_F``, always (the rounding beside it cannot hide more); a smaller
error only when the rounding beside it does not cancel it. For n <= FREIVALDS_GROUPS every column is its
own group and that is ``2 tau ||a_i|| ||b_j||``, twice ``verify: full``'s bound.
"""

from __future__ import annotations

import math

import numpy as np

from ...core import xp as xpmod
from ...core.errors import VerificationError
from ...io.hdf5 import open_h5

CHUNK_ROWS = 2048  # float64 copies of this many rows at a time bound verification memory
FREIVALDS_GROUPS = 256  # columns of C checked in this many groups: A (B X) costs 2 m k G float64 flops

UNIT_ROUNDOFF = {"float32": 2.0**-24, "tf32": 2.0**-11, "float64": 2.0**-53}


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
        out[i : i + CHUNK_ROWS] = xpmod.to_host(m[i : i + CHUNK_ROWS].astype(xp.float64) @ xd)
    return out


def squares64(xp, m, axis: int) -> np.ndarray:
    """Sums of squares of ``m`` along ``axis`` (1: per row, 0: per column), float64, host."""
    out = np.zeros(m.shape[1 - axis])
    for i in range(0, m.shape[0], CHUNK_ROWS):
        part = xpmod.to_host((m[i : i + CHUNK_ROWS].astype(xp.float64) ** 2).sum(axis=axis))
        if axis == 1:
            out[i : i + CHUNK_ROWS] = part
        else:
            out += part
    return out


def selector(signs: np.ndarray, first_col: int, groups: int) -> np.ndarray:
    """The (columns, groups) float64 matrix that sums columns ``first_col``... of a wider matrix, each times its
    sign, per group (global column j in group j mod ``groups``): one GEMM against it gives every group's sum,
    on a GPU far faster than summing strided slices."""
    cols = len(signs)
    out = np.zeros((cols, groups))
    out[np.arange(cols), (first_col + np.arange(cols)) % groups] = signs
    return out


def freivalds(ctx, xp, shapes, blocks, local, seed: int, tol_scale: float) -> float:
    """Check C X == A (B X) over every rank's blocks (the grouped check of the module's docstring); collective.

    Where every rank holds whole rows of A and C (the rows algorithm), each checks its own rows on its device
    and only B X crosses ranks; otherwise (SUMMA's blocks) the ranks' partial C X and A (B X) are summed on the
    host first.

    Args:
        shapes: (m, k, n).
        blocks: {'a', 'b', 'c'} -> Block each rank contributes (B's counted once over ranks).
        local: {'a', 'b', 'c'} -> this rank's arrays of those blocks.
        tol_scale: ``tau`` for this dtype and k.

    Returns:
        The largest |C X - A (B X)| over its bound (<= 1 when correct).
    """
    m, k, n = shapes
    a, b, c = blocks["a"], blocks["b"], blocks["c"]
    groups = min(n, FREIVALDS_GROUPS)
    signs = np.random.default_rng([seed, 1]).choice([-1.0, 1.0], size=n)
    bx = np.zeros((k, groups))
    col_sq = np.zeros(n)
    bx[b.r0 : b.r1] = matvec64(xp, local["b"], selector(signs[b.c0 : b.c1], b.c0, groups))
    col_sq[b.c0 : b.c1] = squares64(xp, local["b"], axis=0)
    ctx.allreduce_host(bx, col_sq)
    group_norm = np.sqrt(np.bincount(np.arange(n) % groups, weights=col_sq, minlength=groups))  # ||B_g||_F
    limit = min(8.0, math.sqrt(math.ceil(n / groups))) * tol_scale
    whole_rows = (a.c0, a.c1, c.c0, c.c1, a.r0, a.r1) == (0, k, 0, n, c.r0, c.r1)
    if all(ctx.comm.allgather(whole_rows)):
        found = own_rows(xp, local["a"], local["c"], bx, selector(signs, 0, groups), group_norm, limit, c.r0)
    else:  # blocks of rows: each rank's part of C X, A (B X) and the rows' squared norms, summed on the host
        abx, cx, row_sq = np.zeros((m, groups)), np.zeros((m, groups)), np.zeros(m)
        abx[a.r0 : a.r1] = matvec64(xp, local["a"], bx[a.c0 : a.c1])
        row_sq[a.r0 : a.r1] = squares64(xp, local["a"], axis=1)
        cx[c.r0 : c.r1] = matvec64(xp, local["c"], selector(signs[c.c0 : c.c1], c.c0, groups))
        ctx.allreduce_host(abx, row_sq, cx)
        found = judge_rows(np, cx, abx, np.sqrt(row_sq), group_norm, limit, 0) if ctx.rank == 0 else (0.0, None, 0)

    def judge():
        worst, bad, rows = found
        if bad is not None:
            i, g, cx, abx, bound = bad
            raise VerificationError(
                f"Freivalds check failed in {rows} row(s) of C, first row {i} (columns j with j "
                f"mod {groups} = {g}): (C X)[{i}, {g}] = {cx!r}, A (B X)[{i}, {g}] = {abx!r} "
                f"(bound {bound:.3g})"
            )
        return worst / limit

    return max(ctx.comm.allgather(ctx.agree(judge)))


def own_rows(xp, a, c, bx: np.ndarray, select: np.ndarray, group_norm: np.ndarray, limit: float, first_row: int):
    """``judge_rows`` of a rank's whole rows of C and A, on its device by row chunks (only B X crossed ranks)."""
    bxd, sel = xp.asarray(bx), xp.asarray(select)
    worst, bad, rows = 0.0, None, 0
    for i in range(0, a.shape[0], CHUNK_ROWS):
        a64 = a[i : i + CHUNK_ROWS].astype(xp.float64)
        part = judge_rows(
            xp,
            c[i : i + CHUNK_ROWS].astype(xp.float64) @ sel,
            a64 @ bxd,
            xp.sqrt((a64 * a64).sum(axis=1)),
            group_norm,
            limit,
            first_row + i,
        )
        worst, bad, rows = max(worst, part[0]), bad or part[1], rows + part[2]
    return worst, bad, rows


def judge_rows(xp, cx, abx, norm_a, group_norm: np.ndarray, limit: float, first_row: int):
    """Rows of C X against A (B X): (the largest |C X - A (B X)| / (||a_i|| ||B_g||_F), infinite for NaN; the first
    element above ``limit`` as (row, group, C X, A (B X), its bound), or None; how many rows hold one)."""
    tiny = np.finfo(np.float64).tiny
    norm_g = xp.asarray(group_norm)
    ratio = xp.abs(cx - abx) / (norm_a[:, None] + tiny) / (norm_g[None, :] + tiny)
    over = ~(ratio <= limit)  # NaN included
    rows = int(over.any(axis=1).sum())
    bad = None
    if rows:
        r, g = (int(v) for v in np.unravel_index(int(over.argmax()), over.shape))
        bad = (first_row + r, g, float(cx[r, g]), float(abx[r, g]), limit * float(norm_a[r]) * float(group_norm[g]))
    return float(xp.nan_to_num(ratio, nan=np.inf).max()), bad, rows


def sample_rows(m: int, c_blocks, count: int, seed: int) -> list[int]:
    """Rows of C to recompute: the first and last row of every block, and ``count`` random ones."""
    rows = {r for blk in c_blocks for r in (blk.r0, blk.r1 - 1)}
    rows |= set(np.random.default_rng([seed, 2]).choice(m, size=min(count, m), replace=False).tolist())
    return sorted(rows)


def sampled_rows(ctx, xp, rows: list[int], c_block, c_local, n: int, a_source, b_source, tol_scale: float) -> float:
    """Compare ``rows`` of the distributed C with float64 rows from A and B as stored; collective.

    Args:
        rows: global row indices (sorted).
        c_block, c_local: this rank's block of C and its array.
        a_source, b_source: (path, dataset) of A and B.

    Returns:
        The largest |C_ij - (A B)_ij| / (||a_i|| ||b_j||) over the sampled elements.
    """
    mine = [(i, c_block.c0, xpmod.to_host(c_local[i - c_block.r0])) for i in rows if c_block.r0 <= i < c_block.r1]
    parts = ctx.comm.gather(mine, root=0)

    def check():
        got = np.full((len(rows), n), np.nan)
        where = {r: j for j, r in enumerate(rows)}
        for part in parts:
            for i, c0, values in part:
                got[where[i], c0 : c0 + len(values)] = values
        want, a_norm, b_norm = _reference_rows(rows, a_source, b_source)
        scale = np.outer(a_norm, b_norm) + np.finfo(np.float64).tiny
        err = np.abs(got - want)
        bad = ~np.isfinite(got) | (err > tol_scale * scale)
        if bad.any():
            j, col = np.unravel_index(int(np.argmax(bad)), bad.shape)
            raise VerificationError(
                f"C[{rows[j]}, {col}] = {float(got[j, col])!r}, float64 recomputation gives "
                f"{float(want[j, col])!r} (tolerance {tol_scale * scale[j, col]:.3g}); "
                f"{int(bad.sum())} of {bad.size} sampled elements wrong"
            )
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
            part = b[start : start + CHUNK_ROWS].astype(np.float64)
            out += a_rows[:, start : start + part.shape[0]] @ part
            col_sq += (part**2).sum(axis=0)
    return out, np.sqrt((a_rows**2).sum(axis=1)), np.sqrt(col_sq)


def every_element(xp, c_block, c_local, a_source, b_source, tol_scale: float) -> float:
    """Every element of this rank's block of C against float64 A @ B from the files, on its device.

    Returns:
        The largest |C_ij - (A B)_ij| / (||a_i|| ||b_j||) (VerificationError naming the first element above
        ``tol_scale``).
    """
    tiny = np.finfo(np.float64).tiny
    with open_h5(b_source[0]) as f:
        b = xp.asarray(f[b_source[1]][:, c_block.c0 : c_block.c1].astype(np.float64))
    b_norm = xp.sqrt((b * b).sum(axis=0))
    worst = 0.0
    with open_h5(a_source[0]) as f:
        a_rows = f[a_source[1]]
        for start in range(c_block.r0, c_block.r1, CHUNK_ROWS):
            stop = min(start + CHUNK_ROWS, c_block.r1)
            a = xp.asarray(a_rows[start:stop, :].astype(np.float64))
            want = a @ b
            got = c_local[start - c_block.r0 : stop - c_block.r0].astype(xp.float64)
            scale = xp.sqrt((a * a).sum(axis=1))[:, None] * b_norm[None, :] + tiny
            err = xp.abs(got - want)
            bad = ~xp.isfinite(got) | (err > tol_scale * scale)
            count = int(bad.sum())
            if count:
                i, j = (int(v) for v in np.unravel_index(int(bad.argmax()), bad.shape))
                raise VerificationError(
                    f"C[{start + i}, {c_block.c0 + j}] = {float(got[i, j])!r}, float64 recomputation gives "
                    f"{float(want[i, j])!r} (tolerance {tol_scale * float(scale[i, j]):.3g}); {count} element(s) "
                    f"of rows {start}-{stop} wrong"
                )
            worst = max(worst, float((err / scale).max()))
    return worst


def gathered_blocks(c_full, blocks: list[dict], block_sums: list[float]) -> None:
    """The gathered C (None: not gathered here) holds exactly every rank's block (same float64 sums, block by
    block), or VerificationError naming the first that does not."""
    if c_full is None:
        return
    for r, blk in enumerate(blocks):
        c = blk["c"]
        got = float(np.ascontiguousarray(xpmod.to_host(c_full[c.r0 : c.r1, c.c0 : c.c1])).sum(dtype=np.float64))
        if got != block_sums[r]:
            raise VerificationError(
                f"gathered C: the block of rank {r} ({c.describe()}) sums to {got!r}, "
                f"rank {r} computed {block_sums[r]!r}"
            )


def checksums(ctx, c_local) -> np.ndarray:
    """sum, sum of |C|, sum of C^2 over the whole C (collective)."""
    stats = np.array(
        [
            float(c_local.sum(dtype=np.float64)),
            float(abs(c_local).sum(dtype=np.float64)),
            float((c_local.astype(np.float64) ** 2).sum()),
        ]
    )
    ctx.allreduce_host(stats)
    return stats
