"""io.threads and the reader threads' CPUs (spmd/core/cpus.py): auto gives a rank's readers its share of the node
even where the launcher bound the rank to one core, an integer stays within the binding, SLURM's allocation is
kept, and a reader thread moves itself while the rank's own binding stays; the config takes auto or 1-256."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from spmd.core import cpus
from spmd.core.config import ConfigError, IoConfig
from spmd.io.direct import ByteRange, read_pieces, split


@pytest.fixture
def node(monkeypatch):
    """A 16-CPU node (its cgroup's cpuset) and a rank bound as each test says; the recorded choice reset after."""

    def bind(bound):
        monkeypatch.setattr(cpus, "node_cpus", lambda: frozenset(range(16)))
        monkeypatch.setattr(cpus, "bound_cpus", lambda: frozenset(bound))

    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    monkeypatch.delenv("SLURM_STEP_ID", raising=False)
    yield bind
    cpus._reader_cpus = None


def test_cpu_lists_parse_as_the_kernel_writes_them():
    assert cpus.parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert cpus.parse_cpu_list("5") == {5} and cpus.parse_cpu_list("") == frozenset()


def test_each_rank_on_the_node_gets_a_contiguous_share():
    node = frozenset(range(16))
    shares = [cpus.node_share(node, r, 4) for r in range(4)]
    assert shares == [frozenset(range(4 * r, 4 * r + 4)) for r in range(4)]
    assert [cpus.node_share(frozenset({0, 1}), r, 3) for r in range(3)] == [{0}, {0}, {1}]  # more ranks than CPUs
    assert sum(len(cpus.node_share(frozenset(range(10)), r, 3)) for r in range(3)) == 10


def test_auto_gives_a_rank_bound_to_one_core_its_share_of_the_node(node):
    node({1})  # Open MPI's mpirun binds each of 2 ranks to a core
    assert cpus.reader_threads("auto", local_ranks=2, local_rank=1) == 8
    assert cpus.reader_cpus() == frozenset(range(8, 16)) | {1}
    node(range(16))  # unbound, 4 ranks on the node: the share's count, the threads on the share
    assert cpus.reader_threads("auto", local_ranks=4, local_rank=1) == 4
    assert cpus.reader_cpus() == frozenset(range(4, 8))
    assert cpus.reader_threads("auto", local_ranks=1) == 16 and cpus.reader_cpus() is None  # alone: the node
    node({2, 3, 4, 5, 6, 7, 8, 9})  # bound to at least its share: its binding is its own
    assert cpus.reader_threads("auto", local_ranks=2, local_rank=0) == 8 and cpus.reader_cpus() is None


def test_a_number_stays_within_the_binding_and_slurm_allocations_are_kept(node, monkeypatch):
    node({1})
    assert cpus.reader_threads(8, local_ranks=2) == 1 and cpus.reader_cpus() is None
    node(range(16))
    assert cpus.reader_threads(8, local_ranks=1) == 8 and cpus.reader_cpus() is None
    assert cpus.reader_threads(8, local_ranks=4, local_rank=3) == 4 and cpus.reader_cpus() == frozenset(range(12, 16))
    assert cpus.reader_threads(8, local_ranks=32) == 1
    node({3, 4})
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "2")  # what the allocation gives a task is what it reads with
    assert cpus.reader_threads("auto", local_ranks=4) == 2 and cpus.reader_cpus() is None
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    monkeypatch.setenv("SLURM_STEP_ID", "0")  # srun without --cpus-per-task: still the allocation's CPUs
    assert cpus.reader_threads("auto", local_ranks=4) == 2 and cpus.reader_cpus() is None


@pytest.mark.parametrize("bound", [range(16), {1}, {2, 3, 4, 5, 6, 7, 8, 9}])
@pytest.mark.parametrize("wanted", ["auto", 4, 12])
@pytest.mark.parametrize("ranks", [1, 2, 3, 4, 32])
def test_a_share_of_n_reads_with_the_threads_rank_0_of_n_gets_and_moves_no_readers(node, bound, wanted, ranks):
    """spmd scale --shares N: the one-rank share reads with what a rank of N on the node would (its block of the
    node's CPUs), not with the whole node's; counting them leaves this process's readers where they were."""
    node(bound)
    cpus.reader_threads("auto", local_ranks=1)  # this process alone on the node: its readers on no block
    assert cpus.threads_of_a_rank_of(wanted, ranks) == cpus.reader_threads(wanted, local_ranks=ranks, local_rank=0)
    cpus.reader_threads("auto", local_ranks=1)
    before = cpus.reader_cpus()
    cpus.threads_of_a_rank_of(wanted, ranks)
    assert cpus.reader_cpus() == before
    if wanted == "auto" and set(bound) == set(range(16)):
        assert cpus.threads_of_a_rank_of(wanted, ranks) == max(1, 16 // ranks)


def test_the_cgroup_cpuset_bounds_the_node(monkeypatch, tmp_path):
    real = Path.read_text
    files = {
        "/proc/self/cgroup": "0::/job/step\n",
        "/sys/devices/system/cpu/online": "0-15\n",
        "/sys/fs/cgroup/job/step/cpuset.cpus.effective": "4-7,12\n",
    }
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: files[str(self)] if str(self) in files else real(self))
    assert cpus.node_cpus() == {4, 5, 6, 7, 12}
    files["/proc/self/cgroup"] = "5:cpuset:/slurm/job\n3:memory:/x\n"  # cgroup v1
    files["/sys/fs/cgroup/cpuset/slurm/job/cpuset.effective_cpus"] = "0-1"
    assert cpus.node_cpus() == {0, 1}
    files["/proc/self/cgroup"] = "3:memory:/x\n"  # no cpuset: the online CPUs
    assert cpus.node_cpus() == frozenset(range(16))


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_reader_threads_move_onto_the_share_while_the_rank_stays_bound(tmp_path, monkeypatch):
    import spmd.io.direct as direct

    mine = os.sched_getaffinity(0)
    seen = []

    def pin_and_look():  # the real move, then where the reader thread now runs
        cpus.pin_reader_thread()
        seen.append((threading.current_thread().name, os.sched_getaffinity(0)))

    monkeypatch.setattr(direct, "pin_reader_thread", pin_and_look)
    monkeypatch.setattr(cpus, "_reader_cpus", frozenset(mine))
    data = np.arange(1 << 16, dtype=np.uint32).view(np.uint8)
    (tmp_path / "data.bin").write_bytes(data.tobytes())
    out = bytearray(len(data))
    os.sched_setaffinity(0, {min(mine)})  # the rank, bound to one core
    try:
        read_pieces(str(tmp_path / "data.bin"), split([ByteRange(0, len(data), 0)], 4096), memoryview(out), 2, "d")
        assert os.sched_getaffinity(0) == {min(mine)}  # the rank's own thread keeps its binding
    finally:
        os.sched_setaffinity(0, mine)
    assert seen == [("spmd-read", mine)] * 2 and bytes(out) == data.tobytes()


def test_the_config_takes_auto_or_a_count():
    assert IoConfig().threads == "auto" and IoConfig(threads=4).threads == 4
    for bad in (0, 257, "many", 2.5):
        with pytest.raises(ConfigError, match="io.threads: auto, or from 1 to 256"):
            IoConfig(threads=bad)


def test_the_node_cpus_are_the_cgroups_within_the_online_ones():
    found = cpus.node_cpus()
    assert found and found <= cpus.parse_cpu_list(Path("/sys/devices/system/cpu/online").read_text())
