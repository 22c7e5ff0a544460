"""The straggler fault matrix (bench/programs/straggler_matrix.py): a slow rank made on purpose wherever a step can be
slow, on four models users bring (no buffers, BatchNorm, a GRU, GPT-2 tiny), on rank 0 and on the last rank, with and
without ``--capture``, verified as users run; clean runs by turns beside them. Published: the share of slowed runs
whose straggler is the slowed rank, of those naming a cause the share naming the expected one (a cause not
determined counted apart), the share of clean runs naming none, and the step without the straggler (spmd's
estimate) against the same launch's clean runs. At 2 ranks and, where the launch has them, 3; and 2 ranks on two
SLURM nodes where ci/slurm/start.sh runs its pair. On GPUs, a stated subset of the matrix (``gpu_subset``)."""

from __future__ import annotations

import json
import statistics

from ..env import CaseFailed
from ..records import Measure
from . import Case
from .predict import save_inputs

TARGETS = {"right rank": 98.0, "right cause": 90.0, "clean runs naming none": 100.0}
SLOWED_SHARE = 0.5  # the slowness as a share of the model's clean step (at least 5 ms)


MODELS = ("mlp", "bn", "gru", "gpt2-tiny")
SLURM_MODELS = ("bn", "gru", "gpt2-tiny")  # on two nodes: buffers broadcast, a recurrent model, a transformer
CLEAN = 3  # clean runs in each launch (a model, with or without capture): 24 at each rank count
GPU_CLEAN = 10  # the GPU subset's clean runs: each of its five models with and without capture
GPU_SECONDS = 420  # the GPU subset starts no run after this: its rows so far come back within one device call


def matrix(env) -> list[Measure]:
    """One launch a model, capture setting and rank count (a process that ran some fifty jobs with profiler captures
    crashed in PyTorch's profiler, twice in two full matrices; one relaunch of a launch that crashed, counted)."""
    return _matrix(env, [2, 3] if env.ranks >= 3 else [2])


def matrix_3(env) -> list[Measure]:
    """The matrix's 3-rank half alone: on a host with a core for each rank (the 2-core machine time-shares 3)."""
    return _matrix(env, [3])


def _matrix(env, counts: list[int]) -> list[Measure]:
    rows, relaunched = [], 0
    for n in counts:
        for model in ("bn",) if env.quick else MODELS:
            for capture in ("no", "yes"):
                args = _args(env, n, "matrix", model, capture)
                found, again = _launched(lambda: env.program("straggler_matrix.py", *args, ranks=n, timeout=1200))
                rows, relaunched = rows + found, relaunched + again
    out = []
    for n in sorted({r["ranks"] for r in rows}):
        mine = [r for r in rows if r["ranks"] == n]
        out += figures(mine, f"{n} CPU ranks", relaunched)
    return out


def two_nodes(env) -> list[Measure]:
    """The matrix with its 2 ranks on two SLURM nodes (ci/slurm/start.sh's namespaced pair, gloo across their
    link), one launch a model and capture setting: BatchNorm's buffer broadcast and a GRU cross the link."""
    # one compute thread a rank: both "nodes" share this machine's cores (each would take them all)
    single = {"OMP_NUM_THREADS": "1"}
    rows, relaunched = [], 0
    for model in ("bn",) if env.quick else SLURM_MODELS:
        for capture in ("no", "yes"):
            args = _args(env, 2, "matrix-slurm", model, capture)
            found, again = _launched(
                lambda: env.srun(*args, nodes=2, per_node=1, env=single, program="straggler_matrix.py", timeout=1200)
            )
            rows, relaunched = rows + found, relaunched + again
    return figures(rows, "2 CPU ranks on two SLURM nodes", relaunched)


def gpu_subset(env) -> list[Measure]:
    """The stated GPU subset (straggler_matrix.py's ``GPU_SUBSET``): 14 slowed runs at 2 ranks, one GPU each, NCCL,
    BatchNorm with and without SyncBatchNorm, GPT-2 tiny, the GRU and the MLP, every cause at least once (a slower
    device made by another process on the slow rank's GPU), and 10 clean runs by turns (each model, with and without
    capture)."""
    args = ["--ranks", 2, "--data", env.work / "matrix-gpu", "--share", SLOWED_SHARE, "--subset", "gpu"]
    args += ["--capture", "both", "--clean", 2 if env.quick else GPU_CLEAN, "--max-seconds", GPU_SECONDS]
    args += ["--keep", env.work / "matrix-gpu-misses"]
    rows, relaunched = _launched(lambda: env.program("straggler_matrix.py", *args, ranks=2, timeout=1200))
    # each miss's report.json beside the records, gzipped (its evidence, read again off the GPU); a row names its own
    kept = {r["kept"]: env.work / "matrix-gpu-misses" / f"{r['kept']}.json" for r in rows if r.get("kept")}
    inputs = save_inputs(env, "gpu-subset", kept, "stragglers") if kept else {}
    return figures(rows, "2 GPUs (the GPU subset)", relaunched, inputs)


def _args(env, ranks: int, folder: str, model: str, capture: str) -> list:
    """straggler_matrix.py's arguments for one launch: a model and capture setting at ``ranks`` ranks."""
    args = ["--ranks", ranks, "--data", env.work / folder, "--share", SLOWED_SHARE, "--models", model]
    return args + ["--capture", capture, "--clean", 1 if env.quick else CLEAN]


