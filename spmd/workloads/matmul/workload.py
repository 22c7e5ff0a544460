"""Workload ``matmul``: C = A @ B, A (m x k) and B (k x n) from HDF5.

``rows``: rank r holds rows block r of A and all of B (every rank reads it, rank 0 reads
and broadcasts it, or each rank reads 1/n of its rows and they are allgathered), and
computes rows block r of C with one GEMM.
``summa``: A, B and C in blocks on a 2-D process grid; for each panel of k, the owners
broadcast A's panel along grid rows and B's panel along grid columns, and every rank
accumulates its C block (van de Geijn & Watts), so B is never replicated.
``gather``: C stays distributed (none), goes to every rank (allgather) or to rank 0 (root).
"""

from __future__ import annotations

import dataclasses
import time
from fractions import Fraction

import numpy as np

from ...core import faults
from ...core import xp as xpmod
from ...core.errors import ConfigError, InputError
from ...core.memory import require_memory
from ...io.blocks import read_block, save_blocks
from ...io.hdf5 import dataset_info
from ...io.plan import Block, Grid, block_range, choose_grid, grid_block
from ..base import Workload, read_then_wait, require_one_dataset, same_every_repeat
from . import check
from .params import MatmulParams


class MatmulWorkload(Workload):
    name = "matmul"
    Params = MatmulParams
    COMM_GROWTH = 1.0  # C's blocks shrink with each rank's share (B's slices say their own)
    OUTPUT_FILES = ("save",)
    DTYPES = ("float32", "float64")

    @classmethod
    def extra_inputs(cls, cfg):
        b = cfg.params.b
        if b.generate is not None and cfg.generate is not None and b.generate.shape[0] != cfg.generate.shape[1]:
            raise ConfigError(
                f"params.b.generate.shape: B has {b.generate.shape[0]} rows, but A "
                f"(generate.shape) has {cfg.generate.shape[1]} columns"
            )
        return [(b.input_config(), b.generate)]

    @classmethod
    def share_config(cls, cfg, factor):
        """A rank of ``factor`` times the ranks holds its rows of A and, reading B in slices (b_source allgather),
        only its slice of B: the rest comes by the allgather the model prices on the target's links."""
        shared = super().share_config(cfg, factor)
        p = cfg.params
        if (p.algorithm, p.b_source) != ("rows", "allgather") or Fraction(factor).denominator != 1:
            return shared
        return dataclasses.replace(shared, params=dataclasses.replace(shared.params, b_share_of=int(factor)))

    # -- setup ---------------------------------------------------------------------------

    def setup(self, ctx, cfg, comm):
        self.ctx, self.cfg, self.comm, self.params = ctx, cfg, comm, cfg.params
        p = self.params
        require_one_dataset(cfg, "matmul", "Freivalds' check and sampled rows")
        self.a_source = (cfg.input.path, cfg.input.dataset)
        self.b_source = (p.b.path, p.b.dataset)
        self.m, self.k, self.n, self.dtype = ctx.agree(self._shapes)
        if p.tf32 and self.dtype != np.float32:
            raise ctx.collective_error(
                ConfigError, 0, f"params.tf32: TF32 applies to float32; A and B are {self.dtype}"
            )
        if p.b_share_of > 1 and ctx.size > 1:
            raise ctx.collective_error(
                ConfigError,
                0,
                f"params.b_share_of: one rank stands for a rank of {p.b_share_of}; this run has {ctx.size}",
            )
        self.grid = ctx.agree(choose_grid, ctx.size, p.grid) if p.algorithm == "summa" else Grid(ctx.size, 1)
        self.blocks = [self._blocks(r) for r in range(ctx.size)]
        ctx.agree(self._check_sizes)
        self.mine = self.blocks[ctx.rank]
        if p.algorithm == "summa":
            from ...comm.factory import open_subcommunicator  # here: the comm layer loads MPI, config loading must not

            row, col = self.grid.position(ctx.rank)
            self.row_comm = open_subcommunicator(ctx, comm, color=row, key=col)
            self.col_comm = open_subcommunicator(ctx, comm, color=col, key=row)
            self.panels = self._panels()
        self._tf32_set = False
        if ctx.device == "gpu" and self.dtype == np.float32:
            xpmod.set_tf32(p.tf32)
            self._tf32_set = True
        ctx.agree(self._allocate)
        self.sums, self._ran = [], False

    def _shapes(self):
        m, (k,), a_dtype = dataset_info(*self.a_source, self.DTYPES, (2,))
        kb, (n,), b_dtype = dataset_info(*self.b_source, self.DTYPES, (2,))
        if kb != k:
            raise InputError(
                f"{self.b_source[0]}:{self.b_source[1]}: B has {kb} rows, but A "
                f"({self.a_source[0]}:{self.a_source[1]}) has {k} columns"
            )
        if b_dtype != a_dtype:
            raise InputError(f"{self.b_source[0]}:{self.b_source[1]}: B is {b_dtype}, A is {a_dtype}; use one dtype")
        return m, k, n, np.dtype(a_dtype)

    def _blocks(self, rank: int) -> dict:
        """Rank's blocks: 'a', 'c' (what it computes with and into), 'b' (what it reads of B),
        'b_own' (the part of B it answers for in verification: each element once over ranks)."""
        m, k, n = self.m, self.k, self.n
        if self.params.algorithm == "summa":
            b = grid_block((k, n), self.grid, rank)
            return {
                "a": grid_block((m, k), self.grid, rank),
                "b": b,
                "b_own": b,
                "c": grid_block((m, n), self.grid, rank),
            }
        r0, r1 = block_range(m, self.ctx.size, rank)
        k0, k1 = block_range(k, self.b_parts, rank)
        own = Block(k0, k1, 0, n)
        return {
            "a": Block(r0, r1, 0, k),
            "c": Block(r0, r1, 0, n),
            "b_own": own if self.params.b_share_of == 1 else Block(0, k, 0, n),  # a share answers for all of B
            "b": own if self.params.b_source == "allgather" else Block(0, k, 0, n),
        }

    @property
    def b_parts(self) -> int:
        """The slices B's rows are read in (b_source allgather): one a rank, or the ranks a share stands for."""
        return max(self.ctx.size, self.params.b_share_of)

    def _check_sizes(self):
        g, (m, k, n) = self.grid, (self.m, self.k, self.n)
        where = f"{self.a_source[0]}:{self.a_source[1]}"
        if m < g.rows:
            raise InputError(
                f"{where}: {m} rows of A cannot be split over {g.rows} ranks (each rank needs at least one row)"
            )
        if self.params.algorithm == "summa" and (k < max(g.rows, g.cols) or n < g.cols):
            raise InputError(
                f"{where}: A {m}x{k} and B {k}x{n} are too small for a {g.rows}x{g.cols} "
                f"grid (every block needs a row and a column)"
            )
        if self.params.b_source == "allgather" and k < self.b_parts:
            raise InputError(
                f"{self.b_source[0]}:{self.b_source[1]}: {k} rows of B cannot be split over "
                f"{self.b_parts} ranks for b_source: allgather"
            )

    def _panels(self) -> list[tuple[int, int, int, int]]:
        """SUMMA's panels of k: (k0, k1, grid column owning A's columns, grid row owning B's rows);
        cut where either owner changes, and at most ``panel`` wide."""
        cuts = {0, self.k}
        for q in range(self.grid.cols):
            cuts.update(block_range(self.k, self.grid.cols, q))
        for r in range(self.grid.rows):
            cuts.update(block_range(self.k, self.grid.rows, r))
        edges = sorted(cuts)

        def owner(parts: int, index: int) -> int:  # which of ``parts`` blocks of k holds ``index``
            return next(p for p in range(parts) if index < block_range(self.k, parts, p)[1])

        panels = []
        for lo, hi in zip(edges, edges[1:]):
            for k0 in range(lo, hi, self.params.panel):
                panels.append(
                    (k0, min(hi, k0 + self.params.panel), owner(self.grid.cols, k0), owner(self.grid.rows, k0))
                )
        return panels

    def _allocate(self):
        gpu, xp, dt, mine = self.ctx.device == "gpu", self.ctx.xp, self.dtype, self.mine
        a, b, c = mine["a"], mine["b"], mine["c"]
        c_pad = max(blk["c"].shape[0] * blk["c"].shape[1] for blk in self.blocks)
        rows_b_pad = max(blk["b"].shape[0] for blk in self.blocks)
        need = {
            "A block": a.shape,
            "B": (self.k, self.n) if self.params.algorithm == "rows" else b.shape,
            "C block": (c_pad,),
        }
        if self.params.b_share_of > 1:
            need["B rest"] = (self.k - b.shape[0], self.n)
        elif self.params.b_source == "allgather":
            need["B slices"] = (self.ctx.size, rows_b_pad, self.n)
        holds_full_c = self.params.gather == "allgather" or (self.params.gather == "root" and self.ctx.rank == 0)
        if holds_full_c:
            need["gathered C"] = (self.ctx.size, c_pad)
            need["C"] = (self.m, self.n)
        if self.params.algorithm == "summa":
            w = min(self.params.panel, self.k)
            need.update({"A panel": (a.shape[0] * w,), "B panel": (w * b.shape[1],), "C panel product": c.shape})
        total = sum(int(np.prod(s)) for s in need.values()) * dt.itemsize
        buffers = "matmul's buffers (" + ", ".join(f"{k} {list(s)}" for k, s in need.items()) + ")"
        require_memory(total, "device", self.ctx, buffers)
        if gpu:  # the pinned staging of A and B
            require_memory(
                (a.shape[0] * a.shape[1] + int(np.prod(need["B"]))) * dt.itemsize,
                "host",
                self.ctx,
                "matmul's host staging of A and B",
            )
        self.host_a = xpmod.empty_host(a.shape, dt, pinned=gpu)
        self.dev_a = xp.empty(a.shape, dt) if gpu else self.host_a
        if self.params.b_share_of > 1:  # a share: its slice read and copied each repeat, the rest once, here
            self.host_b = xpmod.empty_host((rows_b_pad, self.n), dt, pinned=gpu)
            self.dev_b_slice = xp.empty((rows_b_pad, self.n), dt) if gpu else self.host_b
            self.dev_b = xp.empty((self.k, self.n), dt)
            rest = Block(b.r1, self.k, 0, self.n)
            host_rest = np.empty(rest.shape, dt)
            read_block(*self.b_source, rest, host_rest, check_finite=self.cfg.check_finite)
            self.b_rest = xp.asarray(host_rest)
        elif self.params.b_source == "allgather":
            self.host_b = xpmod.empty_host((rows_b_pad, self.n), dt, pinned=gpu)
            self.dev_b_slice = xp.empty((rows_b_pad, self.n), dt) if gpu else self.host_b
            self.b_slices = xp.empty((self.ctx.size, rows_b_pad, self.n), dt)
            even = self.k % self.ctx.size == 0
            self.dev_b = self.b_slices.reshape(self.k, self.n) if even else xp.empty((self.k, self.n), dt)
        else:
            self.host_b = xpmod.empty_host(b.shape, dt, pinned=gpu)
            self.dev_b = xp.empty(b.shape, dt) if gpu else self.host_b
        self.c_flat = xp.empty(c_pad, dt)
        self.c_local = self.c_flat[: c.shape[0] * c.shape[1]].reshape(c.shape)
        self.c_gathered = xp.empty((self.ctx.size, c_pad), dt) if holds_full_c else None
        self.c_full = None
        if holds_full_c:
            stacked = self.grid.cols == 1 and self.m % self.ctx.size == 0
            self.c_full = self.c_gathered.reshape(self.m, self.n) if stacked else xp.empty((self.m, self.n), dt)
        if self.params.algorithm == "summa":
            self.a_panel = xp.empty(need["A panel"], dt)
            self.b_panel = xp.empty(need["B panel"], dt)
            self.c_product = xp.empty(c.shape, dt)

    # -- one repeat ----------------------------------------------------------------------

    def prepare(self):
        if self._ran:  # the previous repeat's checksum, outside the timed repeat
            self.sums.append(float(self.c_local.sum(dtype=np.float64)))
        self._ran = True
        # poison everything a repeat writes: an element it misses shows as NaN
        for buf in (self.host_a, self.dev_a, self.host_b, self.dev_b, self.c_flat, self.c_gathered, self.c_full):
            if buf is not None:
                buf.fill(np.nan)

    def run(self, timer):
        gpu, xp, p = self.ctx.device == "gpu", self.ctx.xp, self.params
        a, b = self.mine["a"], self.mine["b"]

        def read():
            self.read_input_block(self.a_source, a, self.host_a)
            if p.b_source == "allgather":
                self.read_input_block(self.b_source, b, self.host_b[: b.shape[0]])
            elif p.b_source == "read" or self.ctx.rank == 0:
                self.read_input_block(self.b_source, b, self.host_b)

        read_then_wait(self.ctx, timer, read)
        if gpu:
            with timer.phase("h2d"):
                self.dev_a.set(self.host_a)
                if p.b_source == "allgather":
                    self.dev_b_slice.set(self.host_b)
                elif p.b_source == "read" or self.ctx.rank == 0:
                    self.dev_b.set(self.host_b)
        if p.algorithm == "summa":
            self._summa(timer, xp)
        else:
            with timer.phase("comm"):
                self._share_b()
            with timer.phase("compute"):
                xp.matmul(self.dev_a, self.dev_b, out=self.c_local)
        faults.corrupt(self.c_local, "C block")
        with timer.phase("comm"):
            self._gather_c()

    def _share_b(self):
        if self.params.b_share_of > 1:  # what the allgather would bring a rank of b_share_of: the rest of B
            rows = self.mine["b"].shape[0]
            self.dev_b[:rows] = self.dev_b_slice[:rows]
            self.dev_b[rows:] = self.b_rest
        elif self.params.b_source == "bcast":
            self.comm.bcast(self.dev_b, root=0, out=self.dev_b)
        elif self.params.b_source == "allgather":
            self.comm.allgather(self.dev_b_slice, out=self.b_slices)
            if self.dev_b.base is not self.b_slices:  # uneven slices: close the gaps
                for r, blk in enumerate(self.blocks):
                    self.dev_b[blk["b"].r0 : blk["b"].r1] = self.b_slices[r, : blk["b"].shape[0]]

    def _summa(self, timer, xp):
        a, b = self.mine["a"], self.mine["b"]
        row, col = self.grid.position(self.ctx.rank)
        for i, (k0, k1, owner_col, owner_row) in enumerate(self.panels):
            w = k1 - k0
            with timer.phase("comm"):
                a_panel = self._panel(
                    self.row_comm,
                    self.a_panel,
                    (a.shape[0], w),
                    owner_col,
                    col,
                    lambda: self.dev_a[:, k0 - a.c0 : k1 - a.c0],
                )
                b_panel = self._panel(
                    self.col_comm,
                    self.b_panel,
                    (w, b.shape[1]),
                    owner_row,
                    row,
                    lambda: self.dev_b[k0 - b.r0 : k1 - b.r0],
                )
            with timer.phase("compute"):
                if i == 0:
                    xp.matmul(a_panel, b_panel, out=self.c_local)
                else:
                    xp.matmul(a_panel, b_panel, out=self.c_product)
                    self.c_local += self.c_product

    @staticmethod
    def _panel(comm, buffer, shape, owner, me, local_slice):
        """The panel as every rank of ``comm`` needs it: the owner's slice, broadcast."""
        if comm.size == 1:
            return local_slice()  # nobody to send to: use the block in place
        panel = buffer[: shape[0] * shape[1]].reshape(shape)
        if me == owner:
            panel[...] = local_slice()
        comm.bcast(panel, root=owner, out=panel)
        return panel

    def _gather_c(self):
        gather = self.params.gather
        if gather == "none":
            return
        if gather == "allgather":
            self.comm.allgather(self.c_flat, out=self.c_gathered)
        else:
            self.comm.gather(self.c_flat, root=0, out=self.c_gathered)
        if self.c_full is not None and self.c_full.base is not self.c_gathered:
            for r, blk in enumerate(self.blocks):
                c = blk["c"]
                self.c_full[c.r0 : c.r1, c.c0 : c.c1] = self.c_gathered[r, : c.shape[0] * c.shape[1]].reshape(c.shape)

    # -- verification and results ---------------------------------------------------------

    def verify(self):
        ctx, xp, p = self.ctx, self.ctx.xp, self.params
        tol = check.tau(self.dtype.name, self.k, p.tf32)
        every, every_s = 0.0, None
        if self.cfg.verify == "full":  # every element, recomputed in float64 from the files: the most specific
            start = time.perf_counter()  # every_element ends on host reads of its results: nothing left queued
            every = ctx.agree(check.every_element, xp, self.mine["c"], self.c_local, self.a_source, self.b_source, tol)
            every_s = time.perf_counter() - start
        local = {"a": self.dev_a, "c": self.c_local, "b": self._b_own()}
        blocks = {"a": self.mine["a"], "b": self.mine["b_own"], "c": self.mine["c"]}
        freivalds = check.freivalds(ctx, xp, (self.m, self.k, self.n), blocks, local, p.seed, tol)
        rows = check.sample_rows(self.m, [blk["c"] for blk in self.blocks], p.samples, p.seed)
        worst = check.sampled_rows(
            ctx, xp, rows, self.mine["c"], self.c_local, self.n, self.a_source, self.b_source, tol
        )
        worst = max(worst, every)
        # both sides sum a contiguous host copy with NumPy, so equal blocks give bit-equal sums
        # (a device sum or a strided view adds in another order)
        block_sums = ctx.comm.allgather(float(np.ascontiguousarray(xpmod.to_host(self.c_local)).sum(dtype=np.float64)))
        ctx.agree(check.gathered_blocks, self.c_full, self.blocks, block_sums)
        sums = [*self.sums, float(self.c_local.sum(dtype=np.float64))]
        ctx.agree(same_every_repeat, sums, "C blocks")
        self.stats = check.checksums(ctx, self.c_local)
        full = (
            ", every element recomputed in float64 from the files (verify: full)" if self.cfg.verify == "full" else ""
        )
        return {
            "reference": f"grouped Freivalds ({min(self.n, check.FREIVALDS_GROUPS)} groups of columns, random "
            f"signs, float64) + sampled rows recomputed in float64{full}",
            "sampled_rows": len(rows),
            "tolerance_tau": tol,
            "freivalds_worst_to_bound": freivalds,
            "max_relative_error": worst,
            "every_element_s": every_s,
        }

    def _b_own(self):
        own = self.mine["b_own"]
        return self.dev_b if self.params.algorithm == "summa" else self.dev_b[own.r0 : own.r1]

    def check_input_finite(self):
        a, b = self.mine["a"], self.mine["b"]
        read_block(*self.a_source, a, np.empty(a.shape, self.host_a.dtype), check_finite=True)
        read_block(*self.b_source, b, np.empty(b.shape, self.host_b.dtype), check_finite=True)

    def result(self):
        stats = self.stats
        out = {
            "shape": [self.m, self.n],
            "k": self.k,
            "dtype": self.dtype.name,
            "algorithm": self.params.algorithm,
            "grid": [self.grid.rows, self.grid.cols],
            "gather": self.params.gather,
            "sum": stats[0],
            "abs_sum": stats[1],
            "frobenius_norm": float(np.sqrt(stats[2])),
        }
        if self.params.save is not None:
            out["saved"] = f"{self.params.save.path}:{self.params.save.dataset}"
        return out

    def save(self):
        s = self.params.save
        if s is None:
            return None
        return save_blocks(
            self.ctx,
            s.path,
            s.dataset,
            (self.m, self.n),
            self.dtype,
            self.mine["c"],
            xpmod.to_host(self.c_local),
            self.cfg.overwrite,
        )

    def metrics(self, rank_medians):
        flops = [2.0 * blk["c"].shape[0] * blk["c"].shape[1] * self.k for blk in self.blocks]
        compute = [m.get("compute", 0.0) for m in rank_medians]
        slowest_total = max(m["total"] for m in rank_medians)
        return {
            "flop_total": sum(flops),
            "tflops_per_rank": [f / t / 1e12 if t > 0 else None for f, t in zip(flops, compute)],
            "tflops_compute": sum(flops) / max(compute) / 1e12 if max(compute) > 0 else None,
            "tflops_job": sum(flops) / slowest_total / 1e12 if slowest_total > 0 else None,
        }

    def problem(self):
        isz, p = self.dtype.itemsize, self.params
        comm = []
        if p.algorithm == "rows" and p.b_source == "bcast":
            comm.append({"op": "bcast", "bytes": self.k * self.n * isz, "growth": 0.0})
        if p.algorithm == "rows" and p.b_source == "allgather":
            # B is k x n whatever the problem (A's rows): each rank's slice follows 1/ranks only (a share on its
            # one rank lists what a one-rank run does, all of B: the slices are scaled from there)
            slice_bytes = self.k * self.n * isz if p.b_share_of > 1 else self.dev_b_slice.nbytes
            comm.append({"op": "allgather", "bytes": slice_bytes, "growth": 0.0, "ranks_power": -1.0})
        if p.algorithm == "summa":
            a, b = self.mine["a"], self.mine["b"]
            w = min(p.panel, self.k)
            comm += [
                {"op": "bcast", "bytes": a.shape[0] * w * isz, "calls": len(self.panels)},
                {"op": "bcast", "bytes": w * b.shape[1] * isz, "calls": len(self.panels)},
            ]
        if p.gather != "none":
            comm.append({"op": "allgather" if p.gather == "allgather" else "gather", "bytes": self.c_flat.nbytes})
        problem = {"bytes": self.m * self.k * isz, "comm": comm}
        if p.algorithm == "rows" and p.b_source == "allgather":  # each rank reads and copies in its slice of B
            problem["sliced"] = {"bytes": self.k * self.n * isz, "parts": self.b_parts}
        return problem

    def close(self):
        self.b_rest = None
        if getattr(self, "_tf32_set", False):
            xpmod.set_tf32(False)
        for name in ("row_comm", "col_comm"):
            sub = getattr(self, name, None)
            if sub is not None:
                sub.close()
                setattr(self, name, None)
        self.host_a = self.dev_a = self.host_b = self.dev_b = self.c_flat = self.c_local = None
        self.c_gathered = self.c_full = None
