"""The scaling model recovers known parameters from synthetic timings, and its predictions
(best rank count, break-even size) match closed-form answers."""

from __future__ import annotations

import math

import pytest
from helpers import (
    ALPHA,
    BETA,
    COMPUTE_RATE,
    GAP,
    MOMENTS,
    OVERHEAD,
    READ_INTERCEPT,
    READ_RATE,
    RUNS,
    S,
    synthetic_probe,
    synthetic_run,
    true_time,
)
from hypothesis import given
from hypothesis import strategies as st

from spmd.measure.collectives import COLLECTIVES, model_terms
from spmd.scale.decision.advice import model_advice
from spmd.scale.models.node import node_beyond_seconds, ranks_on_a_node
from spmd.scale.models.phases import HOST_PHASES
from spmd.scale.models.scaling_model import best_ranks, break_even, fit_alpha_beta, fit_local, fit_model, predict


def test_model_recovers_the_synthetic_machine():
    model = fit_model(RUNS, synthetic_probe(), "mpi", growth=0.0)
    assert model["local"]["read"]["rate_Bps"] == pytest.approx(READ_RATE, rel=1e-9)
    assert model["local"]["read"]["intercept_s"] == pytest.approx(READ_INTERCEPT, rel=1e-6)
    assert model["local"]["compute"]["rate_Bps"] == pytest.approx(COMPUTE_RATE, rel=1e-9)
    assert "h2d" not in model["local"]  # zero in every run: not a phase of this machine
    assert model["comm"]["alpha_s"] == pytest.approx(ALPHA, rel=1e-9)
    assert model["comm"]["busbw_Bps"] == pytest.approx(1 / BETA, rel=1e-9)
    assert model["comm"]["overhead_s"] == pytest.approx(OVERHEAD, rel=1e-6)
    assert model["gap_s"] == pytest.approx(GAP, rel=1e-6)
    assert all(abs(p["error"]) < 1e-9 for p in model["points"])
    for n in (1, 5, 16):  # and it predicts sizes it never saw
        want = sum(true_time(n, 3 * S).values()) + GAP
        assert predict(model, n, 3 * S)["total"] == pytest.approx(want, rel=1e-9)


def test_without_a_probe_the_comm_phases_give_the_latency():
    model = fit_model(RUNS, [], "mpi", growth=0.0)
    assert model["comm"]["source"] == "the workload's comm phases"
    assert all(abs(p["error"]) < 1e-3 for p in model["points"])


def test_best_rank_count_is_the_minimum_of_the_closed_form():
    model = fit_model(RUNS, synthetic_probe(), "mpi", growth=0.0)
    # T(n) = c + S/n * (1/R1 + 1/R2) + alpha (n-1) + beta (n-1) m: minimum near sqrt(S k / (alpha + beta m))
    k = 1 / READ_RATE + 1 / COMPUTE_RATE
    continuous = math.sqrt(S * k / (ALPHA + BETA * MOMENTS))
    best = best_ranks(model, S, list(range(1, 400)))
    assert abs(best["best_ranks"] - continuous) <= 1


def test_break_even_share_matches_the_closed_form():
    model = fit_model(RUNS, synthetic_probe(), "mpi", growth=0.0)
    # n ranks beat one when x (n-1) k > (n-1)(alpha + beta m), x = bytes per rank
    k = 1 / READ_RATE + 1 / COMPUTE_RATE
    for n in (2, 4, 8):
        even = break_even(model, n)
        assert even["status"] == "above"
        assert even["bytes_per_rank"] == pytest.approx((ALPHA + BETA * MOMENTS) / k, rel=1e-6)


def test_break_even_never_and_always():
    model = fit_model(RUNS, synthetic_probe(), "mpi", growth=0.0)
    free = {**model, "comm": {**model["comm"], "alpha_s": 0.0, "beta_s_per_B": 0.0}}
    assert break_even(free, 2)["status"] == "always"
    no_work = {**model, "local": {p: {**f, "seconds_per_byte": 0.0} for p, f in model["local"].items()}}
    assert break_even(no_work, 2)["status"] == "never"


