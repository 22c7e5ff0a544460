"""The analysis of a sweep: its runs -> scaling.json (figures per series, the fitted model, advice)."""

from __future__ import annotations

import datetime

from ...core.version import __version__
from ...report.schema import SCALING_SCHEMA
from ...report.summary import job_time
from ...workloads.base import SCALING_MODES
from ...workloads.registry import job_config_from_dict, workload_class
from ..decision.advice import (
    backend_advice,
    binding_advice,
    cost_words,
    interval_note,
    model_advice,
    oversubscription_advice,
    series_advice,
    storage_advice,
    straggler_advice,
    suspect_advice,
)
from ..decision.batch_words import advice as batch_advice
from ..decision.decide import decide
from ..decision.flags import suspect_reasons
from ..decision.training import is_training, training_series_advice
from ..decision.verdict import verdict
from ..models.phases import HOST_PHASES
from ..models.scaling_model import INNER_PHASES, best_ranks, break_even, fit_model, measured, predict
from ..models.series import series_figures
from .batches import batch_sweep


def reanalyse(scaling: dict) -> dict:
    """``analyse`` again over the runs stored in a scaling.json (after the analysis changed)."""
    cfg = job_config_from_dict(scaling["config"])
    placements = {(row["mode"], row["ranks"]): row["placement"] for rows in scaling["series"].values() for row in rows}
    runs = [{**r, "placement": r.get("placement") or placements[(r["mode"], r["ranks"])]} for r in scaling["runs"]]
    runs += scaling.get("batch_runs") or []  # a batch sweep's runs (kept since schema 2)
    runs += scaling.get("share_runs") or []  # --shares: one rank at other rank counts' shares
    again = analyse(cfg, runs, scaling["world_size"], scaling["mpi_library"].replace("\x00", ""), scaling.get("cost"))
    again["created"] = scaling["created"]  # when it was measured
    return again


def held_out(scaling: dict, fit: int | None = None) -> list[dict]:
    """The model as if the sweep had stopped at ``fit`` ranks (default: the largest count below the top), asked
    to predict the largest count measured: per mode, the predicted and measured time, the error, and the phase
    furthest off. The question before buying GPUs: what would 1 and 2 have said about 4?"""
    top = max(r["ranks"] for r in scaling["runs"])
    below = [r["ranks"] for r in scaling["runs"] if r["ranks"] < top]
    if not below:
        return []
    fit = fit or max(below)
    small = [
        {**r, "probe": [q for q in (r["probe"] or []) if q["ranks"] <= fit] or None}
        for r in scaling["runs"]
        if r["ranks"] <= fit
    ]
    model = reanalyse({**scaling, "runs": small})["model"]
    if model is None:
        return []
    rows = []
    for run in scaling["runs"]:
        if run["ranks"] != top:
            continue
        report = run["report"]
        row = next(x for x in scaling["series"][run["mode"]] if x["ranks"] == top)
        placement = run.get("placement") or row["placement"]
        guess = predict(model, top, report["problem"]["bytes"], node_counts(placement, report["device"])["node_ranks"])
        phases = {
            p: (measured({"timings": report["timings"]}, p), guess[p])
            for p in guess
            if p != "total" and p in report["timings"]
        }
        worst = max(phases, key=lambda p: abs(phases[p][1] - phases[p][0])) if phases else None
        rows.append(
            {
                "workload": scaling["workload"],
                "mode": run["mode"],
                "fit": fit,
                "ranks": top,
                "measured_s": row["time"],
                "predicted_s": guess["total"],
                "error": (guess["total"] - row["time"]) / row["time"],
                "worst_phase": worst,
                "worst_measured_s": phases[worst][0] if worst else None,
                "worst_predicted_s": phases[worst][1] if worst else None,
            }
        )
    return rows


