"""The benchmark runner and its report: records and their statistics, ratios that say which way is better, the
strongest peer, a failing case recorded while the others run, and documents rendered from raw results (a
document that disagrees with its raw results is named)."""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

pytest.importorskip("jinja2", reason="the test extra brings Jinja2 (bench report's templates)")

from helpers import git_repo  # noqa: E402

from bench import report, runner  # noqa: E402
from bench.manifest import changed_files, enclosing_git_dir, tree_hash  # noqa: E402
from bench.records import Measure, Record, collect, ratios, read_records, summary, write_records  # noqa: E402
from bench.suites import Case, expand  # noqa: E402
from bench.suites.kernels import REGISTERS  # noqa: E402


def rec(subject, values, role="result", better="higher", case="c", metric="rate"):
    return Record("s", case, subject, metric, "GB/s", role, better, list(values))


def test_runs_become_records_and_ratios_pair_them_run_by_run():
    runs = [
        [Measure("c", "spmd", 2.0, "rate", "GB/s"), Measure("c", "limit", 4.0, "rate", "GB/s", "ceiling")],
        [Measure("c", "spmd", 3.0, "rate", "GB/s"), Measure("c", "limit", 3.0, "rate", "GB/s", "ceiling")],
    ]
    spmd, limit = collect("io", runs, "read")
    assert (spmd.values, limit.values, spmd.bench_case) == ([2.0, 3.0], [4.0, 3.0], "read")
    assert ratios(spmd, limit) == [0.5, 1.0]
    fast, slow = rec("spmd", [1.0, 2.0], better="lower"), rec("peer", [3.0, 3.0], "peer", better="lower")
    assert ratios(fast, slow) == [3.0, 1.5]  # lower is better: above 1, spmd ahead
    s = summary([1.0, 2.0, 3.0, 10.0, 4.0, 5.0])
    assert (s["median"], s["min"], s["max"], s["n"]) == (3.5, 1.0, 10.0, 6) and s["level"] > 0.95


def test_records_round_trip_through_json_lines(tmp_path):
    records = [rec("spmd", [1.0, 2.0]), rec("limit", [3.0, 3.0], "ceiling")]
    write_records(tmp_path / "r.jsonl", records)
    assert read_records(tmp_path / "r.jsonl") == records


def test_a_row_shows_the_ceiling_and_the_strongest_peer():
    rows = report.rows_of(
        [
            rec("spmd", [10.0, 12.0]),
            rec("HBM", [20.0, 20.0], "ceiling"),
            rec("torch eager", [5.0, 5.0], "peer"),
            rec("torch graph", [11.0, 11.0], "peer"),
        ]
    )
    (row,) = rows
    assert row["ceiling"] == "HBM: 20.0" and row["peer"] == "torch graph: 11.0"
    assert row["ceiling_ratio"].startswith("0.550 (0.500 - 0.600, 2 runs)")
    times = report.rows_of(
        [
            rec("spmd", [1.0], better="lower"),
            rec("by hand", [2.0], "peer", better="lower"),
            rec("other", [0.5], "peer", better="lower"),
        ]
    )
    assert times[0]["peer"] == "other: 0.500" and times[0]["ceiling"] == "-"


def test_expand_spells_out_the_aliases_once_and_refuses_an_unknown_suite():
    assert expand(["gpu"])[:2] == ["kernels", "io"] and "cuda-mpi" not in expand(["gpu"])
    assert expand(["io", "cpu"]).count("io") == 1
    with pytest.raises(SystemExit, match="unknown suite 'nope'"):
        expand(["nope"])


def fake_suite(monkeypatch, cases: list, manifest=lambda argv, ranks: {"command": " ".join(argv)}) -> None:
    """The runner sees one suite, "fake", of ``cases``, on a machine without a GPU."""
    fake = types.ModuleType("fake")
    fake.__doc__ = "A fake suite."
    fake.cases = lambda env: cases
    monkeypatch.setattr(runner, "suites", lambda: {"fake": fake})
    monkeypatch.setattr(runner, "expand", lambda names: names)
    monkeypatch.setattr(runner, "gpu_count", lambda: 0)
    monkeypatch.setattr(runner, "manifest", manifest)


def test_a_failing_case_is_recorded_and_the_others_still_run(tmp_path, monkeypatch):
    def broken(env):
        raise RuntimeError("no such device")

    fake_suite(
        monkeypatch,
        [
            Case("breaks", broken),
            Case("works", lambda env: [Measure("w", "spmd", 1.0, "r", "u")]),
            Case("needs two GPUs", broken, needs=("gpu", "ranks2")),
        ],
        manifest=lambda argv, ranks: {"machine_kind": "test", "command": "bench run fake"},
    )
    assert runner.run(["fake"], tmp_path, runs=2, quick=True, ranks=None, argv=["run", "fake"]) == 1
    status = json.loads((tmp_path / "fake/manifest.json").read_text())["cases"]
    assert status[0]["failed"] == "RuntimeError: no such device" and "traceback" in status[0]
    assert status[1]["records"] == 1 and status[2]["skipped"] == "needs a GPU"
    assert read_records(tmp_path / "fake/records.jsonl")[0].values == [1.0, 1.0]


def test_only_keeps_the_other_cases_and_every_command_that_measured_them(tmp_path, monkeypatch):
    fake_suite(
        monkeypatch,
        [
            Case("first", lambda env: [Measure("a", "spmd", 1.0, "r", "u")]),
            Case("second", lambda env: [Measure("b", "spmd", 2.0, "r", "u")]),
        ],
    )
    runner.run(["fake"], tmp_path, runs=1, quick=True, ranks=None, argv=["run", "fake", "--max-minutes", "1"])
    runner.run(
        ["fake"], tmp_path, runs=2, quick=True, ranks=None, argv=["run", "fake", "--only", "second"], only="second"
    )
    manifest = json.loads((tmp_path / "fake/manifest.json").read_text())
    assert manifest["commands"] == ["run fake --max-minutes 1", "run fake --only second"]
    assert [(c["case"], c["command"]) for c in manifest["cases"]] == [
        ("first", "run fake --max-minutes 1"),
        ("second", "run fake --only second"),
    ]
    assert {r.case: r.values for r in read_records(tmp_path / "fake/records.jsonl")} == {"a": [1.0], "b": [2.0, 2.0]}
    shown = report.environment().from_string("{{ m | commands }}").render(m=manifest)
    assert shown == "`run fake --max-minutes 1`, then `run fake --only second`"
    assert report.environment().from_string("{{ m | commands }}").render(m={"command": "x"}) == "`x`"


