"""What a careful reader would doubt is marked: suspect runs, a model with no points to spare, a best rank
count past the hardware present, and no GPU words in a CPU run's findings."""

from __future__ import annotations

import pytest
from helpers import RUNS, S, synthetic_probe, synthetic_run

from spmd.scale.decision.advice import model_advice, series_advice, suspect_advice
from spmd.scale.decision.flags import noisy as noise_reason
from spmd.scale.decision.flags import suspect_reasons
from spmd.scale.models.scaling_model import best_ranks, fit_model
from spmd.scale.models.series import series_figures, time_interval
from spmd.scale.render.tables import tables

FAIR = {"oversubscribed": [], "ranks_per_node": {"vm": 2}, "cpus_per_node": {"vm": 4}}


def report(ranks: int, totals: list[float]) -> dict:
    """A report whose every rank took ``totals`` (seconds per repeat)."""
    med = {"median": totals[0], "min": totals[0], "max": totals[0]}
    return {
        "ranks": ranks,
        "problem": {"bytes": 1000},
        "per_rank": [
            {"rank": r, "median": {"compute": min(totals)}, "repeats": [{"total": t} for t in totals]}
            for r in range(ranks)
        ],
        "timings": {"compute": med, "comm": {"median": 0.0, "min": 0.0, "max": 0.0}, "total": med},
    }


def test_a_sound_run_has_no_reasons():
    rows = series_figures("strong", [report(1, [8.0, 8.1, 8.0]), report(2, [4.4, 4.5, 4.4])])
    assert [suspect_reasons(r, FAIR, rep) for r, rep in zip(rows, [report(1, [8.0] * 3), report(2, [4.4] * 3)])] == [
        [],
        [],
    ]


def test_a_speedup_beyond_ideal_is_flagged_and_suspect_when_its_whole_interval_is():
    reports = [report(1, [8.0] * 3), report(2, [3.0] * 3)]  # 2.67x on 2 ranks: 133%
    row = series_figures("strong", reports)[1]
    assert suspect_reasons(row, FAIR, reports[1]) == [
        "beyond ideal: 2.67x on 2 ranks, above the 2x they can give (its whole interval too)"
    ]
    assert row["flags"] == ["beyond ideal: 2.67x on 2 ranks, above the 2x they can give"]
    wide = [report(1, [8.0, 8.0, 8.0]), report(2, [3.7, 3.8, 4.4])]  # 2.1x, its interval reaching 1.8x
    row = series_figures("strong", wide)[1]
    assert suspect_reasons(row, FAIR, wide[1])[:1] != [] and row["flags"]  # flagged; noisy: suspect for that
    assert not any(r.startswith("beyond ideal") for r in suspect_reasons(row, FAIR, wide[1]))


def test_oversubscribed_and_noisy_runs_are_named():
    reports = [report(1, [8.0] * 3), report(3, [4.0, 6.0, 4.2])]
    row = series_figures("strong", reports)[1]
    crowded = {"oversubscribed": ["vm"], "ranks_per_node": {"vm": 3}, "cpus_per_node": {"vm": 2}}
    iv = time_interval(reports[1])  # 3 repeats: [min, max] at 75%
    assert (iv.low, iv.median, iv.high, iv.level) == (4.0, 4.2, 6.0, 0.75)
    assert suspect_reasons(row, crowded, reports[1]) == [
        "oversubscribed: vm ran 3 ranks on 2 CPUs",
        "noisy: the interval of the time per repeat reaches +-43% of its median over 3 repeats (bound +-5%)",
    ]
    assert noise_reason(report(1, [8.0])) is None  # one repeat: nothing to judge
    bound = {**FAIR, "single_cpu_gpu_ranks": [0, 1]}  # GPU ranks on a core each (Open MPI's mpirun -n 2)
    assert suspect_reasons(
        series_figures("strong", reports[:1] + [report(2, [4.2] * 3)])[1], bound, report(2, [4.2] * 3)
    ) == ["one CPU per GPU rank: 2 rank(s) bound to a single CPU by the launcher"]


