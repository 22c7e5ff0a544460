"""The advice names what the numbers show: slower sizes, fixed costs, shared resources."""

from __future__ import annotations

from spmd.scale.advice import oversubscription_advice, series_advice


def row(mode, ranks, time, bytes_per_rank, **phases):
    timings = {p: {"min": t, "median": t, "max": t} for p, t in
               {"read": 0.0, "wait": 0.0, "compute": 0.0, "comm": 0.0, **phases}.items()}
    timings["total"] = {"min": time, "median": time, "max": time}
    return {"mode": mode, "ranks": ranks, "time": time, "bytes_per_rank": bytes_per_rank, "timings": timings}


def with_figures(rows):
    base = rows[0]
    for r in rows:
        p = r["ranks"] / base["ranks"]
        if r["mode"] == "strong":
            r["speedup"] = base["time"] / r["time"]
            r["efficiency"] = r["speedup"] / p
        else:
            r["efficiency"] = base["time"] / r["time"]
            r["speedup"] = r["efficiency"] * p
    return rows


def test_strong_slowdown_names_the_phase_that_grew():
    rows = with_figures([row("strong", 1, 1.0, 1e9, compute=0.9, comm=0.1),
                         row("strong", 2, 1.2, 5e8, compute=0.45, comm=0.75)])
    lines = series_advice(rows)
    assert lines[0] == "Strong scaling 1 -> 2 ranks: speedup 0.83x, efficiency 42%."
    slower = [line for line in lines if line.startswith("Adding ranks made the job slower")]
    assert len(slower) == 1 and "1 -> 2 ranks took 1 s -> 1.2 s (+20%); comm grew most (+650 ms)" in slower[0]


def test_strong_fixed_cost_is_named():
    rows = with_figures([row("strong", 1, 1e-3, 1e6, compute=5e-4, read=5e-4),
                         row("strong", 2, 8e-4, 5e5, compute=4.8e-4, read=2.5e-4)])
    lines = series_advice(rows)
    fixed = [line for line in lines if "does not shrink" in line]
    assert len(fixed) == 1 and fixed[0].startswith("compute took 500.0 us at 1 rank(s) and 480.0 us at 2")
    assert any(line.startswith("At 2 ranks efficiency is 62%: compute is") for line in lines)


def test_weak_contention_is_named():
    rows = with_figures([row("weak", 1, 1.0, 1e9, read=0.5, compute=0.5),
                         row("weak", 2, 1.5, 1e9, read=1.0, compute=0.5)])
    lines = series_advice(rows)
    assert lines[0] == "Weak scaling 1 -> 2 ranks: efficiency 67% (each rank's share took 1.50x as long)."
    shared = [line for line in lines if "share something" in line]
    assert len(shared) == 1 and shared[0].startswith("Per rank, read moved 2 GB/s at 1 rank(s) but 1 GB/s at 2 (-50%)")


def test_good_scaling_says_only_so():
    rows = with_figures([row("strong", 1, 1.0, 1e9, compute=1.0), row("strong", 2, 0.5, 5e8, compute=0.5)])
    assert series_advice(rows) == ["Strong scaling 1 -> 2 ranks: speedup 2.00x, efficiency 100%."]
    assert series_advice(rows[:1]) == []


def test_oversubscription_is_reported_once_per_size():
    place = {"oversubscribed": ["vm"], "ranks_per_node": {"vm": 3}, "cpus_per_node": {"vm": 2}}
    runs = [{"ranks": 3, "placement": place}, {"ranks": 3, "placement": place},
            {"ranks": 2, "placement": {"oversubscribed": []}}]
    lines = oversubscription_advice(runs)
    assert lines == ["At 3 ranks, host vm runs 3 ranks on 2 CPUs: they compete for cores, so this size measures "
                     "contention, not scaling (the model is fitted without it)."]