def test_only_takes_the_case_named_exactly_when_there_is_one_else_every_case_holding_it(tmp_path, monkeypatch):
    fake_suite(
        monkeypatch,
        [
            Case("batch sweep", lambda env: [Measure("a", "spmd", 1.0, "r", "u")]),
            Case("examples, batch sweep", lambda env: [Measure("b", "spmd", 2.0, "r", "u")]),
        ],
    )

    def cases(only):
        runner.run(["fake"], tmp_path / only, runs=1, quick=True, ranks=None, argv=["run"], only=only)
        return [c["case"] for c in json.loads((tmp_path / only / "fake/manifest.json").read_text())["cases"]]

    assert cases("batch sweep") == ["batch sweep"]
    assert cases("sweep") == ["batch sweep", "examples, batch sweep"]
    # given twice (one call's cases, the rest in another): a case either picks
    runner.run(["fake"], tmp_path / "two", runs=1, quick=True, ranks=None, argv=["run"], only=["batch sweep", "nope"])
    assert [c["case"] for c in json.loads((tmp_path / "two/fake/manifest.json").read_text())["cases"]] == [
        "batch sweep"
    ]
    runner.run(["fake"], tmp_path / "all", runs=1, quick=True, ranks=None, argv=["run"], only=["batch sweep", "ex"])
    assert len(json.loads((tmp_path / "all/fake/manifest.json").read_text())["cases"]) == 2
    runner.run(["fake"], tmp_path / "x", runs=1, quick=True, ranks=None, argv=["run"])
    runner.run(["fake"], tmp_path / "x", runs=2, quick=True, ranks=None, argv=["run"], only="batch sweep")
    # the exact name's records replaced, the other case's kept
    assert {r.case: r.values for r in read_records(tmp_path / "x/fake/records.jsonl")} == {"a": [1.0, 1.0], "b": [2.0]}


def test_provenance_credits_each_case_measured_later_to_its_own_commit():
    m = {
        "commit": "a" * 40,
        "date": "2026-11-25T10:00:00",
        "cases": [
            {"case": "first", "commit": "a" * 40, "records": 2},
            {"case": "later", "commit": "b" * 40, "date": "2026-11-26T09:00:00", "records": 4},
            {"case": "failed later", "commit": "c" * 40, "failed": "x"},  # no figures: nothing to credit
        ],
    }
    assert report.provenance(m) == (
        f"2026-11-25, commit `{'a' * 12}` (cases measured at other commits: `later` at `{'b' * 12}` (2026-11-26))"
    )
    assert report.provenance({**m, "cases": m["cases"][:1]}) == f"2026-11-25, commit `{'a' * 12}`"
    # runs joined from several calls (bench merge --add-runs): each commit and date once, and the count of calls
    earlier = [{"commit": "b" * 40, "date": "2026-11-26T08:00:00"}, {"commit": "d" * 40, "date": "2026-11-24"}]
    joined = {**m["cases"][1], "earlier": earlier}
    assert report.provenance({**m, "cases": [joined]}) == (
        f"2026-11-25, commit `{'a' * 12}` (cases measured at other commits: `later` (3 calls) at `{'b' * 12}` "
        f"(2026-11-26), `{'d' * 12}` (2026-11-24))"
    )
    # several calls, every one at the top commit: counted there, never listed as measured at other commits
    here = [{"commit": "a" * 40, "date": "2026-11-25T09:00:00"}]
    twice = [{**m["cases"][0], "earlier": here}, {"case": "second", "commit": "a" * 40, "records": 1, "earlier": here}]
    assert (
        report.provenance({**m, "cases": twice})
        == f"2026-11-25, commit `{'a' * 12}` (each case in 2 calls, all at that commit)"
    )
    assert report.provenance({**m, "cases": [twice[0], m["cases"][0] | {"case": "once"}]}) == (
        f"2026-11-25, commit `{'a' * 12}` (in several calls, all at that commit: `first` (2 calls))"
    )
    mixed = [twice[0], joined]
    assert "other commits: `later` (3 calls)" in report.provenance({**m, "cases": mixed})
    assert "`first` (2 calls))" in report.provenance({**m, "cases": mixed})


def test_a_block_report_cannot_render_fails_by_its_line_rather_than_keeping_typed_text():
    ok = "<!-- bench:halves how=told dirs=a/b,c -->\n| typed |\n<!-- /bench:halves -->\n"
    report.unmatched(Path("x.md"), "prose naming `<!-- bench:NAME -->` blocks\n" + ok)
    for bad in ("<!-- bench:halves dirs=a b -->\n| typed |\n<!-- /bench:halves -->\n", ok.replace("/bench:", "/x:")):
        with pytest.raises(ValueError, match=r"x\.md:2: a block bench report cannot render"):
            report.unmatched(Path("x.md"), "text\n" + bad)


def test_a_halves_block_renders_the_table_the_command_prints():
    folders = "cpu-16core/heldoutcpu6,cpu-16core/heldoutcpu5"
    printed = subprocess.run(
        [sys.executable, "-m", "bench.tools.rank_halves", "--told", "--total"]
        + [str(report.RESULTS / f) for f in folders.split(",")],
        capture_output=True,
        text=True,
        check=True,
        cwd=report.ROOT,
    ).stdout
    assert report.halves("told-total", folders) == printed
    rows = [line.split(" | ") for line in printed.splitlines()[2:]]
    assert {(r[1], r[2]) for r in rows} == {(w, n) for w in ("matmul", "reduce", "stencil", "train") for n in "48"}
    assert all(r[3] == "6" for r in rows)  # three launches of each round
    with pytest.raises(FileNotFoundError, match="no folder"):
        report.halves("rounds", "cpu-16core/no-such-round")
    with pytest.raises(ValueError, match="unknown table"):
        report.halves("sideways", folders)


