"""The interface every workload implements, driven by spmd.job.

setup (agreed on every rank) -> [prepare -> run] x (warmup + repeats) -> verify -> result.
"""

from __future__ import annotations

import contextlib
import dataclasses
from abc import ABC, abstractmethod
from fractions import Fraction
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..core.cpus import reader_threads
from ..core.errors import ConfigError, UserCodeError, VerificationError
from ..io.blocks import read_block
from ..io.weak import scaled_input
from ..measure.collectives import COLLECTIVES

SCALING_MODES = ("strong", "weak")
RUN_REPEATS = 5  # spmd run's repeats where the config gives none


class Workload(ABC):
    """One kind of SPMD work.

    Attributes:
        name: the config's ``workload`` value.
        Params: frozen dataclass of the workload's ``params`` keys.
    """

    name: ClassVar[str] = "plug-in"
    #: the dataclass ``params`` is built into (None: the config's mapping as it is)
    Params: ClassVar[type | None] = None
    #: How each rank's message bytes grow with its share S/n of the problem: m ~ (S/n)**COMM_GROWTH
    #: (0: fixed-size messages such as reduce's moments; 1: messages proportional to the share).
    COMM_GROWTH: ClassVar[float] = 0.0
    #: The ``params`` fields that name a file the run writes (a section with a ``path``: matmul's and
    #: stencil's ``save``, train's ``checkpoint``).
    OUTPUT_FILES: ClassVar[tuple[str, ...]] = ()
    #: whether ``verify: none`` is allowed (the user's own code: plug-ins, a torch model whose reference is costly)
    MAY_SKIP_VERIFY: ClassVar[bool] = False
    #: whether ``repeats: auto`` may choose the number of repeats (not where it sets how much work the run does)
    AUTO_REPEATS: ClassVar[bool] = True
    #: whether a repeat is made of steps that ``run_steps`` can run under the profiler (config ``capture``)
    STEPPED: ClassVar[bool] = False

    @abstractmethod
    def setup(self, ctx, cfg, comm) -> None:
        """Check inputs and allocate buffers; every rank-local failure agreed via ctx.agree."""

    def prepare(self) -> None:
        """Untimed work before each repeat (poisoning outputs so unwritten data shows)."""

    @abstractmethod
    def run(self, timer) -> None:
        """One repeat, its phases timed with ``timer.phase``/``timer.host_phase``."""

    @abstractmethod
    def verify(self) -> dict:
        """Check every repeat's result against a reference; raise VerificationError if wrong.

        Returns:
            How it was verified (reference used, largest error seen).
        """

    @abstractmethod
    def result(self) -> dict:
        """The workload's answer for report.json (plain JSON types)."""

    def metrics(self, rank_medians: list[dict[str, float]]) -> dict:
        """Derived figures (bandwidths, rates) from each rank's median phase times."""
        return {}

    def problem(self) -> dict:
        """The size of this run, for the scaling model: ``bytes`` (the global problem) and
        ``comm``, the collectives of one repeat as [{'op', 'bytes' per rank}], each with
        optional ``calls`` (times per repeat, default 1), ``growth`` (overrides COMM_GROWTH) and
        ``ranks_power`` (bytes also scale as ranks**ranks_power: -1 for slices of an operand whose
        size does not follow the problem, such as matmul's B); optionally ``sliced``, such an operand that each
        rank also reads and copies in a slice of, {'bytes' (the whole operand), 'parts' (the slices it is read in,
        one a rank)}. The model adds a rank's slice to the bytes of its reads and copies in."""
        return {}

    def progress_note(self, seconds: float) -> str:
        """What a progress line can say of the repeat that just took ``seconds`` (local state only, no
        collective); nothing by default."""
        return ""

    def schedule(self, warmup: int, repeats: int) -> tuple[int, int]:
        """How many warm-up and recorded repeats to run (called after setup; training that
        resumes from a checkpoint runs only the repeats it has left)."""
        return warmup, repeats

    @classmethod
    def resolve_repeats(cls, cfg, default):
        """``cfg`` with ``repeats`` decided: the config's, else ``default``. spmd run's default is RUN_REPEATS,
        spmd scale's ``"auto"``, and a workload without AUTO_REPEATS always gets RUN_REPEATS. ConfigError for
        ``repeats: auto`` asked of such a workload."""
        if cfg.repeats == "auto" and not cls.AUTO_REPEATS:
            raise ConfigError(
                f"repeats: auto: the repeats of workload {cfg.workload} set how much work it does "
                f"(params.steps each): give a number"
            )
        if cfg.repeats is not None:
            return cfg
        chosen = default if default != "auto" or cls.AUTO_REPEATS else RUN_REPEATS
        return dataclasses.replace(cfg, repeats=chosen)

    @classmethod
    def strong_config(cls, cfg, factor):
        """The config at ``factor`` (a Fraction) times the ranks, for strong scaling: the same
        global problem (the config itself, unless the workload states its size per rank)."""
        return cfg

    @classmethod
    def weak_config(cls, cfg, factor):
        """The config of ``factor`` (a Fraction) times the problem, for weak scaling.

        By default the input grows by rows (see ``io.weak.scaled_input``: generated, or copies of your own).
        """
        return scaled_input(cfg, factor)

    @classmethod
    def share_config(cls, cfg, factor):
        """The config whose one rank holds what each rank of a strong run at ``factor`` (a Fraction) times the ranks
        holds: by default the input's rows over ``factor`` (``spmd scale --shares``: a one-GPU sweep measuring the
        local work of the rank counts it cannot run)."""
        return cls.weak_config(cfg, 1 / Fraction(factor))

    @classmethod
    def scaled_config(cls, cfg, mode: str, factor):
        """``strong_config`` or ``weak_config`` (``mode``, one of SCALING_MODES) at ``factor``."""
        if mode not in SCALING_MODES:
            raise ValueError(f"scaling mode {mode!r} is not one of {', '.join(SCALING_MODES)}")
        return cls.strong_config(cfg, factor) if mode == "strong" else cls.weak_config(cfg, factor)

    def run_steps(self, window) -> None:
        """After the timed repeats (``STEPPED`` workloads): ``window.length`` more steps, untimed and unchecked,
        ``window.before(i)`` and ``window.after(i)`` around step ``i`` (spmd.report.capture.window)."""
        raise NotImplementedError(f"{type(self).__qualname__} runs no steps of its own")

    @classmethod
    def output_files(cls, cfg) -> list[str]:
        """The paths of the files a run of ``cfg`` writes besides its report (``OUTPUT_FILES``)."""
        sections = (getattr(cfg.params, name) for name in cls.OUTPUT_FILES)
        return [section.path for section in sections if section is not None]

    @classmethod
    def with_output_tag(cls, cfg, tag: str):
        """``cfg`` with every file of ``output_files`` named ``stem-TAG.suffix``: jobs of a series that
        may run at once each write their own."""
        changes = {}
        for name in cls.OUTPUT_FILES:
            section = getattr(cfg.params, name)
            if section is not None:
                path = Path(section.path)
                changes[name] = dataclasses.replace(
                    section, path=str(path.with_name(f"{path.stem}-{tag}{path.suffix}"))
                )
        return dataclasses.replace(cfg, params=dataclasses.replace(cfg.params, **changes)) if changes else cfg

    @classmethod
    def load_libraries(cls, cfg) -> None:
        """Load what the workload's own libraries must load for themselves, before spmd opens its communicator
        (whose NCCL would otherwise be the one a later library gets under the same name); nothing by default."""

    @classmethod
    def brief_config(cls, cfg):
        """The config of a brief run kept only for what follows its one repeat (the sweep's capture pass, whose
        repeat only warms the captured steps): by default the config itself."""
        return cfg

    @classmethod
    @contextlib.contextmanager
    def sweep_session(cls, ctx, cfg, sizes: list[int]):
        """What a sweep's runs share in one process: entered by every rank of the launch (``ctx``) at once before the
        first run, left after the last; ``sizes``: the sweep's rank counts. A rank that joins only a later size has
        then loaded what its first run loads cold (the workload's libraries, its GPU's context) beside the others,
        not alone while they wait. A failure while warming meets the run that needs it, which names it. By default
        the workload's libraries."""
        with contextlib.suppress(Exception):  # met again, and named, by the first run
            cls.load_libraries(cfg)
        yield

    @classmethod
    def extra_inputs(cls, cfg) -> list:
        """Datasets beyond ``input`` that the workload reads, as (InputConfig, GenerateConfig
        or None): ``spmd generate`` writes those with a generate section (matmul's B)."""
        return []

    def check_input_finite(self) -> None:
        """After a failed verification: read this rank's input again and raise InputError naming the
        rows that hold NaN or infinity, if any (workloads that read per repeat implement it)."""

    def save(self) -> str | None:
        """Write the verified result where ``params.save`` says (collective); the path, or None."""
        return None

    def input_engines(self) -> list[dict] | None:
        """What read each piece of this rank's input (report.json ``io``): that of ``self.rows`` when the
        workload reads through ``spmd.InputRows``, else the blocks read by ``read_input_block``; None where
        nothing says."""
        engines = getattr(getattr(self, "rows", None), "engines", None)
        if callable(engines):
            return engines()
        noted = getattr(self, "_block_engines", None)
        return [{"source": source, "engine": engine} for source, engine in noted.items()] if noted else None

    def read_input_block(self, source: tuple[str, str], block, out, out_sel=None) -> None:
        """``block`` of ``source`` (path, dataset) into ``out`` (io.blocks.read_block) with the config's ``io``
        engine on this rank's reader threads and its ``check_finite``; the engine is noted for report.json."""
        cfg = self.cfg
        engine = read_block(
            *source,
            block,
            out,
            out_sel,
            check_finite=cfg.check_finite,
            io=cfg.io,
            threads=reader_threads(cfg.io.threads, self.ctx.local_size, self.ctx.local_rank),
        )
        self.__dict__.setdefault("_block_engines", {})[f"{source[0]}:{source[1]} {block.describe()}"] = engine

    @classmethod
    def expected_attrs(cls, dataset) -> dict:
        """Reference answers ``spmd generate`` stores as attributes of a new dataset."""
        return {}

    @classmethod
    def finish_input(cls, cfg, dataset) -> dict:
        """``spmd generate`` calls this on the main input it just wrote, file still open: write
        companion datasets (train's labels) and return the attributes to store."""
        return cls.expected_attrs(dataset)

    @classmethod
    def input_recipe(cls, cfg) -> dict:
        """Settings beyond ``generate`` that the generated main input depends on: a file made
        with other values is out of date."""
        return {}

    def close(self) -> None:
        """Release buffers."""


