"""What verifies a torch run: the replicas identical at the end, and at the checked steps (``schedule``) every rank's
own gradient and the optimizer's update, checked as the run took them (``checks``). Where no step can be checked as
it runs (ddp-graph's replays run no Python; SyncBatchNorm's gradient on a rank depends on every rank's rows) the
first step's averaged gradient is compared with the one-process reference (``reference``); under ddp-graph the
parameters after the last step too, against the whole training again in one process.

Those parameters are compared by each tensor's relative RMS error, within SPREAD_FACTOR times the difference
between two references, the second started one rounding step away and dividing the ranks' gradients after their
sum: what rounding alone does to this training (a model with ties or max-pooling, Adam on near-zero gradients,
BLAS results that depend on memory alignment turn rounding into differences that grow step by step). Where that
spread is beyond MAX_SPREAD, rounding alone carries the training too far for the comparison to tell anything:
the parameters are reported not checked.
"""

from __future__ import annotations

import copy

import numpy as np

from ...core.errors import VerificationError
from ...core.memory import free_device_memory
from .dist import group
from .gradients import BOUND_FACTOR, FLOOR, judge, summarize
from .inputs import read_all
from .reference import Reference, host_tensors
from .schedule import escape_shares, steps_words

SPREAD_FACTOR = 10  # the parameters may differ from the reference by 10x what two roundings of it differ by
MAX_SPREAD = 1e-3  # beyond it the two references differ by more than 0.1%: the parameters are not checked
DETERMINISTIC = "deterministic (PyTorch's deterministic algorithms, cuDNN's, SDPA's math backend)"


def verify_torch(w) -> dict:
    """The run of TorchWorkload ``w`` verified on every rank (collective): the replicas identical, the checks made at
    the checked steps as the run took them (checks.StepChecks, gathered here), and under ddp-graph and SyncBatchNorm
    the first step's averaged gradient against the one-process reference; report.json's ``verification``."""
    ctx = w.ctx
    # parameters only: a rank's buffers hold its own last forward's update until DDP broadcasts rank 0's
    differs = ctx.comm.allgather(ctx.agree(replicas_diverged, w.torch, w.trainer.module))
    if any(differs):
        raise ctx.collective_error(
            VerificationError,
            differs.index(True),
            f"parameters differ from rank 0's after {w.trainer.step} steps: the replicas diverged",
        )
    checks = w.trainer.checks
    results = ctx.comm.gather(checks.results if checks else [], root=0)
    mine = {"checks": 0.0, "checked_steps": 0.0, "parts": {}, "setup": 0.0}
    if checks:
        mine = {
            "checks": checks.seconds,
            "checked_steps": w.trainer.checked_seconds,
            "parts": checks.parts,
            "setup": checks.setup_seconds,
        }
    timing = ctx.comm.gather(mine, root=0)
    outcome = ctx.agree(summarize_checks, w, results, timing, root_only=True)
    return {"replicas_identical": True, **outcome}


def replicas_diverged(torch, module) -> bool:
    """Whether this rank's parameters differ from rank 0's in any bit (collective): rank 0's broadcast over
    torch.distributed, one flat buffer per dtype, compared on the device (no copy to the host)."""
    import torch.distributed as dist

    differs = False
    for dtype in sorted({t.dtype for t in module.parameters()}, key=str):
        mine = torch.cat([t.detach().reshape(-1) for t in module.parameters() if t.dtype == dtype])
        theirs = mine.clone()
        dist.broadcast(theirs, 0, group=group())  # rank 0 of the launch, the job's first
        differs = differs or not torch.equal(mine.view(torch.uint8), theirs.view(torch.uint8))
    return differs


def taken_again(results: list[list[dict]]) -> list[dict]:
    """The checked steps whose update check took the optimizer's step a second time and passed on it (the first
    recomputation differed from the run, the second agreed: the check's own copy moved, not the run), by rank."""
    return [
        {
            "rank": rank,
            "step": r["step"],
            "first_recomputation_difference": r["update"]["first_recomputation_difference"],
        }
        for rank, steps in enumerate(results)
        for r in steps
        if "first_recomputation_difference" in r["update"]
    ]


