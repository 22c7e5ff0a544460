"""Injected faults (SPMD_FAULT) under a real ``mpiexec -n 3``: every one must end the whole job with a
non-zero exit within timeout_s + 30 s, name the rank, host and phase, and leave no report.

These runs look closer at the catalogue's injected faults (bench/failures/injected.py) than the catalogue's own
phrases do. docs/reliability.md's table comes from bench's faults suite, not from these runs.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import yaml
from helpers import HOST, small, train_config, watchdog_lines, write_dataset
from mpi_job import spmd

from bench.failures import injected

TIMEOUT_S = 3  # the watchdog's timeout_s in these runs
LIMIT_S = TIMEOUT_S + 30  # what the issue allows a fault to take
ROWS = 30_000


@pytest.fixture
def config(tmp_path):
    write_dataset(tmp_path / "x.h5", np.random.default_rng(1).standard_normal(ROWS).astype(np.float32))
    cfg = {
        "workload": "reduce",
        "device": "cpu",
        "repeats": 2,
        "timeout_s": TIMEOUT_S,
        "input": {"path": str(tmp_path / "x.h5"), "dataset": "x"},
        "output": str(tmp_path / "out"),
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def run_with_fault(config, fault: str, *overrides: str):
    args = [a for o in overrides for a in ("-o", o)]
    return spmd("run", config, *args, env={"SPMD_FAULT": fault}, timeout=LIMIT_S + 30)


# the catalogue's injected faults on 3 ranks
CATALOGUE = {case.fault: case for case in injected.cases(3, gpu=False)}
RAISE_AND_EXIT = [f for f in CATALOGUE if re.search(r"kind=(raise|exit)$", f)]


def final_message(fault: str) -> str:
    """What the last line must say of a raise or an exit on one rank."""
    rank, phase = re.search(r"rank=(\d+),phase=(\w+)", fault).groups()
    if fault.endswith("kind=exit"):
        return f"rank {rank} on {HOST}: SPMD_FAULT: injecting exit at phase {phase}"
    return f"error: rank {rank} on {HOST}: injected fault"


@pytest.mark.parametrize("fault", RAISE_AND_EXIT)
def test_raise_or_exit_on_one_rank_ends_the_job(config, fault):
    code, message = CATALOGUE[fault].expect, final_message(fault)
    rc, _, err, elapsed = run_with_fault(config, fault)
    phase = re.search(r"phase=(\w+)", fault)[1]
    assert rc == code if code else rc != 0, (rc, err)
    assert message in err and f"phase {phase}" in err, err
    assert elapsed < LIMIT_S
    assert not (config.parent / "out").exists()


HANGS = [f for f in CATALOGUE if re.search(r"rank=\d+,.*kind=hang$", f)]
WAITING = {  # the phase a rank hangs in -> (the phase the others wait in, what they wait in)
    "compute": ("comm", "Allgather"),
    "read": ("wait", "Barrier"),  # rank 0 hangs: its watchdog thread still judges
    "comm": ("comm", "Allgather"),
    "report": ("report", None),
}


@pytest.mark.parametrize("fault", HANGS)
def test_a_hang_on_one_rank_is_ended_by_the_watchdog(config, fault):
    rank, phase = int(fault[5]), re.search(r"phase=(\w+)", fault)[1]
    others_phase, others_wait = WAITING[phase]
    rc, _, err, elapsed = run_with_fault(config, fault)
    assert rc == CATALOGUE[fault].expect == 4, err
    assert f"(timeout_s: {TIMEOUT_S})" in err and "Where every rank is:" in err, err
    lines = watchdog_lines(err)
    assert lines[rank] == f"phase {phase}, not in a collective", err
    for other in {0, 1, 2} - {rank}:
        assert lines[other].startswith(f"phase {others_phase}, waiting in {others_wait or ''}"), err
    assert f"ranks that never reached it: {rank} " in err
    assert TIMEOUT_S <= elapsed < LIMIT_S
    assert not (config.parent / "out").exists()


@pytest.mark.parametrize("phase", ["read", "compute"])
def test_a_phase_that_never_ends_on_every_rank_is_ended_by_the_watchdog(config, phase):
    """No rank waits in a collective, so none times out there: the phase itself is timed."""
    rc, _, err, elapsed = run_with_fault(config, f"rank=all,phase={phase},kind=hang")
    assert rc == 4, err
    assert re.search(
        rf"watchdog: rank \d on {re.escape(HOST)} has been in phase {phase} for \d+\.\d s "
        rf"\(timeout_s: {TIMEOUT_S}\) and no rank waits in a collective",
        err,
    ), err
    assert all(line == f"phase {phase}, not in a collective" for line in watchdog_lines(err).values()), err
    assert TIMEOUT_S <= elapsed < LIMIT_S and not (config.parent / "out").exists()


def test_nan_on_one_rank_is_named_by_the_verification(config):
    rc, _, err, elapsed = run_with_fault(config, "rank=1,phase=read,kind=nan")
    assert rc == 3, err
    # rank 1 reads rows 10000-20000; the fault poisons the middle one
    assert f"rank 1 on {HOST}: {config.parent / 'x.h5'}:x rows 15000-15001: 1 row(s) hold NaN" in err, err
    assert elapsed < LIMIT_S and not (config.parent / "out").exists()


def test_nan_on_one_rank_is_refused_at_read_by_check_finite(config):
    rc, _, err, _ = run_with_fault(config, "rank=2,phase=read,kind=nan", "check_finite=true")
    assert rc == 2, err
    assert f"error: rank 2 on {HOST}: {config.parent / 'x.h5'}:x rows 25000-25001: 1 row(s) hold NaN" in err, err
    assert not (config.parent / "out").exists()


def test_check_finite_passes_clean_data(config):
    rc, _, err, _ = spmd("run", config, "-o", "check_finite=true")
    assert rc == 0, err
    assert json.loads((config.parent / "out/report.json").read_text())["config"]["check_finite"] is True


@pytest.mark.parametrize("phase, pool", [("read", "host memory"), ("h2d", "host memory")])
def test_oom_is_refused_before_allocating_with_the_numbers(config, phase, pool):
    rc, _, err, _ = run_with_fault(config, f"rank=2,phase={phase},kind=oom")
    assert rc == 2, err
    assert re.search(
        rf"rank 2 on {re.escape(HOST)}: .*rows 20000-30000: the shard's rows need 39\.1 KiB, "
        rf"{pool} \(this rank's share: 1/3\) has 9\.77 KiB free: refused before allocating",
        err,
    ), err
    assert not (config.parent / "out").exists()


@pytest.mark.parametrize(
    "fault, message",
    [
        ("rank=1,phase=h2d,kind=raise", "never fired: this run did not reach phase h2d (a CPU run copies nothing"),
        ("rank=3,phase=read,kind=raise", "fault: rank 3, but the job has 3 ranks"),
        ("rank=1,phase=compute", "SPMD_FAULT: fault: 'rank=1,phase=compute': kind missing"),
        ("rank=1,phase=compute,kind=nan", "kind=nan poisons the rows a rank reads: use phase=read"),
        ("rank=1,phase=read,kind=hog", "kind=hog acts on a rank's compute: use phase=compute"),
        ("rank=1,phase=compute,kind=work", "kind=work needs seconds=S"),
        ("rank=1,phase=report,kind=slow,seconds=1", "use phase=read, h2d, data, compute, optimizer or comm"),
        (
            "rank=1,phase=think,kind=raise",
            "phase 'think' is not one of read, h2d, data, compute, optimizer, backward, comm, report",
        ),
    ],
)
def test_a_fault_that_cannot_fire_is_refused(config, fault, message):
    rc, _, err, _ = run_with_fault(config, fault)
    assert rc == 2 and message in err, err
    assert not (config.parent / "out").exists()


def test_the_fault_config_key_works_like_the_variable(config):
    rc, _, err, _ = spmd("run", config, "-o", "fault=rank=2,phase=compute,kind=raise")
    assert rc == 1 and f"rank 2 on {HOST}: injected fault" in err, err


# The other workloads: a hang in their own communication, and poisoned input.
WORKLOADS = {
    "matmul": lambda d: small(
        "matmul.yaml", d, **{"generate.shape": [301, 203], "params.b.generate.shape": [203, 97], "timeout_s": TIMEOUT_S}
    ),
    "stencil": lambda d: small(
        "stencil.yaml", d, **{"generate.shape": [120, 90], "params.iterations": 2, "timeout_s": TIMEOUT_S}
    ),
    "train": lambda d: train_config(d, timeout_s=TIMEOUT_S),
}


@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_workload_ends_a_hang_in_its_communication(tmp_path, workload):
    config = WORKLOADS[workload](tmp_path)
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    rc, _, err, elapsed = spmd(
        "run", config, cwd=tmp_path, env={"SPMD_FAULT": "rank=1,phase=comm,kind=hang"}, timeout=LIMIT_S + 30
    )
    assert rc == 4 and "Where every rank is:" in err, err
    lines = watchdog_lines(err)
    assert "not in a collective" in lines[1] and all("waiting in" in lines[r] for r in (0, 2)), err
    assert elapsed < LIMIT_S and not (tmp_path / "results").exists()


@pytest.mark.parametrize("workload, code", [("matmul", 3), ("stencil", 3), ("train", 2)])
def test_every_workload_names_the_rank_whose_input_is_poisoned(tmp_path, workload, code):
    config = WORKLOADS[workload](tmp_path)
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    rc, _, err, _ = spmd("run", config, cwd=tmp_path, env={"SPMD_FAULT": "rank=2,phase=read,kind=nan"})
    assert rc == code, err
    assert re.search(rf"rank 2 on {re.escape(HOST)}: data/{workload}/\S+ .*rows? \d+", err), err
    assert "NaN" in err or "not finite" in err, err
    assert not (tmp_path / "results").exists()


# Silent data corruption: one element of one rank's computed output times 1.01 must end the job with exit 3,
# named by the verification, and no report. Several seeds: a different element each time.
CORRUPTED = {
    "reduce attrs": (
        lambda d: small("reduce.yaml", d, **{"generate.shape": [30_000], "verify": "attrs"}),
        "this rank's own moments",
    ),
    "reduce full": (
        lambda d: small("reduce.yaml", d, **{"generate.shape": [30_000], "verify": "full"}),
        "this rank's own moments",
    ),
    "stencil": (WORKLOADS["stencil"], "element(s) differ from the single-process filter"),
    "matmul float32 full": (
        lambda d: small(
            "matmul.yaml", d, **{"generate.shape": [301, 203], "params.b.generate.shape": [203, 97], "verify": "full"}
        ),
        "float64 recomputation gives",
    ),
    "matmul float64 full": (
        lambda d: small(
            "matmul.yaml",
            d,
            **{
                "generate.shape": [301, 203],
                "generate.dtype": "float64",
                "params.b.generate.shape": [203, 97],
                "params.b.generate.dtype": "float64",
                "verify": "full",
            },
        ),
        "float64 recomputation gives",
    ),
    "train": (WORKLOADS["train"], "the replicas diverged"),
    "histogram plug-in": (lambda d: small_plugin("histogram", d), "differ"),
}


def small_plugin(name, folder):
    from helpers import example

    return example(name, folder)


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("case", CORRUPTED)
def test_silent_corruption_on_one_rank_fails_verification(tmp_path, case, seed):
    make, message = CORRUPTED[case]
    config = make(tmp_path)
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    rc, _, err, _ = spmd(
        "run",
        config,
        cwd=tmp_path,
        env={"SPMD_FAULT": "rank=1,phase=compute,kind=corrupt", "SPMD_FAULT_SEED": str(seed)},
    )
    assert rc == 3, err
    assert f"rank 1 on {HOST}: SPMD_FAULT: injecting corrupt at phase compute" in err and message in err, err
    assert not (tmp_path / "results").exists() and not (tmp_path / "out").exists()


def test_silent_corruption_of_a_single_rank_training_run_is_caught_by_stepping_again(tmp_path):
    config = WORKLOADS["train"](tmp_path)
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    rc, _, err, _ = spmd("run", config, cwd=tmp_path, ranks=1, env={"SPMD_FAULT": "rank=0,phase=compute,kind=corrupt"})
    assert rc == 3 and "run again eagerly from its starting state, end on other parameters" in err, err
    assert spmd("run", config, cwd=tmp_path, ranks=1)[0] == 0  # and without the fault it passes


@pytest.mark.parametrize(
    "fault, message",
    [("rank=1,phase=read,kind=corrupt", "kind=corrupt changes what a rank computed: use phase=compute")],
)
def test_corrupt_is_a_compute_fault(config, fault, message):
    rc, _, err, _ = run_with_fault(config, fault)
    assert rc == 2 and message in err, err