def test_message_growth_scales_the_comm_with_the_share():
    runs = [synthetic_run("strong", n, S) for n in (1, 2, 4)]
    for r in runs:  # messages proportional to the share (growth 1): 1/1000 of it
        r["problem"]["comm"] = [{"op": "allreduce", "bytes": int(S / r["ranks"] / 1000)}]
    model = fit_model(runs, [], "mpi", growth=1.0)
    ops = model["comm"]["ops"]
    assert ops == runs[0]["problem"]["comm"]
    from spmd.scale.models.scaling_model import scaled_ops

    assert scaled_ops(model, 4, S)[0]["bytes"] == pytest.approx(S / 4 / 1000, rel=1e-6)


def test_fit_local_affine_and_proportional():
    fit = fit_local([1e6, 2e6, 4e6], [1e-3 + 1e6 / 1e9, 1e-3 + 2e6 / 1e9, 1e-3 + 4e6 / 1e9])
    assert (
        fit["fit"] == "affine" and fit["rate_Bps"] == pytest.approx(1e9) and fit["intercept_s"] == pytest.approx(1e-3)
    )
    fit = fit_local([1e6, 2e6, 2e6], [2e-3, 3e-3, 3e-3])  # two shares: the line through both
    assert (
        fit["fit"] == "affine" and fit["rate_Bps"] == pytest.approx(1e9) and fit["intercept_s"] == pytest.approx(1e-3)
    )
    fit = fit_local([1e6, 1e6], [1e-3, 1e-3])  # one share: only a rate
    assert fit["fit"] == "proportional" and fit["rate_Bps"] == pytest.approx(1e9) and fit["intercept_s"] == 0
    fit = fit_local([1e6, 2e6, 4e6], [3e-3, 2e-3, 1e-3])  # slower with less data: no negative rate
    assert fit["rate_Bps"] is None and fit["intercept_s"] == pytest.approx(2e-3)


NODE_COST = 0.5  # each further rank on a node adds half the read's time per byte (a memory bandwidth they share)


def contended_run(mode: str, ranks: int, problem: float, node_ranks: int | None = None) -> dict:
    """synthetic_run on a machine whose read slows as the ranks on a node share it."""
    run = synthetic_run(mode, ranks, problem)
    k = node_ranks or ranks
    extra = (problem / ranks) / READ_RATE * NODE_COST * (k - 1)
    for phase in ("read", "total"):
        run["timings"][phase] = {stat: t + extra for stat, t in run["timings"][phase].items()}
    return {**run, "time": run["time"] + extra, "node_ranks": k}


