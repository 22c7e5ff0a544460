"""bench/earlier/claims.py: the documents agree with their raw files, and a document that does not is caught."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("claims", ROOT / "bench/earlier/claims.py")
claims = importlib.util.module_from_spec(spec)
sys.modules["claims"] = claims  # its dataclasses look their module up there
spec.loader.exec_module(claims)


def test_every_covered_figure_matches_its_raw_file():
    assert claims.check(claims.CLAIMS, show=False) == []


def test_a_document_that_disagrees_or_a_missing_source_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(claims, "ROOT", tmp_path)
    (tmp_path / "doc.md").write_text("the kernel ran at 4.20\n  TB/s on one GPU")
    right = claims.Claim("doc.md", "ran at {v:.2f} TB/s", lambda: {"v": 4.2}, "here")
    wrong = claims.Claim("doc.md", "ran at {v:.2f} TB/s", lambda: {"v": 4.31}, "there")
    gone = claims.Claim("doc.md", "ran at {v:.2f} TB/s", lambda: claims.load("nowhere.json"), "nowhere.json")
    failures = claims.check([right, wrong, gone], show=False)
    assert failures[0] == "doc.md should say 'ran at 4.31 TB/s' (from there)"
    assert failures[1].startswith("doc.md: 'ran at {v:.2f} TB/s': its source (nowhere.json) cannot be read")
    assert len(failures) == 2
