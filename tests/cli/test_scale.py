"""``spmd scale`` and ``spmd report`` end to end under ``mpiexec -n 3`` on the CPU.

The figures in scaling.json are checked against their definitions recomputed here from
the per-rank repeat timings, every output file is parsed, and failures leave no output.
"""

from __future__ import annotations

import copy
import csv
import json
import math
import statistics
import struct
from html.parser import HTMLParser
from pathlib import Path

import h5py
import pytest
import yaml
from mpi_job import spmd

from spmd.core.units import fmt_bytes

ROWS = 600_000


def write_config(folder: Path, **keys) -> Path:
    cfg = {
        "workload": "reduce",
        "device": "cpu",
        "warmup": 1,
        "repeats": 3,
        "input": {"path": str(folder / "data" / "x.h5"), "dataset": "x"},
        "generate": {"shape": [ROWS], "dtype": "float32", "seed": 7},
        "output": str(folder / "out"),
        **keys,
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """One sweep at 1, 2 and 3 ranks, strong and weak, shared by the checks below."""
    folder = tmp_path_factory.mktemp("scale")
    config = write_config(folder)
    rc, out, err, _ = spmd(
        "scale",
        config,
        "--mode",
        "both",
        "--ranks",
        "1,2,3",
        "--out",
        folder / "sc",
        "--probe-max-bytes",
        "64K",
        timeout=240,
    )
    assert rc == 0, err
    return folder, out, json.loads((folder / "sc" / "scaling.json").read_text())


def slowest_rank_median(report: dict) -> float:
    repeats = [r["repeats"] for r in report["per_rank"]]
    return statistics.median(max(rank[i]["total"] for rank in repeats) for i in range(len(repeats[0])))


def test_sweep_runs_every_size_verified(sweep):
    folder, out, scaling = sweep
    assert scaling["schema"] == 3 and scaling["kind"] == "scaling" and scaling["workload"] == "reduce"
    assert scaling["modes"] == ["strong", "weak"] and scaling["ranks"] == [1, 2, 3]
    for mode in ("strong", "weak"):
        rows = scaling["series"][mode]
        assert [r["ranks"] for r in rows] == [1, 2, 3]
        assert all(r["verified"] and r["verification"]["reference"] == "attrs" for r in rows)
    # weak scaling keeps the problem per rank: n times the rows, in files of their own
    weak = {r["ranks"]: r for r in scaling["series"]["weak"]}
    assert [weak[n]["problem_bytes"] for n in (1, 2, 3)] == [4 * ROWS * n for n in (1, 2, 3)]
    assert all(r["problem_bytes"] == 4 * ROWS for r in scaling["series"]["strong"])
    for n in (2, 3):
        with h5py.File(folder / "data" / f"weak-x{n}" / "x.h5") as f:
            assert f["x"].shape == (ROWS * n,)
    # one progress line per size measured (the weak base size reuses the strong run)
    progress = [
        line
        for line in out.splitlines()
        if line.startswith("spmd scale: strong") or line.startswith("spmd scale: weak")
    ]
    assert len(progress) == 6 and all("verified" in line for line in progress)


def test_figures_follow_their_definitions(sweep):
    _, _, scaling = sweep
    runs = {(r["mode"], r["ranks"]): r["report"] for r in scaling["runs"]}
    for mode, rows in scaling["series"].items():
        base = rows[0]
        assert base["speedup"] == pytest.approx(1.0) and base["efficiency"] == pytest.approx(1.0)
        assert base["karp_flatt"] is None
        for row in rows:
            report = runs[(mode, row["ranks"])]
            t = slowest_rank_median(report)
            assert row["time"] == pytest.approx(t)
            p = row["ranks"] / base["ranks"]
            if mode == "strong":
                assert row["speedup"] == pytest.approx(base["time"] / t)
            else:
                assert row["efficiency"] == pytest.approx(base["time"] / t)
            assert row["efficiency"] == pytest.approx(row["speedup"] * base["ranks"] / row["ranks"])
            if p > 1:
                assert row["karp_flatt"] == pytest.approx((1 / row["speedup"] - 1 / p) / (1 - 1 / p))
            timings = report["timings"]
            assert row["comm_share"] == pytest.approx(timings["comm"]["median"] / timings["total"]["median"])
            busy = [sum(r["median"][ph] for ph in ("read", "h2d", "compute")) for r in report["per_rank"]]
            assert row["imbalance"] == pytest.approx(max(busy) / statistics.fmean(busy))
            for phase in ("read", "wait", "compute", "comm", "total"):
                assert timings[phase]["min"] <= timings[phase]["median"] <= timings[phase]["max"]
            # suspect: recomputed from the same figures (CI's 2 cores oversubscribe 3 ranks)
            place = row["placement"]
            want = [
                bool(place["oversubscribed"]),
                row["speedup_interval"][0] > p * (1 + 1e-9),  # beyond ideal, its whole interval: suspect
            ]
            got = [any(r.startswith(k) for r in row["suspect"]) for k in ("oversubscribed", "beyond ideal")]
            assert bool(row["flags"]) == (row["speedup"] > p * (1 + 1e-9))  # flagged wherever above ideal
            assert got == want, row["suspect"]
    for run in scaling["runs"]:
        row = next(r for r in scaling["series"][run["mode"]] if r["ranks"] == run["ranks"])
        assert run["suspect"] == row["suspect"]


def test_placement_names_hosts_ranks_and_links(sweep):
    _, _, scaling = sweep
    for row in scaling["series"]["strong"]:
        place = row["placement"]
        assert sum(place["ranks_per_node"].values()) == row["ranks"]
        assert [r["rank"] for r in place["ranks"]] == list(range(row["ranks"]))
        assert place["devices"] == ["cpu"]
        assert place["link_class"] == ("single" if row["ranks"] == 1 else "cpu-shm")
        assert len(place["pairs"]) == row["ranks"] * (row["ranks"] - 1) // 2


def test_model_and_advice_are_reported(sweep):
    _, _, scaling = sweep
    model = scaling["model"]
    assert model["comm"]["backend"] == "mpi" and model["comm"]["alpha_s"] >= 0
    assert {(p["mode"], p["ranks"]) for p in model["points"]} == {
        ("strong", 1),
        ("strong", 2),
        ("strong", 3),
        ("weak", 2),
        ("weak", 3),
    }
    for p in model["points"]:
        assert p["error"] == pytest.approx((p["predicted_s"] - p["measured_s"]) / p["measured_s"])
    best = model["predictions"]["best"]
    assert best["best_ranks"] in [r["ranks"] for r in best["by_ranks"]]
    assert best["problem_bytes"] == 4 * ROWS
    assert [e["ranks"] for e in model["predictions"]["break_even"]] == [2, 3, 4, 8]
    assert any(line.startswith("Strong scaling 1 -> 3 ranks") for line in scaling["advice"])
    assert model["validated"] == (model["points_fitted"] > model["parameters"])
    suspects = [row for rows in scaling["series"].values() for row in rows if row["suspect"]]
    assert len([line for line in scaling["advice"] if line.startswith("Suspect: ")]) == len(suspects)
    if scaling["device"] == "cpu":
        assert not any("kernel" in line for line in scaling["advice"])
    # break-even sizes only from a model that meets its own points (CI's shared cores make misses)
    trusted = scaling["decision"]["array_model"]["trusted"]
    assert any("Break-even" in line for line in scaling["advice"]) == trusted
    assert ("withheld" in model["predictions"]) == (not trusted)
    # the storage finding: the largest run's read against preads of the same bytes measured right after it
    largest = max(scaling["runs"], key=lambda r: r["ranks"])
    assert [x["bytes"] for x in largest["read_limit"]] == [4 * ROWS // 3] * 3
    assert all(x["seconds"] > 0 for x in largest["read_limit"])
    assert any(
        line.startswith(f"At 3 ranks each rank read {fmt_bytes(4 * ROWS // 3)} at ") for line in scaling["advice"]
    ), scaling["advice"]


class _Resources(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.images, self.tables = [], 0, 0

    def handle_starttag(self, tag, attrs):
        self.images += tag == "img"
        self.tables += tag == "table"
        self.refs += [v for k, v in attrs if k in ("src", "href", "srcset", "data") and v]


def test_every_output_file_exists_and_parses(sweep):
    folder, _, scaling = sweep
    out = folder / "sc"
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == ["efficiency.png", "model.png", "phases.png", "speedup.png"]
    for name in pngs:
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", data[16:24])
        assert width >= 400 and height >= 300
    with open(out / "scaling.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [(r["series"], int(r["ranks"])) for r in table] == [(m, n) for m in ("strong", "weak") for n in (1, 2, 3)]
    strong2 = next(r for r in table if r["series"] == "strong" and r["ranks"] == "2")
    row2 = scaling["series"]["strong"][1]
    assert (
        float(strong2["speedup"]) == row2["speedup"]
        and float(strong2["comm_median_s"]) == row2["timings"]["comm"]["median"]
    )
    markdown = (out / "scaling.md").read_text()
    assert "| series | ranks | nodes | link | time / repeat | speedup |" in markdown
    assert all(f"]({name})" in markdown for name in pngs)
    page = _Resources()
    page.feed((out / "scaling.html").read_text())
    assert page.images == 4 and page.tables >= 6
    assert page.refs and all(ref.startswith("data:image/png;base64,") for ref in page.refs)  # nothing external
    assert not list(out.glob(".*.tmp"))


def test_markdown_shows_user_text_as_text(sweep, tmp_path):
    """An input path (or host name) holding HTML or a newline: scaling.md shows it escaped, on one line."""
    folder, _, scaling = sweep
    hostile = copy.deepcopy(scaling)
    hostile["config"]["input"]["path"] = "<img src=x onerror=alert(1)>\n# a heading"
    path = tmp_path / "scaling.json"
    path.write_text(json.dumps(hostile))
    rc, out, err, _ = spmd("report", "render", path, "--out", tmp_path / "r", ranks=1)
    assert rc == 0, err
    markdown = (tmp_path / "r/scaling.md").read_text()
    # < opens a tag in Markdown, > alone opens none: "1 -> 2 ranks" stays as written
    assert "&lt;img src=x onerror=alert(1)> # a heading" in markdown and "<img" not in markdown
    assert "\n# a heading" not in markdown
    assert "&lt;img" in (tmp_path / "r/scaling.html").read_text()


def test_report_compare_flags_a_planted_regression(sweep, tmp_path):
    """Slower in the median and in every repeat: flagged. Slower in the median only, the fastest repeat as it was
    (3 repeats: the interval is [fastest, slowest]): the intervals overlap, noise."""
    folder, _, scaling = sweep
    old = folder / "sc" / "scaling.json"
    rc, out, err, _ = spmd("report", "compare", old, old, "--fail-above", "5", ranks=1)
    assert rc == 0, err
    assert "no slowdown above 5%" in out
    slower = copy.deepcopy(scaling)
    row = next(r for r in slower["series"]["strong"] if r["ranks"] == 2)
    row["timings"]["compute"]["median"] = max(row["timings"]["compute"]["median"], 1e-3) * 1.5
    run = next(r for r in slower["runs"] if r["mode"] == "strong" and r["ranks"] == 2)
    repeats = [rep for rank in run["report"]["per_rank"] for rep in rank["repeats"]]
    floor = max(max(rep["compute"] for rep in repeats), 1e-3) * 1.5  # every repeat beyond the old spread
    for rep in repeats:
        rep["compute"] = floor
    new = tmp_path / "slower.json"
    new.write_text(json.dumps(slower))
    rc, out, err, _ = spmd("report", "compare", old, new, "--fail-above", "20", ranks=1)
    assert rc == 1
    flagged = [line for line in out.splitlines() if line.endswith("SLOWER")]
    assert len(flagged) == 1 and flagged[0].split()[:3] == ["strong", "2", "compute"]
    change = float(next(w for w in flagged[0].split() if w.endswith("%")).rstrip("%"))
    assert change >= 49.9 and math.isfinite(change)
    noisy = copy.deepcopy(scaling)  # the median repeat 50% slower, the fastest as it was: inside the runs' spread
    run = next(r for r in noisy["runs"] if r["mode"] == "strong" and r["ranks"] == 2)
    per_rank = [rank["repeats"] for rank in run["report"]["per_rank"]]
    slowest = sorted(max(reps[i]["compute"] for reps in per_rank) for i in range(len(per_rank[0])))
    assert len(slowest) >= 3
    for reps in per_rank:
        for i, rep in enumerate(reps):
            rep["compute"] = slowest[0] if i == 0 else 1.5 * statistics.median(slowest)
    (tmp_path / "noisy.json").write_text(json.dumps(noisy))
    rc, out, err, _ = spmd("report", "compare", old, tmp_path / "noisy.json", "--fail-above", "20", ranks=1)
    assert rc == 0, out
    assert "(intervals overlap)" in out and "noise, not flagged" in out


@pytest.mark.parametrize("reanalyse", [False, True])
def test_report_render_rewrites_the_outputs(sweep, tmp_path, reanalyse):
    folder, _, scaling = sweep
    rc, out, err, _ = spmd(
        "report",
        "render",
        folder / "sc" / "scaling.json",
        "--out",
        tmp_path,
        *(["--reanalyse"] if reanalyse else []),
        ranks=1,
    )
    assert rc == 0, err
    assert (tmp_path / "scaling.html").read_text() and len(list(tmp_path.glob("*.png"))) == 4
    again = json.loads((tmp_path / "scaling.json").read_text())
    for key in ("series", "model", "advice", "runs", "mpi_library"):  # the analysis is reproducible
        assert again[key] == scaling[key], key


def test_quiet_sweep_prints_nothing(tmp_path):
    config = write_config(tmp_path)
    rc, out, err, _ = spmd("scale", config, "--ranks", "1,3", "-q", "--probe-max-bytes", "0")
    assert rc == 0, err
    assert out == ""
    scaling = json.loads((tmp_path / "out" / "scaling" / "scaling.json").read_text())  # default --out
    assert scaling["modes"] == ["strong"] and scaling["ranks"] == [1, 3]
    assert scaling["model"]["comm"]["source"] == "the workload's comm phases"


def test_failed_verification_at_one_size_fails_the_sweep(tmp_path):
    """The 2-rank weak input carries a wrong stored answer: exit 3, naming the size, no output."""
    from spmd.io.generate import generate
    from spmd.io.weak import scaled_input
    from spmd.workloads.reduce.workload import ReduceWorkload
    from spmd.workloads.registry import load_job_config

    config = write_config(tmp_path)
    weak2 = scaled_input(load_job_config(config), 2)
    generate(weak2, ReduceWorkload)
    with h5py.File(weak2.input.path, "r+") as f:
        f["x"].attrs["sum"] = f["x"].attrs["sum"] + 1.0
    rc, out, err, _ = spmd("scale", config, "--mode", "weak", "--ranks", "1,2", "--probe-max-bytes", "0")
    assert rc == 3, err
    assert "weak scaling at 2 rank(s): rank 0 on" in err and "sum" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--ranks", "1,4"], "sizes must be between 1 and the 3 ranks launched"),
        (["--ranks", "two"], "expected comma-separated integers"),
    ],
)
def test_bad_rank_lists_exit_2(tmp_path, args, message):
    rc, _, err, _ = spmd("scale", write_config(tmp_path), *args)
    assert rc == 2 and message in err
    assert not (tmp_path / "out").exists()


def test_weak_scaling_needs_a_generate_section(tmp_path):
    config = write_config(tmp_path)
    raw = yaml.safe_load(config.read_text())
    del raw["generate"]
    config.write_text(yaml.safe_dump(raw))
    rc, _, err, _ = spmd("scale", config, "--mode", "weak")
    assert rc == 2 and "needs a generate section" in err


def test_the_model_fitted_on_fewer_ranks_predicts_the_largest_without_seeing_it(sweep):
    """held_out: 1 and 2 ranks' model asked about 3 (the question before buying GPUs); the 3-rank runs changed
    tenfold change what was measured, not what was predicted."""
    import copy

    from spmd.scale.sweep.analysis import held_out

    _, _, scaling = sweep
    rows = {r["mode"]: r for r in held_out(scaling)}
    assert set(rows) == {"strong", "weak"}
    for mode, row in rows.items():
        assert row["fit"] == 2 and row["ranks"] == 3 and row["predicted_s"] > 0
        three = next(r for r in scaling["series"][mode] if r["ranks"] == 3)
        assert row["measured_s"] == three["time"]
        assert row["error"] == pytest.approx((row["predicted_s"] - three["time"]) / three["time"])
        assert row["worst_phase"] in scaling["runs"][0]["report"]["timings"]
    # a copy whose 3-rank runs a fit would use (not marked oversubscribed, as on a machine with the cores for them)
    # and that took ten times as long
    fair = copy.deepcopy(scaling)
    for run in fair["runs"]:
        run["placement"]["oversubscribed"] = []
    rows = {r["mode"]: r for r in held_out(fair)}
    slower = copy.deepcopy(fair)
    for run in slower["runs"]:
        for q in run["probe"] or []:  # the collectives timed on 3 ranks, too
            if q["ranks"] == 3:
                q["seconds"] *= 10
        if run["ranks"] == 3:
            for phase in run["report"]["timings"].values():
                for key in ("min", "median", "max"):
                    if isinstance(phase.get(key), float):
                        phase[key] *= 10
    for rows_of_mode in slower["series"].values():
        for r in rows_of_mode:
            if r["ranks"] == 3:
                r["time"] *= 10
    again = {r["mode"]: r for r in held_out(slower)}
    for mode in rows:
        assert again[mode]["predicted_s"] == pytest.approx(rows[mode]["predicted_s"])
        assert again[mode]["measured_s"] == pytest.approx(10 * rows[mode]["measured_s"])
