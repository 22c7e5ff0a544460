"""Pieces of ``spmd scale``: rank lists, weak configs, figures, links, compare, units."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest

from spmd.core.errors import ConfigError, InputError
from spmd.core.topology import gpu_pair_link, normalize_bus_id, summarize_placement
from spmd.core.units import fmt_bytes, fmt_seconds, parse_bytes
from spmd.io.weak import scaled_input
from spmd.report.compare import Point, compare, load_entries
from spmd.report.summary import job_time
from spmd.scale.models.series import imbalance, karp_flatt, series_figures
from spmd.scale.sweep.run import default_ranks, parse_ranks, plan
from spmd.workloads.registry import job_config_from_dict


def test_default_ranks_are_powers_of_two_plus_the_launch():
    assert default_ranks(1) == [1]
    assert default_ranks(3) == [1, 2, 3]
    assert default_ranks(8) == [1, 2, 4, 8]
    assert default_ranks(6) == [1, 2, 4, 6]
    assert parse_ranks("4,1, 2,2", 4) == [1, 2, 4]
    for bad in ("0,1", "1,5", "x", ","):
        with pytest.raises(ConfigError):
            parse_ranks(bad, 4)


def config(**keys):
    raw = {
        "workload": "reduce",
        "input": {"path": "d/x.h5"},
        "generate": {"shape": [100, 3], "dtype": "float32"},
        **keys,
    }
    return job_config_from_dict(raw)


def test_weak_config_grows_rows_into_its_own_files():
    cfg = config()
    assert scaled_input(cfg, 1) is cfg
    two = scaled_input(cfg, 2)
    assert two.input.path == "d/weak-x2/x.h5" and two.generate.shape == (200, 3)
    half = scaled_input(cfg, Fraction(3, 2))
    assert half.input.path == "d/weak-x1.5/x.h5" and half.generate.shape == (150, 3)
    sharded = config(input={"shards": "s/part-*.h5"}, generate={"shape": [100], "shards": 2})
    four = scaled_input(sharded, 4)
    assert four.input.shards == ("s/weak-x4/part-*.h5",) and four.generate.shards == 8
    assert four.generate.shape == (400,)
    points = plan(cfg, ["strong", "weak"], [1, 2])
    assert [(s.mode, s.ranks) for s in points] == [("strong", 1), ("strong", 2), ("weak", 1), ("weak", 2)]
    assert points[2].cfg is cfg and points[3].cfg.generate.shape == (200, 3)


@pytest.mark.parametrize(
    "keys, factor, message",
    [
        ({"generate": None}, 2, "needs a generate section"),
        ({"input": {"shards": ["a.h5", "b.h5"]}}, 2, "not a list of files"),
        ({"generate": {"shape": [101]}}, Fraction(3, 2), "not a whole number of rows"),
        (
            {"input": {"shards": "s/*.h5"}, "generate": {"shape": [300], "shards": 2}},
            Fraction(4, 3),
            "not a whole number of shards",
        ),
    ],
)
def test_weak_config_errors(keys, factor, message):
    with pytest.raises(ConfigError, match=message):
        scaled_input(config(**keys), factor)


def test_scaled_config_is_the_workloads_own_rule_for_each_mode():
    """sweeps, job scripts and merge all ask the workload through one classmethod."""
    from spmd.workloads.registry import workload_class

    cfg = config()
    reduce = workload_class("reduce")
    assert reduce.scaled_config(cfg, "strong", Fraction(2)) is cfg
    assert reduce.scaled_config(cfg, "weak", Fraction(2)) == scaled_input(cfg, 2)
    train = job_config_from_dict({"workload": "train", "input": {"path": "t.h5"}, "params": {"batch": 64}})
    trainer = workload_class("train")
    assert trainer.scaled_config(train, "strong", Fraction(4)).params.batch == 16  # the global batch stays
    assert trainer.scaled_config(train, "weak", Fraction(4)) is train  # the per-rank batch stays
    with pytest.raises(ValueError, match="scaling mode 'both'"):
        reduce.scaled_config(cfg, "both", Fraction(2))


def test_a_share_is_what_one_rank_of_a_strong_run_holds_on_one_rank():
    """--shares: arrays split their rows, training its per-rank batch; each point one rank, named by its rank
    count; a share the sweep runs itself is refused."""
    from spmd.scale.sweep.run import SHARE_MODE, parse_shares, plan_shares
    from spmd.workloads.registry import workload_class

    cfg = config()
    assert workload_class("reduce").share_config(cfg, Fraction(4)) == scaled_input(cfg, Fraction(1, 4))
    train = job_config_from_dict({"workload": "train", "input": {"path": "t.h5"}, "params": {"batch": 64}})
    points = plan_shares(train, [2, 8], [1])
    assert [(p.mode, p.ranks, p.share_of, p.cfg.params.batch) for p in points] == [
        (SHARE_MODE, 1, 2, 32),
        (SHARE_MODE, 1, 8, 8),
    ]
    assert plan_shares(train, [8], [2])[0].cfg.params.batch == 16  # the config is the strong run's at 2 ranks
    assert parse_shares("2,4", [1]) == [2, 4] and parse_shares(None, [1]) == []
    with pytest.raises(ConfigError, match="--shares '2,4': 2 ranks run in the sweep itself"):
        parse_shares("2,4", [1, 2])


def test_a_runs_wall_words_name_its_parts_and_nothing_when_none_is_worth_naming():
    from spmd.scale.sweep.run import wall_words

    assert wall_words({"wall": {"setup": 1.26, "repeats": 0.5, "report": 0.01}}) == (
        "; 1.8 s in all (setup 1.3 s, repeats 0.5 s)"
    )
    assert wall_words({"wall": {"repeats": 0.04, "report": 0.01}}) == "; 0.1 s in all"
    assert wall_words({}) == ""


def report(ranks: int, totals_by_rank: list[list[float]], busy_by_rank=None) -> dict:
    """A minimal report.json: per-rank repeat totals; busy = read per rank (median)."""
    busy_by_rank = busy_by_rank or [0.5 * min(t) for t in totals_by_rank]
    per_rank = [
        {
            "rank": r,
            "median": {"read": b, "h2d": 0.0, "compute": 0.0, "wait": 0.0, "comm": 0.0},
            "repeats": [{"total": t} for t in totals],
        }
        for r, (totals, b) in enumerate(zip(totals_by_rank, busy_by_rank))
    ]
    med = {"median": 1.0, "min": 1.0, "max": 1.0}
    return {
        "schema": 1,
        "workload": "reduce",
        "ranks": ranks,
        "per_rank": per_rank,
        "problem": {"bytes": 1000},
        "timings": {
            "read": med,
            "wait": med,
            "h2d": med,
            "compute": med,
            "comm": {"median": 0.25, "min": 0.2, "max": 0.3},
            "total": med,
        },
        "config": {},
        "result": {},
        "nodes": [],
        "device": "cpu",
        "comm": "mpi",
        "verified": True,
    }


def test_job_time_is_the_median_of_the_slowest_rank_per_repeat():
    # repeat maxima are 3, 5, 4 -> 4 (the max of per-rank medians would be 3)
    r = report(2, [[3.0, 1.0, 4.0], [1.0, 5.0, 2.0]])
    assert job_time(r) == 4.0


def test_series_figures_strong_and_weak():
    base = report(1, [[8.0, 8.0, 8.0]])
    two = report(2, [[5.0] * 3, [5.0] * 3])
    four = report(4, [[4.0] * 3] * 4)
    strong = series_figures("strong", [base, two, four])
    assert [r["speedup"] for r in strong] == [1.0, 1.6, 2.0]
    assert [r["efficiency"] for r in strong] == [1.0, 0.8, 0.5]
    assert strong[1]["karp_flatt"] == pytest.approx((1 / 1.6 - 1 / 2) / (1 - 1 / 2))
    assert strong[0]["comm_share"] == 0.25 and strong[1]["bytes_per_rank"] == 500
    weak = series_figures("weak", [base, report(2, [[10.0] * 3] * 2), report(4, [[16.0] * 3] * 4)])
    assert [r["efficiency"] for r in weak] == [1.0, 0.8, 0.5]
    assert [r["speedup"] for r in weak] == [1.0, 1.6, 2.0]
    assert karp_flatt(2.0, 2) == 0.0 and karp_flatt(1.0, 2) == 1.0 and karp_flatt(1.0, 1) is None


def test_imbalance_is_max_over_mean_of_own_work():
    r = report(3, [[1.0]] * 3, busy_by_rank=[1.0, 1.0, 4.0])
    assert imbalance(r) == pytest.approx(4.0 / 2.0)


class FakeNVML:
    """Just enough of pynvml: GPUs a, b on NVLink (18 links), c on PCIe through a host bridge."""

    NVML_P2P_CAPS_INDEX_NVLINK = 2
    NVML_P2P_STATUS_OK = 0
    NVML_NVLINK_MAX_LINKS = 36
    NVML_FEATURE_ENABLED = 1

    class NVMLError(Exception):
        pass

    BUS = {b"0000:1b:00.0": "a", b"0000:43:00.0": "b", b"0000:52:00.0": "c"}

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        if bus not in self.BUS:
            raise self.NVMLError("Not Found")
        return self.BUS[bus]

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        assert index == self.NVML_P2P_CAPS_INDEX_NVLINK
        return 0 if {a, b} == {"a", "b"} else 3

    def nvmlDeviceGetNvLinkState(self, handle, link):
        if link >= 18:
            raise self.NVMLError("Invalid Argument")
        return 1

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return 30


def test_gpu_pair_link_from_nvml():
    nvml = FakeNVML()
    assert gpu_pair_link("0000:1B:00.0", "0000:43:00.0", nvml) == ("nvlink", "NVLink, 18 links per GPU")
    assert gpu_pair_link("0000:1b:00.0", "0000:52:00.0", nvml) == ("pcie", "PCIe, through the CPU's host bridge")
    cls, detail = gpu_pair_link("0000:1b:00.0", "0000:99:00.0", nvml)
    assert cls == "unknown" and "Not Found" in detail
    assert gpu_pair_link("00000000:1B:00.0", "0000:1b:00.0", nvml)[0] == "same-gpu"
    assert normalize_bus_id("00000000:1B:00.0") == "0000:1b:00.0"


def test_placement_summary_worst_link_and_oversubscription():
    ranks = [
        {"rank": r, "host": h, "name": "NVIDIA H200", "cpus": 2} for r, h in enumerate(["n1", "n1", "n2", "n2", "n2"])
    ]
    pairs = [
        {"ranks": [0, 1], "class": "nvlink", "detail": "NVLink, 18 links per GPU"},
        {"ranks": [2, 3], "class": "pcie", "detail": "x"},
        {"ranks": [2, 4], "class": "pcie", "detail": "x"},
        {"ranks": [3, 4], "class": "pcie", "detail": "x"},
    ]
    s = summarize_placement(ranks, pairs)
    assert s["hosts"] == {"n1": [0, 1], "n2": [2, 3, 4]} and s["ranks_per_node"] == {"n1": 2, "n2": 3}
    assert s["link_class"] == "network" and s["link"] == "across nodes"
    assert s["pair_counts"] == {"nvlink": 1, "pcie": 3, "network": 6}
    assert s["oversubscribed"] == ["n2"]
    one = summarize_placement(ranks[:2], pairs[:1])
    assert one["link"] == "same node, NVLink (NVLink, 18 links per GPU)" and one["oversubscribed"] == []
    assert summarize_placement(ranks[:1], [])["link_class"] == "single"


@pytest.mark.parametrize(
    "device,bound,node,named",
    [
        ("gpu", 1, 32, [0, 1]),  # Open MPI's mpirun -n 2: a core each on a 32-CPU node
        ("gpu", 8, 32, []),  # several CPUs each
        ("gpu", 1, 3, []),  # the node has no CPUs to spare (fewer than 2 a rank)
        ("cpu", 1, 32, []),  # a CPU rank computes on its core: binding it is the point
    ],
)
def test_gpu_ranks_bound_to_one_cpu_with_cpus_to_spare_are_named_and_warned(device, bound, node, named):
    """Each GPU rank's host thread launches every kernel: bound to one CPU it shares it with NCCL's proxy thread,
    so the report warns and spmd scale advises giving ranks several CPUs, naming the launcher options."""
    from spmd.job import single_cpu
    from spmd.scale.decision.advice import binding_advice

    ranks = [
        {"rank": r, "host": "n1", "device": device, "name": "x", "cpus": 2, "bound_cpus": bound, "node_cpus": node}
        for r in range(2)
    ]
    place = summarize_placement(ranks, [])
    assert place["single_cpu_gpu_ranks"] == named
    warning, advice = single_cpu(place), binding_advice([{"ranks": 2, "placement": place}])
    if named:
        assert len(warning) == 1 and "rank(s) 0, 1" in warning[0] and f"use {node}" in warning[0]
        assert "--bind-to none" in warning[0] and "--cpus-per-task" in warning[0]
        assert len(advice) == 1 and advice[0].startswith("At 2 rank(s)") and "--bind-to none" in advice[0]
    else:
        assert warning == [] and advice == []


@pytest.mark.parametrize(
    "env,says",
    [
        ({}, None),
        ({"NCCL_P2P_DISABLE": "0"}, None),
        ({"NCCL_P2P_DISABLE": "1"}, "NCCL_P2P_DISABLE is set: NCCL goes through host shared memory"),
        ({"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}, "NCCL uses its network transport (sockets)"),
        ({"NCCL_P2P_LEVEL": "PIX"}, "NCCL_P2P_LEVEL=PIX limits where NCCL uses it"),
    ],
)
def test_the_link_says_when_nccls_settings_take_it_out_of_nccls_hands(env, says):
    ranks = [{"rank": r, "host": "n1", "name": "NVIDIA H200", "cpus": 32, "nccl_env": env} for r in range(2)]
    s = summarize_placement(ranks, [{"ranks": [0, 1], "class": "nvlink", "detail": "NVLink, 18 links per GPU"}])
    assert s["link_class"] == "nvlink" and s["link"].startswith("same node, NVLink (NVLink, 18 links per GPU")
    assert (says in s["link"]) if says else s["link"] == "same node, NVLink (NVLink, 18 links per GPU)"
    assert s["nccl_env"] == env
    cpu = summarize_placement(ranks, [{"ranks": [0, 1], "class": "cpu-shm", "detail": "MPI shared memory"}])
    assert "NCCL" not in cpu["link"]  # ranks on CPUs: NCCL's settings say nothing about their link


def scaling_file(tmp_path, name, compute_s, **changes):
    def t(s):
        return {"median": s, "min": s, "max": s}

    rows = [
        {"ranks": n, "time": 1.0 / n, "timings": {"compute": t(compute_s / n), "wait": t(1e-6), "total": t(1.0 / n)}}
        for n in (1, 2)
    ]
    path = tmp_path / name
    path.write_text(
        json.dumps({"kind": "scaling", "schema": 1, "workload": "reduce", "series": {"strong": rows}, **changes})
    )
    return path


def test_compare_flags_slowdowns_above_the_threshold_only(tmp_path):
    old = load_entries(scaling_file(tmp_path, "old.json", 0.010))
    new = load_entries(scaling_file(tmp_path, "new.json", 0.012))
    rows, slower = compare(old, new, fail_above=10, min_seconds=1e-4)
    assert {(r["series"], r["ranks"], r["phase"]) for r in slower} == {
        ("strong", 1, "compute"),
        ("strong", 2, "compute"),
    }
    assert all(r["change_pct"] == pytest.approx(20.0) for r in slower)
    assert compare(old, new, fail_above=25, min_seconds=1e-4)[1] == []
    assert compare(old, old, fail_above=0, min_seconds=0)[1] == []
    noisy = {k: {**v, "wait": Point(v["wait"].value * 5)} for k, v in old.items()}
    assert compare(old, noisy, fail_above=10, min_seconds=1e-4)[1] == []  # 1 us -> 5 us is noise


def test_compare_reads_report_json_and_rejects_strangers(tmp_path):
    r = report(2, [[3.0, 1.0, 4.0], [1.0, 5.0, 2.0]])
    path = tmp_path / "report.json"
    path.write_text(json.dumps(r))
    entries = load_entries(path)
    assert list(entries) == [("strong", 2)] and entries[("strong", 2)]["time"].value == 4.0
    (tmp_path / "x.json").write_text("[1, 2]")
    (tmp_path / "y.json").write_text("{not json")
    for name in ("x.json", "y.json", "missing.json"):
        with pytest.raises(InputError):
            load_entries(tmp_path / name)
    other = {("weak", 7): {"time": 1.0}}
    with pytest.raises(InputError, match="nothing in common|no series"):
        compare(entries, other, 5, 0)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"schema": 4}, "report schema 4; this spmd reads schema 1, 2, 3 (writes 3)"),
        ({"schema": True}, "report schema True; this spmd reads schema 1, 2, 3"),
        ({"per_rank": [{"median": {}}]}, "missing or malformed: per_rank (one entry per rank)"),
        ({"per_rank": [{"median": {}, "repeats": [{"total": "1"}]}] * 2}, "per_rank[].repeats[] (finite seconds"),
        ({"per_rank": [{"median": {}, "repeats": [{"total": 1.0, "read": "x"}]}] * 2}, "per_rank[].repeats[] (finite"),
        ({"per_rank": [{"median": {}, "repeats": [{"total": float("nan")}]}] * 2}, "per_rank[].repeats[] (finite"),
        ({"timings": {"total": {"median": None}}}, "timings.'total'"),
        ({"timings": {"total": {"median": float("nan"), "min": 1, "max": 1}}}, "timings.'total' (finite"),
        ({"workload": "reduce\n" * 10_000}, "missing or malformed: workload"),
        ({"ranks": True}, "missing or malformed: ranks"),
        ({"verified": "yes"}, "verified"),
    ],
)
def test_a_report_that_parses_but_is_malformed_is_named_not_a_traceback(tmp_path, change, message):
    """What compare and merge read is checked first: exit 2 naming the file and the field."""
    from spmd.report.compare import compare_files

    good = tmp_path / "good.json"
    good.write_text(json.dumps(report(2, [[3.0], [2.0]])))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**report(2, [[3.0], [2.0]]), **change}))
    with pytest.raises(InputError, match=re.escape(message)) as info:
        compare_files(good, bad, None, 0)
    assert str(info.value).startswith(f"{bad}: ")


def test_compare_refuses_reports_of_different_workloads_and_unknown_scalings(tmp_path):
    from spmd.report.compare import compare_files

    reduce = scaling_file(tmp_path, "reduce.json", 0.01)
    matmul = scaling_file(tmp_path, "matmul.json", 0.01, workload="matmul")
    with pytest.raises(InputError, match="is a report of reduce, .*matmul.json of matmul: nothing to compare"):
        compare_files(reduce, matmul, None, 0)
    with pytest.raises(InputError, match="scaling schema 4"):
        compare_files(reduce, scaling_file(tmp_path, "new.json", 0.01, schema=4), None, 0)
    assert compare_files(reduce, scaling_file(tmp_path, "same.json", 0.02), 10, 0)[1]  # slower: flagged


def test_units():
    assert parse_bytes("16M") == 16 << 20 and parse_bytes("1GiB") == 1 << 30 and parse_bytes("4096") == 4096
    assert parse_bytes("64k") == 64 << 10
    for bad in ("", "M", "1X", "-"):
        with pytest.raises(ValueError):
            parse_bytes(bad)
    assert fmt_seconds(12e-6) == "12.0 us" and fmt_seconds(0.0123) == "12.3 ms" and fmt_seconds(1.5) == "1.5 s"
    assert fmt_bytes(1536) == "1.5 KiB" and fmt_bytes(100) == "100 B" and fmt_bytes(3 << 30) == "3 GiB"