def _launched(launch) -> tuple[list[dict], int]:
    """The rows a launch printed, and 1 where it crashed once and was launched again (PyTorch's profiler crashing in
    a process of many captures), else 0."""
    try:
        done, again = launch(), 0
    except CaseFailed:
        done, again = launch(), 1
    return [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")], again


def figures(rows: list[dict], where: str, relaunched: int = 0, inputs: dict | None = None) -> list[Measure]:
    """The matrix's shares and the step estimate's ratio, with every run's row kept in the records' params (and
    ``inputs``: {a row's ``kept``: its report.json gzipped beside the records})."""
    slowed = [r for r in rows if r["where"] is not None]
    clean = [r for r in rows if r["where"] is None]
    named = [r for r in slowed if r["named_rank"] is not None]
    with_cause = [r for r in slowed if r["named_rank"] == r["slow_rank"] and r["cause"]]
    undetermined = [r for r in slowed if r["named_rank"] == r["slow_rank"] and not r["cause"]]
    out = []

    def share(case: str, subject: str, hits: int, of: int, target: float | None, extra: dict | None = None):
        params = {"hits": hits, "of": of, **(extra or {})}
        out.append(Measure(case, subject, 100.0 * hits / of if of else 0.0, "share", "%", params=params))
        if target is not None:
            out.append(Measure(case, "the issue's target", target, "share", "%", "ceiling"))

    every = {"rows": rows, "relaunched": relaunched, **({"inputs": inputs} if inputs else {})}  # ("runs": bench's)
    right = sum(r["named_rank"] == r["slow_rank"] for r in slowed)
    share(f"straggler fault matrix, {where}: right rank", "spmd", right, len(slowed), TARGETS["right rank"], every)
    good = sum(r["cause"] == r["expected_cause"] for r in with_cause)
    share(f"straggler fault matrix, {where}: right cause", "spmd", good, len(with_cause), TARGETS["right cause"])
    share(f"straggler fault matrix, {where}: cause not determined", "spmd", len(undetermined), len(slowed), None)
    if clean:
        none = sum(r["named_rank"] is None for r in clean)
        share(f"straggler fault matrix, {where}: clean runs naming none", "spmd", none, len(clean), 100.0)
    # the estimate against the same launch's clean runs (a launch: one model and capture setting), by turns: their
    # step, and their step less the ranks' own waits for each other (what the estimate leaves out by its definition)
    right = [r for r in named if r["named_rank"] == r["slow_rank"] and r["step_without_s"]]

    def clean_median(r: dict, key: str) -> float | None:
        mine = _same(clean, r, key)
        return statistics.median(mine) if mine else None

    against = {
        "the clean step": lambda r: clean_median(r, "step_s"),
        "the clean step less its ranks' own waits": lambda r: clean_median(r, "own_step_s"),
        # what removing the slowness gives in the same run: its step less the slowness made (the estimate's own
        # accuracy, apart from how a step with a sleeping rank differs from a clean one on shared cores)
        "the slowed run's step less the slowness made": lambda r: (
            (r["step_s"] - r["seconds"]) if r["seconds"] else None
        ),
    }
    for name, base in against.items():
        pairs = [(r, base(r)) for r in right]
        ratios = [r["step_without_s"] / b for r, b in pairs if b]
        if not ratios:
            continue
        q = statistics.quantiles(ratios, n=10) if len(ratios) > 1 else [ratios[0]] * 9
        by_model = {
            m: _within([r["step_without_s"] / b for r, b in pairs if b and r["model"] == m])
            for m in sorted({r["model"] for r, b in pairs if b})
        }
        params = {"estimates": len(ratios), "p10": q[0], "p90": q[-1], "within_10_percent": _within(ratios)}
        out.append(
            Measure(
                f"straggler fault matrix, {where}: the step without the straggler against {name}",
                "spmd's estimate",
                statistics.median(ratios),
                "ratio",
                "x",
                params={**params, "within_10_percent_by_model": by_model},
            )
        )
    # the clean runs' own spread by turns, what 10% is held to: where a launch ran two or more of a model and capture
    # setting (one alone is its own median and says nothing)
    paired = [c for c in clean if len(_same(clean, c, "step_s")) >= 2]
    if paired and all("own_step_s" in c for c in clean):
        spread = [c["step_s"] / statistics.median(_same(clean, c, "step_s")) for c in paired]
        out.append(
            Measure(
                f"straggler fault matrix, {where}: a clean run's step against its launch's median clean step",
                "the clean runs themselves",
                statistics.median(spread),
                "ratio",
                "x",
                params={"runs_compared": len(spread), "within_10_percent": _within(spread)},
            )
        )
    return out


def _same(clean: list[dict], r: dict, key: str) -> list[float]:
    """``key`` of the clean runs of ``r``'s launch (its model and capture setting), where they recorded it."""
    return [c[key] for c in clean if (c["model"], c["capture"]) == (r["model"], r["capture"]) and key in c]


def _within(ratios: list[float]) -> float:
    return sum(abs(x - 1) <= 0.10 for x in ratios) / len(ratios)


def cases(env) -> list[Case]:
    return [
        Case("the straggler fault matrix", matrix, needs=("torch", "transformers"), runs=1),
        Case("the straggler fault matrix at 3 ranks", matrix_3, needs=("torch", "transformers", "ranks3"), runs=1),
        Case(
            "the straggler fault matrix, GPU subset",
            gpu_subset,
            needs=("gpu", "ranks2", "torch", "transformers"),
            runs=1,
        ),
        Case(
            "the straggler fault matrix on two SLURM nodes",
            two_nodes,
            needs=("torch", "transformers", "slurm2"),
            runs=1,
        ),
    ]