def quiet_and_bimodal(n: int, seed: int = 0) -> tuple[list[float], list[float]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    quiet = list(1.0 + 0.01 * rng.standard_normal(n))
    bimodal = list(np.where(rng.random(n) < 0.5, 1.0, 1.4) + 0.01 * rng.standard_normal(n))
    return quiet, bimodal


@pytest.mark.parametrize("n", [12, 40])
def test_a_quiet_run_is_not_noisy_and_a_bimodal_one_is(n):
    quiet, bimodal = quiet_and_bimodal(n)
    auto = {"rule": "auto", "bound": 0.05, "max_seconds": 30.0, "stopped": "budget"}
    assert noise_reason({**report(2, quiet), "repeat_rule": auto}) is None
    reason = noise_reason({**report(2, bimodal), "repeat_rule": auto})
    assert reason.startswith("noisy: the interval of the time per repeat reaches +-")
    assert reason.endswith(f"of its median over {n} repeats after its 30 s budget (bound +-5%)")


def test_under_auto_five_repeats_are_too_few_for_the_95_percent_level_but_a_fixed_five_are_judged():
    tight = [1.0, 1.01, 0.99, 1.0, 1.02]
    assert noise_reason({**report(1, tight), "repeat_rule": {"rule": "fixed"}}) is None
    assert noise_reason(
        {**report(1, tight), "repeat_rule": {"rule": "auto", "max_seconds": 1.0, "stopped": "budget"}}
    ) == (
        "noisy: 5 repeats after its 1 s budget, too few for a 95% interval of the time per repeat (within +-2% of "
        "its median at the level they reach; bound +-5%)"
    )


def test_the_findings_and_the_runs_table_show_them():
    rows = series_figures("strong", [report(1, [8.0] * 3), report(2, [3.0] * 3)])
    for row in rows:
        row.update(
            placement={**FAIR, "hosts": {"vm": [0, 1]}, "link": "one rank", "devices": ["cpu"]},
            verified=True,
            suspect=suspect_reasons(row, FAIR, report(row["ranks"], [row["time"]] * 3)),
        )
    assert suspect_advice({"strong": rows}) == [
        "Suspect: strong at 2 ranks (beyond ideal: 2.67x on 2 ranks, above the 2x they can give (its whole interval "
        "too)): read its figures with care."
    ]
    runs = tables({"series": {"strong": rows}, "model": None})[0]
    assert runs.header[-1] == "suspect" and runs.rows[0][-1] == "-" and runs.rows[1][-1].startswith("beyond ideal")


def test_a_model_fitted_on_no_more_points_than_parameters_is_not_validated():
    two = [synthetic_run("strong", n, S) for n in (1, 2)]
    model = fit_model(two, synthetic_probe(), "mpi", growth=0.0)
    assert (model["points_fitted"], model["parameters"], model["validated"]) == (2, 2, False)
    lines = model_advice(model, best_ranks(model, S, [1, 2]), [], 2)
    assert lines[-1].startswith("The model is not validated: it was fitted on 2 measured point(s), no more than its 2")
    assert not any("fits the measurements" in line for line in lines)
    again = fit_model(RUNS, synthetic_probe(), "mpi", growth=0.0)
    assert again["validated"] and again["points_fitted"] == 6
    without_probe = fit_model(RUNS[:3], [], "mpi", growth=0.0)  # 3 points for overhead, alpha and beta
    assert without_probe["parameters"] == 3 and not without_probe["validated"]


@pytest.mark.parametrize(
    "hardware, says",
    [
        ({"count": 2, "what": "CPU cores", "nodes": 1}, "(an extrapolation: only 2 CPU cores are present on 1 node(s)"),
        ({"count": 64, "what": "GPUs", "nodes": 8}, "(extrapolated beyond the 4 measured"),
        (None, "(extrapolated beyond the 4 measured"),
    ],
)
def test_a_best_rank_count_beyond_the_hardware_is_labelled_with_its_count(hardware, says):
    model = fit_model(RUNS, synthetic_probe(), "mpi", growth=0.0)
    best = best_ranks(model, S, [1, 2, 4, 8, 16, 32])
    assert best["best_ranks"] > 4
    line = next(line for line in model_advice(model, best, [], 4, hardware) if "predicted best" in line)
    assert says in line


def test_cpu_findings_never_blame_kernel_launches():
    def row(ranks, time, device):
        t = {"min": time, "median": time, "max": time}
        return {
            "mode": "strong",
            "ranks": ranks,
            "time": time,
            "device": device,
            "bytes_per_rank": 1e6 / ranks,
            "timings": {"compute": t, "comm": {"min": 0, "median": 0, "max": 0}, "total": t},
            "speedup": 1.0 / time,
            "efficiency": 1.0 / time / ranks,
        }

    cpu = series_advice([row(1, 1.0, "cpu"), row(2, 0.95, "cpu")])
    gpu = series_advice([row(1, 1.0, "gpu"), row(2, 0.95, "gpu")])
    assert any("does not shrink" in line for line in cpu) and not any("kernel" in line for line in cpu)
    assert any("kernel launches" in line for line in gpu)
