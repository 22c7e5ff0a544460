"""The held-out suites (bench/suites/heldout.py to heldout7.py, one a round, and heldoutcpu.py to heldoutcpu13.py): each
list, fixed before anything of it was measured, makes at least 20 predictions over at least 3 workloads, one of a
family never used before; every committed held-out record was measured with the prediction model's files as its round
froze them; the check itself tells a changed model file from any other."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

import pytest
from helpers import git_repo

from bench.env import Env
from bench.records import read_records
from bench.suites import (
    heldout,
    heldout2,
    heldout3,
    heldout4,
    heldout5,
    heldout6,
    heldout7,
    heldoutcpu,
    heldoutcpu2,
    heldoutcpu3,
    heldoutcpu4,
    heldoutcpu5,
    heldoutcpu6,
    heldoutcpu7,
    heldoutcpu8,
    heldoutcpu9,
    heldoutcpu10,
    heldoutcpu11,
    heldoutcpu12,
    heldoutcpu13,
)

ROOT = Path(__file__).resolve().parents[2]


# the suites the model was designed on: a round's new family is in none of them, nor in an earlier round
DESIGNED_ON = ("predict.py", "scaling.py", "torch_models.py", "torch_answer.py")


ROUNDS = (
    heldout,
    heldout2,
    heldout3,
    heldout4,
    heldout5,
    heldout6,
    heldout7,
    heldoutcpu,
    heldoutcpu2,
    heldoutcpu3,
    heldoutcpu4,
    heldoutcpu5,
    heldoutcpu6,
    heldoutcpu7,
    heldoutcpu8,
    heldoutcpu9,
    heldoutcpu10,
    heldoutcpu11,
    heldoutcpu12,
    heldoutcpu13,
)


@pytest.mark.parametrize("frozen", [m.FROZEN for m in ROUNDS])
def test_the_frozen_commit_is_in_the_history_and_holds_the_model(frozen):
    found = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{frozen}^{{commit}}"])
    assert found.returncode == 0, f"{frozen} is not in this clone's history (a shallow clone?)"
    for path in heldout.MODEL_PATHS:
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-tree", frozen, "--", path], capture_output=True)
        assert listed.stdout, path


def test_the_list_makes_twenty_predictions_over_three_workloads_one_of_a_new_family():
    for gpus in (0, 2):  # the names and sizes a CPU and a GPU machine would run
        env = Env(out=Path(tempfile.mkdtemp()), work=Path(tempfile.mkdtemp()), quick=False, ranks=2, gpus=gpus)
        listed = heldout.cases_list(env)
        workloads = {name.split(",")[0] for name in listed}
        assert heldout.predictions(listed) >= 20 and len(workloads) >= 3
        assert any(name.startswith("vit") for name in listed)
        # the new family is nowhere in the suites the model was designed on
        for suite in DESIGNED_ON:
            assert not re.search(r"\bvit\b|vit_b|visiontransformer", (ROOT / "bench/suites" / suite).read_text(), re.I)


def test_the_second_round_is_new_cases_at_a_later_freeze_one_of_a_new_family():
    """Twenty predictions or more over three workloads or more on 2 GPUs (fitted on one) and on 4 (fitted on 1-2,
    the fit's own links carried as a third kind of input); none of its cases is a first-round case, its family
    (ConvNeXt) in no suite the model was designed on nor in the first round, and its freeze after the first's."""
    for gpus in (2, 4):
        env = Env(out=Path(tempfile.mkdtemp()), work=Path(tempfile.mkdtemp()), quick=False, ranks=gpus, gpus=gpus)
        listed = heldout2.cases_list(env)
        assert heldout2.predictions(listed, gpus) >= (28 if gpus == 2 else 42)
        assert len({name.split(",")[0] for name in listed}) >= 3
        first = heldout.cases_list(env)
        assert not set(listed) & set(first) and not [
            j for j, _ in listed.values() if j in [f for f, _ in first.values()]
        ]
    assert heldout2.input_kinds(2) == (heldout2.PRESET, heldout2.TARGETS) and len(heldout2.input_kinds(4)) == 3
    for suite in (*DESIGNED_ON, "heldout.py"):
        assert not re.search(r"convnext", (ROOT / "bench/suites" / suite).read_text(), re.I), suite
    later = subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", heldout.FROZEN, heldout2.FROZEN])
    assert later.returncode == 0


@pytest.mark.parametrize(
    "later, earlier, family, changed, mark",
    [
        (heldout3, (heldout, heldout2), "efficientnet", "spmd/workloads/stencil/workload.py", "self.grid.size == 1"),
        (heldout4, (heldout, heldout2, heldout3), "mobilenet", "spmd/scale/prediction/predict.py", "def unseen_above("),
        (
            heldout5,
            (heldout, heldout2, heldout3, heldout4),
            "densenet",
            "spmd/scale/prediction/intervals.py",
            "def unseen_seconds(",
        ),
        (heldout6, ROUNDS[:5], "regnet", "spmd/scale/prediction/predict.py", "def read_engine("),
        (heldout7, ROUNDS[:6], "swin", "spmd/scale/prediction/machines.py", "def read_host_read("),
        (heldout7, ROUNDS[:6], "swin", "spmd/scale/models/phases.py", "def sliced_bytes("),
        (heldout7, ROUNDS[:6], "swin", "spmd/scale/prediction/intervals.py", "MODEL_SPREAD = ("),
        (heldout7, ROUNDS[:6], "swin", "spmd/scale/prediction/reads.py", "def shared_rate("),
        (heldout7, ROUNDS[:6], "swin", "spmd/scale/prediction/machines.py", "NVLINK_OVERHEAD = "),
        (heldout7, ROUNDS[:6], "swin", "spmd/scale/prediction/reads.py", "OWN_READERS = ("),
        (heldout7, ROUNDS[:6], "swin", "spmd/scale/models/node.py", "def node_beyond_seconds("),
        (heldout7, ROUNDS[:6], "swin", "spmd/scale/prediction/predict.py", "def node_unmeasured_note("),
        (heldout7, ROUNDS[:6], "swin", "spmd/scale/models/node.py", "def cores_slowdown("),
        (heldout7, ROUNDS[:6], "swin", "spmd/scale/models/node.py", "def alone_seconds("),
        (heldout7, ROUNDS[:6], "swin", "spmd/scale/prediction/reads.py", "def host_read_ceiling("),
        (heldout7, ROUNDS[:6], "swin", "spmd/scale/prediction/intervals.py", "def sweep_part("),
    ],
)
def test_a_later_round_is_new_cases_at_a_later_freeze_one_of_a_new_family(later, earlier, family, changed, mark):
    """Twenty predictions or more over three workloads or more (fitted on one GPU, and on 1-N for the target with
    peer-to-peer off); none of its cases, nor any job, is an earlier round's; its family in no suite the model was
    designed on nor in an earlier round; its freeze after the round before, with the change it tests in the frozen
    tree. The third round tests a stencil's lone rank listing its halos (EfficientNet its new family); the fourth,
    what a fit on one rank never saw priced above its intervals (MobileNet); the fifth, it added to the predictions
    (DenseNet); the sixth, a sweep's reads bound by the ceiling of the engine it read with (RegNet); the seventh, a
    preset target with the host's reads measured on the fitting machine, a rank's slice of an operand that does not
    grow with the problem, intervals that carry the model's own error, a host's reads carried to more ranks, presets
    at what NCCL reaches, a node term its pair of equal bytes decides, a CPU target's note on the ranks a node
    measured and a CPU compute phase charged what the target's link test measured of its cores, its model files split
    by responsibility at the last freeze (Swin-T)."""
    for gpus in (2, 4):
        env = Env(out=Path(tempfile.mkdtemp()), work=Path(tempfile.mkdtemp()), quick=False, ranks=gpus, gpus=gpus)
        listed = later.cases_list(env)
        assert later.predictions(listed, gpus) >= 20 and len({name.split(",")[0] for name in listed}) >= 3
        for before in (e.cases_list(env) for e in earlier):
            assert not set(listed) & set(before)
            assert not [j for j, _ in listed.values() if j in [f for f, _ in before.values()]]
    for suite in (*DESIGNED_ON, *(Path(e.__file__).name for e in earlier)):
        assert not re.search(family, (ROOT / "bench/suites" / suite).read_text(), re.I), suite
    after = subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", earlier[-1].FROZEN, later.FROZEN])
    assert after.returncode == 0
    frozen = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{later.FROZEN}:{changed}"], capture_output=True, text=True
    )
    assert mark in frozen.stdout


