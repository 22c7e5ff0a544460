"""The batch sweep's step model (spmd/scale/batches.py): what N ranks add to a step fitted as an allreduce K of
which a share phi of backward hides, recovered from steps made by a known model, and held to the target of the
multi-GPU runs (predicted speedup within 15% of the measured one at every batch) on the sweeps measured on two
H200s under NVLink, NCCL_P2P_DISABLE=1 and sockets (tests/fixtures/reports/batch-sweeps-h200x4.json)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from spmd.scale.decision.batch_words import _x, advice, host_sentence, pay_off_sentence
from spmd.scale.decision.flags import flag_batch_rows
from spmd.scale.models.scaling_model import predict
from spmd.scale.models.step import exposed_fit, fit, speedup
from spmd.scale.render.plots import stacked_phases

SWEEPS_FILE = Path(__file__).resolve().parents[1] / "fixtures/reports/batch-sweeps-h200x4.json"
SWEEPS = json.loads(SWEEPS_FILE.read_text())["sweeps"]


def made_rows(c0, c1, d0, d1, k, phi, batches=(16, 64, 256), n=2):
    rows = []
    for b in batches:
        t1, backward = c0 + c1 * b, d0 + d1 * b
        tn = t1 + max(0.0, k - phi * backward)
        rows.append(
            {
                "batch": b,
                "speedup": n * t1 / tn,
                "speedup_interval": [0.98 * n * t1 / tn, 1.02 * n * t1 / tn],
                "step_s_1": t1,
                "step_s_n": tn,
                "comm_s_n": k * 3,  # the allreduce timed on its own: not what the steps pay
                "exposed_s_n": k * 3,
                "backward_s_n": backward,
            }
        )
    return rows


def test_the_fit_recovers_the_allreduce_and_its_hidden_share_from_the_step_times():
    rows = made_rows(c0=1e-3, c1=2e-6, d0=4e-4, d1=1e-6, k=6e-4, phi=0.5)
    model = fit(rows, 2)
    assert model["comm_s"] == pytest.approx(6e-4) and model["hidden_share"] == pytest.approx(0.5)
    assert model["comm_timed_s"] == pytest.approx(18e-4)
    for point in model["points"]:
        assert point["error"] == pytest.approx(0.0, abs=1e-9)
    assert speedup(model, 1024) == pytest.approx(2 * (1e-3 + 2e-6 * 1024) / (1e-3 + 2e-6 * 1024))  # all hidden


@pytest.mark.parametrize(
    "added, backward, k, phi",
    [
        ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], 2.0, 0.0),  # grows with backward: nothing hides it
        ([5.0, 3.0, 1.0], [1.0, 2.0, 3.0], 5.0, 1.0),  # falls twice as fast as backward grows: phi stops at 1
        ([2.0, 4.0], [1.0, 1.0], 3.0, 0.0),  # one backward time: the mean
        ([-2.0, -3.0], [1.0, 2.0], 0.0, 1.0),  # faster on N ranks than on one: no allreduce below 0
    ],
)
def test_the_exposed_fit_keeps_phi_a_share_and_k_a_time(added, backward, k, phi):
    assert exposed_fit(added, backward) == pytest.approx((k, phi))


@pytest.mark.parametrize("topology", sorted(SWEEPS))
def test_the_predicted_speedup_is_within_15_percent_at_every_measured_batch(topology):
    sweep = SWEEPS[topology]
    model = fit(sweep["rows"], sweep["ranks"])
    for point in model["points"]:
        assert abs(point["error"]) <= 0.15, (topology, point)
    # the timed allreduce is kept beside the fit: under sockets both say the allreduce is what the step pays for
    assert model["comm_timed_s"] > 0 and model["comm_s"] >= 0


def test_on_sockets_the_advice_says_slower_and_names_what_would_pay_off():
    sweep = SWEEPS["sockets"]
    model = fit(sweep["rows"], 2)
    model["next_ranks"], model["alpha_beta"] = 4, None
    for point in model["points"]:
        point["predicted_speedup_next"] = speedup(model, point["batch"], ranks=4)
    lines = " ".join(advice(sweep["rows"], model, 2, {"gradient_bytes": 2**26, "buckets": [1, 2]}))
    assert "2 ranks are SLOWER than one at batch 16, 64, 256" in lines
    assert model["break_even_batch"] and model["break_even_batch"] > 256
    assert "2 ranks pay off measured at no trustworthy batch of 16, 64, 256; predicted from per-rank batch" in lines
    assert "accumulate: 4 ->" in lines and "fitted on what 2 ranks add to a step: no captured kernels" in lines


def sweep_of(rows, n=2):
    flag_batch_rows(rows, n)
    model = fit([r for r in rows if not r["suspect"]], n, rows)
    model["next_ranks"], model["alpha_beta"] = 2 * n, None
    for point in model["points"]:
        point["predicted_speedup_next"] = speedup(model, point["batch"], ranks=2 * n)
    return model


def test_a_point_far_beyond_what_the_ranks_can_give_is_flagged_and_kept_out():
    """The newcomer's sweep: a busy machine slowed the 1-rank run at batch 8 tenfold, so 2 ranks 'gave' 20.9x."""
    rows = made_rows(c0=1e-3, c1=2e-6, d0=4e-4, d1=1e-6, k=6e-4, phi=0.5, batches=(8, 32, 128))
    for r in rows:
        r["speedup_interval"] = [0.95 * r["speedup"], 1.05 * r["speedup"]]
    rows[0].update(step_s_1=rows[0]["step_s_1"] * 10, speedup=20.9, speedup_interval=[18.0, 23.0])
    model = sweep_of(rows)
    assert rows[0]["suspect"] and not rows[1]["suspect"] and not rows[2]["suspect"]
    assert model["fitted_batches"] == [32, 128] and model["c0_s"] == pytest.approx(1e-3)
    lines = " ".join(advice(rows, model, 2, {"device": "gpu"}))
    assert "batch 8: 20.90x (18.00-23.00) BEYOND IDEAL SUSPECT" in lines
    assert (
        "suspect point, kept out of the step model: batch 8: beyond ideal: 20.90x on 2 ranks, above the 2x they can "
        "give (interval 18.00x-23.00x)" in lines
    )
    assert "not fitted (suspect)" in lines


