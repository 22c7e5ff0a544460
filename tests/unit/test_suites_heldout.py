"""The held-out suites (bench/suites/heldout.py, heldout2.py, heldout3.py, one a round): each list, fixed before
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
from bench.suites import heldout, heldout2, heldout3

ROOT = Path(__file__).resolve().parents[2]


# the suites the model was designed on: a round's new family is in none of them, nor in an earlier round
DESIGNED_ON = ("predict.py", "scaling.py", "torch_models.py", "torch_answer.py")


@pytest.mark.parametrize("frozen", [heldout.FROZEN, heldout2.FROZEN, heldout3.FROZEN])
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


def test_the_third_round_is_new_cases_at_a_later_freeze_one_of_a_new_family():
    """Twenty predictions or more over three workloads or more (fitted on one GPU, and on 1-N for the target with
    peer-to-peer off); none of its cases, nor any job, is an earlier round's; its family (EfficientNet) in no suite
    the model was designed on nor in an earlier round; its freeze after the second's, and the stencil's lone rank
    listing its halos (the change it tests) in the frozen tree."""
    for gpus in (2, 4):
        env = Env(out=Path(tempfile.mkdtemp()), work=Path(tempfile.mkdtemp()), quick=False, ranks=gpus, gpus=gpus)
        listed = heldout3.cases_list(env)
        assert heldout3.predictions(listed) >= 20 and len({name.split(",")[0] for name in listed}) >= 3
        for earlier in (heldout, heldout2):
            before = earlier.cases_list(env)
            assert not set(listed) & set(before)
            assert not [j for j, _ in listed.values() if j in [f for f, _ in before.values()]]
    for suite in (*DESIGNED_ON, "heldout.py", "heldout2.py"):
        assert not re.search(r"efficientnet", (ROOT / "bench/suites" / suite).read_text(), re.I), suite
    later = subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", heldout2.FROZEN, heldout3.FROZEN])
    assert later.returncode == 0
    frozen = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{heldout3.FROZEN}:spmd/workloads/stencil/workload.py"],
        capture_output=True,
        text=True,
    )
    assert "self.grid.size == 1" in frozen.stdout


def test_every_committed_held_out_record_ran_its_rounds_frozen_model():
    folders = sorted(ROOT.glob("docs/results/*/heldout*/manifest.json"))
    assert folders
    for manifest in folders:
        m = json.loads(manifest.read_text())
        commits = [m["commit"], *(c["commit"] for c in m.get("cases", []) if c.get("commit"))]
        frozen = {r.params["frozen"] for r in read_records(manifest.parent / "records.jsonl")}
        rounds = {"heldout": heldout, "heldout2": heldout2, "heldout3": heldout3}
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
