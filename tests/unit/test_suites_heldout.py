"""The held-out suite (bench/suites/heldout.py): its list, fixed before anything was measured, makes at least 20
predictions over at least 3 workloads, one of a family never used before; every committed held-out record was
measured with the prediction model's files as frozen; the check itself tells a changed model file from any other."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

from helpers import git_repo

from bench.env import Env
from bench.suites import heldout

ROOT = Path(__file__).resolve().parents[2]


def test_the_frozen_commit_is_in_the_history_and_holds_the_model():
    found = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{heldout.FROZEN}^{{commit}}"])
    assert found.returncode == 0, f"{heldout.FROZEN} is not in this clone's history (a shallow clone?)"
    for path in heldout.MODEL_PATHS:
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-tree", heldout.FROZEN, "--", path], capture_output=True)
        assert listed.stdout, path


def test_the_list_makes_twenty_predictions_over_three_workloads_one_of_a_new_family():
    for gpus in (0, 2):  # the names and sizes a CPU and a GPU machine would run
        env = Env(out=Path(tempfile.mkdtemp()), work=Path(tempfile.mkdtemp()), quick=False, ranks=2, gpus=gpus)
        listed = heldout.cases_list(env)
        workloads = {name.split(",")[0] for name in listed}
        assert heldout.predictions(listed) >= 20 and len(workloads) >= 3
        assert any(name.startswith("vit") for name in listed)
        # the new family is nowhere in the suites the model was designed on
        for suite in ("predict.py", "scaling.py", "torch_models.py", "torch_answer.py"):
            assert not re.search(r"\bvit\b|vit_b|visiontransformer", (ROOT / "bench/suites" / suite).read_text(), re.I)


def test_every_committed_held_out_record_ran_the_frozen_model():
    commits = []
    for manifest in ROOT.glob("docs/results/*/heldout/manifest.json"):
        m = json.loads(manifest.read_text())
        commits += [m["commit"], *(c["commit"] for c in m.get("cases", []) if c.get("commit"))]
    assert heldout.records_with_other_model_files(commits) == []


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
