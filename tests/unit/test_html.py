"""report.html from report.json alone: a report of an earlier spmd (no breakdown, intervals or timeline) renders
with them computed from its repeats, and whatever a report holds (host names, findings, results) is text, never
markup."""

from __future__ import annotations

import html.parser

from spmd.report.build import completed
from spmd.report.html import run_html

HOSTILE = '<script>alert(1)</script>"&'


def old_report() -> dict:
    per_rank = [
        {
            "rank": r,
            "host": HOSTILE if r else "node0",
            "median": {},
            "repeats": [
                {
                    "read": 0.01 + 0.2 * r,
                    "wait": 0.2 * (1 - r),
                    "compute": 0.05,
                    "comm": 0.01,
                    "total": 0.27 + 0.001 * i,
                }
                for i in range(6)
            ],
        }
        for r in range(2)
    ]
    return {
        "schema": 1,
        "workload": "reduce",
        "ranks": 2,
        "per_rank": per_rank,
        "device": "cpu",
        "comm": "mpi",
        "verified": True,
        "nodes": [{"host": "node0", "ranks": [0], "devices": []}],
        "config": {},
        "result": {"note": HOSTILE},
        "timings": {"total": {"min": 0.27, "median": 0.27, "max": 0.27, "imbalance": 1.0}},
        "warnings": [HOSTILE],
    }


class Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def test_an_earlier_report_renders_with_its_breakdown_computed_and_nothing_it_holds_is_markup():
    report = completed(old_report())
    assert report["breakdown"]["straggler"]["rank"] == 1 and report["timeline"] is None
    assert report["intervals"]["total"]["n"] == 6
    page = run_html(report)
    parser = Tags()
    parser.feed(page)
    assert "script" not in parser.tags
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "No timeline in this report." in page and "is the straggler" in page