def test_a_sigterm_ends_the_run_with_a_manifest_naming_the_stopped_case(tmp_path, monkeypatch):
    """What `timeout` does to a run that overstays: the cases that ended keep their records, the one in progress
    is named as stopped, the rest never start, and the run says it failed."""
    ran = []

    def killed(env):
        os.kill(os.getpid(), signal.SIGTERM)  # delivered before kill() returns: the handler raises here
        ran.append("after the signal")

    fake_suite(
        monkeypatch,
        [
            Case("first", lambda env: [Measure("a", "spmd", 1.0, "r", "u")]),
            Case("second", killed),
            Case("third", lambda env: ran.append("third") or [Measure("c", "spmd", 3.0, "r", "u")]),
        ],
        manifest=lambda argv, ranks: {"command": "bench run fake"},
    )
    before = signal.getsignal(signal.SIGTERM)
    assert runner.run(["fake"], tmp_path, runs=1, quick=True, ranks=None, argv=["run", "fake"]) == 1
    assert ran == [] and signal.getsignal(signal.SIGTERM) is before
    cases = json.loads((tmp_path / "fake/manifest.json").read_text())["cases"]
    assert [c["case"] for c in cases] == ["first", "second"] and cases[0]["records"] == 1
    assert cases[1]["failed"].startswith("stopped by SIGTERM after")
    assert [r.case for r in read_records(tmp_path / "fake/records.jsonl")] == ["a"]
    assert not list((tmp_path / "fake").glob(".*tmp"))


