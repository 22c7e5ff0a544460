"""The GPU straggler rules' committed design set (docs/results/h200x2/stragglers/design) replayed under this
checkout's rules: what the rules were shaped on still reads as docs/report.md says, and a later rule change that
moves it shows here."""

from __future__ import annotations

from pathlib import Path

from bench.tools.straggler_replay import replay, tally

DESIGN = Path(__file__).resolve().parents[2] / "docs/results/h200x2/stragglers/design"


def test_the_design_set_names_the_slowed_rank_and_its_clean_runs_name_none_but_syncbatchnorms_captured_ones():
    """Every clean run names nobody except the SyncBatchNorm ones with a capture, whose reports predate its timed
    gathers (their kernels say the phases missed those collectives, so the captured steps alone decide, and the
    profiler's uneven cost to each host decides for them); the only slowed run not named is the busy device on GPT-2
    tiny, where no rank is named."""
    rows = [r for launch in sorted(DESIGN.glob("*/rows.jsonl")) for r in replay(launch.parent)]
    assert len(rows) == 90
    clean_named = [r for r in rows if not r["where"] and r["now_rank"] is not None]
    assert clean_named and all(r["model"] == "bn-sync" and r["capture"] for r in clean_named)
    missed = [r for r in rows if r["where"] and r["now_rank"] != r["slow_rank"]]
    assert [(r["model"], r["where"], r["now_rank"]) for r in missed] == [("gpt2-tiny", "busy device", None)]
    assert tally(rows) == {"right_rank": "41/42", "right_cause": "37/37", "clean_naming_none": "39/48"}
