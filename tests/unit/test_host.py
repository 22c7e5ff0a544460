"""The host as a fact (spmd.core.host): the compute threads a rank is given and the load beside it, decided the same
way whatever the numbers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spmd.core.host import (
    BUSY_SHARE,
    HostLoad,
    busy_reasons,
    choose_threads,
    clock_tick,
    cpu_seconds,
    device_sharing,
    gpu_processes,
    host_record,
    node_load,
)


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


class FakeNvml:
    """NVML's two calls gpu_processes makes, over {bus id: processes listed} (a bus it does not know raises)."""

    def __init__(self, listed: dict[str, list[int]]):
        self.listed = listed

    def nvmlDeviceGetHandleByPciBusId(self, bus: bytes) -> str:
        if bus.decode() not in self.listed:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return bus.decode()

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[int]:
        return self.listed[handle]


def test_a_gpus_processes_are_counted_at_both_ends_of_the_repeats_and_unknown_without_nvml():
    listed = {"0000:1b:00.0": [11]}
    fake = FakeNvml(listed)
    assert gpu_processes("00000000:1B:00.0", fake) == 1  # NVML's spelling and CUDA's name one GPU
    assert gpu_processes("0000:2c:00.0", fake) is None and gpu_processes(None, fake) is None
    load = HostLoad("0000:1b:00.0", fake)
    load.start()
    listed["0000:1b:00.0"] = [11, 12, 13]  # others came during the repeats
    assert load.stop()["gpu_processes"] == 3 and load.sample["gpu"] == "0000:1b:00.0"
    assert "gpu" not in HostLoad().stop()  # a CPU rank samples no GPU


@given(
    gpus=st.lists(st.tuples(st.integers(1, 3), st.integers(0, 2)), min_size=1, max_size=4),  # (job ranks, others)
    unknown=st.booleans(),
)
def test_a_gpu_is_busy_exactly_when_nvml_lists_more_processes_than_the_jobs_ranks_on_it(gpus, unknown):
    """Ranks on GPUs of one host, each GPU with its job ranks and other processes: a busy-device reason names each
    GPU with others, every rank on it is said to share it, and a rank whose count is unknown says nothing."""
    ranks, hosts, expected = [], [], {}
    for g, (mine, others) in enumerate(gpus):
        bus = f"0000:{g:02x}:00.0"
        for _ in range(mine):
            load = {"wall_s": 1.0, "own_cpu_s": 0.5, "node_busy_s": None, "node_cpus": 4, "gpu": bus}
            load["gpu_processes"] = None if unknown and g == 0 else mine + others
            ranks.append({"device": "gpu", "threads": {"compute": 1}, "load": load})
            hosts.append("h")
            if others and not (unknown and g == 0):
                expected[len(ranks) - 1] = others
    record = host_record(ranks, hosts)
    assert device_sharing(record, hosts) == expected
    named = {w.split(" ")[5] for w in record["busy"] if w.startswith("busy device")}
    assert named == {ranks[r]["load"]["gpu"] for r in expected}