def test_the_tree_hash_names_the_files_that_ran_whatever_head_says(tmp_path):
    git = git_repo(tmp_path)
    (tmp_path / ".gitignore").write_text("ignored\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "-A")
    git("commit", "-qm", "one")
    committed = git("rev-parse", "HEAD^{tree}")
    (tmp_path / "ignored").write_text("not code")
    assert tree_hash(tmp_path) == committed  # ignored files are not the code
    (tmp_path / "code.py").write_text("x = 2\n")
    (tmp_path / "new.py").write_text("y = 1\n")
    changed = tree_hash(tmp_path)
    assert changed != committed and changed_files(tmp_path) == [" M code.py", "?? new.py"]
    assert changed_files(tmp_path, most=1) == [" M code.py", "... 1 more"]
    git("add", "-A")
    git("commit", "-qm", "two")
    assert git("rev-parse", "HEAD^{tree}") == changed  # the later commit that holds exactly those files


def test_an_older_commit_unpacked_inside_a_checkout_is_credited_with_its_own_tree(tmp_path):
    """An older commit's files run from an ignored folder of a newer checkout (`git archive OLD | tar -x`): git there
    answers for the enclosing checkout, whose HEAD and clean status are not what ran."""
    from bench.merge import ran_commit

    git = git_repo(tmp_path)
    (tmp_path / ".gitignore").write_text("/old/\n__pycache__/\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "-A")
    git("commit", "-qm", "one")
    first, first_tree = git("rev-parse", "HEAD"), git("rev-parse", "HEAD^{tree}")
    (tmp_path / "code.py").write_text("x = 2\n")
    git("commit", "-qam", "two")
    old = tmp_path / "old"
    old.mkdir()
    archive = subprocess.run(["git", "archive", first], cwd=tmp_path, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    (old / "__pycache__").mkdir()
    (old / "__pycache__" / "code.pyc").write_bytes(b"ignored by the old tree's own .gitignore")
    assert enclosing_git_dir(tmp_path) is None and enclosing_git_dir(old)
    assert tree_hash(old) == first_tree and tree_hash(tmp_path) == git("rev-parse", "HEAD^{tree}")
    changes = changed_files(old)
    assert changes and changed_files(tmp_path) == []  # a change, so that bench merge looks the tree up
    assert ran_commit({"commit": git("rev-parse", "HEAD") + "+changes", "changes": changes, "tree": tree_hash(old)},
                      tmp_path) == first  # fmt: skip
    (old / "extra.py").write_text("y = 1\n")  # a file the old commit lacks is no longer that commit
    assert tree_hash(old) not in (first_tree, "")


def test_the_machine_says_when_the_run_had_fewer_cpus_than_the_host():
    gpu = {"name": "NVIDIA H200", "driver": "580"}
    assert (
        report.machine({"gpus": [gpu], "cpus": 16, "cpus_total": 32})
        == "1 x NVIDIA H200 (driver 580), 16 of its 32 CPUs"
    )
    assert report.machine({"gpus": [gpu, gpu], "cpus": 32}) == "2 x NVIDIA H200 (driver 580), 32 CPUs"
    bound = {"gpus": [gpu, gpu], "cpus": 32, "rank_cpus": [1, 1]}  # Open MPI's mpirun -n 2: a core each
    assert report.machine(bound) == "2 x NVIDIA H200 (driver 580), 32 CPUs (2 ranks on 1 CPU(s) each)"
    assert report.machine({**bound, "rank_cpus": [16, 8]}).endswith("(2 ranks on 8-16 CPU(s) each)")
    assert report.machine({**bound, "rank_cpus": [32]}) == "2 x NVIDIA H200 (driver 580), 32 CPUs"
    assert report.machine({"cpu": "EPYC", "cpus": 2, "cpus_total": 2}) == "EPYC, 2 CPUs, no GPU"


def test_rendering_the_committed_results_changes_no_document():
    assert report.render(check=True) == 0


def test_each_kinds_targets_name_the_commit_and_date_of_every_suite_they_come_from():
    """A kind's target rows may come from runs of different commits (h200x1's train before a change that h100x1's
    has): the table says which."""
    text = (report.ROOT / "docs/benchmarks.md").read_text()
    section = text[text.index("## Against the targets") : text.index("\n## ", text.index("## Against the targets") + 1)]
    kinds = re.findall(r"^### (\S+)\n\nMeasured by (.+)\.$", section, re.M)
    assert len(kinds) == section.count("\n### ") and kinds
    for kind, sources in kinds:
        for suite, commit, date in re.findall(r"(\w+) \(commit `(\w+)`, (\S+)\)", sources):
            manifest = json.loads((report.RESULTS / kind / suite / "manifest.json").read_text())
            assert manifest["commit"].startswith(commit) and manifest["date"].startswith(date), (kind, suite)


def test_a_document_that_disagrees_with_its_results_is_named(tmp_path, monkeypatch, capsys):
    (tmp_path / "docs/results/box/io").mkdir(parents=True)
    write_records(tmp_path / "docs/results/box/io/records.jsonl", [rec("spmd", [2.0]), rec("lim", [4.0], "ceiling")])
    (tmp_path / "docs/results/box/io/manifest.json").write_text(
        json.dumps(
            {
                "cpu": "a CPU",
                "cpus": 2,
                "gpus": [],
                "date": "2026-11-25T00:00:00",
                "commit": "abc",
                "command": "x",
                "cases": [],
            }
        )
    )
    doc = tmp_path / "docs/x.md"
    doc.write_text("before\n<!-- bench:table suite=io kind=box -->\nhand-typed 9.99\n<!-- /bench:table -->\nafter\n")
    (tmp_path / "README.md").write_text("readme\n")
    monkeypatch.setattr(report, "ROOT", tmp_path)
    monkeypatch.setattr(report, "RESULTS", tmp_path / "docs/results")
    monkeypatch.setattr(report, "WHOLE", {})
    assert report.render(check=True) == 1
    assert "docs/x.md is not what its raw results render" in capsys.readouterr().err
    assert report.render() == 0 and "| c | rate (GB/s) | spmd | 2.00 (1 run) | lim: 4.00 |" in doc.read_text()
    assert doc.read_text().startswith("before\n<!-- bench:table") and doc.read_text().endswith("after\n")
    assert report.render(check=True) == 0


def test_bench_run_gpu_starts_no_case_after_its_default_budget(monkeypatch, tmp_path):
    import bench.__main__ as cli

    seen = []
    monkeypatch.setattr(runner, "run", lambda *args: seen.append(args[-1]) or 0)
    assert cli.main(["run", "gpu", "--out", str(tmp_path)]) == 0
    assert cli.main(["run", "gpu", "--out", str(tmp_path), "--max-minutes", "3"]) == 0
    assert cli.main(["run", "kernels", "--out", str(tmp_path)]) == 0
    assert seen == [cli.GPU_MINUTES, 3.0, None] and cli.GPU_MINUTES <= 7


def test_the_faults_suite_on_a_gpu_machine_injects_faults_on_two_ranks_and_times_the_check(tmp_path):
    pytest.importorskip("h5py")
    from bench.suites import faults

    def env(gpus):
        return types.SimpleNamespace(ranks=2, gpus=gpus, device="gpu" if gpus else "cpu")

    on_gpu, on_cpu = faults.cases(env(2)), faults.cases(env(0))
    assert len(on_cpu) > len(on_gpu) > 10
    assert "raise at h2d on rank 1" in {c.name for c in on_gpu} - {c.name for c in on_cpu}  # the device's own phase
    assert "missing file" in {c.name for c in on_cpu} - {c.name for c in on_gpu}
    assert all(c.needs == ("ranks2",) for c in on_gpu[:-1]) and on_gpu[-1].needs == ("gpu",)
    assert any(c.needs == () for c in on_cpu)  # the bad inputs and configs run on one rank too


def test_a_relative_launcher_path_survives_the_cases_own_folders(monkeypatch, tmp_path):
    from bench.env import launcher

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin/mpiexec").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPMD_MPIEXEC", "bin/mpiexec --oversubscribe")
    assert launcher() == [str(tmp_path / "bin/mpiexec"), "--oversubscribe"]
    monkeypatch.setenv("SPMD_MPIEXEC", "mpirun --allow-run-as-root")  # a name on PATH stays a name
    assert launcher() == ["mpirun", "--allow-run-as-root"]


def test_targets_say_met_or_what_bounds_the_figure(tmp_path):
    from bench import targets

    def r(case, subject, values, role="result", unit="TB/s", better="higher"):
        return Record("s", case, subject, "m", unit, role, better, list(values))

    kernels = [
        r("reduce: moments of 4096 MiB float32", "spmd", [0.94, 0.93, 0.95]),
        r("reduce: moments of 4096 MiB float32", "CuPy float32 sum", [1, 1, 1], "ceiling"),
        r("reduce: moments of 4096 MiB float64", "spmd", [0.99, 0.99, 0.99]),
        r("reduce: moments of 4096 MiB float64", "CuPy float64 sum", [1, 1, 1], "ceiling"),
        r("stencil: a 5-point step of 16384^2 float32", "spmd", [0.96, 0.97, 0.95]),
        r("stencil: a 5-point step of 16384^2 float32", "device copy", [1, 1, 1], "ceiling"),
        r("stencil: a 5-point step of 4096^2 float32", "spmd", [0.4, 0.4, 0.4]),
        r("stencil: a 5-point step of 4096^2 float32", "device copy", [0.5, 0.5, 0.5], "ceiling"),  # not the largest
    ]
    train = [
        r("large batch 512 per GPU, fp32, 1 GPU(s)", "spmd", [1000.0] * 3, unit="samples/s"),
        r("large batch 512 per GPU, fp32, 1 GPU(s)", "PyTorch eager", [500.0] * 3, "peer"),
        r("large batch 512 per GPU, fp32, 1 GPU(s)", "PyTorch graph", [800.0] * 3, "peer"),  # the strongest
        r("train GEMMs of one step: large batch 512, fp32", "lt", [0.4e6] * 3, unit="us", better="lower"),
        r("train GEMMs of one step: large batch 512, fp32", "nvmath", [0.5e6] * 3, "peer", unit="us", better="lower"),
    ]
    entries = {
        "kernels": {"records": kernels, "manifest": {"commit": "c"}, "folder": tmp_path},
        "train": {"records": train},
    }
    rows = {row["what"]: row for row in targets.rows(entries)}
    reduce = rows["moments of 4096 MiB float32"]
    assert reduce["met"] is False and reduce["target"] == 0.97
    assert "float64 data of the same size (half the elements) at 0.990x" in reduce["limit"]
    assert "per-element work" in reduce["limit"] and "sweep" not in reduce["limit"]  # no sweep of this call
    variant = {"dtype": "float32", "loads": 4, "blocks_per_sm": 3}
    sweep = [
        {**variant, "variant": "default", "TBps": 0.9},
        {**variant, "blocks_per_sm": 6, "TBps": 0.95},
        {**variant, "variant": "registers", "TBps": 0.93},
        {**variant, "variant": "ring", "TBps": 0.94},
    ]
    (tmp_path / "sweeps.json").write_text(
        json.dumps({"reduce": {"commit": "c", "ceiling_TBps": 1.0, "variants": sweep}})
    )
    kernels[2] = r("reduce: moments of 4096 MiB float64", "spmd", [0.95, 0.95, 0.95])  # no closer to its ceiling
    limit = {row["what"]: row for row in targets.rows(entries)}["moments of 4096 MiB float32"]["limit"]
    assert "per-element" not in limit and "at 0.950x its ceiling" in limit
    assert "(4 float32 shapes, sweeps.json) peaked at 0.950x its CuPy sum with 4 loads x 6 blocks/SM (default)" in limit
    assert "(spmd's default: 0.900x)" in limit and "rounds loaded into registers at best 0.930x" in limit
    assert "rounds through a ring in shared memory at best 0.940x" in limit
    # rows timed by turns with their own CuPy sum: each against its own (the default's 0.9 of 0.9 is the best)
    for v, beside in zip(sweep, (0.9, 1.0, 1.0, 1.0)):
        v["ceiling_TBps"] = beside
    (tmp_path / "sweeps.json").write_text(
        json.dumps({"reduce": {"commit": "c", "ceiling_TBps": 1.0, "variants": sweep}})
    )
    limit = {row["what"]: row for row in targets.rows(entries)}["moments of 4096 MiB float32"]["limit"]
    assert "peaked at 1.000x its CuPy sum with 4 loads x 3 blocks/SM (default)" in limit
    assert "registers at best 0.930x" in limit and "(spmd's default: 1.000x)" in limit
    # a reduce case merged from a later call carries its own commit: the sweep of the first call is not its own
    entries["kernels"]["manifest"]["cases"] = [{"case": "reduce moments", "commit": "later"}]
    limit = {row["what"]: row for row in targets.rows(entries)}["moments of 4096 MiB float32"]["limit"]
    assert "sweep" not in limit
    entries["kernels"]["manifest"]["cases"] = [{"case": "reduce moments", "commit": "c"}]
    assert "sweeps.json" in {row["what"]: row for row in targets.rows(entries)}["moments of 4096 MiB float32"]["limit"]
    del entries["kernels"]["manifest"]["cases"]
    assert "timed by turns" not in limit  # no record of an alternative: nothing said
    # loads into registers timed by turns in the same runs: their rate over spmd's, run by run (0.96/0.94, ...)
    kernels.insert(1, r("reduce: moments of 4096 MiB float32", REGISTERS, [0.96, 0.93, 0.9405]))
    row = {row["what"]: row for row in targets.rows(entries)}["moments of 4096 MiB float32"]
    assert row["ratios"] == [0.94, 0.93, 0.95]  # spmd's own kernel is the figure
    assert (
        "a thread's rounds loaded into its registers (no ring), timed by turns with spmd's kernel in the same runs: "
        "1.000x its rate " in (row["limit"])
    )
    assert "(0.990 - 1.021)" in row["limit"]
    del kernels[1]
    stencil = rows["a 5-point step of 16384^2 float32"]
    assert stencil["met"] is True and stencil["limit"] == "" and stencil["ratios"] == [0.96, 0.97, 0.95]
    step = rows["large batch 512 per GPU, fp32, 1 GPU(s)"]
    assert step["against"] == "PyTorch graph" and step["met"] is False  # 1.25x against 1.5x
    # step 512 / 1000 = 0.512 s, GEMMs 0.4 s (78%); PyTorch graph's step 0.64 s: GEMMs alone would be 1.60x
    assert (
        "78% of spmd's" in step["limit"]
        and "1.60x PyTorch graph" in step["limit"]
        and "nvmath: 500000 us" in step["limit"]
    )
    # SGD's floor: 6,899,466 parameters x 20 B = 138 MB, 138 us at the largest field's copy rate (1 TB/s)
    assert (
        "SGD's pass moves 138 MB (20 B a parameter), 138 us at this machine's device copy rate (1.00 TB/s"
        in (step["limit"])
    )
    assert "16384^2" in step["limit"] and "GEMMs and that pass alone would be 1.60x" in step["limit"]
    assert "update inside backward" not in step["limit"]  # not measured: nothing said
    assert rows["train bf16 against PyTorch's autocast"]["met"] is None  # not measured: said, not hidden
    where = "large batch 512, fp32, 1 GPU: where the update runs"
    train += [
        r(where, "spmd, update inside backward", [900.0, 840.0, 850.0]),
        r(where, "spmd, update after backward, inputs_first order", [1010.0, 1000.0, 990.0]),
        r(where, "spmd, update after backward", [1000.0, 990.0, 1000.0], "peer"),
    ]
    step = {row["what"]: row for row in targets.rows(entries)}["large batch 512 per GPU, fp32, 1 GPU(s)"]
    assert (  # median over median, each arrangement named
        "against the default (update after backward, case update inside backward): update inside backward 0.85x, "
        "update after backward, inputs_first order 1.00x" in step["limit"]
    )


def test_target_notes_say_how_the_reduce_alternatives_and_floor_probes_fared(tmp_path):
    from bench import targets

    def r(subject, values, role="result"):
        return Record("s", "reduce: moments of 4096 MiB float32", subject, "m", "TB/s", role, "higher", list(values))

    kernels = [r("spmd", [0.98, 0.99, 1.0]), r(REGISTERS, [0.931, 0.99, 0.95]), r("CuPy", [1, 1, 1], "ceiling")]
    entries = {"kernels": {"records": kernels, "manifest": {"commit": "c"}, "folder": tmp_path}}
    (note,) = targets.notes(entries)  # no sweep of this call: the alternatives alone
    assert "loaded into its registers (no ring), timed by turns with spmd's kernel in the same runs: 0.950x" in note
    assert "(0.950 - 1.000)" in note
    floors = [{"work": "a float64 sum", "TBps": 0.9, "ceiling_TBps": 1.0}, {"work": "a float32 sum", "TBps": 2.0,
              "ceiling_TBps": 2.0}]  # fmt: skip
    sweep = {"reduce": {"commit": "c", "ceiling_TBps": 1.0, "variants": [], "floors": floors}}
    (tmp_path / "sweeps.json").write_text(json.dumps(sweep))
    assert targets.notes(entries)[1].endswith("with CuPy's sum): a float64 sum 0.900x, a float32 sum 1.000x.")
    sweep["reduce"]["commit"] = "another call"
    (tmp_path / "sweeps.json").write_text(json.dumps(sweep))
    assert len(targets.notes(entries)) == 1 and targets.notes({}) == []


def test_io_targets_hold_direct_to_the_pread_beside_it_on_one_rank_and_on_every_rank():
    """The direct engine's 0.9x of the N-thread pread of the same run, on one rank and on a GPU box's ranks (issue:
    'on one GPU with one rank and on one GPU box with 2 ranks'); io.engine auto's row only where the run has it."""
    from bench import targets

    def r(case, subject, values, role="result", params=None):
        return Record("io", case, subject, "read rate", "GB/s", role, "higher", list(values), params or {})

    one, two = "read 1 GiB per rank, 1 rank(s), page cache", "read 512 MiB per rank, 2 rank(s), page cache"
    records = [
        r(one, "direct", [36, 37, 35]),
        r(one, "pread, 16 threads", [40, 40, 40], "ceiling"),
        r(two, "direct", [30, 28, 26]),
        r(two, "pread, 16 threads", [32, 32, 32], "ceiling"),
    ]
    rows = {row["what"]: row for row in targets.io_rows(records)}
    assert rows[f"{one}: direct"]["met"] is True and rows[f"{one}: direct"]["ratios"] == [0.9, 0.925, 0.875]
    assert rows[f"{two}: direct"]["met"] is False  # 28 / 32 = 0.875 < 0.9
    assert rows[f"{two}: direct"]["target"] == 0.9 and len(rows) == 2  # no reduce repeat: no io.engine auto row
    records += [
        r(one, "file to GPU (mapped, locked at set-up)", [54, 54, 54], "peer"),
        r(one, "file to GPU (direct, copies as pieces land)", [27, 27, 27]),
        r("reduce repeat, 1 rank(s)", "io.engine auto", [0.02] * 3, params={"engines": ["mapped"]}),
    ]
    rows = {row["what"]: row for row in targets.io_rows(records)}
    assert rows["reduce repeat, 1 rank(s): io.engine auto picks the fastest safe engine"]["met"] and len(rows) == 3


def test_whole_launch_cases_rotate_which_side_launches_first():
    """A host that favours the first launch of a call (or drifts through it) must not favour one side: over the
    runs each launch goes first equally often, and each run's measures keep the launches' own order."""
    from bench.suites.torch_workload import _launched, launch_order

    assert [launch_order(["plain", "spmd"], run) for run in range(4)] == [["plain", "spmd"], ["spmd", "plain"]] * 2
    assert [launch_order("abc", run)[0] for run in range(3)] == ["a", "b", "c"]
    started = []

    def launch(name):
        return lambda: started.append(name) or [name]

    per_run = _launched(3, [launch("plain"), launch("inside"), launch("spmd")])
    assert per_run == [["plain", "inside", "spmd"]] * 3
    assert started == ["plain", "inside", "spmd", "inside", "spmd", "plain", "spmd", "plain", "inside"]


def test_alternating_seconds_gives_each_function_its_turn_round_by_round(monkeypatch):
    import itertools

    from bench import ceilings

    calls, clock = [], itertools.count()
    monkeypatch.setattr(ceilings.time, "perf_counter", lambda: next(clock) * {"a": 1.0, "b": 3.0}[calls[-1]])
    seconds = ceilings.alternating_seconds({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 3, 2)
    turns = [name for name, _ in itertools.groupby(calls)]
    assert turns == ["a", "b"] * 3  # whole turns (warm-up and timed calls), a and b in alternation
    assert seconds == {"a": 1.0, "b": 3.0}  # each timed call spans one tick of its own clock


def test_a_predictions_error_cell_shows_the_median_runs_sign_and_the_runs_range():
    one = Record("predict", "reduce weak at 4", "spmd predict", "error", "share", "result", "lower", [0.05])
    one.params = {"error": -0.05}
    assert report.prediction_error(one) == "-5.0%"
    runs = Record(
        "predict", "reduce weak at 4", "spmd predict", "error", "share", "result", "lower", [0.078, 0.001, 0.05]
    )
    runs.params = {"error": 0.05, "runs": [{"error": -0.078}, {"error": 0.001}, {"error": 0.05}]}
    assert report.prediction_error(runs) == "+5.0% (-7.8 to +5.0%, 3 runs)"
    runs.params = {"error": 0.05}  # runs that kept no check of their own: the median |error| and its range
    assert report.prediction_error(runs) == "5.0% (0.1 - 7.8%, 3 runs)"


def test_a_kept_sweep_is_decided_again_by_the_spmd_of_today(tmp_path):
    """bench report re-derives the verdict of a sweep a record keeps (params.inputs.scaling, gzipped), named by the
    record's sweep, from the stored runs: here a schema-1 scaling.json, written before spmd kept its decision."""
    import gzip
    import json

    from bench.report import decided_again

    stored = Path(__file__).resolve().parents[1] / "fixtures/reports/gpu-kmeans-scaling.json"
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs/k.json.gz").write_bytes(gzip.compress(stored.read_bytes()))
    record = {"suite": "s", "case": "kmeans, 2 GPUs", "subject": "measured", "metric": "speedup", "unit": "x",
              "role": "result", "better": "higher", "values": [1.0],
              "params": {"inputs": {"scaling": "inputs/k.json.gz"}, "sweep": "k-means on 2 H200s"}}  # fmt: skip
    (tmp_path / "records.jsonl").write_text(json.dumps(record) + "\n" + json.dumps(record) + "\n")
    (sweep,) = decided_again(tmp_path)  # the same file once
    assert sweep["case"] == "k-means on 2 H200s" and sweep["cost"] is None  # schema 1 kept no cost
    assert sweep["verdict"].startswith("Verdict: on this machine, 2 GPUs take ")


def test_a_straggler_matrix_launch_that_crashed_is_launched_once_more_and_counted():
    from types import SimpleNamespace

    from bench.env import CaseFailed
    from bench.suites.stragglers import _launched

    calls = []

    def launch(fail_first: bool):
        calls.append(1)
        if fail_first and len(calls) == 1:
            raise CaseFailed("crashed in the profiler")
        return SimpleNamespace(stdout='noise\n{"model": "bn"}\n{"model": "gru"}\n')

    assert _launched(lambda: launch(True)) == ([{"model": "bn"}, {"model": "gru"}], 1) and len(calls) == 2
    calls.clear()
    assert _launched(lambda: launch(False)) == ([{"model": "bn"}, {"model": "gru"}], 0) and len(calls) == 1


def test_every_straggler_matrix_run_states_its_expected_cause_on_each_device():
    """straggler_matrix.py's expected cause for every run it plans: the GPU subset's on a GPU (a busy device among
    them, which its CPU table does not hold), every place on a CPU. Asked in a child process: the program imports
    mpi4py, which this one must not initialise."""
    code = (
        "import json, sys; sys.path[:0] = ['bench/programs', '.']; import straggler_matrix as m; "
        "print(json.dumps([[w, m.expected_cause(w, True)] for _, w, _, _ in m.GPU_SUBSET] + "
        "[[w, m.expected_cause(w, False)] for w in m.WHERE]))"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120)
    assert done.returncode == 0, done.stderr
    causes = json.loads(done.stdout.splitlines()[-1])
    allowed = {"data", "host", "more work", "slower device"}
    assert all(c in allowed for _, c in causes)
    assert ["busy device", "slower device"] in causes and ["in backward", "host"] in causes


def test_the_clean_runs_spread_is_published_only_where_a_launch_ran_two_of_a_kind():
    """The clean runs against their launch's median clean step (what the step estimate's 10% is held to): a clean run
    alone of its model and capture setting is its own median, 1.00 whatever it measured, so such runs are left out,
    and with none left the figure is not published."""
    from bench.suites.stragglers import figures

    def clean(model: str, step: float) -> dict:
        return {"model": model, "capture": True, "where": None, "slow_rank": None, "named_rank": None, "cause": None,
                "step_s": step, "own_step_s": step, "step_without_s": None, "seconds": 0.0}  # fmt: skip

    def spread(rows: list[dict]) -> list:
        return [m for m in figures(rows, "2 GPUs") if m.subject == "the clean runs themselves"]

    assert spread([clean("bn", 1.0), clean("gru", 2.0), clean("mlp", 3.0)]) == []
    (m,) = spread([clean("bn", 1.0), clean("bn", 1.5), clean("gru", 2.0)])
    assert m.params["runs_compared"] == 2 and m.params["within_10_percent"] == 0.0  # 1.0 and 1.5 against 1.25


def test_carried_links_are_the_models_median_over_launches_with_their_own_spread(tmp_path, monkeypatch):
    """bench report's carried links: per size of the target, the median over the fit's launches of what spmd's model
    carries to the target's ranks, its error, and the launches' own spread at the nearest recorded size."""
    from spmd.scale.models.links import collective_seconds
    from spmd.scale.prediction.machines import links_from_bench

    def links_file(seconds: list[float], ranks: int) -> dict:
        rows = [{"bytes": b, "seconds": t} for b, t in zip((8, 1 << 20, 1 << 24), seconds)]
        level = {"ranks": ranks, "rows": rows}
        return {"kind": "links", "backend": "nccl", "device": "gpu", "ranks": ranks, "ranks_per_node": ranks,
                "levels": {"intra": level}}  # fmt: skip

    runs = [[20e-6, 40e-6, 100e-6], [22e-6, 44e-6, 100e-6], [21e-6, 42e-6, 110e-6]]
    for i, seconds in enumerate(runs, 1):
        (tmp_path / f"two-{i}.json").write_text(json.dumps(links_file(seconds, 2)))
    (tmp_path / "two-x.json").write_text("{}")  # another recording's name: not a launch of this one
    (tmp_path / "four.json").write_text(json.dumps(links_file([25e-6, 60e-6, 150e-6], 4)))
    monkeypatch.setattr(report, "LINKS", tmp_path)
    c = report.carried_links("two", "four", 4)
    assert c["launches"] == 3 and c["from_ranks"] == 2 and [r["size"] for r in c["rows"]] == ["8 B", "1 MiB", "16 MiB"]
    links = [links_from_bench(links_file(s, 2))["intra"] for s in runs]
    for r, measured in zip(c["rows"], (25e-6, 60e-6, 150e-6)):
        carried = statistics.median(collective_seconds("allreduce", r["bytes"], 4, 4, k, None) for k in links)
        assert r["carried_s"] == pytest.approx(carried) and r["error"] == pytest.approx(carried / measured - 1)
    assert [r["spread"] for r in c["rows"]] == pytest.approx([22 / 20 - 1, 44 / 40 - 1, 110 / 100 - 1])
    assert c["large_sizes"] == 2 and c["small_sizes"] == 1
    assert c["large_worst"] == pytest.approx(max(abs(r["error"]) for r in c["rows"][1:]))


def test_carried_calls_pair_each_calls_fit_with_its_own_target(tmp_path, monkeypatch):
    """The CPU rounds' carried links: each call's 2-rank test carried to the target's ranks against the test the same
    call ran there (its own error), over every round named; per size the medians' error and the target's own spread
    between calls (90th over 10th percentile)."""
    import gzip

    from spmd.scale.models.links import collective_seconds
    from spmd.scale.prediction.machines import links_from_bench

    def links_file(seconds: list[float], ranks: int) -> dict:
        rows = [{"bytes": b, "seconds": t} for b, t in zip((8, 1 << 21), seconds)]
        return {"kind": "links", "backend": "mpi", "device": "cpu", "ranks": ranks, "ranks_per_node": ranks,
                "levels": {"intra": {"ranks": ranks, "rows": rows}}}  # fmt: skip

    fits = {("r1", "a"): [10e-6, 1e-3], ("r1", "b"): [20e-6, 2e-3], ("r2", "c"): [15e-6, 1.5e-3]}
    targets = {("r1", "a"): [30e-6, 3e-3], ("r1", "b"): [33e-6, 3.3e-3], ("r2", "c"): [36e-6, 3.6e-3]}
    for (suite, case), seconds in fits.items():
        folder = tmp_path / "cpu-x" / suite / "inputs"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{case}-links-fit.json.gz").write_bytes(gzip.compress(json.dumps(links_file(seconds, 2)).encode()))
        target = json.dumps(links_file(targets[suite, case], 8)).encode()
        (folder / f"{case}-links-8.json.gz").write_bytes(gzip.compress(target))
        (folder / f"{case}-links-4.json.gz").write_bytes(gzip.compress(b"{}"))  # another target: not read
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    c = report.carried_calls("cpu-x", "r1,r2", 8)
    assert c["calls"] == 3 and c["from_ranks"] == 2 and [r["size"] for r in c["rows"]] == ["8 B", "2 MiB"]
    for i, r in enumerate(c["rows"]):
        carried = {k: collective_seconds("allreduce", r["bytes"], 8, 8, links_from_bench(links_file(v, 2))["intra"],
                                         None) for k, v in fits.items()}  # fmt: skip
        own = [carried[k] / targets[k][i] - 1 for k in fits]
        assert r["carried_s"] == pytest.approx(statistics.median(carried.values()))
        assert r["measured_s"] == pytest.approx(targets["r1", "b"][i])
        assert r["error"] == pytest.approx(r["carried_s"] / r["measured_s"] - 1)
        tenth = statistics.quantiles(own, n=10)
        assert r["each"] == pytest.approx([tenth[0], tenth[-1]])
        apart = statistics.quantiles([v[i] for v in targets.values()], n=10)
        assert r["spread"] == pytest.approx(apart[-1] / apart[0] - 1)
    assert (c["large_sizes"], c["small_sizes"]) == (1, 1)


def test_carried_links_take_the_targets_launches_median_and_the_wider_spread(tmp_path, monkeypatch):
    """Recorded in several launches on the target too, its measured time is their median at each size, and a size's
    spread is the wider of the two sides' launch-to-launch spreads."""

    def links_file(seconds: list[float], ranks: int) -> dict:
        rows = [{"bytes": b, "seconds": t} for b, t in zip((8, 1 << 24), seconds)]
        return {"kind": "links", "backend": "nccl", "device": "gpu", "ranks": ranks, "ranks_per_node": ranks,
                "levels": {"intra": {"ranks": ranks, "rows": rows}}}  # fmt: skip

    (tmp_path / "two.json").write_text(json.dumps(links_file([20e-6, 100e-6], 2)))
    for i, seconds in enumerate([[25e-6, 150e-6], [30e-6, 160e-6], [26e-6, 300e-6]], 1):
        (tmp_path / f"four-{i}.json").write_text(json.dumps(links_file(seconds, 4)))
    monkeypatch.setattr(report, "LINKS", tmp_path)
    c = report.carried_links("two", "four", 4)
    assert (c["launches"], c["target_launches"]) == (1, 3)
    assert [r["measured_s"] for r in c["rows"]] == pytest.approx([26e-6, 160e-6])
    assert [r["spread"] for r in c["rows"]] == pytest.approx([30 / 25 - 1, 300 / 150 - 1])
    assert c["files"] == ["two.json", "four-1.json", "four-2.json", "four-3.json"]


def test_contention_holds_each_share_at_once_against_the_same_share_alone(tmp_path):
    """bench.tools.contention: for each case and run, the share a rank of n holds, timed alone on one rank by the fit,
    against the same share timed on n ranks at once by the strong series; per phase, comm left out."""
    import gzip

    from bench.tools.contention import at_once

    whole = 8e6

    def point(mode: str, ranks: int, share: float, **phases: float) -> dict:
        timed = {p: {"measured_s": t} for p, t in {**phases, "comm": 1.0}.items()}
        return {"mode": mode, "ranks": ranks, "problem_bytes": share * ranks, "phases": timed}

    def write(name: str, points: list[dict]) -> None:
        (tmp_path / "inputs" / name).write_bytes(gzip.compress(json.dumps({"model": {"points": points}}).encode()))

    (tmp_path / "inputs").mkdir()
    fitted = [point("strong", 1, whole, compute=8.0), point("share", 1, whole / 4, compute=2.0),
              point("share", 1, whole / 8, compute=1.0)]  # fmt: skip
    measured = [point("strong", 1, whole, compute=8.5), point("strong", 4, whole / 4, compute=3.0),
                point("weak", 4, whole, compute=20.0), point("strong", 8, whole / 8, compute=2.5)]  # fmt: skip
    write("a-fit.json.gz", fitted)
    write("a-measured.json.gz", measured)
    write("a-links-fit.json.gz", [])  # a link test: not a case's fit
    assert at_once(tmp_path) == {(4, "compute"): [1.5], (8, "compute"): [2.5]}


def test_the_binding_suite_launches_unbound_and_bound_by_turns_and_takes_the_slowest_ranks_read(tmp_path, monkeypatch):
    """bench.suites.binding: a case for each of the ninth CPU round's array jobs; per run one launch unbound (spmd
    run) and one through bound.py with the node's CPUs over its ranks, which goes first alternating; each launch's
    slowest rank's read, against the median rank's, and its time a repeat, from its own report; refused where the
    machine has fewer CPUs than ranks."""
    from bench.env import CaseFailed, Env
    from bench.suites import binding

    launched = []
    reads = {"spmd": [0.006, 0.007, 0.008, 0.020, 0.006, 0.007, 0.0065, 0.0075], "bound.py": [0.007] * 7 + [0.0084]}

    def report(self, folder):
        kind = launched[int(folder.name.split("-")[-1])][0]
        per_rank = [{"median": {"read": r}} for r in reads[kind]]
        placement = {"ranks": [{"bound_cpus": 2 if kind == "bound.py" else 16}] * 8}
        return {"per_rank": per_rank, "placement": placement, "timings": {"total": {"median": 0.07}}}

    def spmd(self, *args, ranks=1, **_):
        if args[0] == "run":
            launched.append(("spmd", ranks, args))

    monkeypatch.setattr(Env, "spmd", spmd)
    monkeypatch.setattr(Env, "program", lambda self, name, *args, ranks=1, **_: launched.append((name, ranks, args)))
    monkeypatch.setattr(Env, "report", report)
    monkeypatch.setattr(binding, "cpus_a_rank", lambda ranks: 16 // ranks)
    env = Env(out=tmp_path / "out", work=tmp_path, quick=True, ranks=8, gpus=0)
    names = [c.name for c in binding.cases(env)]
    assert names == [f"unbound against bound, {w} at 8 CPU ranks" for w in ("reduce", "matmul", "stencil")]
    (case,) = [c for c in binding.cases(env) if "matmul" in c.name]
    assert case.batched and case.needs == ("ranks4",)
    per_run = case.measure(env, 3)
    assert [kind for kind, _, _ in launched] == ["spmd", "bound.py", "bound.py", "spmd", "spmd", "bound.py"]
    assert all(ranks == 8 for _, ranks, _ in launched)
    assert [" ".join(map(str, args[:4])) for kind, _, args in launched if kind == "bound.py"] == ["2 -m spmd run"] * 3
    (cfg,) = {args[4] if kind == "bound.py" else args[1] for kind, _, args in launched}
    job = yaml.safe_load(Path(cfg).read_text())  # the round's own matmul, on the CPU
    assert (job["workload"], job["generate"]["shape"], job["device"]) == ("matmul", [240, 240], "cpu")
    first = {(m.subject.split(" ")[0], m.metric): m.value for m in per_run[0]}
    assert first[("unbound", "slowest rank's read / median rank's")] == pytest.approx(
        0.020 / statistics.median(reads["spmd"])
    )
    assert first[("bound", "slowest rank's read / median rank's")] == pytest.approx(0.0084 / 0.007)
    assert first[("unbound", "slowest rank's read")] == pytest.approx(20.0)
    assert first[("bound", "time a repeat")] == pytest.approx(70.0)
    assert [m.subject.split(" ")[0] for m in per_run[1]][::3] == ["unbound", "bound"]  # the launches' own order kept
    monkeypatch.setattr(binding, "cpus_a_rank", lambda ranks: 0)
    with pytest.raises(CaseFailed, match="need a CPU each"):
        case.measure(env, 1)
