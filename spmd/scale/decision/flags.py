"""The flags a measured point carries, one rule each, used by the sweep and by predict alike."""

from __future__ import annotations

from ...core.units import fmt_seconds

SUPERLINEAR = 1.25  # a speedup above this times the rank count, its interval above the count: a suspect point


def flag_suspects(rows: list[dict], n: int) -> None:
    """Mark each row whose speedup lies beyond what ``n`` ranks can give (above SUPERLINEAR x n, its whole
    interval above n: its 1-rank run was slowed by something else), with the run that would settle it."""
    for r in rows:
        r.setdefault("suspect", [])
        if r["speedup"] > SUPERLINEAR * n and r["speedup_interval"][0] > n:
            r["suspect"].append(
                f"{r['speedup']:.1f}x on {n} ranks is beyond what {n} ranks can give (interval "
                f"{r['speedup_interval'][0]:.1f}x-{r['speedup_interval'][1]:.1f}x): its 1-rank run took "
                f"{fmt_seconds(r['step_s_1']).strip()} a step; rerun batch {r['batch']} on 1 rank to settle it"
            )