def test_with_captured_kernels_the_allreduce_is_what_they_showed_not_a_fit_of_step_differences():
    rows = made_rows(c0=1e-3, c1=2e-6, d0=4e-4, d1=1e-6, k=6e-4, phi=0.5)
    for r in rows[1:]:  # backward grows with the batch: the same hidden time is a smaller share of it
        r["backward_s_n"] *= 2
    for r in rows:  # the kernels: a 0.9 ms allreduce, a third of it exposed
        r.update(comm_source="captured kernels", comm_s_n=9e-4, exposed_s_n=3e-4)
    model = fit(rows, 2)
    assert model["comm_source"] == "captured kernels" and model["comm_s"] == pytest.approx(9e-4)
    shares = sorted(6e-4 / r["backward_s_n"] for r in rows)  # hidden / backward: 1.29, 0.98, 0.74
    assert model["hidden_share"] == pytest.approx(min(1.0, statistics.median(shares)))
    model["next_ranks"], model["alpha_beta"] = 4, None
    for point in model["points"]:
        point["predicted_speedup_next"] = speedup(model, point["batch"], ranks=4)
    assert "from the captured NCCL kernels" in " ".join(advice(rows, model, 2, {"device": "gpu"}))


def test_an_allreduce_clamped_at_zero_is_said_and_carried_nowhere():
    """N ranks faster per step than one (noise): the allreduce term would be negative; no 8.00x comes of it."""
    rows = made_rows(c0=1e-3, c1=2e-6, d0=4e-4, d1=1e-6, k=0.0, phi=0.0)
    for r in rows:
        r["step_s_n"] = 0.9 * r["step_s_1"]
        r["speedup_interval"] = [1.9, 2.3]  # beyond ideal, flagged; not surely (its interval reaches 2x): fitted
        r["speedup"] = 2.2
    model = sweep_of(rows)
    assert "K" in model["clamped"]
    lines = " ".join(advice(rows, model, 2, {"device": "gpu"}))
    assert "at 4 GPUs: not predicted, the model holds no allreduce cost to carry there" in lines
    assert "4.00x" not in lines and "2.00x predicted" in lines