def test_every_committed_held_out_record_ran_its_rounds_frozen_model():
    folders = sorted(ROOT.glob("docs/results/*/heldout*/manifest.json"))
    assert folders
    for manifest in folders:
        m = json.loads(manifest.read_text())
        commits = [m["commit"], *(c["commit"] for c in m.get("cases", []) if c.get("commit"))]
        frozen = {r.params["frozen"] for r in read_records(manifest.parent / "records.jsonl")}
        rounds = {m.__name__.split(".")[-1]: m for m in ROUNDS}
        assert frozen == {rounds[manifest.parent.name].FROZEN}, manifest
        assert heldout.records_with_other_model_files(commits, frozen=frozen.pop()) == [], manifest


def test_a_record_of_other_model_files_is_told_from_one_of_other_files(tmp_path):
    git = git_repo(tmp_path)
    (tmp_path / "spmd/scale/models").mkdir(parents=True)
    (tmp_path / "spmd/scale/models/a.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("one\n")
    git("add", "-A")
    git("commit", "-qm", "frozen")
    frozen = git("rev-parse", "HEAD")
    (tmp_path / "README.md").write_text("two\n")
    git("commit", "-qam", "docs")
    docs = git("rev-parse", "HEAD")
    (tmp_path / "spmd/scale/models/a.py").write_text("x = 2\n")
    git("commit", "-qam", "model")
    model = git("rev-parse", "HEAD")
    check = heldout.records_with_other_model_files
    assert check([frozen, docs], tmp_path, frozen) == []
    assert check([docs, model], tmp_path, frozen) == [model]
    assert check([f"{docs}+changes"], tmp_path, frozen) == [f"{docs}+changes"]


def test_the_stand_in_cores_test_is_the_medians_of_the_stored_cores_tests_at_eight_and_carries_to_theirs_at_four():
    """STAND_IN_CORES: at 8 ranks at once, the medians of the CPU rounds 4-8's target link tests' cores figures (the
    slowdown and its kernels' ends, each launch's test once), recomputed from the stored inputs
    (bench.tools.carried_design); carried linearly to 4 ranks (``node.cores_slowdown``), within 0.04 of the same
    tests' medians at 4."""
    from bench.tools.carried_design import cores_medians
    from spmd.scale.models.node import STAND_IN_CORES, cores_slowdown

    folders = [ROOT / f"docs/results/cpu-16core/heldoutcpu{r}" for r in range(4, 9)]
    assert STAND_IN_CORES["ranks"] == 8
    stand_in = {**STAND_IN_CORES, "sweep_ranks": 2, "stand_in": True}
    at_four = cores_slowdown({"node_cores": stand_in}, 4)
    for key, carried in zip(("slowdown", "low", "high"), at_four):
        medians = cores_medians(folders, key)
        assert round(medians[8], 2) == STAND_IN_CORES[key], key
        assert carried == pytest.approx(medians[4], abs=0.04), key


CPU_LINK_ROUNDS = ",".join(["heldoutcpu", *(f"heldoutcpu{r}" for r in range(2, 11))])
BEFORE_MPI_ROUNDS = "30f6327"  # the last commit whose links carried host MPI by a ring's steps
MPI_ROUNDS = "0099870"  # the change that carried them by MPI's rounds


def test_host_mpis_calls_carried_round_by_round_meet_the_cpu_rounds_tests_where_a_rings_steps_did_not():
    """In-sample, the 120 calls of the CPU rounds 1-10 (each its 2-rank link test carried to its 8-rank one): below
    MPI_DOUBLING_BYTES the calls carried round by round (``links.mpi_steps``, at MPI_ROUNDS) lie within 15% of the
    measured median and inside the calls' own spread; by the model before it (at BEFORE_MPI_ROUNDS, rendered so in
    docs/validation.md: a ring's steps) the smallest lay 25% and more above. Beyond it the same bytes as before."""
    from bench.report import carried_calls
    from spmd.scale.models.links import MPI_DOUBLING_BYTES

    now = carried_calls("cpu-16core", CPU_LINK_ROUNDS, 8, commit=MPI_ROUNDS)
    before = carried_calls("cpu-16core", CPU_LINK_ROUNDS, 8, commit=BEFORE_MPI_ROUNDS)
    assert now["calls"] == before["calls"] == 120
    for new, old in zip(now["rows"], before["rows"]):
        if new["bytes"] < MPI_DOUBLING_BYTES:
            assert abs(new["error"]) <= min(0.15, new["spread"]), new
        if new["bytes"] <= 512:
            assert old["error"] >= 0.25, old
        if new["bytes"] >= 1 << 20:
            assert new["carried_s"] == pytest.approx(old["carried_s"], rel=0.01), new


CPU_LINK_ROUNDS_11 = f"{CPU_LINK_ROUNDS},heldoutcpu11"
MPI_BYTES = "eaf815a"  # the change that read host MPI's curve at a call's own bytes a rank
BEFORE_MPI_BYTES = "dacc11e"  # the last commit that read it at the bytes a link carries


@pytest.mark.parametrize("op", ["allreduce", "allgather"])
@pytest.mark.parametrize("ranks", [4, 8])
def test_host_mpis_calls_read_at_their_own_bytes_meet_the_cpu_rounds_large_calls(op, ranks):
    """In-sample, the 132 calls of the CPU rounds 1-11 (each its 2-rank link test carried to its 4- and 8-rank ones):
    read at a call's own bytes a rank (at MPI_BYTES), the calls from 1 MiB lie within 21% of the measured median where
    read at the bytes a link carries (at BEFORE_MPI_BYTES) the worst lay a third and more off, and every size below 1
    MiB within the calls' own spread; an allreduce below MPI_DOUBLING_BYTES (recursive doubling's, read at its own
    bytes before too) does not move."""
    from bench.report import carried_calls
    from spmd.scale.models.links import MPI_DOUBLING_BYTES

    now = carried_calls("cpu-16core", CPU_LINK_ROUNDS_11, ranks, commit=MPI_BYTES, op=op)
    before = carried_calls("cpu-16core", CPU_LINK_ROUNDS_11, ranks, commit=BEFORE_MPI_BYTES, op=op)
    assert now["calls"] == before["calls"] == 132 and now["large_sizes"] == 3
    assert now["large_worst"] <= 0.21 and before["large_worst"] >= 0.33
    assert now["small_within_spread"] == now["small_sizes"] == 9
    if op == "allreduce":
        for new, old in zip(now["rows"], before["rows"]):
            if new["bytes"] < MPI_DOUBLING_BYTES:
                assert new["carried_s"] == pytest.approx(old["carried_s"], rel=1e-9), new


CPU_ROUNDS_12 = [ROOT / "docs/results/cpu-16core" / m.SUITE for m in ROUNDS[7:19]]  # heldoutcpu to heldoutcpu12


def test_the_optimizer_priced_as_a_steps_work_meets_the_cpu_rounds_strong_training():
    """In-sample, the training cases of the CPU rounds 1-12 (72 runs at each count of ranks and series, both inputs),
    derived by the model the twelfth round froze and by the thirteenth's (``per_step_design``): strong scaling, whose
    small batches alone had priced the optimizer on their warmer caches, was a seventh or more too fast at 4 and 8
    ranks and comes within a twentieth, more of its measured times inside; weak scaling, priced on the sweep's own
    problem before too, does not move."""
    from bench.tools.heldout_inputs import inside
    from bench.tools.per_step_design import training_runs

    runs = training_runs(CPU_ROUNDS_12)
    before, after = runs[heldoutcpu12.FROZEN], runs[heldoutcpu13.FROZEN]
    for ranks in (4, 8):
        old, new = before[(ranks, "strong")], after[(ranks, "strong")]
        assert len(old) == len(new) == 72
        assert median_error(old) <= -0.12 and abs(median_error(new)) <= 0.05
        assert sum(map(inside, new)) > sum(map(inside, old))
        for old, new in zip(before[(ranks, "weak")], after[(ranks, "weak")]):
            assert new["predicted_s"] == pytest.approx(old["predicted_s"], rel=1e-9)


def median_error(runs: list[dict]) -> float:
    return statistics.median(q["predicted_s"] / q["measured_s"] - 1 for q in runs)


def test_a_design_derived_at_a_commit_is_that_commits_model_and_its_patches_apply_there():
    """A design tool's table is derived by the models at named commits (``heldout_inputs.derived_at``), so that it
    stays that design's as the model moves on: the ninth CPU round derived at its frozen commit is its committed
    records, to the last digit; under carried_design's BEFORE (the eighth round's rules, patched in there) its carried
    predictions move and those from the target's link test do not."""
    from bench.tools.heldout_inputs import derived_at

    folder = ROOT / "docs/results/cpu-16core/heldoutcpu9"
    committed = read_records(folder / "records.jsonl")
    again = derived_at(folder, heldoutcpu9.FROZEN)
    assert [r.case for r in again] == [r.case for r in committed]
    for old, new in zip(committed, again):
        assert new.values == pytest.approx(old.values, rel=1e-9, abs=1e-12), old.case
    before = derived_at(folder, heldoutcpu9.FROZEN, "bench.tools.carried_design:BEFORE")
    carried = [(o, n) for o, n in zip(committed, before) if "carried" in o.params["kind"]]
    assert any(n.values != pytest.approx(o.values, rel=1e-9) for o, n in carried)
    target = [(o, n) for o, n in zip(committed, before) if "carried" not in o.params["kind"]]
    assert all(n.values == pytest.approx(o.values, rel=1e-9, abs=1e-12) for o, n in target)


def test_what_one_rank_never_saw_is_the_median_of_the_held_out_rounds_and_their_spread_its_95th_percentile():
    """HALO_CALL_S and COUPLING: the median of how far the measured times of rounds 1-4, fitted on one GPU, lay from
    their predictions without them (per halo call, or a share of the step); HALO_SPREAD_S and COUPLING_SPREAD, the
    95th percentile of how far they lay outside the rest of the interval with them, each side; recomputed from the
    stored inputs by the model as it is."""
    import statistics

    from spmd.scale.prediction.intervals import COUPLING, COUPLING_SPREAD, HALO_CALL_S, HALO_SPREAD_S

    design = heldout.unseen_design([ROOT / f"docs/results/h200x2/heldout{r}" for r in ("", "2", "3", "4")])
    assert len(design["halo"]) == 32 and len(design["coupling"]) == 108  # rounds 3-4's stencils; every training run
    assert statistics.median(design["halo"]) == pytest.approx(HALO_CALL_S, abs=1e-6)
    assert statistics.median(design["coupling"]) == pytest.approx(COUPLING, abs=0.005)
    p95 = {k: statistics.quantiles(v, n=20)[-1] for k, v in design.items()}
    assert (p95["halo_below"], p95["halo_above"]) == pytest.approx(HALO_SPREAD_S, abs=1e-6)
    assert (p95["coupling_below"], p95["coupling_above"]) == pytest.approx(COUPLING_SPREAD, abs=0.005)


STORED_ROUNDS = sorted(ROOT.glob("docs/results/h200x*/heldout*/records.jsonl"))


def test_the_models_error_is_the_95th_percentile_of_how_far_the_stored_rounds_speedups_lay_outside_the_rest():
    """MODEL_SPREAD: the 95th percentile, each side, of how far the stored held-out rounds' measured speedups lay
    outside their intervals' other parts (one launch's runs: the launch's part left out), recomputed from the stored
    inputs by the model as it is; with it, those speedups and times fall inside their intervals as often as the goal
    asks of a 90% interval (80-97%)."""
    import statistics

    from bench.suites.predict import checked
    from spmd.scale.prediction.intervals import MODEL_SPREAD

    folders = [p.parent for p in STORED_ROUNDS]
    assert {f.parent.name for f in folders} == {"h200x2", "h200x4"} and len(folders) >= 7
    design = heldout.spread_design(folders)
    assert len(design["below"]) == len(design["above"]) >= 450  # one figure a stored run, each on one side
    assert all(b == 0 or a == 0 for b, a in zip(design["below"], design["above"]))
    p95 = tuple(statistics.quantiles(design[k], n=20)[-1] for k in ("below", "above"))
    assert p95 == pytest.approx(MODEL_SPREAD, abs=0.005)
    inside = times = runs = 0
    with tempfile.TemporaryDirectory() as scratch:
        for folder in folders:
            for record in read_records(folder / "records.jsonl"):
                for run in record.params.get("runs") or [record.params]:
                    files = {r: heldout._unpacked(folder / s, Path(scratch)) for r, s in run["inputs"].items()}
                    (row,) = [
                        c
                        for c in checked(files, run["target"])
                        if (c["mode"], c["ranks"]) == (run["mode"], run["ranks"])
                    ]
                    low, high = row["speedup_interval"]
                    inside += low <= row["measured_speedup"] <= (high or float("inf"))
                    times += row["interval"][0] <= row["measured_s"] <= row["interval"][1]
                    runs += 1
    assert 0.8 * runs <= inside <= 0.97 * runs and 0.8 * runs <= times <= 0.97 * runs, (inside, times, runs)


def test_the_design_is_how_far_each_run_lay_from_its_prediction_without_what_it_never_saw(tmp_path, monkeypatch):
    """On a stored round's stencil fitted on one GPU, its training MLP, its reduce (nothing unseen) and the stencil
    fitted on 1-2: the design holds one figure per run fitted on one GPU that had halos or trained, the measured time
    less the prediction with nothing unseen charged (the constants set to 0), per halo call or a share of the step."""
    import shutil

    from bench.suites.predict import checked
    from spmd.scale.prediction import intervals

    source = ROOT / "docs/results/h200x2/heldout3"
    names = ("stencil, a 2048 grid, 400 iterations", "train, an MLP of 1024-4096-4096-10", "reduce, seed 71")
    kept = [r for r in read_records(source / "records.jsonl") if any(n in r.case for n in names)]
    assert {("1-2 GPUs" in r.case) for r in kept} == {True, False}
    for r in kept:
        for run in r.params["runs"]:
            for stored in run["inputs"].values():
                (tmp_path / stored).parent.mkdir(exist_ok=True)
                shutil.copyfile(source / stored, tmp_path / stored)
    lines = (source / "records.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "records.jsonl").write_text("".join(x for x in lines if any(n in json.loads(x)["case"] for n in names)))
    got = heldout.unseen_design([tmp_path])
    for name in ("HALO_CALL_S", "COUPLING"):
        monkeypatch.setattr(intervals, name, 0.0)
    expected = {"halo": [], "coupling": []}
    for r in kept:
        for run in r.params["runs"]:
            if "1-2 GPUs" in r.case or "reduce" in r.case:
                continue
            files = {role: heldout._unpacked(tmp_path / stored, tmp_path) for role, stored in run["inputs"].items()}
            row = next(c for c in checked(files, run["target"]) if c["mode"] == run["mode"] and c["ranks"] == 2)
            if "stencil" in r.case:
                expected["halo"].append((row["measured_s"] - row["predicted_s"]) / 800)  # 400 iterations, 2 ways
            else:
                expected["coupling"].append(row["measured_s"] / row["predicted_s"] - 1)
    assert expected["halo"] and expected["coupling"]
    assert got["halo"] == pytest.approx(expected["halo"], rel=1e-9)
    assert got["coupling"] == pytest.approx(expected["coupling"], rel=1e-9)
    for kind in ("halo", "coupling"):
        assert len(got[f"{kind}_below"]) == len(got[f"{kind}_above"]) == len(got[kind])
        assert all(b == 0 or a == 0 for b, a in zip(got[f"{kind}_below"], got[f"{kind}_above"]))


@pytest.mark.parametrize("gpus", [2, 4])
def test_a_later_round_on_four_gpus_is_fitted_on_two_and_carries_their_links(tmp_path, monkeypatch, gpus):
    """On 2 GPUs a round's case is fitted on one (its share of 2) and predicted from the preset, the target's link
    test and, fitted on 1-2, with peer-to-peer off; on 4, as the acceptance asks, it is fitted on 1-2 GPUs and the
    fit's own 2-GPU link test, carried to 4, is a fourth kind of input (the issue's kind b)."""
    calls, links, kinds = [], [], {}
    env = Env(out=tmp_path / "out", work=tmp_path, quick=False, ranks=gpus, gpus=gpus)
    monkeypatch.setattr(Env, "spmd", lambda self, *args, ranks=None: calls.append((args, ranks)))
    monkeypatch.setattr(heldout3, "launch", lambda env, args, n, extra: calls.append((tuple(args), n)))
    monkeypatch.setattr(heldout3, "link_test", lambda env, n, p2p, suite: links.append((n, p2p)) or tmp_path / "l")
    monkeypatch.setattr(heldout3, "save_inputs", lambda env, name, files, suite: dict(files))
    monkeypatch.setattr(heldout3, "held_against", lambda name, n, files, inputs, k, frozen: kinds.update(k) or [])
    job, modes = heldout6.cases_list(env)["reduce, seed 197, float64"]
    heldout3.measure_round(env, "heldout6", heldout6.FROZEN, "reduce, seed 197, float64", job, modes)
    scales = [(args, ranks) for args, ranks in calls if args[0] == "scale"]
    fit = scales[0]
    if gpus == 4:
        assert fit[0][2:4] == ("--ranks", "1,2") and fit[1] == 2
        assert (2, True) in links and (4, True) in links and (4, False) in links
        assert list(kinds) == [heldout3.PRESET, heldout2.CARRIED, heldout3.TARGETS, heldout3.P2P_OFF]
        assert kinds[heldout2.CARRIED][3] == "links-fit"
        assert {k: v[4] for k, v in kinds.items()} == {
            **dict.fromkeys(list(kinds)[:3], "1-2 GPUs"),
            heldout3.P2P_OFF: "1-4 GPUs",
        }
    else:
        assert fit[0][2:6] == ("--ranks", "1", "--shares", "2") and fit[1] == 1
        assert (2, True) in links and (2, False) in links and len(links) == 2
        assert list(kinds) == [heldout3.PRESET, heldout3.TARGETS, heldout3.P2P_OFF]
        assert {k: v[4] for k, v in kinds.items()} == {
            heldout3.PRESET: "1 GPU",
            heldout3.TARGETS: "1 GPU",
            heldout3.P2P_OFF: "1-2 GPUs",
        }
    assert heldout6.predictions(heldout6.cases_list(env), gpus) == 10 * (4 if gpus == 4 else 3)


@pytest.mark.parametrize("gpus", [2, 4])
def test_the_seventh_round_predicts_from_the_preset_with_the_fits_own_host_reads(tmp_path, monkeypatch, gpus):
    """The seventh round adds a kind of input: the preset with the host's reads the fitting machine measured (spmd
    bench comm --host-read) by as many ranks as the target has, sharing the fit's GPUs (one on 2 GPUs, two on 4),
    kept as its own stored input (the role host_read of each prediction)."""
    calls, kinds = [], {}
    env = Env(out=tmp_path / "out", work=tmp_path, quick=False, ranks=gpus, gpus=gpus)
    monkeypatch.setattr(Env, "spmd", lambda self, *args, ranks=None: calls.append((args, ranks)))
    monkeypatch.setattr(heldout3, "launch", lambda env, args, n, extra: calls.append((tuple(args), n, extra)))
    monkeypatch.setattr(heldout3, "link_test", lambda env, n, p2p, suite: tmp_path / "l")
    monkeypatch.setattr(heldout3, "save_inputs", lambda env, name, files, suite: dict(files))
    monkeypatch.setattr(heldout3, "held_against", lambda name, n, files, inputs, k, frozen: kinds.update(k) or [])
    job, modes = heldout7.cases_list(env)["reduce, seed 227, float32"]
    heldout3.measure_round(env, "heldout7", heldout7.FROZEN, "reduce, seed 227, float32", job, modes,
                           kinds=heldout7.input_kinds)  # fmt: skip
    (test,) = [c for c in calls if c[0][:3] == ("bench", "comm", "--host-read")]
    visible = "0,1" if gpus == 4 else "0"
    assert test[1] == gpus and test[2] == ({"CUDA_VISIBLE_DEVICES": visible}, None)
    assert test[0][-1] == tmp_path / f"heldout7-host-read-{gpus}-on-{2 if gpus == 4 else 1}.json"
    assert list(kinds) == list(heldout7.input_kinds(gpus)) and heldout3.PRESET_READS in kinds
    assert kinds[heldout3.PRESET_READS] == ("intra=nvlink4,", "fit", "measured", None, kinds[heldout3.PRESET][4],
                                            "host-read-fit")  # fmt: skip
    assert heldout7.predictions(heldout7.cases_list(env), gpus) == 10 * (5 if gpus == 4 else 4)


def test_a_prediction_from_a_preset_with_the_host_reads_keeps_them_as_an_input(tmp_path, monkeypatch):
    """held_against: a kind with a host reads' role predicts with them (checked's host_read) and stores them among
    its inputs, so that bench recheck derives it again from the same files."""
    seen = []
    monkeypatch.setattr(heldout, "checked", lambda files, target: seen.append((files, target)) or [])
    kinds = {"preset nvlink4 with the fit's host reads": ("intra=nvlink4,", "fit", "measured", None, "1 GPU", "r")}
    files = {"fit": "f.json", "measured": "m.json", "r": "r.json"}
    inputs = {"fit": "inputs/f.gz", "measured": "inputs/m.gz", "r": "inputs/r.gz"}
    assert heldout.held_against("x", 2, files, inputs, kinds, "frozen") == []
    ((given, target),) = seen
    assert given == {"fit": "f.json", "measured": "m.json", "host_read": "r.json"}
    assert target == "intra=nvlink4,gpus_per_node=2,nodes=1,name=preset nvlink4 with the fit's host reads"


@pytest.mark.parametrize(
    "cpu_round, name, earlier, before, changed",
    [
        (heldoutcpu, "reduce, seed 307, float64", ROUNDS[:7], heldout6, None),
        (
            heldoutcpu2,
            "reduce, seed 331, float32",
            ROUNDS[:8],
            heldoutcpu,
            ("spmd/scale/models/scaling_model.py", "def node_beyond_seconds("),
        ),
        (
            heldoutcpu3,
            "reduce, seed 353, float64",
            ROUNDS[:9],
            heldoutcpu2,
            ("spmd/scale/models/scaling_model.py", "beyond what a 2-rank pair showed in some held-out cases"),
        ),
        (
            heldoutcpu4,
            "reduce, seed 389, float32",
            ROUNDS[:10],
            heldoutcpu3,
            ("spmd/scale/models/scaling_model.py", "def cores_slowdown("),
        ),
        (
            heldoutcpu5,
            "reduce, seed 419, float64",
            ROUNDS[:11],
            heldoutcpu4,
            ("spmd/scale/models/scaling_model.py", "def alone_seconds("),
        ),
        (
            heldoutcpu6,
            "reduce, seed 439, float32",
            ROUNDS[:12],
            heldoutcpu5,
            ("spmd/workloads/train/ops.py", "def _scratch("),
        ),
        (
            heldoutcpu7,
            "reduce, seed 461, float64",
            ROUNDS[:13],
            heldoutcpu6,
            ("spmd/scale/prediction/intervals.py", "def sweep_part("),
        ),
        (heldoutcpu8, "reduce, seed 487, float32", ROUNDS[:14], heldoutcpu7, None),
        (
            heldoutcpu9,
            "reduce, seed 509, float64",
            ROUNDS[:15],
            heldoutcpu8,
            ("spmd/scale/models/node.py", "def unmeasured_cores_seconds("),
        ),
        (
            heldoutcpu10,
            "reduce, seed 547, float32",
            ROUNDS[:16],
            heldoutcpu9,
            ("spmd/scale/models/node.py", "STAND_IN_CORES = "),
        ),
        (
            heldoutcpu11,
            "reduce, seed 571, float64",
            ROUNDS[:17],
            heldoutcpu10,
            ("spmd/scale/models/links.py", "def mpi_steps("),
        ),
        (
            heldoutcpu12,
            "reduce, seed 601, float32",
            ROUNDS[:18],
            heldoutcpu11,
            ("spmd/scale/models/links.py", 'if level.library == "mpi" and level.curve_per_node == r:'),
        ),
        (
            heldoutcpu13,
            "reduce, seed 641, float64",
            ROUNDS[:19],
            heldoutcpu12,
            ("spmd/scale/models/phases.py", 'PER_STEP_PHASES = ("optimizer",)'),
        ),
    ],
)
def test_a_cpu_round_is_fitted_on_two_ranks_and_predicts_four_and_eight_from_two_kinds_of_input(
    tmp_path, monkeypatch, cpu_round, name, earlier, before, changed
):
    """A CPU round: each case fitted on 1-2 ranks with the shares of 4 and 8 (a launch of 2), measured at 1, 2, 4 and
    8 in one launch of 8, every job on the CPU; link tests on the CPU with 2 (the fit's), 4 and 8 ranks; each
    prediction at 4 and 8 from the fit's 2-rank links carried and from the target's own, as many ranks as it has.
    Twenty predictions or more over three workloads or more, none of its cases nor jobs an earlier round's, frozen
    after the round before it, with the change it tests in the frozen tree. The second tests the node term its pair
    of equal bytes decides, held beyond for compute, designed on the first; the third, the docstring that says what
    the second found, the model unchanged; the fourth, a compute phase charged what the target's link test measured of
    its node's cores, designed on the first three; the fifth, that charge on the time alone the sweep measured of the
    share, designed on the first four; the sixth, the same model measured with workloads that allocate nothing of a
    block's size after the first repeat; the seventh, the sweep's part of an interval with the lines' misfit on the
    lines' seconds only, designed on the fourth to sixth; the eighth, the seventh's model on four more cases; the ninth,
    a carried prediction's compute on the share's own run and a stored slowdown above unmeasured ranks a node,
    designed on the fourth to eighth; the tenth, another node's cores test standing in for the target's where
    nothing measured as many ranks a node, charged as the target's own would be, designed on the fourth to ninth; the
    eleventh, host MPI's collectives carried round by round, designed on the link tests of the first ten; the twelfth,
    host MPI's curve read at a call's own bytes a rank, designed on the link tests of the first eleven; the thirteenth,
    a training step's optimizer priced as a step's work, designed on the first twelve."""
    calls, launched, held = [], [], []
    env = Env(out=tmp_path / "out", work=tmp_path, quick=False, ranks=8, gpus=0)
    monkeypatch.setattr(Env, "spmd", lambda self, *args, ranks=None: calls.append((args, ranks)))
    monkeypatch.setattr(heldout3, "launch", lambda env, args, n, extra: launched.append((tuple(args), n, extra)))
    monkeypatch.setattr(heldoutcpu, "save_inputs", lambda env, name, files, suite: dict(files))
    monkeypatch.setattr(heldoutcpu, "held_against", lambda *a: held.append(a) or [])
    listed = cpu_round.cases_list(env)
    assert all(job["device"] == "cpu" for job, _ in listed.values())
    (case,) = [c for c in cpu_round.cases(env) if c.name == f"held-out {name}"]
    assert case.runs == 1 and case.needs == ("ranks8",)
    case.measure(env)
    scales = [(args[2:-3], ranks) for args, ranks in calls if args[0] == "scale"]
    assert scales[0] == (("--ranks", "1,2", "--shares", "4,8", "--mode", "both"), 2)
    assert scales[1] == (("--ranks", "1,2,4,8", "--mode", "both"), 8)
    assert sorted(n for _, n, _ in launched) == [2, 4, 8]
    assert all(args[:5] == ("bench", "comm", "--links", "--device", "cpu") for args, _, _ in launched)
    assert [(a[1], a[5]) for a in held] == [(4, cpu_round.FROZEN), (8, cpu_round.FROZEN)]
    for _, n, files, _, kinds, _ in held:
        assert kinds == {
            heldoutcpu.CARRIED: ("", "fit", "measured", "links-fit", "1-2 ranks"),
            heldout3.TARGETS: ("", "fit", "measured", f"links-{n}", "1-2 ranks"),
        }
        assert files["links-fit"].endswith(f"{cpu_round.SUITE}-links-2.json")
        assert files[f"links-{n}"].endswith(f"{cpu_round.SUITE}-links-{n}.json")
    assert heldoutcpu.predictions(listed) == 32 and len({name.split(",")[0] for name in listed}) == 4
    for earlier_list in (r.cases_list(env) for r in earlier):
        assert not set(listed) & set(earlier_list)
        assert not [j for j, _ in listed.values() if j in [f for f, _ in earlier_list.values()]]
    after = subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", before.FROZEN, cpu_round.FROZEN])
    assert after.returncode == 0
    if changed:
        tree = subprocess.run(["git", "-C", str(ROOT), "show", f"{cpu_round.FROZEN}:{changed[0]}"], capture_output=True)
        assert changed[1] in tree.stdout.decode()