def analyse(cfg, runs: list[dict], world_size: int, mpi_library: str, cost: dict | None = None) -> dict:
    """The scaling dict (scaling.json, schema 1) from the runs of a sweep (a batch sweep's runs in its own
    section, ``batch_sweep``)."""
    batch_runs = [r for r in runs if r["mode"] == "batch"]
    share_runs = [r for r in runs if r["mode"] == "share"]  # kept out of the series: the model's points alone
    runs = [r for r in runs if r["mode"] not in ("batch", "share")] or batch_runs[:1]
    modes = [m for m in SCALING_MODES if any(r["mode"] == m for r in runs)]
    series = {}
    for mode in modes:
        mine = sorted((r for r in runs if r["mode"] == mode), key=lambda r: r["ranks"])
        rows = series_figures(mode, [r["report"] for r in mine])
        for row, run in zip(rows, mine):
            row.update(
                placement=run["placement"],
                verification=run["report"]["verification"],
                verified=run["report"]["verified"],
                result=run["report"]["result"],
                comm=run["report"]["comm"],
                device=run["report"]["device"],
            )
            row["suspect"] = suspect_reasons(row, run["placement"], run["report"])
        series[mode] = rows

    growth = workload_class(cfg.workload).COMM_GROWTH
    # every run measured once, and one rank at each other rank count's share (its local work at that size); a
    # series row's time is its report's job_time
    model_runs = [
        {
            "mode": r["mode"],
            "ranks": r["ranks"],
            "problem": r["report"].get("problem", {}),
            "timings": r["report"]["timings"],
            "time": job_time(r["report"]),
            "oversubscribed": bool(r["placement"]["oversubscribed"]),
            **node_counts(r["placement"], r["report"]["device"]),
        }
        for r in [*measured_once(runs), *share_runs]
    ]
    probe = [p for r in measured_once(runs) for p in (r["probe"] or [])]
    backend = runs[0]["report"]["comm"]
    on_gpus = runs[0]["report"]["device"] == "gpu"
    # torch times a step's parts inside its compute phase; train's forward, backward and optimizer are its compute
    inner = INNER_PHASES if "comm_exposed" in runs[0]["report"]["timings"] else ()
    model = fit_model(model_runs, probe, backend, growth, HOST_PHASES if on_gpus else None, inner, gpu=on_gpus)
    measured_max = max(r["ranks"] for r in runs)
    best, even = None, []
    strong_bytes = next((r["problem"].get("bytes") for r in model_runs if r["mode"] == "strong"), None) or (
        model_runs[0]["problem"].get("bytes") if model_runs else None
    )
    if model is not None:
        candidates = sorted(set(range(1, measured_max + 1)) | {2**k for k in range(11) if 2**k <= 4 * measured_max})
        best = best_ranks(model, strong_bytes, candidates)
        even = [break_even(model, n) for n in candidates if n > 1 and (n & (n - 1) == 0 or n == measured_max)]
        model["predictions"] = {"best": best, "break_even": even, "measured_max_ranks": measured_max}
    training = is_training(runs[0]["report"])
    sweep = batch_sweep(batch_runs, model["comm"] if model else None)
    reports = {
        (r["mode"], r["ranks"], r["report"]["result"].get("batch_per_rank")): r["report"] for r in runs + batch_runs
    }
    decision = decide(
        {
            "training": training,
            "device": runs[0]["report"]["device"],
            "series": series,
            "model": model,
            "batch": sweep,
            "reports": [r["report"] for r in runs + batch_runs],
            "lead_reports": reports,
            "captured_batch": bool(sweep and sweep["captured"]),
        }
    )
    if sweep:
        sweep["advice"] = batch_advice(sweep["rows"], sweep["model"], sweep["ranks"], sweep.pop("result"), decision)
    trusted = (decision.get("array_model") or {}).get("trusted", True)
    if model is not None and not trusted:  # a model that misses its own points predicts nothing further
        model["predictions"]["withheld"] = "the model misses its own points"
    answer = verdict(decision)
    advice = oversubscription_advice(runs) + binding_advice(runs)
    note = interval_note(runs + batch_runs)
    advice += [note] if note else []
    advice += suspect_advice(series)
    advice += straggler_advice(measured_once(runs))
    if training:  # the job's own terms; the array model's problem bytes and break-even sizes say nothing here
        advice += [line for mode in modes for line in training_series_advice(series[mode])]
    else:
        advice += [line for mode in modes for line in series_advice(series[mode])]
        advice += model_advice(
            model, best if trusted else None, even if trusted else [], measured_max, hardware_present(runs)
        )
        advice += backend_advice([{**r, "time": _row(series, r)["time"]} for r in measured_once(runs)], backend)
        advice += storage_advice(runs)
    advice += sweep["advice"] if sweep else []
    advice += [cost_words(cost)] if cost else []
    first = runs[0]["report"]
    return {
        "schema": SCALING_SCHEMA,
        "kind": "scaling",
        "spmd_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "workload": cfg.workload,
        "world_size": world_size,
        "modes": modes,
        "ranks": sorted({r["ranks"] for r in runs}),
        "device": first["device"],
        "comm": backend,
        "mpi_library": mpi_library,
        "series": series,
        "model": model,
        "training": training,
        "decision": decision,
        **({"cost": cost} if cost else {}),
        "verdict": answer,
        "advice": [answer] + advice,
        "config": cfg.to_dict(),
        **({"batch_sweep": sweep} if sweep else {}),
        "runs": [
            {
                "mode": r["mode"],
                "ranks": r["ranks"],
                "suspect": _row(series, r)["suspect"],
                "placement": r["placement"],
                "probe": r["probe"],
                "backends": r.get("backends"),
                "read_limit": r.get("read_limit"),
                "capture_pass": r.get("capture_pass"),
                "outside_s": r.get("outside_s"),
                "report": r["report"],
            }
            for r in runs
        ],
        # --shares: one rank at other rank counts' shares, the model's points (decided again like the others)
        **({"share_runs": [_kept(r, share_of=r.get("share_of")) for r in share_runs]} if share_runs else {}),
        # the batch sweep's runs, so that a later spmd decides again from them (report render --reanalyse)
        "batch_runs": [_kept(r) for r in batch_runs],
    }


