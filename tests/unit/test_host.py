"""The host as a fact (spmd.core.host): the compute threads a rank is given and the load beside it, decided the same
way whatever the numbers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spmd.core.host import BUSY_SHARE, HostLoad, busy_reasons, choose_threads, clock_tick, cpu_seconds, node_load


def test_threads_are_the_ranks_share_of_the_cores_unless_the_user_set_them():
    assert choose_threads(2, cpus=16, env={}).count == 8
    assert choose_threads(3, cpus=2, env={}).count == 1  # never fewer than one
    assert "share of 16 CPU(s) for 2 rank(s)" in choose_threads(2, cpus=16, env={}).how
    given_ = choose_threads(2, cpus=16, env={"OMP_NUM_THREADS": "5"})
    assert given_.count == 5 and given_.how == "OMP_NUM_THREADS=5 as given"  # honoured, not replaced by 1
    assert choose_threads(1, cpus=16, env={"OMP_NUM_THREADS": "4,2"}).count == 4  # OpenMP's nested form
    assert choose_threads(1, cpus=16, env={"MKL_NUM_THREADS": "3"}).count == 3
    assert choose_threads(2, cpus=16, env={"OMP_NUM_THREADS": "x"}).count == 8  # not a count: spmd's default


def facts(device: str, threads: int, own: float, busy: float | None, wall: float = 1.0, cpus: int = 4) -> dict:
    load = {"wall_s": wall, "own_cpu_s": own, "node_busy_s": busy, "node_cpus": cpus}
    return {"device": device, "threads": {"compute": threads}, "load": load}


@given(
    ranks=st.integers(1, 4),
    own=st.floats(0.0, 1.0),
    others=st.floats(0.0, 4.0),
    threads=st.integers(1, 8),
    device=st.sampled_from(["cpu", "gpu"]),
)
def test_a_host_is_busy_exactly_when_others_take_their_share_or_threads_outnumber_its_cpus(
    ranks, own, others, threads, device
):
    """Other processes' CPU time is the node's busy time less its ranks' own (less /proc/stat's resolution); a GPU
    rank's threads wait on its device and never count against the cores."""
    cpus = 4
    per_rank = [facts(device, threads, own, busy=ranks * own + others) for _ in range(ranks)]
    node = node_load(per_rank, ["h"] * ranks)["h"]
    expected = max(0.0, others - cpus / clock_tick())
    assert abs(node["others_cpu_s"] - expected) < 1e-9
    assert abs(node["others_share"] - expected / cpus) < 1e-9
    assert node["oversubscribed_threads"] == (device == "cpu" and ranks * threads > max(cpus, ranks))
    reasons = busy_reasons({"h": node})
    assert any("other processes on h took" in r for r in reasons) == (node["others_share"] >= BUSY_SHARE)
    assert any("compute threads over" in r for r in reasons) == node["oversubscribed_threads"]


def test_without_proc_stat_the_load_is_unknown_and_never_busy(tmp_path):
    assert cpu_seconds(frozenset({0}), tmp_path / "missing") is None
    node = node_load([facts("cpu", 1, 0.5, None)], ["h"])["h"]
    assert node["others_cpu_s"] is None and not busy_reasons({"h": node})


def test_the_load_of_a_busy_loop_is_the_process_own():
    load = HostLoad()
    load.start()
    x = 0
    for i in range(2_000_000):
        x += i
    sample = load.stop()
    assert 0 < sample["own_cpu_s"] <= sample["wall_s"] * 1.05 + 0.01
    if sample["node_busy_s"] is not None:  # the node's CPUs were busy at least while this process ran
        assert sample["node_busy_s"] >= sample["own_cpu_s"] - sample["node_cpus"] / clock_tick() - 0.02


def test_nodes_emulated_on_one_machine_count_each_others_ranks_as_their_own():
    """Two emulated nodes of one rank each share the machine's /proc/stat: the other node's rank is no other process."""
    ranks = [facts("cpu", 1, 0.9, busy=1.8), facts("cpu", 1, 0.9, busy=1.8)]
    for f in ranks:
        f["load"]["machine"] = "boot-1"
    nodes = node_load(ranks, ["node1", "node2"])
    assert all(n["others_cpu_s"] == 0.0 and not busy_reasons({"h": n}) for n in nodes.values())
    for f in ranks:
        f["load"]["machine"] = None  # unknown machines: each node alone, the other's rank counted as another's
    assert node_load(ranks, ["node1", "node2"])["node1"]["others_cpu_s"] > 0.8
