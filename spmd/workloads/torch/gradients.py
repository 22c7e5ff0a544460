"""Every rank's own gradient, as it entered the allreduce, against the one-process reference's: the check with power.

After the allreduce one rank's error is averaged with the others' and hidden; before it, each rank's gradient of
its own micro-batches at a checked step is compared element by element with the reference's computation of the
same micro-batches from the same parameters (the run's own at that step), with rank r's thread count on a CPU.
Both sides run those steps with deterministic kernels, so they compute the same operations on the same values:
what they may differ by is measured on this run by computing every rank's gradient twice. Where the two agree
bit for bit the bound is a few float32 roundings (FLOOR); where a kernel without a deterministic form makes them
differ, BOUND_FACTOR times the largest difference in the tensor. Both relative to |element| + the tensor's rms.
"""

from __future__ import annotations

import numpy as np

from ...core.errors import VerificationError

BOUND_FACTOR = 16  # where the reference's two computations differ: 16x the largest difference in the tensor
FLOOR = 2.0**-20  # where they agree bit for bit: a few float32 roundings
CAUGHT = 0.01  # the change of one element the check is asked to catch (a corrupt fault's 1%)
QUANTILES = (0.5, 0.9, 0.99)


def gather_local_gradients(ctx, stepper) -> dict | None:
    """Every rank's checked-step gradients on rank 0 (collective): {"steps": {step: [per rank {parameter: float32
    array}]}, "threads": [per rank]}; None elsewhere, and everywhere when no step was checked. Sent bucket by
    bucket with MPI as the ranks' DDP laid them out, once every rank knows the layouts agree."""
    import torch

    if not stepper.checked_steps:  # the same on every rank: none was checked
        return None
    comm = ctx.comm
    steps = sorted(stepper.local_gradients)
    layout = {k: [names for _, (_, names) in sorted(stepper.local_gradients[k].items())] for k in steps}
    layouts = comm.allgather(layout)
    differ = next((r for r, other in enumerate(layouts) if other != layouts[0]), None)
    if differ is not None:  # raised on every rank alike, before any gradient is sent
        raise ctx.collective_error(
            VerificationError, differ, "its DDP laid its gradient buckets out unlike rank 0's at the checked steps"
        )
    threads = comm.gather(torch.get_num_threads(), root=0)
    mine = {k: [_host(torch, t) for _, (t, _) in sorted(stepper.local_gradients[k].items())] for k in steps}
    if ctx.rank != 0:
        for k in steps:
            for flat in mine[k]:
                comm.Send(flat, dest=0, tag=k)
        return None
    out = {"threads": threads, "steps": {k: [_named(mine[k], layout[k])] for k in steps}}
    for r in range(1, ctx.size):
        for k in steps:
            received = [np.empty_like(flat) for flat in mine[k]]
            for flat in received:
                comm.Recv(flat, source=r, tag=k)
            out["steps"][k].append(_named(received, layout[k]))
    return out


def _host(torch, t) -> np.ndarray:
    """A bucket's flat gradient as a NumPy array (bfloat16 and float16 widened to float32, exactly)."""
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()
    return np.ascontiguousarray(t.numpy())


def _named(buckets: list, layout: list) -> dict:
    """{parameter: flat array} from flat buckets (each the concatenation of its parameters' gradients)."""
    out = {}
    for flat, names in zip(buckets, layout):
        offset = 0
        for name, size in names:
            out[name] = flat[offset : offset + size]
            offset += size
    return out


