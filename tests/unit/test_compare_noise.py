"""report compare weighs the runs' own spread: a change inside it is noise, not a regression (issue 25)."""

from __future__ import annotations

from spmd.report.compare import _spreads, compare, format_compare


def report(compute_repeats: list[list[float]], ranks: int = 2) -> dict:
    """A report.json's parts compare reads: per rank, every repeat's compute (and total)."""
    per_rank = [{"repeats": [{"compute": c, "total": c + 1e-3} for c in rank]} for rank in compute_repeats]
    median = sorted(max(r[i] for r in compute_repeats) for i in range(len(compute_repeats[0])))
    return {"ranks": ranks, "per_rank": per_rank, "m": median[len(median) // 2]}


def entries(rep: dict) -> dict:
    return {("strong", rep["ranks"]): {"compute": rep["m"]}}


def test_a_change_inside_the_spread_is_noise_and_one_beyond_it_is_flagged():
    # sub-millisecond phases with a noisy tail: the median moved 30%, the ranges overlap
    old = report([[100e-6, 110e-6, 160e-6], [105e-6, 108e-6, 150e-6]])
    noisy = report([[130e-6, 140e-6, 150e-6], [128e-6, 135e-6, 145e-6]])
    rows, slower = compare(entries(old), entries(noisy), 10, 0.0, _spreads(old), _spreads(noisy))
    assert rows[0]["change_pct"] > 10 and rows[0]["noise"] and slower == []
    assert rows[0]["old_range"] == (105e-6, 160e-6) and rows[0]["new_range"] == (130e-6, 150e-6)
    text = format_compare(rows, slower, 10)
    assert "(within the runs' spread)" in text and text.endswith("no slowdown above 10% (1 more inside the runs' own "
                                                                 "spread: noise, not flagged)")
    # every new repeat slower than every old one: a regression, however small the phase
    slow = report([[170e-6, 175e-6, 180e-6], [171e-6, 172e-6, 173e-6]])
    rows, slower = compare(entries(old), entries(slow), 10, 1.0, _spreads(old), _spreads(slow))
    assert [r["phase"] for r in slower] == ["compute"] and "SLOWER" in format_compare(rows, slower, 10)


def test_reports_without_repeats_fall_back_to_the_noise_floor():
    old, new = {("strong", 1): {"compute": 50e-6}}, {("strong", 1): {"compute": 80e-6}}
    assert compare(old, new, 10, 1e-4)[1] == []  # under --min-seconds in both: noise
    assert compare(old, new, 10, 1e-5)[1][0]["phase"] == "compute"