def summarize_checks(w, results: list[list[dict]], timing: list[dict]) -> dict:
    """Rank 0: report.json's words and figures for what was checked (the reference ran only where the steps were not
    checked as they ran: ddp-graph, SyncBatchNorm's gradients, or no checked step asked for)."""
    p, ctx, st = w.params, w.ctx, w.trainer
    total = st.step
    steps = sorted({r["step"] for rank in results for r in rank})
    out: dict = {"checked_steps": steps, "steps": total, "seed": w.check_plan.seed if w.check_plan.active else None}
    gradients = parameters = None
    if steps:
        escape = escape_shares(steps, total, (1, 2, 5, p.steps))
        out["escape_chance"] = {
            "what": "for a change on k consecutive steps starting at a random step: the share of starts whose steps "
            "were none of them checked (k -> share); a change from some step on to the end is always caught, the "
            "run's last step being checked",
            "by_steps": escape,
        }
        out["budget"] = {
            "share": p.verify_budget,
            "what": "the checks drawn at random are made while all the checks stay within this share of the run's "
            "wall time so far, set-up included (the first and the last steps' always; 1: every draw)",
            "draws_left_out": w.budget.skipped,
        }
        out["check_seconds"] = max(t["checks"] for t in timing)  # the slowest rank's checks
        out["checked_steps_seconds"] = max(t["checked_steps"] for t in timing)  # the checked steps with their checks
        # set-up's share of verification (the recomputation's copy of the model): counted as verification's wall
        out["setup_seconds"] = max(t["setup"] for t in timing)
        parts = [t["parts"] for t in timing]
        out["check_parts_seconds"] = {k: max(p.get(k, 0.0) for p in parts) for k in parts[0]}
        parameters = {
            "compared": "the parameters after each checked step against the optimizer's update taken again from the "
            "run's own state at that step (its parameters, averaged gradient and optimizer state), element by "
            f"element, relative to |element| + the tensor's rms, within {FLOOR:.3g}",
            "checked": True,
            "steps": steps,
            "largest_difference": max(r["update"]["largest_difference"] for rank in results for r in rank),
            "taken_again": taken_again(results),
        }
    if w.trainer.ranks_checked:
        checks = [{k: v for k, v in r.items() if k != "update"} for rank in results for r in rank]
        one = ctx.size == 1
        gradients = {
            "compared": "each rank's own gradient as it entered the allreduce (DDP's bucket), element by element, "
            "against its micro-batches' gradient recomputed from the step's parameters by "
            + (
                "the one rank's own device (one rank: no other device to check it)"
                if one
                else "the next rank (rank r checks rank r-1), reading the rows itself"
            ),
            "steps": steps,
            "kernels": f"{DETERMINISTIC} on both sides for these steps"
            if ctx.device == "gpu"
            else "the CPU's, on both sides",
            "assumes": "a device of the same kind running the same deterministic kernels computes the same gradient "
            "bit for bit; where two recomputations differ, the bound is their difference measured",
            **_bound_words("its second computation of the same micro-batches"),
            **summarize(checks),
        }
    elif w.cfg.verify != "none":
        gradients = first_step_check(w)
    if p.strategy == "ddp-graph":
        parameters = whole_run_check(w)
    out["gradients"] = gradients
    out["parameters"] = parameters or {
        "checked": False,
        "why": "no checked step (params.verify_steps and params.verify_per_repeat are 0)",
    }
    out["buffers"] = "rank 0's (DDP broadcasts them before every forward)" if list(st.module.buffers()) else None
    out["checked"] = checked_words(w, steps, total, gradients, out["parameters"])
    out["reference"] = out["checked"]
    return out


def checked_words(w, steps: list[int], total: int, gradients: dict | None, parameters: dict) -> str:
    """The console's first line and report.html's: what was checked, naming the steps."""
    parts = []
    if steps and w.trainer.ranks_checked:
        by = "recomputed on its own device" if w.ctx.size == 1 else "each recomputed by the next rank"
        parts.append(f"gradients of every rank checked at steps {steps_words(steps, total)}, {by}")
    elif gradients:
        parts.append("the first step's gradient averaged over the ranks checked against the one-process reference")
    if parameters.get("checked") and parameters.get("steps") == steps and steps:
        parts.append(
            "parameter updates at the same steps"
            if w.trainer.ranks_checked
            else f"parameter updates at steps {steps_words(steps, total)}"
        )
    elif parameters.get("checked"):
        parts.append("parameters after the last step against the one-process reference")
    else:
        parts.append(f"parameters not checked ({parameters.get('why', '')})")
    return "; ".join(parts) + "; the replicas identical"


def first_step_check(w) -> dict:
    """ddp-graph and SyncBatchNorm (a rank's gradient there depends on every rank's rows), or no checked step: the
    first step's averaged gradient against the one-process reference's, the ranks summed in two orders for the
    bound."""
    torch = w.torch
    x, y, gpu = _reference_rows(w)
    whole = w.one_rank_sampler()
    ref = _reference(w, copy.deepcopy(w.start_state), x, y)
    reordered = _reference(w, copy.deepcopy(w.start_state), x, y)
    ref.train(whole.window, 0, 1, False)
    reordered.train(whole.window, 0, 1, True)
    if not w.trainer.first_grads:
        raise VerificationError("the first step's averaged gradient was not kept: nothing to compare (a bug)")
    first = {name: t.detach().cpu().double().numpy() for name, t in w.trainer.first_grads.items()}
    summary, failure = judge(first, ref.first_grads, reordered.first_grads, "the first step's averaged gradient of")
    if failure:
        raise VerificationError(failure)
    del torch
    return {
        "compared": "the first step's gradient averaged over the ranks (after the allreduce: one rank's change "
        f"is divided by {w.ctx.size}), element by element, against the reference's",
        "steps": [0],
        "kernels": _first_step_kernels(gpu, int(w.trainer.first_exact)),
        **_bound_words("the first step again with the ranks summed in another order"),
        **summary,
    }