class Bound:
    """The bound on |run - reference| of each element of one tensor, from the reference computed twice: an element
    may differ by ``level`` x (|reference| + the tensor's rms), ``level`` = FLOOR where the two computations agree
    bit for bit, else BOUND_FACTOR x the largest difference between them in units of the same scale."""

    def __init__(self, reference: np.ndarray, second: np.ndarray):
        reference = self.reference = reference.astype(np.float64)
        self.rms = float(np.sqrt(np.mean(reference**2))) if reference.size else 0.0
        self.scale = np.abs(reference) + self.rms + np.finfo(np.float64).tiny
        self.noise = float(np.max(np.abs(second - reference) / self.scale)) if reference.size else 0.0
        self.level = BOUND_FACTOR * self.noise if self.noise > 0 else FLOOR

    def excess(self, run: np.ndarray) -> np.ndarray:
        """Each element's error in units of its bound (beyond 1: not rounding)."""
        err = np.abs(run.astype(np.float64) - self.reference) / self.scale
        return np.where(np.isfinite(err), err / self.level, np.inf)

    def smallest_caught(self) -> np.ndarray:
        """For each non-zero element, the smallest relative change of it alone that exceeds the bound."""
        nonzero = self.reference != 0
        return self.level * self.scale[nonzero] / np.abs(self.reference[nonzero])


def judge(run: dict, reference: dict, second: dict, what: str) -> tuple[dict, str | None]:
    """``run`` (name -> array) against ``reference`` with bounds from ``second``: a summary for the report and the
    first element beyond its bound described (None when all are within)."""
    worst, worst_noise, failure = 0.0, 0.0, None
    caught = []
    for name, ref in reference.items():
        bound = Bound(ref, second[name])
        got = run[name].reshape(ref.shape) if name in run else np.zeros_like(ref)
        excess = bound.excess(got)
        worst_noise = max(worst_noise, bound.noise)
        if excess.size:
            worst = max(worst, float(np.max(excess)))
            caught.append(bound.smallest_caught())
        bad = excess > 1
        if bad.any() and failure is None:
            i = int(np.argmax(excess.reshape(-1)))
            failure = (
                f"{what} {name} element {i}: {float(got.reshape(-1)[i])!r} in the run, "
                f"{float(ref.reshape(-1)[i])!r} in the one-process reference: {float(excess.reshape(-1)[i]):.3g}x "
                f"the bound rounding allows ({int(bad.sum())} of {bad.size} elements beyond it)"
            )
    every = np.concatenate(caught) if caught else np.zeros(0)
    summary = {
        "largest_error_in_bounds": worst,
        "measured_rounding": worst_noise,
        "smallest_change_caught": {f"q{int(q * 100)}": float(np.quantile(every, q)) for q in QUANTILES}
        if every.size
        else None,
        "share_caught_at_1_percent": float(np.mean(every <= CAUGHT)) if every.size else None,
    }
    return summary, failure


def check_ranks(reference, window, states: dict, gathered: dict) -> dict:
    """Rank 0: every rank's gradient at each checked step against the reference's (``reference.rank_gradients``
    from the run's parameters at that step, twice for the bound), or VerificationError naming the step, the rank
    and the element."""
    per_step = []
    threads = gathered["threads"]
    for step, runs in sorted(gathered["steps"].items()):
        expected = reference.rank_gradients(window, step, states[step], threads)
        second = reference.rank_gradients(window, step, states[step], threads)
        for rank, run in enumerate(runs):
            summary, failure = judge(run, expected[rank], second[rank], f"step {step}, rank {rank}'s gradient of")
            if failure:
                raise VerificationError(
                    f"{failure}: rank {rank} computed a gradient its micro-batches do not give (before the allreduce)"
                )
            per_step.append({"step": step, "rank": rank, **summary})
    return summarize(per_step)


def summarize(checks: list[dict]) -> dict:
    """The checks' worst case over steps and ranks, and each one."""
    known = [c for c in checks if c["smallest_change_caught"]]
    return {
        "largest_error_in_bounds": max((c["largest_error_in_bounds"] for c in checks), default=0.0),
        "measured_rounding": max((c["measured_rounding"] for c in checks), default=0.0),
        "smallest_change_caught": {
            q: max(c["smallest_change_caught"][q] for c in known) for q in known[0]["smallest_change_caught"]
        }
        if known
        else None,
        "share_caught_at_1_percent": min((c["share_caught_at_1_percent"] for c in known), default=None),
        "checks": checks,
    }