def _kept(run: dict, **extra) -> dict:
    """A run of no series as scaling.json keeps it (batch_runs, share_runs): enough to decide again from it."""
    keys = ("mode", "ranks", "placement", "report")
    when = {k: run.get(k) for k in ("capture_pass", "outside_s")}  # where its time went
    return {**{k: run[k] for k in keys}, **extra, **when, "probe": None}


def sweep_cost(runs: list[dict], own: dict[str, float], total_s: float) -> dict:
    """Where a sweep's wall time went (scaling.json ``cost``). Its own parts come first (``own``, such as its inputs
    and every rank's warm start), then each part of every run (report.json ``wall``: set-up, warm-up, timed repeats,
    capture, checks, calibration, report) summed over the runs. Beside them, the timed steps themselves (each
    repeat's slowest rank, summed) and the ratio of everything else to them."""
    parts: dict[str, float] = dict(own)
    timed = 0.0
    seen = []
    for run in runs:
        report = run["report"]
        if any(report is other for other in seen):  # a weak run reusing its strong twin ran once
            continue
        seen.append(report)
        for name, seconds in (report.get("wall") or {}).items():
            parts[name] = parts.get(name, 0.0) + seconds
        timed += sum(slowest_total(report))
    # what no part holds: the groups split and joined between runs, each run's communicators closed
    parts["between_runs"] = max(0.0, total_s - sum(parts.values()))
    other = max(0.0, total_s - timed)
    return {
        "total_s": total_s,
        "timed_steps_s": timed,
        "parts_s": parts,
        "beyond_timed": other / timed if timed > 0 else None,
    }


def slowest_total(report: dict) -> list[float]:
    """Each recorded repeat's total on its slowest rank."""
    per_rank = [r["repeats"] for r in report["per_rank"]]
    return [max(rank[i]["total"] for rank in per_rank) for i in range(len(per_rank[0]))]


def slots_per_node(placement: dict, device: str) -> dict:
    """host -> the GPUs (or, on CPUs, cores) it holds, from a run's placement ({} where it was not recorded)."""
    return placement.get("gpus_per_node" if device == "gpu" else "cpus_per_node") or {}


def node_counts(placement: dict, device: str) -> dict:
    """{'node_ranks': the ranks on the run's busiest node, 'node_slots': the GPUs (or, on CPUs, cores) a node
    holds} from a run's placement; None where it does not say."""
    per_node = placement.get("ranks_per_node") or {}
    slots = slots_per_node(placement, device)
    return {"node_ranks": max(per_node.values(), default=None), "node_slots": max(slots.values(), default=0) or None}


def hardware_present(runs: list[dict]) -> dict | None:
    """What the sweep's hosts hold: {'count', 'what' ('GPUs' or 'CPU cores'), 'nodes'}, from the largest
    run's placement; None where it was not recorded (GPUs per node, before spmd recorded them)."""
    place = max(runs, key=lambda r: r["ranks"])["placement"]
    gpu = runs[0]["report"]["device"] == "gpu"
    per_node = slots_per_node(place, runs[0]["report"]["device"])
    if not per_node or not all(per_node.values()):
        return None
    return {"count": sum(per_node.values()), "what": "GPUs" if gpu else "CPU cores", "nodes": len(per_node)}


def measured_once(runs: list[dict]) -> list[dict]:
    """Runs measured once (a weak run reusing the strong run of its size counts once)."""
    out: list[dict] = []
    for r in runs:
        if not any(r["ranks"] == o["ranks"] and r["report"] == o["report"] for o in out):
            out.append(r)
    return out


def _row(series: dict, run: dict) -> dict:
    return next(row for row in series[run["mode"]] if row["ranks"] == run["ranks"])
