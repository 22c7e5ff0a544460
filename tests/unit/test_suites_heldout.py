"""The held-out suites (bench/suites/heldout.py to heldout4.py, one a round): each list, fixed before
anything of it was measured, makes at least 20 predictions over at least 3 workloads, one of a family never used
before; every committed held-out record was measured with the prediction model's files as its round froze them; the
check itself tells a changed model file from any other."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
from helpers import git_repo

from bench.env import Env
from bench.records import read_records
from bench.suites import heldout, heldout2, heldout3, heldout4

ROOT = Path(__file__).resolve().parents[2]


# the suites the model was designed on: a round's new family is in none of them, nor in an earlier round
DESIGNED_ON = ("predict.py", "scaling.py", "torch_models.py", "torch_answer.py")


@pytest.mark.parametrize("frozen", [heldout.FROZEN, heldout2.FROZEN, heldout3.FROZEN, heldout4.FROZEN])
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
    ],
)
def test_a_later_round_is_new_cases_at_a_later_freeze_one_of_a_new_family(later, earlier, family, changed, mark):
    """Twenty predictions or more over three workloads or more (fitted on one GPU, and on 1-N for the target with
    peer-to-peer off); none of its cases, nor any job, is an earlier round's; its family in no suite the model was
    designed on nor in an earlier round; its freeze after the round before, with the change it tests in the frozen
    tree. The third round tests a stencil's lone rank listing its halos (EfficientNet its new family); the fourth,
    what a fit on one rank never saw priced above its intervals (MobileNet)."""
    for gpus in (2, 4):
        env = Env(out=Path(tempfile.mkdtemp()), work=Path(tempfile.mkdtemp()), quick=False, ranks=gpus, gpus=gpus)
        listed = later.cases_list(env)
        assert later.predictions(listed) >= 20 and len({name.split(",")[0] for name in listed}) >= 3
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
        rounds = {"heldout": heldout, "heldout2": heldout2, "heldout3": heldout3, "heldout4": heldout4}
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


def test_what_one_rank_never_saw_is_the_90th_percentile_of_the_held_out_rounds_above_their_intervals():
    """HALO_HOST_S and COUPLING: how far the measured times of rounds 1-3, fitted on one GPU, lay above their
    intervals (per halo call, or a share of the step), their 90th percentile, recomputed from the stored records."""
    import statistics

    from spmd.scale.prediction.intervals import COUPLING, HALO_HOST_S

    excess = heldout.unseen_excess([ROOT / f"docs/results/h200x2/{r}" for r in ("heldout", "heldout2", "heldout3")])
    assert len(excess["halo"]) == 16 and len(excess["coupling"]) == 76  # round 3's stencils; every training run
    assert statistics.quantiles(excess["halo"], n=10)[-1] == pytest.approx(HALO_HOST_S, abs=2e-6)
    assert statistics.quantiles(excess["coupling"], n=10)[-1] == pytest.approx(COUPLING, abs=0.01)


def test_unseen_excess_is_how_far_above_the_interval_per_halo_call_or_share_of_the_step(tmp_path):
    import gzip

    from bench.records import Measure, collect, write_records

    def fit(name, ranks, training, ops):
        model = {"comm": {"ops": ops}}
        doc = {"runs": [{"ranks": r} for r in ranks], "training": training, "model": model}
        (tmp_path / name).write_bytes(gzip.compress(json.dumps(doc).encode()))
        return name

    def record(case, fit_name, measured, high, predicted=1.0):
        params = {
            "inputs": {"fit": fit_name},
            "measured_s": measured,
            "interval": [0.5, high],
            "predicted_s": predicted,
        }
        return Measure(case, "spmd predict", 0.1, "error", "share", params=params)

    halos = fit("halo.json.gz", [1], False, [{"op": "sendrecv", "calls": 400, "bytes": 8}])
    train = fit("train.json.gz", [1], True, [{"op": "allreduce", "calls": 4, "bytes": 8}])
    two = fit("two.json.gz", [1, 2], True, [])
    write_records(
        tmp_path / "records.jsonl",
        collect("heldout", [[record("a", halos, 1.4, 1.2), record("b", halos, 1.0, 1.2),
                             record("c", train, 1.5, 1.2, 1.0), record("d", two, 3.0, 1.2)]]),
    )  # fmt: skip
    got = heldout.unseen_excess([tmp_path])
    assert got["halo"] == pytest.approx([0.2 / 400, 0.0]) and got["coupling"] == pytest.approx([0.3])