def test_a_read_that_slows_as_the_node_fills_is_fitted_on_one_and_two_ranks_and_predicts_four():
    runs = [contended_run("strong", 1, S), contended_run("strong", 2, S), contended_run("weak", 2, 2 * S)]
    probe = [q for q in synthetic_probe() if q["ranks"] <= 2]
    model = fit_model(runs, probe, "mpi", 0.0)
    read = model["local"]["read"]
    assert read["fit"] == "affine + node" and read["node_seconds_per_byte"] == pytest.approx(NODE_COST / READ_RATE)
    assert read["rate_Bps"] == pytest.approx(READ_RATE) and read["intercept_s"] == pytest.approx(READ_INTERCEPT)
    assert "node_seconds_per_byte" not in model["local"]["compute"]  # the same at 1 and 2 a node: its own
    assert model["parameters"] == 3 and model["validated"] is False  # 3 points, 3 parameters: not yet tested
    for mode, problem in (("strong", S), ("weak", 4 * S)):  # 4 ranks on one node, never measured
        assert predict(model, 4, problem)["total"] == pytest.approx(contended_run(mode, 4, problem)["time"])
    # two nodes of two: each rank shares its node with one other
    assert predict({**model, "node_slots": 2}, 4, 4 * S)["read"] == pytest.approx(
        contended_run("weak", 4, 4 * S, node_ranks=2)["timings"]["read"]["max"]
    )
    advice = " ".join(model_advice(model, None, [], 2))
    assert "read slowed as the node filled: each further rank on a node adds 50% to its time per byte" in advice
    assert read["node_ranks_measured"] == 2  # the most ranks a node the term was fitted on
    assert "Measured with up to 2 rank(s) on a node" in advice and "the prediction of read is a lower bound" in advice
    assert "compute slowed" not in advice
    # on GPUs only what a rank does on the host may share the node: a compute phase slower at 2 a node is not
    # extrapolated (each rank has its own GPU)
    slower = [
        {
            **r,
            "timings": {
                **r["timings"],
                "compute": {k: v * (1.2 if r["ranks"] == 2 else 1) for k, v in r["timings"]["compute"].items()},
            },
        }
        for r in runs
    ]
    on_cpus = fit_model(slower, probe, "mpi", 0.0)
    assert "node_seconds_per_byte" in on_cpus["local"]["compute"]  # CPUs: it is, held beyond 2 a node
    assert "compute slowed as the node filled" in " ".join(model_advice(on_cpus, None, [], 2))
    assert "the growth is held there beyond" in " ".join(model_advice(on_cpus, None, [], 2))
    on_gpus = fit_model(slower, probe, "nccl", 0.0, node_phases=HOST_PHASES)["local"]
    assert "node_seconds_per_byte" not in on_gpus["compute"] and "node_seconds_per_byte" in on_gpus["read"]
    # the model without the node term (the same runs as if each rank had a node) is well under at 4
    alone = fit_model([{**r, "node_ranks": 1} for r in runs], probe, "mpi", 0.0)
    assert predict(alone, 4, 4 * S, node_ranks=4)["total"] < 0.8 * contended_run("weak", 4, 4 * S)["time"]


def test_a_node_term_needs_the_same_share_at_two_counts_and_more_than_noise():
    share, t = 1e6, 2e-3
    assert "node_seconds_per_byte" not in fit_local([share, share / 2], [t, t / 2 * 1.2], [1, 2])  # strong alone
    assert "node_seconds_per_byte" not in fit_local([share, share / 2, share], [t, t / 2, t * 1.03], [1, 2, 2])
    grown = fit_local([share, share / 2, share], [t, t / 2 * 1.2, t * 1.2], [1, 2, 2])
    assert grown["node_seconds_per_byte"] == pytest.approx(0.2 * t / share)
    assert "node_seconds_per_byte" not in fit_local([share, share / 2, share], [t, t / 2, t * 0.8], [1, 2, 2])


@given(rate=st.floats(1e8, 1e11), pair=st.floats(0.7, 1.0), cached=st.floats(0.1, 0.9))
def test_only_the_points_of_equal_bytes_decide_a_node_term(rate, pair, cached):
    """A rank's shares that stay in a cache run faster per byte than the whole (``cached`` of its cost), and its 2-rank
    run of the same bytes was no slower (``pair`` of the 1-rank time): no node term, however cheap the shares were.
    Least squares over every point read the whole's dearer bytes at 2 ranks as the node filling."""
    whole = 128 * 2**20
    xs = [whole, whole, whole / 2, whole / 4, whole / 8]
    ys = [whole / rate, pair * whole / rate, pair * whole / 2 / rate, *(cached * x / rate for x in xs[3:])]
    assert "node_seconds_per_byte" not in fit_local(xs, ys, [1, 2, 2, 1, 1])


@given(growth=st.floats(0.06, 2.0), cached=st.floats(0.3, 1.0), k=st.integers(2, 64))
def test_a_node_term_is_the_growth_its_pair_of_equal_bytes_showed(growth, cached, k):
    """Whatever the shares' cost per byte, the term is what the pair of equal bytes grew by, per further rank."""
    whole, t = 64 * 2**20, 0.1
    xs = [whole, whole, whole / 4, whole / 8]
    ys = [t, t * (1 + growth * (k - 1)), cached * t / 4, cached * t / 8]
    fit = fit_local(xs, ys, [1, k, 1, 1])
    assert fit["node_seconds_per_byte"] == pytest.approx(growth * t / whole, rel=1e-9)
    assert fit["node_ranks_measured"] == k


