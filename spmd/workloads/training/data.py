"""The synthetic classification set, and the order its samples are visited in.

``spmd generate`` draws the features like any input (seeded chunks), then labels every row
with a fixed random teacher network (``argmax(tanh(x' A + c) B)`` on standardized x), so the
task is learnable but not linear; a held-out set (``eval/data``, ``eval/labels``) is drawn
the same way from its own seed.

Sample order. The rows are cut into ``P`` logical shards (balanced row blocks; P a multiple
of the rank count) and rank r holds the contiguous shards r*P/n ... (r+1)*P/n - 1. Every shard
is visited through its own endless stream of permutations, one per epoch, seeded by
(seed, shard, epoch); step t takes the next G/P samples of every stream (G: the global batch).
So which samples make a step depends only on the seed, P and G, never on how many ranks
share the work: 2 ranks x batch b and 1 rank x batch 2b train on the same samples.
"""

from __future__ import annotations

import numpy as np

from ...core.errors import ConfigError, InputError
from ...io.plan import block_range

TEACHER_SALT = 0x7EAC4E2
EVAL_SALT = 0xE7A1


def teacher(seed: int, inputs: int, hidden: int, classes: int):
    """The teacher's weights (a function of the seed and the shape only)."""
    rng = np.random.default_rng([seed, TEACHER_SALT])
    a = rng.standard_normal((inputs, hidden)) / np.sqrt(inputs)
    c = rng.standard_normal(hidden) * 0.5
    b = rng.standard_normal((hidden, classes)) / np.sqrt(hidden)
    return a, c, b


def teacher_labels(x: np.ndarray, weights, loc: float, scale: float) -> np.ndarray:
    a, c, b = weights
    z = np.tanh(((np.asarray(x, np.float64) - loc) / scale) @ a + c)
    return np.argmax(z @ b, axis=1).astype(np.int32)


def write_labels(dset, weights, loc: float, scale: float, name: str = "labels", chunk_rows: int = 8192) -> None:
    """Write the labels dataset ``name`` next to features ``dset`` (same file), chunk by chunk."""
    rows = dset.shape[0]
    labels = dset.parent.create_dataset(name, shape=(rows,), dtype=np.int32)
    for start in range(0, rows, chunk_rows):
        stop = min(rows, start + chunk_rows)
        labels[start:stop] = teacher_labels(dset[start:stop], weights, loc, scale)


def write_eval_set(group, rows: int, weights, g) -> None:
    """The held-out set: ``rows`` fresh samples drawn like the features, and their labels."""
    rng = np.random.default_rng([g.seed, EVAL_SALT])
    x = rng.standard_normal((rows, weights[0].shape[0])).astype(g.dtype) * np.dtype(g.dtype).type(g.scale)
    x += np.dtype(g.dtype).type(g.loc)
    group.create_dataset("data", data=x)
    group.create_dataset("labels", data=teacher_labels(x, weights, g.loc, g.scale))


class Sampler:
    """Batch indices of one rank: for each step, ``per_rank`` local row numbers.

    Args:
        rows: rows of the whole dataset; shards: P; ranks, rank: who this is;
        global_batch: G (must be divisible by P); seed: of the order.
    """

    def __init__(self, rows: int, shards: int, ranks: int, rank: int, global_batch: int, seed: int):
        if shards % ranks:
            raise ConfigError(
                f"params.data_shards: {shards} logical shards cannot be split evenly over "
                f"{ranks} ranks (use a multiple of {ranks})"
            )
        if global_batch % shards:
            raise ConfigError(
                f"params.data_shards: the global batch of {global_batch} samples cannot take the "
                f"same number from each of {shards} shards (use a divisor of {global_batch})"
            )
        if rows < shards:
            raise InputError(f"{rows} rows cannot make {shards} data shards (each needs at least one row)")
        self.seed, self.per_shard = seed, global_batch // shards
        mine = range(rank * shards // ranks, (rank + 1) * shards // ranks)
        self.shards = [(s, *block_range(rows, shards, s)) for s in mine]
        self.first_row = self.shards[0][1]
        self.last_row = self.shards[-1][2]
        self._perm: dict[tuple[int, int], np.ndarray] = {}

    @property
    def local_rows(self) -> tuple[int, int]:
        """[start, stop) of the dataset rows this rank holds."""
        return self.first_row, self.last_row

    def _permutation(self, shard: int, epoch: int, n: int) -> np.ndarray:
        key = (shard, epoch)
        if key not in self._perm:
            if len(self._perm) > 4 * len(self.shards):
                self._perm.clear()
            self._perm[key] = np.random.default_rng([self.seed, shard, epoch]).permutation(n)
        return self._perm[key]

    def window(self, first_step: int, steps: int) -> np.ndarray:
        """Local row numbers, shape (steps, per_rank): for each step, each shard's samples in turn."""
        out = np.empty((steps, len(self.shards) * self.per_shard), dtype=np.int32)
        positions = np.arange(first_step * self.per_shard, (first_step + steps) * self.per_shard, dtype=np.int64)
        for k, (shard, start, stop) in enumerate(self.shards):
            n = stop - start
            epochs, within = np.divmod(positions, n)
            picked = np.empty_like(positions)
            for epoch in np.unique(epochs):
                sel = epochs == epoch
                picked[sel] = self._permutation(shard, int(epoch), n)[within[sel]]
            cols = slice(k * self.per_shard, (k + 1) * self.per_shard)
            out[:, cols] = (picked + (start - self.first_row)).reshape(steps, self.per_shard)
        return out