def test_predicted_ratios_carry_two_significant_figures():
    assert [_x(v) for v in (8.0, 0.0612, 1.234)] == ["8x", "0.061x", "1.2x"]


def test_where_more_ranks_pay_off_is_said_once_measured_and_predicted():
    rows = made_rows(c0=1e-3, c1=2e-6, d0=4e-4, d1=1e-6, k=6e-4, phi=0.5, batches=(8, 32))
    rows[0]["speedup_interval"], rows[1]["speedup_interval"] = [0.8, 1.2], [1.3, 1.6]
    model = sweep_of(rows)
    model["break_even_batch"] = 4
    line = pay_off_sentence(rows, model, 2, {"device": "gpu"})
    assert line == "2 GPUs pay off measured from per-GPU batch 32; predicted from per-GPU batch 4"
    model["break_even_batch"] = 64
    assert "(the measurement at 32 says earlier: the model is off there)" in pay_off_sentence(rows, model, 2, {})


def test_a_step_model_that_misses_its_own_points_predicts_no_pay_off_batch():
    rows = made_rows(c0=1e-3, c1=2e-6, d0=4e-4, d1=1e-6, k=6e-4, phi=0.5, batches=(8, 32))
    rows[0]["speedup_interval"], rows[1]["speedup_interval"] = [0.8, 0.9], [0.5, 0.6]
    model = sweep_of(rows)
    model["break_even_batch"] = 4  # what the model would say, were it trusted
    misses = [{"batch": 8, "error": -0.07}, {"batch": 32, "error": 0.55}]
    line = pay_off_sentence(rows, model, 2, {}, {"fitted": True, "trusted": False, "misses": misses})
    assert line == (
        "2 ranks pay off measured at no trustworthy batch of 8, 32; "
        "not predicted (the step model misses its own points, by +55% at batch 32)"
    )


def test_the_hosts_part_is_said_in_samples_per_second_never_as_a_ratio_to_a_graphed_one_gpu():
    rows = made_rows(c0=1e-3, c1=2e-6, d0=4e-4, d1=1e-6, k=6e-4, phi=0.5)
    model = sweep_of(rows)
    top = rows[-1]["batch"]
    rows[-1]["host_s_1"] = 5e-4
    line = host_sentence(rows, model, 2, top, {"device": "gpu", "strategy": "ddp"})
    assert "sat idle 500.0 us waiting for its host" in line and "samples/s against" in line and "0.00x" not in line
    assert "--capture measures" in host_sentence(
        rows[:-1] + [{**rows[-1], "host_s_1": None}], model, 2, top, {"device": "gpu"}
    )
    assert "on a CPU the host is the device" in host_sentence(rows, model, 2, top, {"device": "cpu"})


def test_a_stacked_bar_never_adds_a_phase_that_holds_another():
    torch = [
        "read",
        "compute",
        "comm",
        "data",
        "forward",
        "backward",
        "comm_exposed",
        "comm_overlapped",
        "optimizer",
        "step",
        "total",
    ]
    assert stacked_phases(torch) == ["read", "data", "forward", "backward", "comm_exposed", "optimizer"]
    assert stacked_phases(["read", "h2d", "compute", "comm", "total"]) == ["read", "h2d", "compute", "comm"]


def test_the_array_model_never_predicts_a_negative_time():
    """A phase fitted with a negative intercept (the newcomer's '-378 ms'): no phase takes less than nothing."""
    model = {
        "local": {"compute": {"intercept_s": -0.5, "seconds_per_byte": 1e-9}},
        "comm": {"overhead_s": -0.1, "alpha_s": 0.0, "busbw_Bps": 1e9, "ops": [], "reference_share_bytes": 1e4},
        "gap_s": -0.2,
        "ops": [],
    }
    p = predict(model, 8, 80 * 1024)
    assert p["compute"] == 0.0 and p["comm"] >= 0.0 and p["total"] >= 0.0