def read_then_wait(ctx, timer, read) -> None:
    """The ``read`` phase (``read()``: file to host memory), then ``wait``: a barrier, so ranks that
    finish reading at different times show as input imbalance instead of inflating ``comm``."""
    with timer.host_phase("read"):
        read()
    with timer.host_phase("wait"):
        ctx.comm.Barrier()


def checked_problem(problem, who: str) -> dict:
    """``problem()``'s answer, checked as the scaling model reads it; UserCodeError naming ``who`` (the
    workload's class) and what is wrong. A plug-in's mistake shows here, not as a crash of ``spmd scale``."""

    def wrong(what: str):
        return UserCodeError(f"{who}.problem() returned {what} (see docs/plugins.md, 'The scaling model')")

    if not isinstance(problem, dict) or set(problem) - {"bytes", "comm", "sliced"}:
        return_what = f"keys {sorted(map(str, problem))}" if isinstance(problem, dict) else type(problem).__name__
        raise wrong(f"{return_what}: expected a dict with 'bytes' and 'comm' (and optionally 'sliced')")
    if "bytes" in problem and not (_number(problem["bytes"]) and problem["bytes"] >= 0):
        raise wrong(f"bytes = {problem['bytes']!r}: expected a number >= 0")
    sliced = problem.get("sliced")
    if "sliced" in problem and not (
        isinstance(sliced, dict)
        and set(sliced) == {"bytes", "parts"}
        and _number(sliced["bytes"])
        and sliced["bytes"] >= 0
        and isinstance(sliced["parts"], (int, np.integer))
        and not isinstance(sliced["parts"], bool)
        and sliced["parts"] >= 1
    ):
        raise wrong(f"sliced = {sliced!r}: expected {{'bytes': >= 0, 'parts': an integer >= 1}}")
    items = problem.get("comm", [])
    if not isinstance(items, list):
        raise wrong(f"comm = {type(items).__name__}: expected a list of {{'op', 'bytes'}}")
    for i, item in enumerate(items):
        if (
            not isinstance(item, dict)
            or item.get("op") not in COLLECTIVES
            or not _number(item.get("bytes"))
            or item["bytes"] < 0
        ):
            raise wrong(f"comm[{i}] = {item!r}: expected {{'op': one of {', '.join(COLLECTIVES)}, 'bytes': >= 0}}")
        extra = set(item) - {"op", "bytes", "calls", "growth", "ranks_power"}
        if (
            extra
            or not all(_number(item.get(k, 1)) for k in ("calls", "growth", "ranks_power"))
            or item.get("calls", 1) < 0
        ):
            raise wrong(f"comm[{i}] = {item!r}: optional keys are calls (>= 0), growth and ranks_power (numbers)")
    return problem


def _number(value) -> bool:
    return (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, bool)
        and bool(np.isfinite(value))
    )


def same_every_repeat(sums: list[float], what: str) -> None:
    """Every repeat must give bit-identical results (float64 ``sums`` of each): one that moves is a
    race or unwritten memory. Run it under ``ctx.agree``: the sums are each rank's own."""
    if any(s != sums[0] for s in sums[1:]) or not np.isfinite(sums[0]):
        raise VerificationError(f"the repeats gave different {what} (float64 sums {sums}): a race or unwritten memory")


def require_one_dataset(cfg, workload: str, verified_by: str) -> None:
    """For workloads that read one dataset (``input.path``, not shards) and verify by
    recomputing: refuse shard inputs and ``verify: attrs`` (they store no answers)."""
    if cfg.input.path is None:
        raise ConfigError(f"input.shards: {workload} reads one dataset (input.path)")
    if cfg.verify == "attrs":
        raise ConfigError(
            f"verify: attrs: {workload} stores no answers; it verifies by {verified_by} (use auto or full)"
        )
