"""report.json's ``kernels`` as docs/report.md documents it: every key spmd writes there is named in the
document's row, for a GPU capture (the committed fixtures) and a CPU one (a hand-made trace)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from spmd.report.capture import causes, kernels

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests/fixtures/traces/analyses/resnet-r2-work.json"


def documented() -> set[str]:
    row = next(line for line in (ROOT / "docs/report.md").read_text().splitlines() if line.startswith("| `kernels`"))
    return set(re.findall(r"`([a-z_]+)`", row))


def keys(value, out: set[str]) -> set[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            if not k.isdigit():  # a stream's number in idle_by_stream
                out.add(k)
            keys(v, out)
    elif isinstance(value, list):
        for v in value:
            keys(v, out)
    return out


def test_every_key_of_a_gpu_capture_is_documented():
    x = json.loads(FIXTURE.read_text())
    for a in x["analyses"]:
        a["capture"] = {"steps": 2, "seconds_per_step": 0.1, "trace_bytes": 1, "kept": True}
    k = causes.combine(x["analyses"], x["records"], x["steps_per_repeat"])
    # per_step and names stay on the ranks (the critical path and causes read them); report.json keeps the rest
    missing = keys(k, set()) - documented() - {"device", "steps", "rank", "name", "count", "kind"}
    assert not missing, f"report.json kernels keys not in docs/report.md: {sorted(missing)}"
    assert "per_step" not in k["per_rank"][0] and "names" not in k["per_rank"][0]


def test_a_cpu_capture_writes_the_same_keys():
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0.0, "dur": 100.0, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10.0, "dur": 30.0, "tid": 1},
        {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "ts": 50.0, "dur": 20.0, "tid": 2},
    ]
    a = kernels.analyze({"traceEvents": ev}, gpu=False)
    assert a["device"] == "cpu" and a["median"]["busy_us"] == 30.0 and a["median"]["comm_us"] == 20.0
    assert a["per_step"][0]["comm_kernels"] == [20.0] and a["median"]["idle"]["other"] == 70.0
    gpu = json.loads(FIXTURE.read_text())["analyses"][0]
    assert set(a) | {"temporal", "idle_by_stream"} == set(gpu)
