"""Weak scaling's inputs: ``factor`` times the rows, in files of their own, never over the user's.

- An input spmd generates (missing, or written by ``spmd generate``): the generate section grows
  (``shape[0]`` x factor, or ``shards`` x factor) and the files go to ``weak-x<factor>/`` beside the base input
  (``data/x.h5`` -> ``data/weak-x2/x.h5``).
- The user's own input (a file spmd did not generate): nothing is written beside or over it. Copies that
  repeat its rows go under the config's ``output``: ``<output>/weak-inputs/x<factor>/<name>`` (a shard input:
  ``shard-000.h5``, ... each a copy of one of the user's shards, in order, round and round). No generate
  section is needed, and one that is there does not apply to them (``generate.copy_of`` describes them).
"""

from __future__ import annotations

import dataclasses
import glob
import os
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..core.config import GenerateConfig
from ..core.errors import ConfigError, InputError, one_line
from ..core.units import fmt_bytes
from .generate import generated_by_spmd, source_layout

WEAK_INPUTS = "weak-inputs"


def input_files(inp) -> list[str]:
    """The files of an input section as they are now: its path, or its shards (a glob expanded, sorted)."""
    if inp.path is not None:
        return [inp.path]
    if len(inp.shards) == 1 and glob.has_magic(inp.shards[0]):
        return sorted(glob.glob(inp.shards[0]))
    return list(inp.shards)


def input_owner(inp) -> str:
    """'missing' (no file yet), 'spmd' (every file written by spmd generate) or 'user' (any other)."""
    existing = [p for p in input_files(inp) if os.path.lexists(p)]
    if not existing:
        return "missing"
    return "spmd" if all(generated_by_spmd(p) for p in existing) else "user"


def scaled_input(cfg, factor: Fraction):
    """``cfg`` with ``factor`` times the rows, in files of their own (see the module's docstring).

    Raises:
        ConfigError: a generated input without a generate section, an explicit list of generated shards,
            or a factor that does not give whole rows or shards.
        InputError: the user's input cannot be read.
    """
    factor = Fraction(factor)
    if factor == 1:
        return cfg
    if input_owner(cfg.input) == "user":
        return _copies(cfg, factor)
    g = cfg.generate
    if g is None:
        raise ConfigError(
            "weak scaling generates a larger input for each rank count: the config needs a "
            "generate section (shape, dtype, seed), or an input of your own to repeat"
        )
    tag = _tag(factor)
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
            raise ConfigError(
                "input.shards: weak scaling needs input.path or a shard glob (with "
                "generate.shards), not a list of files"
            )
        count = (g.shards or 1) * factor
        if count.denominator != 1:
            raise ConfigError(f"generate.shards: {g.shards} x {factor} is not a whole number of shards")
        shards = int(count)
        source = Path(patterns[0])
        new_input = dataclasses.replace(cfg.input, shards=(str(source.parent / tag / source.name),))
    generate = dataclasses.replace(g, shape=(int(rows), *g.shape[1:]), shards=shards)
    return dataclasses.replace(cfg, input=new_input, generate=generate)


def _copies(cfg, factor: Fraction):
    """The config of copies of the user's own input, ``factor`` times its rows (or shards), under ``output``."""
    inp = cfg.input
    folder = Path(cfg.output) / WEAK_INPUTS / f"x{float(factor):g}"
    sources = input_files(inp)
    layouts = [source_layout((path, inp.dataset)) for path in sources]
    if len({(shape, dtype) for _, shape, dtype in layouts}) > 1:
        raise InputError(f"input.shards: {one_line(inp.shards[0])}: the shards' rows differ in shape or dtype")
    rows, row_shape, dtype = layouts[0]
    if inp.path is not None:
        total = rows * factor
        if total.denominator != 1:
            raise ConfigError(f"input.path: {rows} rows x {factor} is not a whole number of rows for weak scaling")
        new_input = dataclasses.replace(inp, path=str(folder / Path(inp.path).name))
        shards, total = None, int(total)
    else:
        count = len(sources) * factor
        if count.denominator != 1:
            raise ConfigError(
                f"input.shards: {len(sources)} shards x {factor} is not a whole number of shards for weak scaling"
            )
        shards = int(count)
        total = sum(layouts[i % len(layouts)][0] for i in range(shards))
        new_input = dataclasses.replace(inp, shards=(str(folder / "shard-*.h5"),))
    kind = dtype.name if dtype.name in ("float32", "float64") else "float32"  # the copies keep the source's
    generate = GenerateConfig(shape=(total, *row_shape), dtype=kind, shards=shards, copy_of=tuple(sources))
    return dataclasses.replace(cfg, input=new_input, generate=generate)


def _tag(factor: Fraction) -> str:
    return f"weak-x{float(factor):g}"


def copies_note(cfg) -> str | None:
    """Where a weak config's copies of the user's input go and how big they are (None: it makes none)."""
    g = cfg.generate
    if g is None or not g.copy_of:
        return None
    _, row_shape, dtype = source_layout((g.copy_of[0], cfg.input.dataset))
    nbytes = g.shape[0] * int(np.prod(row_shape, dtype=np.int64)) * dtype.itemsize
    more = f" and {len(g.copy_of) - 1} more" if len(g.copy_of) > 1 else ""
    return (
        f"weak scaling repeats the rows of your input {one_line(g.copy_of[0])}{more} (never written) in "
        f"{one_line(cfg.input.path or cfg.input.shards[0])}: {g.shape[0]} rows, {fmt_bytes(nbytes)}"
    )