@given(
    per_byte=st.floats(1e-11, 1e-8),
    node=st.floats(1e-12, 1e-8),
    measured=st.integers(2, 8),
    ranks=st.integers(1, 64),
    problem=st.floats(1e6, 1e11),
)
def test_beyond_the_ranks_measured_a_host_phase_grows_on_and_a_compute_phase_is_held(
    per_byte, node, measured, ranks, problem
):
    """A host's reads grow with every further rank on its node; a rank's compute grows only up to the ranks its node
    was measured with, and what growing on would add is ``node_beyond_seconds``: the two extrapolations' difference."""
    fit = {"intercept_s": 0.0, "seconds_per_byte": per_byte, "node_seconds_per_byte": node}
    fit["node_ranks_measured"] = measured
    comm = {"ops": [], "growth": 0.0, "reference_share_bytes": 1.0, "overhead_s": 0.0, "alpha_s": 0, "beta_s_per_B": 0}
    model = {"local": {"read": fit, "compute": fit}, "comm": comm, "gap_s": 0.0}
    share = problem / ranks
    phases = predict(model, ranks, problem)
    assert phases["read"] == pytest.approx(share * (per_byte + (ranks - 1) * node))
    assert phases["compute"] == pytest.approx(share * (per_byte + (min(ranks, measured) - 1) * node))
    beyond = node_beyond_seconds(model, ranks, problem)
    assert beyond == pytest.approx(share * max(0, ranks - measured) * node)
    assert phases["compute"] + beyond == pytest.approx(phases["read"])


def test_ranks_fill_the_nodes_evenly():
    assert [ranks_on_a_node({"node_slots": 4}, n) for n in (1, 4, 5, 6, 8, 9)] == [1, 4, 3, 3, 4, 3]
    assert ranks_on_a_node({"node_slots": None}, 8) == 8 and ranks_on_a_node({}, 3) == 3


def test_alpha_beta_never_negative():
    # pure latency: beta must not go negative to fit noise
    alpha, beta = fit_alpha_beta([(1, 8, 10e-6), (1, 1e6, 9.9e-6), (2, 2e6, 20.1e-6)])
    assert alpha > 0 and beta == 0
    alpha, beta = fit_alpha_beta([(1, 1e3, 1e-6), (1, 1e9, 1.0)])  # pure bandwidth
    assert beta == pytest.approx(1e-9, rel=1e-2) and alpha >= 0
    assert fit_alpha_beta([(0, 0, 1e-6)]) == (0.0, 0.0)  # one rank: nothing to fit


def test_fewer_than_two_sizes_give_no_model():
    assert fit_model(RUNS[:1], [], "mpi", 0.0) is None


def test_oversubscribed_runs_are_left_out_of_the_fit():
    bad = synthetic_run("strong", 3, S)
    bad["time"] *= 3
    bad["oversubscribed"] = True
    model = fit_model([r for r in RUNS if r["ranks"] != 3] + [bad], synthetic_probe(), "mpi", 0.0)
    fitted = {(p["mode"], p["ranks"]): p for p in model["points"]}
    assert fitted[("strong", 3)]["fitted"] is False and fitted[("strong", 3)]["error"] < -0.6
    assert all(abs(p["error"]) < 1e-9 for p in model["points"] if p["fitted"])


@pytest.mark.parametrize(
    "op, n, factor",
    [
        ("allreduce", 4, 1.5),
        ("allgather", 4, 0.75),
        ("reduce_scatter", 8, 0.875),
        ("bcast", 4, 1.0),
        ("sendrecv", 2, 1.0),
    ],
)
def test_bus_factors_are_nccl_tests(op, n, factor):
    assert COLLECTIVES[op].bus_factor(n) == pytest.approx(factor)
    assert model_terms(op, 1, 1024) == (0.0, 0.0)  # one rank moves nothing