def whole_run_check(w) -> dict:
    """ddp-graph (its replays run no Python, so no step is checked as it runs): the parameters after the last step
    against the whole training again in one process, within SPREAD_FACTOR x what two references one rounding step
    apart differ by, or not checked where that is beyond MAX_SPREAD."""
    torch, p = w.torch, w.params
    run_tensors = host_tensors(w.trainer.module)  # rank 0's, as the run left them
    x, y, _ = _reference_rows(w)
    whole = w.one_rank_sampler()
    hint = (
        ""
        if w.trainer.reseed
        else " (a forward that draws random numbers itself, not through nn.Dropout, needs params.reseed: true)"
    )
    other = _reference(w, one_ulp_away(torch, copy.deepcopy(w.start_state), p.seed), x, y)
    ref = _reference(w, w.start_state, x, y)
    seconds = ref.train(whole.window, 0, w.trainer.step, False)
    expected = host_tensors(ref.module)
    seconds += other.train(whole.window, 0, w.trainer.step, True)
    spread, _ = compare(host_tensors(other.module), expected, 0.0, "")
    parameters = {
        "compared": "every parameter and buffer after the last step against the whole training again in one process, "
        "each tensor's relative RMS error",
        "steps": w.trainer.step,
        "rounding_spread": spread,
        "reference_seconds": seconds,
    }
    if spread > MAX_SPREAD:
        parameters.update(
            checked=False,
            why=f"two references of this training, one rounding step apart, differ by {spread:.3g} (beyond "
            f"{MAX_SPREAD:g}): rounding alone carries it further than a comparison could tell a fault from",
        )
        return parameters
    bound = SPREAD_FACTOR * max(spread, FLOOR)
    error, failure = compare(run_tensors, expected, bound, "after the last step, parameter or buffer")
    if failure:
        raise VerificationError(f"after {w.trainer.step} steps: {failure}{hint}")
    parameters.update(checked=True, bound=bound, error=error)
    return parameters


def _reference_rows(w):
    x, y = _read_all(w)
    gpu = w.ctx.device == "gpu"
    if gpu and x.nbytes + y.nbytes < 0.5 * free_device_memory():
        x, y = x.to(w.compute_device), y.to(w.compute_device)
    return x, y, gpu


def _reference(w, module, x, y) -> Reference:
    return Reference(
        w.torch,
        w.params,
        module,
        w.loss_fn,
        w.transform,
        x,
        y,
        w.compute_device,
        w.param_dtype,
        w.ctx.size,
        w.ctx.device == "gpu",
        w.trainer.reseed,
        int(w.trainer.first_exact),
    )


def _first_step_kernels(gpu: bool, deterministic_steps: int) -> str:
    if not gpu:
        return "the CPU's, on both sides"
    if deterministic_steps:
        return f"{DETERMINISTIC} on both sides for this step"
    # ddp-graph: its first step is a replay of the graph as captured
    return (
        "the CUDA graph's in the run, the same operations eagerly in the reference: where a kernel has no "
        "deterministic form, a rounding it flips may go beyond what one recomputation showed"
    )


def _bound_words(second: str) -> dict:
    return {
        "bound": f"relative to |element| + the tensor's rms: {FLOOR:.3g} where the reference and {second} agree bit "
        f"for bit, else {BOUND_FACTOR} x the largest difference between them"
    }


def _read_all(w):
    """Every row and target (rank 0, for the reference), read again with h5py: independent of the run's path."""
    x, y = read_all(w.cfg, w.ctx, w.rows, w.row_shape, w.dtype)
    return w.torch.from_numpy(x), w.torch.from_numpy(y)


def compare(run: dict, reference: dict, bound: float, what: str) -> tuple[float, str | None]:
    """The largest relative RMS error of a tensor of ``run`` against ``reference`` (name -> NumPy float64 arrays),
    and the first tensor beyond ``bound`` described (None when all are within)."""
    worst, failure = 0.0, None
    for name, ref in reference.items():
        rms = np.sqrt(np.mean(ref**2)) + np.finfo(np.float64).tiny
        err = float(np.sqrt(np.mean((run[name] - ref) ** 2)) / rms)
        err = err if np.isfinite(err) else float("inf")
        worst = max(worst, err)
        if err > bound and failure is None:
            failure = (
                f"{what} {name}: relative RMS error {err:.3g} against the one-process reference, beyond the bound "
                f"{bound:.3g}"
            )
    return worst, failure


def one_ulp_away(torch, module, seed: int):
    """``module`` with every floating parameter moved one rounding step up or down (seeded random signs): the start
    of a reference that differs from the first by rounding only."""
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for t in module.parameters():
            if t.is_floating_point():
                sign = torch.randint(0, 2, t.shape, generator=generator).to(t.device, t.dtype) * 2 - 1
                t.mul_(1 + sign * torch.finfo(t.dtype).eps)
    return module
