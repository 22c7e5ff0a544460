"""The decision (spmd.scale.decision) holds its invariants on any sweep, as properties over generated ones: noisy
points, suspect points, a busy host, strong and batch series that disagree, step models that miss their points.

- nothing from a suspect point leads;
- a speedup above N is flagged wherever it appears;
- a word about a quantity agrees with its number ("faster", "slower", "no measurable difference" with the lead's
  interval; "little" only below 10% of the step; a limit named only when it is the largest part);
- a busy host (or a GPU another process used) comes first, with the fix;
- strong and batch answers are linked when they differ;
- nothing is predicted from a model that misses its own points;
- nested parts never exceed the step.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spmd.scale.decision.batch_words import advice as batch_advice
from spmd.scale.decision.decide import FASTER, SAME, SLOWER, decide, outcome
from spmd.scale.decision.flags import LITTLE, suspect_reasons
from spmd.scale.decision.verdict import verdict
from spmd.scale.models.series import series_figures
from spmd.scale.sweep.batches import batch_sweep

STEPS = 4
FAIR = {"oversubscribed": [], "ranks_per_node": {"h": 2}, "cpus_per_node": {"h": 8}}


def torch_report(ranks: int, batch: int, step_s: list[float], parts: dict, others: float, beside: int = 0) -> dict:
    """A training run's report.json as analysis reads it: every rank's repeats of STEPS steps of ``step_s`` seconds,
    the step's parts (shares of it), the host's other processes' share of the CPU time, and ``beside``: processes
    another user ran on rank 0's GPU."""
    repeats = []
    for s in step_s:
        rep = {"total": s * STEPS}
        rep.update({p: share * s * STEPS for p, share in parts.items()})
        rep["step"] = s * STEPS
        rep["compute"] = rep["step"] - rep["comm_exposed"]
        rep["comm"] = rep["comm_exposed"]
        repeats.append(rep)
    timings = {}
    for p in repeats[0]:
        values = sorted(r[p] for r in repeats)
        timings[p] = {"min": values[0], "median": values[len(values) // 2], "max": values[-1]}
    busy = others >= 0.10
    nodes = {"h": {"ranks": ranks, "threads": ranks, "cpus": 8, "others_share": others, "wall_s": 1.0}}
    nodes["h"].update(others_cpu_s=others * 8, oversubscribed_threads=False)
    return {
        "ranks": ranks,
        "device": "cpu",
        "verified": True,
        "problem": {"bytes": 1000 * batch * ranks},
        "per_rank": [
            {"rank": r, "median": {p: t["median"] for p, t in timings.items()}, "repeats": repeats}
            for r in range(ranks)
        ],
        "timings": timings,
        "result": {"batch_per_rank": batch, "global_batch": batch * ranks, "steps_per_repeat": STEPS},
        "metrics": {"samples_per_s": batch * ranks * STEPS / timings["total"]["median"]},
        "host": {
            "busy": (
                [f"busy host: other processes on h took {others:.0%} of the CPU time its ranks could use"]
                if busy
                else []
            )
            + ([f"busy device: the GPU at 0000:1b:00.0 on h ran {beside} other process(es)"] if beside else []),
            "nodes": nodes,
            "gpus": {"h": {"0000:1b:00.0": {"ranks": 1, "processes": 1 + beside, "others": beside}}},
            "per_rank": [{"threads": {"chosen": 4, "how": "the rank's share", "compute": 4}}],
        },
        "kernels": None,
        "breakdown": {},
    }


PARTS = st.fixed_dictionaries(
    {
        "data": st.floats(0.0, 0.3),
        "forward": st.floats(0.05, 0.4),
        "backward": st.floats(0.05, 0.5),
        "comm_exposed": st.floats(0.0, 0.6),
        "comm_overlapped": st.floats(0.0, 0.3),
        "optimizer": st.floats(0.0, 0.2),
    }
)


@st.composite
def sweeps(draw):
    """A sweep of a training job at 1 and N ranks: a strong series and a batch sweep, each run's repeats noisy or
    not, its host busy or not."""
    n = draw(st.integers(2, 4))
    parts = draw(PARTS)
    same = draw(st.booleans())  # N ranks' steps as long as one's times N: speedups about 1

    def run(ranks, batch):
        step = draw(st.floats(1e-3, 1.0)) if not same else 0.01 * ranks * batch / 16
        noise = draw(st.sampled_from([0.0, 0.01, 0.1, 0.3]))
        repeats = [step * (1 + noise * ((i * 7919) % 11 - 5) / 5) for i in range(draw(st.integers(3, 9)))]
        others = draw(st.sampled_from([0.0] * 8 + [0.05, 0.3]))
        return torch_report(ranks, batch, repeats, parts, others, draw(st.sampled_from([0] * 9 + [1])))

    global_batch = draw(st.sampled_from([8, 16, 64]))
    strong = [run(1, global_batch), run(n, max(1, global_batch // n))]
    batches = sorted(draw(st.sets(st.sampled_from([4, 16, 32, 128]), min_size=2, max_size=3)))
    batch_runs = [{"mode": "batch", "ranks": k, "report": run(k, b)} for b in batches for k in (1, n)]
    return n, strong, batch_runs


def analysed(n, strong, batch_runs):
    rows = series_figures("strong", strong)
    for row, report in zip(rows, strong):
        row.update(result=report["result"], placement=FAIR, device="cpu")
        row["suspect"] = suspect_reasons(row, FAIR, report)
    series = {"strong": rows}
    sweep = batch_sweep(batch_runs)
    reports = {("strong", r["ranks"], r["result"]["batch_per_rank"]): r for r in strong}
    reports.update({("batch", r["ranks"], r["report"]["result"]["batch_per_rank"]): r["report"] for r in batch_runs})
    decision = decide(
        {
            "training": True,
            "device": "cpu",
            "series": series,
            "model": None,
            "batch": sweep,
            "reports": strong + [r["report"] for r in batch_runs],
            "lead_reports": reports,
            "captured_batch": False,
        }
    )
    words = batch_advice(sweep["rows"], sweep["model"], n, sweep["result"], decision)
    return series, sweep, decision, verdict(decision), words


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(sweeps())
def test_nothing_from_a_suspect_point_leads(sweep_of):
    series, sweep, decision, text, _ = analysed(*sweep_of)
    lead = decision["lead"]
    if lead is None:
        assert "no trustworthy answer" in text and "the run that would settle it: " in text
        return
    row = next(r for r in sweep["rows"] if r["batch"] == lead["batch"])
    assert not row["suspect"]
    assert f"per-rank batch {lead['batch']} (" in text


@SETTINGS
@given(sweeps())
def test_a_speedup_above_n_is_flagged_wherever_it_appears(sweep_of):
    n = sweep_of[0]
    series, sweep, decision, text, words = analysed(*sweep_of)
    for row in sweep["rows"]:
        assert bool(row["flags"]) == (row["speedup"] > n * (1 + 1e-9))
        shown = f"batch {row['batch']}: {row['speedup']:.2f}x ({row['speedup_interval'][0]:.2f}-"
        table = next(w for w in words if w.startswith("batch sweep"))
        after = table.split(shown, 1)[1].split(", batch ")[0]
        assert ("BEYOND IDEAL" in after) == bool(row["flags"])
    for row in series["strong"]:
        assert bool(row["flags"]) == (row["speedup"] > row["ranks"] * (1 + 1e-9))
    lead = decision["lead"]
    if lead and lead["speedup"] > lead["ideal"] * (1 + 1e-9):
        assert "beyond ideal" in text


@SETTINGS
@given(sweeps())
def test_words_agree_with_their_numbers(sweep_of):
    series, sweep, decision, text, _ = analysed(*sweep_of)
    lead = decision["lead"]
    if lead is not None:
        said = outcome(lead["interval"])
        assert decision["outcome"] == said
        assert ("are faster than" in text) == (said == FASTER)
        assert ("are slower than" in text) == (said == SLOWER)
        assert ("no measurable difference from" in text) == (said == SAME)
    lim = decision["limit"]
    if lim:
        assert lim["seconds"] == max(lim["parts"].values())  # named only as the largest part
        assert sum(lim["parts"].values()) <= lim["whole_s"] * (1 + 1e-9)  # nested parts within the step
        if lead is not None:
            little = re.search(r"exposed allreduce [^;]*\((\d+)% of it: little\)", text)
            if little:
                assert lim["comm_share"] < LITTLE
            if lim["part"] != "allreduce" and "allreduce" in lim["parts"] and lim["comm_share"] >= LITTLE:
                assert "of it: little" not in text
            assert "costs little" not in text


@SETTINGS
@given(sweeps())
def test_a_busy_host_or_device_comes_first_with_the_fix(sweep_of):
    _, strong, batch_runs = sweep_of
    _, _, decision, text, _ = analysed(*sweep_of)
    reports = strong + [b["report"] for b in batch_runs]
    busy = any(r["host"]["busy"] for r in reports)
    host = any(w.startswith("busy host") for r in reports for w in r["host"]["busy"])
    device = any(w.startswith("busy device") for r in reports for w in r["host"]["busy"])
    assert decision["host"]["busy"] == busy
    assert text.startswith("Verdict: busy host: " if host else "Verdict: busy device: ") == busy
    assert ("fix: run when the node is quiet" in text) == host
    assert ("busy device: another process ran on the GPU at 0000:1b:00.0 of h in" in text) == device
    assert ("fix: run on GPUs no other process uses" in text) == device


@SETTINGS
@given(sweeps())
def test_strong_and_batch_answers_are_linked_when_they_differ(sweep_of):
    series, sweep, decision, text, _ = analysed(*sweep_of)
    last = series["strong"][-1]
    strong = outcome(last["speedup_interval"])
    if decision["lead"] is not None and strong != decision["outcome"]:
        assert "the strong series kept its global batch" in text
    else:
        assert "the strong series kept its global batch" not in text


@SETTINGS
@given(sweeps())
def test_nothing_is_predicted_from_a_model_that_misses_its_own_points(sweep_of):
    _, sweep, decision, text, words = analysed(*sweep_of)
    state = decision["batch_model"]
    joined = " ".join(words)
    if state["fitted"] and not state["trusted"]:
        assert "predicted from per-" not in text
        assert "bigger batch:" not in joined and "accumulate: 2 ->" not in joined
        assert "it predicts nothing further" in joined and "a miss: " in joined
    if "predicted from per-" in text:
        assert state["trusted"]


@pytest.mark.parametrize(
    "reason, run",
    [
        ("busy host: other processes on h took 30% of the CPU time", "on a quiet host"),
        ("busy device: the GPU at 0000:1b:00.0 on h ran 1 other process(es)", "on GPUs no other process uses"),
        ("noisy: the interval is wide", "with more repeats"),
    ],
)
def test_the_run_that_would_settle_it_removes_what_made_the_points_suspect(reason, run):
    from spmd.scale.decision.decide import settle

    assert run in settle([reason], "batch sweep")


def test_the_suspect_points_words_read_the_same_in_every_process():
    """A sweep's verdict is derived again by ``spmd predict`` in another process, whose string hashing differs: the
    count of suspect points by kind names tied kinds in the order the points' reasons give them, not a set's order
    (which moved with the hash seed and once made the prediction's verdict differ from the sweep's)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "from spmd.scale.decision.verdict import suspect_words\n"
        "reasons = ['noisy: a', 'busy host: b', 'oversubscribed: c', 'beyond ideal: d']\n"
        "print(suspect_words({'suspect': [{'reasons': reasons}, {'reasons': reasons[1::-1]}]}))\n"
    )
    root = Path(__file__).resolve().parents[2]
    said = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(root)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(12)
    }
    assert said == {"2 suspect point(s) (noisy: 2, busy host: 2, oversubscribed: 1, beyond ideal: 1)\n"}