def test_advice_names_the_phase_that_makes_more_ranks_slower():
    from spmd.scale.decision.advice import model_advice

    model = fit_model(RUNS, synthetic_probe(), "mpi", growth=0.0)
    slow = {**model, "comm": {**model["comm"], "alpha_s": 0.02}}  # 20 ms per step: comm dominates early
    best = best_ranks(slow, S, [1, 2, 4, 8])
    lines = model_advice(slow, best, [break_even(slow, 2)], measured_max=4)
    k = 1 / READ_RATE + 1 / COMPUTE_RATE
    assert best["best_ranks"] == min(
        [1, 2, 4, 8], key=lambda n: S / n * k + 0.02 * (n - 1) + (BETA * MOMENTS) * (n - 1)
    )
    n = best["best_ranks"]
    rise = [line for line in lines if line.startswith(f"Beyond {n} ranks the predicted time rises")]
    assert len(rise) == 1 and ": comm grows by" in rise[0]
    assert not any(line.startswith("Beyond") for line in model_advice(model, best_ranks(model, S, [1, 2]), [], 4))


def test_slices_of_a_fixed_operand_shrink_with_the_ranks_in_weak_scaling():
    """matmul's allgather of B: B is fixed (k x n) while weak scaling grows A, so each rank's
    slice is B / n whatever the share. ``growth: 0, ranks_power: -1`` says so; the share-only
    scaling predicted the whole of B at every rank count."""
    from spmd.scale.models.scaling_model import scaled_ops

    b = 1 << 30
    runs = [synthetic_run("weak", n, S * n) for n in (1, 2, 4)]
    for r in runs:
        r["problem"]["comm"] = [{"op": "allgather", "bytes": b // r["ranks"], "growth": 0.0, "ranks_power": -1.0}]
    model = fit_model(runs, synthetic_probe(), "mpi", growth=1.0)
    for n in (2, 4, 8):
        assert scaled_ops(model, n, S * n)[0]["bytes"] == b // n  # weak: the share stays, the slice shrinks
        assert scaled_ops(model, n, S)[0]["bytes"] == b // n  # strong: the same slices
    shared_only = {**model, "comm": {**model["comm"], "ops": [{"op": "allgather", "bytes": b}]}}
    assert scaled_ops(shared_only, 8, S * 8)[0]["bytes"] == b  # what the model said before


def _sliced_run(ranks: int, share: float, parts: int, b: float, rates: dict) -> dict:
    """A run whose rank reads and copies in its ``share`` of A and B's 1/``parts`` (matmul, b_source allgather) and
    computes on its share alone: ``rates`` {phase: (intercept, bytes a second)}."""
    held = share + b / parts
    phases = {
        "read": rates["read"][0] + held / rates["read"][1],
        "h2d": rates["h2d"][0] + held / rates["h2d"][1],
        "compute": rates["compute"][0] + share / rates["compute"][1],
        "comm": OVERHEAD,
    }
    timings = {p: {"min": t, "median": t, "max": t} for p, t in phases.items()}
    total = sum(phases.values()) + GAP
    timings["total"] = {"min": total, "median": total, "max": total}
    comm = [{"op": "allgather", "bytes": b / parts, "growth": 0.0, "ranks_power": -1.0}]
    problem = {"bytes": share * ranks, "comm": comm, "sliced": {"bytes": b, "parts": parts}}
    return {"mode": "strong" if parts == ranks else "share", "ranks": ranks, "time": total, "timings": timings,
            "problem": problem}  # fmt: skip


@given(
    a=st.floats(1e6, 1e10),
    b=st.floats(1e6, 1e10),
    rates=st.fixed_dictionaries(
        {p: st.tuples(st.floats(1e-5, 1e-2), st.floats(1e9, 2e11)) for p in ("read", "h2d", "compute")}
    ),
    ranks=st.sampled_from([2, 3, 4, 8]),
)
def test_a_rank_reads_its_slice_of_a_fixed_operand_beside_its_share(a, b, rates, ranks):
    """Fitted on one rank and its shares of 2 and 4 (each reading B's 1/N slice, as a rank of N does), a rank's
    reads and copies in are priced at its share of A plus B / N, in weak scaling (A grows, B does not) as in strong;
    its compute on its share alone. Without the slice listed (a model on bytes of A alone, as before) a weak row
    priced B whole: above what its rank reads."""
    runs = [_sliced_run(1, a / n, n, b, rates) for n in (1, 2, 4)]
    model = fit_model(runs, [], "mpi", growth=1.0)
    assert model["sliced_bytes"] == b
    for problem, share in ((a, a / ranks), (a * ranks, a)):  # strong, weak
        want = _sliced_run(ranks, share, ranks, b, rates)["timings"]
        got = predict(model, ranks, problem)
        for phase in ("read", "h2d", "compute"):
            assert got[phase] == pytest.approx(want[phase]["max"], rel=1e-6, abs=1e-9), phase
    before = fit_model([{**r, "problem": {k: v for k, v in r["problem"].items() if k != "sliced"}} for r in runs], [],
                       "mpi", growth=1.0)  # fmt: skip
    weak = _sliced_run(ranks, a, ranks, b, rates)["timings"]["h2d"]["max"]
    assert predict(before, ranks, a * ranks)["h2d"] > weak * (1 + 1e-6)


def test_matmul_states_that_its_b_slices_follow_the_ranks(tmp_path):
    from mpi4py import MPI

    from spmd.core.runtime import Context
    from spmd.io.generate import generate
    from spmd.job import run_job
    from spmd.workloads.matmul.workload import MatmulWorkload
    from spmd.workloads.registry import job_config_from_dict

    cfg = job_config_from_dict(
        {
            "workload": "matmul",
            "device": "cpu",
            "comm": "mpi",
            "warmup": 0,
            "repeats": 1,
            "input": {"path": str(tmp_path / "A.h5"), "dataset": "A"},
            "output": str(tmp_path / "out"),
            "generate": {"shape": [8, 6], "dtype": "float64", "seed": 1},
            "params": {
                "b": {
                    "path": str(tmp_path / "B.h5"),
                    "dataset": "B",
                    "generate": {"shape": [6, 4], "dtype": "float64", "seed": 2},
                },
                "b_source": "allgather",
                "gather": "none",
            },
        }
    )
    generate(cfg, MatmulWorkload)
    with Context(MPI.COMM_SELF) as ctx:
        report = run_job(ctx, cfg).report
    [op] = report["problem"]["comm"]
    assert op == {"op": "allgather", "bytes": 6 * 4 * 8, "growth": 0.0, "ranks_power": -1.0}
    assert report["problem"]["sliced"] == {"bytes": 6 * 4 * 8, "parts": 1}  # one rank reads all of B


def _gpu_run(mode: str, ranks: int, problem: float, host_floor: float, hidden: bool = False) -> dict:
    """A GPU run of the synthetic machine whose host issues the device's work (compute, comm) in no less than
    ``host_floor`` seconds: below it the device idles, outside every phase. ``hidden``: its collectives ran beside
    the compute (timed as overlapped), exposed only beyond it."""
    run = synthetic_run(mode, ranks, problem)
    t = {p: v["max"] for p, v in run["timings"].items() if p != "total"}
    if hidden and ranks > 1:
        priced = t["comm"] - OVERHEAD
        t["comm"] = OVERHEAD + max(0.0, priced - t["compute"])
        run["timings"]["comm_overlapped"] = {"min": priced, "median": priced, "max": priced}
    device = t["compute"] + t["comm"]
    total = sum(t.values()) + GAP + max(0.0, host_floor - device)
    run["timings"].update({p: {"min": v, "median": v, "max": v} for p, v in t.items()})
    run["timings"]["total"] = {"min": total, "median": total, "max": total}
    return {**run, "time": total}


def test_a_host_floor_is_fitted_where_a_small_share_leaves_the_gpu_idle():
    floor = 0.8 * true_time(1, S)["compute"]  # one rank's device work is above it, two and four ranks' below
    runs = [_gpu_run("strong", n, S, floor) for n in (1, 2, 4)] + [_gpu_run("weak", 2, 2 * S, floor)]
    model = fit_model(runs, synthetic_probe(), "nccl", 0.0, node_phases=HOST_PHASES, gpu=True)
    assert model["host_floor_s"] == pytest.approx(floor, rel=1e-6)
    assert model["gap_s"] == pytest.approx(GAP, rel=1e-6)
    for n in (3, 8):  # counts it never saw: the GPU's idle time predicted with the rest
        assert predict(model, n, S)["total"] == pytest.approx(_gpu_run("strong", n, S, floor)["time"], rel=1e-9)
    # fitted to 1 and 2 ranks only (the floor binds at 2), it carries to 4
    two = fit_model([r for r in runs if r["ranks"] <= 2], synthetic_probe(), "nccl", 0.0, HOST_PHASES, gpu=True)
    assert predict(two, 4, S)["total"] == pytest.approx(runs[2]["time"], rel=1e-6)
    assert any("Bound by the host below" in line for line in model_advice(model, None, [], 4))
    # on CPUs every phase is the host's: no floor
    assert "host_floor_s" not in fit_model(runs, synthetic_probe(), "mpi", 0.0)


def test_gaps_that_differ_by_noise_fit_no_floor():
    runs = [_gpu_run("strong", n, S, 0.0) for n in (1, 2, 4)]
    runs[2]["time"] *= 1.01  # 1% more time outside the phases at the smallest share: below NODE_TERM_MIN_SHARE
    model = fit_model(runs, synthetic_probe(), "nccl", 0.0, node_phases=HOST_PHASES, gpu=True)
    assert "host_floor_s" not in model


def test_collectives_beside_the_compute_are_exposed_only_beyond_it():
    runs = [_gpu_run("strong", n, S, 0.0, hidden=True) for n in (1, 2, 4)] + [_gpu_run("weak", 2, 2 * S, 0.0, True)]
    model = fit_model(runs, synthetic_probe(), "nccl", 0.0, node_phases=HOST_PHASES, gpu=True)
    assert model["comm"]["hidden_behind"] == "compute"
    assert any("ran beside compute" in line for line in model_advice(model, None, [], 4))
    assert model["comm"]["overhead_s"] == pytest.approx(OVERHEAD, rel=1e-6)
    compute = predict(model, 4, S)["compute"]
    slow = 1e-3 + compute  # a link whose collectives take a millisecond more than the compute hides
    assert predict(model, 4, S, collectives=lambda n, ops: slow)["comm"] == pytest.approx(OVERHEAD + 1e-3)
    assert predict(model, 4, S, collectives=lambda n, ops: compute / 2)["comm"] == pytest.approx(OVERHEAD)
    # a workload that timed nothing overlapped waits for all of it
    plain = fit_model([synthetic_run("strong", n, S) for n in (1, 2, 4)], synthetic_probe(), "nccl", 0.0)
    assert "hidden_behind" not in plain["comm"]
    assert predict(plain, 4, S, collectives=lambda n, ops: slow)["comm"] == pytest.approx(
        plain["comm"]["overhead_s"] + slow
    )


@given(alone=st.floats(1e-6, 1e-2), overhead=st.floats(1e-6, 1e-2))
def test_one_rank_is_charged_the_comm_it_paid_not_the_overhead_of_several(alone, overhead):
    """make demo's break-even once charged one rank the comm overhead of two (measured 0.1 ms, charged 5.16): one
    rank's comm phase is what it measured, whatever the others paid; two ranks keep theirs."""
    runs = []
    for run in RUNS:
        run = {**run, "timings": {**run["timings"]}}
        t = alone if run["ranks"] == 1 else run["timings"]["comm"]["min"] - OVERHEAD + overhead
        extra = t - run["timings"]["comm"]["min"]
        run["timings"]["comm"] = {"min": t, "median": t, "max": t}
        run["time"] += extra
        runs.append(run)
    model = fit_model(runs, synthetic_probe(), "mpi", growth=0.0)
    assert predict(model, 1, S)["comm"] == pytest.approx(alone, rel=1e-9)
    assert model["comm"]["overhead_s"] == pytest.approx(overhead, rel=1e-6, abs=1e-12)
    even = break_even(model, 2)
    if even["status"] == "above":  # at the break-even share, one rank's predicted time holds its own comm only
        one = predict(model, 1, 2 * even["bytes_per_rank"])
        assert one["comm"] == pytest.approx(alone, rel=1e-9)


@given(halo=st.integers(8, 1 << 24), calls=st.integers(1, 1000), per_call=st.floats(1e-7, 1e-3))
def test_a_sweep_on_one_rank_prices_the_halos_it_listed_at_more_ranks(halo, calls, per_call):
    """A stencil's one rank exchanges nothing but lists the row halos a split would: a sweep fitted on one GPU (two
    shares) prices them on the target's links at 2, all exposed (no run showed them hide), once each call."""
    ops = [{"op": "sendrecv", "bytes": halo, "calls": calls, "growth": 0.0}]
    runs = []
    for share in (S, S / 2):
        run = synthetic_run("share" if share < S else "strong", 1, share)
        run["problem"]["comm"] = ops
        runs.append(run)
    model = fit_model(runs, [], "nccl", 0.0, node_phases=HOST_PHASES, gpu=True)
    seen = []

    def links(ranks, priced_ops):
        seen.append((ranks, priced_ops))
        return sum(o["calls"] * per_call for o in priced_ops)

    alone = predict(model, 1, S)["comm"]
    two = predict(model, 2, S, collectives=links)
    assert seen == [(2, [{**ops[0], "bytes": halo}])]
    assert two["comm"] == pytest.approx(alone + calls * per_call, rel=1e-9)


@given(
    st.floats(1e-3, 1.0),
    st.lists(st.floats(1e-4, 2.0), min_size=3, max_size=3),
    st.sampled_from([4, 8, 16]),
    st.floats(1.0, 3.0),
)
def test_a_training_steps_optimizer_is_priced_on_the_sweeps_own_problem_alone_whatever_the_share(
    own, others, ranks, slowdown
):
    """A training step's optimizer updates every parameter whatever a rank's batch: fitted as the sweep's own problem
    on one rank measured it, no seconds a byte, whatever its runs of two and its share runs (smaller batches alone)
    measured; priced so at every count of ranks and share, times the cores slowdown the target measured. A phase whose
    work is the share's (forward) keeps its line and, on a CPU, the share run that measured its share alone."""
    from spmd.scale.models.node import cores_slowdown

    def run(mode: str, ranks: int, problem: float, optimizer: float, cached: float = 1.0) -> dict:
        phases = {"forward": (1e-3 + problem / ranks * 1e-9) * cached, "optimizer": optimizer, "comm": 0.0}
        timings = {p: {"min": t, "median": t, "max": t} for p, t in phases.items()}
        total = sum(phases.values())
        timings["total"] = {"min": total, "median": total, "max": total}
        return {"mode": mode, "ranks": ranks, "time": total, "timings": timings, "problem": {"bytes": problem}}

    two, quarter, eighth = others
    runs = [
        run("strong", 1, S, own),
        run("strong", 2, S, two),
        run("weak", 2, 2 * S, two),
        run("share", 1, S / 4, quarter, 0.5),
        run("share", 1, S / 8, eighth, 0.5),  # a share its caches hold: faster a byte
    ]
    model = fit_model(runs, [], "mpi", growth=0.0)
    fit = model["local"]["optimizer"]
    assert fit["fit"] == "per step" and fit["seconds_per_byte"] == 0.0 and fit["intercept_s"] == pytest.approx(own)
    assert model["local"]["forward"]["fit"].startswith("affine")
    cores = {"ranks": 16, "sweep_ranks": 2, "slowdown": slowdown, "low": 1.0, "high": slowdown}
    cpu = {**model, "alone_from_runs": True, "node_cores": cores}
    charge = cores_slowdown(cpu, ranks)[0]
    for problem in (S, S * ranks):  # strong and weak
        assert predict(cpu, ranks, problem, ranks)["optimizer"] == pytest.approx(own * charge)
        assert predict(model, ranks, problem, ranks)["optimizer"] == pytest.approx(own)  # a GPU sweep's: as fitted
    # the share S/8 on 8 ranks: forward on the share run that measured it alone, the optimizer on the sweep's own
    eight = predict(cpu, 8, S, 8)
    charge = cores_slowdown(cpu, 8)[0]
    assert eight["forward"] == pytest.approx((1e-3 + S / 8 * 1e-9) * 0.5 * charge)
    assert eight["optimizer"] == pytest.approx(own * charge)
