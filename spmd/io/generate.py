"""``spmd generate``: write the input a config names, with the expected answer as attributes.

Data are seeded and chunked; chunk k of shard s comes from its own generator
``default_rng([seed, s, k])``, so the output does not depend on who writes it or in
which order. Files are written under a temporary name and renamed when complete.
Shard files are spread over the ranks when launched under MPI.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..files import temp_beside
from .hdf5 import open_h5
from .plan import block_ranges

CHUNK_BYTES = 4 << 20  # HDF5 chunk and generation block: 4 MiB


def target_files(cfg, workload) -> list[tuple[str, int]]:
    """(path, rows) of every file ``spmd generate`` writes for the config, in order (``workload``:
    the config's Workload class)."""
    return [(path, rows) for path, rows, *_ in _targets(cfg, workload)]


def _targets(cfg, workload) -> list[tuple]:
    """(path, rows, shard index, input section, generate section, is the main input) per file:
    the config's input, then the extra datasets its workload names (matmul's B)."""
    if cfg.generate is None:
        raise ConfigError("generate: missing; spmd generate needs a generate section (shape, dtype, seed)")
    sources = [(cfg.input, cfg.generate, True)]
    sources += [(inp, g, False) for inp, g in workload.extra_inputs(cfg) if g is not None]
    return [(path, rows, index, inp, g, main) for inp, g, main in sources
            for index, (path, rows) in enumerate(_input_files(inp, g))]


def _input_files(inp, g) -> list[tuple[str, int]]:
    """(path, rows) of every file of one input, rows split evenly over shards."""
    if inp.path is not None:
        return [(inp.path, g.shape[0])]
    patterns = inp.shards
    if len(patterns) == 1 and glob.has_magic(patterns[0]):
        pattern = patterns[0]
        if g.shards is None:
            raise ConfigError("generate.shards: needed to make files for the glob input.shards")
        if pattern.count("*") != 1 or glob.has_magic(pattern.replace("*", "")):
            raise ConfigError(f"input.shards: to generate, the glob must hold exactly one '*' ({pattern!r})")
        width = max(3, len(str(g.shards - 1)))
        paths = [pattern.replace("*", f"{i:0{width}d}") for i in range(g.shards)]
    else:
        paths = list(patterns)
    if len(paths) > g.shape[0]:
        raise ConfigError(f"generate.shape: {g.shape[0]} rows cannot fill {len(paths)} shard files")
    return [(p, stop - start) for p, (start, stop) in zip(paths, block_ranges(g.shape[0], len(paths)))]


def generate(cfg, workload, rank: int = 0, size: int = 1, force: bool = False) -> list[str]:
    """Write this rank's share of the config's input files (and its workload's extra datasets).

    The workload finishes its main input (``Workload.finish_input``: reference answers as
    attributes, companion datasets such as train's labels).

    Args:
        cfg: the job Config (its ``input`` and ``generate`` sections).
        workload: the config's Workload class: its ``extra_inputs``, ``input_recipe`` and
            ``finish_input`` say what else to write (this module imports no workload).
        rank, size: this process's share of the files (a single file is rank 0's).
        force: rewrite files that already hold data generated with the same settings.

    Returns:
        The paths written by this rank (existing up-to-date files are skipped).
    """
    written = []
    targets = _targets(cfg, workload)
    for index in range(rank, len(targets), size):  # round-robin: a single file is rank 0's
        path, rows, shard, inp, g, main = targets[index]
        recipe = _recipe(g, shard, rows, workload.input_recipe(cfg) if main else {})
        if not force and _up_to_date(path, inp.dataset, recipe):
            continue
        finish = (lambda dset: workload.finish_input(cfg, dset)) if main else (lambda _: {})
        _write(path, inp.dataset, rows, shard, g, recipe, finish)
        written.append(path)
    return written


def _recipe(g, index: int, rows: int, extra: dict) -> str:
    return json.dumps({"shape": [rows, *g.shape[1:]], "dtype": g.dtype, "seed": g.seed, "shard": index,
                       "distribution": g.distribution, "loc": g.loc, "scale": g.scale,
                       "chunk_rows": g.chunk_rows, **extra}, sort_keys=True)


def _up_to_date(path: str, dataset: str, recipe: str) -> bool:
    if not os.path.exists(path):
        return False
    try:
        with open_h5(path) as f:
            return dataset in f and f[dataset].attrs.get("spmd_generate") == recipe
    except Exception:  # unreadable or corrupt: regenerate
        return False


def _write(path, dataset, rows, shard, g, recipe, finish) -> None:
    shape = (rows, *g.shape[1:])
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(g.dtype).itemsize
    chunk_rows = g.chunk_rows or max(1, min(rows, CHUNK_BYTES // row_bytes))
    tmp = temp_beside(path)  # unique: two jobs generating one file never share it
    try:
        with open_h5(str(tmp), "w") as f:
            dset = f.create_dataset(dataset, shape=shape, dtype=g.dtype, chunks=(min(chunk_rows, rows), *shape[1:]))
            for k, start in enumerate(range(0, rows, chunk_rows)):
                stop = min(rows, start + chunk_rows)
                rng = np.random.default_rng([g.seed, shard, k])
                dset[start:stop] = _draw(rng, (stop - start, *shape[1:]), g)
            for key, value in finish(dset).items():
                dset.attrs[key] = value
            dset.attrs["spmd_generate"] = recipe
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _draw(rng, shape, g) -> np.ndarray:
    dtype = np.dtype(g.dtype)
    if g.distribution == "normal":
        values = rng.standard_normal(shape, dtype=dtype)
    else:  # uniform on [loc - scale, loc + scale)
        values = rng.random(shape, dtype=dtype) * 2 - 1
    values *= dtype.type(g.scale)
    values += dtype.type(g.loc)
    return values


def scaled_input(cfg, factor: Fraction):
    """``cfg`` with ``factor`` times the generated rows, in files of their own (weak scaling).

    ``data/x.h5`` becomes ``data/weak-x2/x.h5``; a shard glob ``d/part-*.h5`` becomes
    ``d/weak-x2/part-*.h5`` with ``factor`` times the shards, so each rank's share of
    rows and files stays what it was.

    Raises:
        ConfigError: no ``generate`` section, an explicit shard list, or a factor that
            does not give whole rows or shards.
    """
    factor = Fraction(factor)
    if factor == 1:
        return cfg
    g = cfg.generate
    if g is None:
        raise ConfigError("weak scaling generates a larger input for each rank count: the config needs a "
                          "generate section (shape, dtype, seed)")
    tag = f"weak-x{float(factor):g}"
    rows = g.shape[0] * factor
    if rows.denominator != 1:
        raise ConfigError(f"generate.shape: {g.shape[0]} rows x {factor} is not a whole number of rows")
    shards = g.shards
    if cfg.input.path is not None:
        source = Path(cfg.input.path)
        new_input = dataclasses.replace(cfg.input, path=str(source.parent / tag / source.name))
    else:
        patterns = cfg.input.shards
        if len(patterns) != 1 or not glob.has_magic(patterns[0]):
            raise ConfigError("input.shards: weak scaling needs input.path or a shard glob (with "
                              "generate.shards), not a list of files")
        count = (g.shards or 1) * factor
        if count.denominator != 1:
            raise ConfigError(f"generate.shards: {g.shards} x {factor} is not a whole number of shards")
        shards = int(count)
        source = Path(patterns[0])
        new_input = dataclasses.replace(cfg.input, shards=(str(source.parent / tag / source.name),))
    generate = dataclasses.replace(g, shape=(int(rows), *g.shape[1:]), shards=shards)
    return dataclasses.replace(cfg, input=new_input, generate=generate)
