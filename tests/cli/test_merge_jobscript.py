"""spmd report merge (reports of separate jobs -> one scaling report) and spmd jobscript (no SLURM
needed: what it writes; tests/slurm submits it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml
from helpers import LAUNCH_ENV, cli, fake_sinfo, small
from mpi_job import spmd


def test_merge_of_separate_runs_gives_the_sweeps_own_figures(tmp_path):
    """The reports spmd scale measured, merged from files, give the same series as the sweep."""
    config = small("reduce.yaml", tmp_path, **{"generate.shape": [20011], "repeats": 2})
    rc, out, err, _ = spmd(
        "scale",
        config,
        "--mode",
        "both",
        "--ranks",
        "1,2",
        "--out",
        "sweep",
        "--probe-max-bytes",
        "0",
        cwd=tmp_path,
        ranks=2,
    )
    assert rc == 0, err
    sweep = json.loads((tmp_path / "sweep/scaling.json").read_text())
    paths = []
    for run in sweep["runs"]:
        if run["mode"] == "strong" or run["ranks"] > 1:  # the base once, as spmd jobscript writes it
            path = tmp_path / f"{run['mode']}-{run['ranks']}/report.json"
            path.parent.mkdir()
            path.write_text(json.dumps(run["report"]))
            paths.append(path.parent)
    rc, out, err = cli("report", "merge", *paths, "--out", "merged", cwd=tmp_path)
    assert rc == 0, err
    merged = json.loads((tmp_path / "merged/scaling.json").read_text())
    for mode in ("strong", "weak"):
        for mine, theirs in zip(merged["series"][mode], sweep["series"][mode], strict=True):
            for key in ("ranks", "time", "speedup", "efficiency", "comm_share"):
                assert mine[key] == theirs[key], (mode, key)
    assert {p.name for p in (tmp_path / "merged").iterdir()} >= {"scaling.html", "scaling.md", "speedup.png"}

    # a report of another config: named, nothing written
    other = small("reduce.yaml", tmp_path / "merged", **{"generate.shape": [999], "repeats": 2})
    strange = json.loads((paths[1] / "report.json").read_text())
    strange["config"] = {**strange["config"], "repeats": 7}
    (tmp_path / "strange.json").write_text(json.dumps(strange))
    rc, out, err = cli("report", "merge", paths[0], tmp_path / "strange.json", "--out", "bad", cwd=tmp_path)
    assert rc == 2 and "strange.json: its config (2 ranks) is neither the strong nor the weak scaling" in err
    assert not (tmp_path / "bad").exists() and other.exists()
    rc, out, err = cli("report", "merge", paths[0], "--out", "bad", cwd=tmp_path)
    assert rc == 2 and "at least two" in err
    (tmp_path / "junk.json").write_text("{not json")
    rc, out, err = cli("report", "merge", paths[0], tmp_path / "junk.json", "--out", "bad", cwd=tmp_path)
    assert rc == 2 and "junk.json: cannot read a report" in err


def test_jobscript_writes_one_job_per_series_and_size_with_scaled_configs(tmp_path):
    config = small("reduce.yaml", tmp_path, **{"generate.shape": [1000]})
    rc, out, err = cli(
        "jobscript",
        config,
        "--nodes",
        "1,2,4",
        "--gpus-per-node",
        "4",
        "--partition",
        "gpu",
        "--account",
        "proj",
        "--time",
        "01:00:00",
        "--mpi",
        "pmix",
        "--out",
        "jobs",
        cwd=tmp_path,
        env=fake_sinfo(tmp_path, 32),
    )
    assert rc == 0, err
    jobs = tmp_path / "jobs"
    assert sorted(p.name for p in jobs.glob("*.sbatch")) == [
        "generate.sbatch",
        "merge.sbatch",
        "strong-1n.sbatch",
        "strong-2n.sbatch",
        "strong-4n.sbatch",
        "weak-2n.sbatch",
        "weak-4n.sbatch",
    ]
    text = (jobs / "weak-4n.sbatch").read_text()
    for line in (
        "#SBATCH --nodes=4",
        "#SBATCH --ntasks-per-node=4",
        "#SBATCH --gpus-per-node=4",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=proj",
        "#SBATCH --time=01:00:00",
        "#SBATCH --signal=B:USR1@120",
        "#SBATCH --cpus-per-task=8",
        "# --cpus-per-task=8: a rank's share of the partition gpu's nodes: 32 CPUs over 4 rank(s) (sinfo;",
        f"#SBATCH --chdir={tmp_path}",
        "mpi_flag=(--mpi=pmix)  # as --mpi gave it",
        'srun ${mpi_flag[@]+"${mpi_flag[@]}"} --kill-on-bad-exit=1',
    ):
        assert line in text
    weak = yaml.safe_load((jobs / "configs/weak-4n.yaml").read_text())
    strong = yaml.safe_load((jobs / "configs/strong-4n.yaml").read_text())
    assert weak["generate"]["shape"] == [4000] and strong["generate"]["shape"] == [1000]
    assert weak["output"] == str(jobs / "results/weak-4n")
    assert "--dependency=afterok:$gen" in (jobs / "submit.sh").read_text()
    assert "report merge" in (jobs / "merge.sbatch").read_text()
    for cpu_job in ("generate.sbatch", "merge.sbatch"):  # one CPU, no GPU, its own time limit
        text = (jobs / cpu_job).read_text()
        assert "gpus" not in text and "#SBATCH --cpus-per-task=1" in text and "#SBATCH --time=00:10:00" in text
        assert "#SBATCH --partition=gpu" in text  # --cpu-partition not given: the runs' partition
    for bad, why in (
        (["--gpus-per-node", "0"], "give it (>= 1) when --gpus-per-node is 0"),
        (["--gpus-per-node", "2", "--tasks-per-node", "4"], "spmd runs one rank per GPU"),
        (["--gpus-per-node", "2", "--nodes", "0"], "node counts must be >= 1"),
    ):
        args = ["jobscript", config, "--nodes", "1,2", *bad, "--out", "no"]
        if "--nodes" in bad:
            args = ["jobscript", config, *bad, "--out", "no"]
        rc, out, err = cli(*args, cwd=tmp_path)
        assert rc == 2 and why in err, err
    assert not (tmp_path / "no").exists()


STUB = """#!/bin/bash
# a stand-in for {name}: records its arguments, one per line, and answers like the real one
{{ echo "{name}"; printf '%s\\n' "$@"; }} >> "$STUB_LOG"
[[ "{name}" == sbatch ]] && echo $((RANDOM + 1000))
[[ "{name}" == fake-spmd && " $* " == *" srun-mpi "* ]] && printf 'pmi2\\tthe stand-in says so\\n'
exit 0
"""


def stubs(folder):
    """A bin folder whose sbatch, srun and fake-spmd only record what they were given."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "srun", "fake-spmd"):
        (bin_dir / name).write_text(STUB.format(name=name))
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_generated_scripts_run_nothing_a_value_smuggles_in(tmp_path):
    """What reaches a shell line is quoted: run submit.sh and every sbatch file with stand-ins for sbatch,
    srun and spmd, and nothing injected runs (the marker files never appear); every job of the series
    saves to its own file."""

    hostile = "$(touch INJECTED-1); touch INJECTED-2 `touch INJECTED-3`"
    config = small("matmul.yaml", tmp_path, **{"params.save.path": f"results/C {hostile}.h5"})
    rc, out, err = cli(
        "jobscript",
        config,
        "--nodes",
        "1,2",
        "--gpus-per-node",
        "2",
        "--out",
        "jobs",
        "--spmd",
        f"fake-spmd --note {hostile}",
        cwd=tmp_path,
    )  # unquoted: words of a command
    assert rc == 0, err
    jobs = tmp_path / "jobs"
    for name in ("strong-1n", "strong-2n"):  # what the runs would have written: the merge job needs two reports
        (jobs / "results" / name).mkdir(parents=True)
        (jobs / "results" / name / "report.json").write_text("{}")
    env = {**os.environ, "PATH": f"{stubs(tmp_path)}:{os.environ['PATH']}", "STUB_LOG": str(tmp_path / "calls.log")}
    for script in ["submit.sh", *sorted(p.name for p in jobs.glob("*.sbatch"))]:
        proc = subprocess.run(
            ["bash", str(jobs / script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, (script, proc.stdout, proc.stderr)
    assert not [p for p in tmp_path.rglob("INJECTED*")], "a value ran as a command"
    calls = (tmp_path / "calls.log").read_text()
    lines = calls.splitlines()  # 5 jobs submitted; 3 runs (srun's first word: fake-spmd), each choosing its
    # plugin first (srun-mpi); 3 generated, 1 merge
    assert (lines.count("sbatch"), lines.count("srun"), lines.count("fake-spmd")) == (5, 3, 3 + 3 + 4), calls
    assert lines.count("--mpi=pmi2") == 3, calls
    assert "--note\n$(touch\nINJECTED-1);\ntouch\nINJECTED-2\n`touch\nINJECTED-3`\n" in calls  # words, never evaluated
    saves = {yaml.safe_load(p.read_text())["params"]["save"]["path"] for p in (jobs / "configs").glob("*.yaml")}
    assert saves == {f"results/C {hostile}-{name}.h5" for name in ("strong-1n", "strong-2n", "weak-2n")}


@pytest.mark.parametrize(
    "args, why",
    [
        (["--partition", "gpu\ntouch pwned"], "--partition 'gpu\\ntouch pwned': a SLURM name"),
        (["--account", "proj x"], "--account 'proj x': a SLURM name"),
        (["--time", "01:00:00\nrm -rf ~"], "--time '01:00:00\\nrm -rf ~': a SLURM time limit"),
        (["--time", "soon"], "--time 'soon'"),
        (["--out", "jobs$(touch pwned)"], "an #SBATCH line cannot carry it safely"),
        (["--out", "my jobs"], "an #SBATCH line cannot carry it safely"),
        (["--spmd", "python3 -m spmd\ntouch pwned"], "--spmd"),
        (["--spmd", "python3 'unbalanced"], '--spmd "python3 \'unbalanced": No closing quotation'),
    ],
)
def test_jobscript_refuses_what_a_script_cannot_carry_and_writes_nothing(tmp_path, args, why):
    config = small("reduce.yaml", tmp_path, **{"generate.shape": [1000]})
    rc, out, err = cli("jobscript", config, "--nodes", "1,2", "--gpus-per-node", "2", *args, cwd=tmp_path)
    assert rc == 2 and why in err, err
    assert not (tmp_path / "results").exists() and not list(tmp_path.rglob("*.sbatch"))
    assert not list(tmp_path.rglob("pwned"))


def test_a_series_refused_half_way_writes_nothing(tmp_path):
    """train's strong series cannot split a batch of 6 over 4x the ranks: found before any file is written."""
    config = small("train.yaml", tmp_path, **{"params.batch": 6})
    rc, out, err = cli("jobscript", config, "--nodes", "1,2,4", "--gpus-per-node", "1", "--out", "jobs", cwd=tmp_path)
    assert rc == 2 and "params.batch: 6 samples per rank cannot be split over 4x" in err, err
    assert not (tmp_path / "jobs").exists()


def test_the_config_output_folder_is_checked_too(tmp_path):
    config = small("reduce.yaml", tmp_path, **{"output": "res$(touch pwned)"})
    rc, out, err = cli("jobscript", config, "--nodes", "1,2", "--gpus-per-node", "2", cwd=tmp_path)
    assert rc == 2 and "an #SBATCH line cannot carry it safely" in err and "res$(touch pwned)/jobs" in err, err
    assert not list(tmp_path.rglob("pwned")) and not list(tmp_path.rglob("*.sbatch"))


def test_report_commands_name_a_malformed_file_and_exit_2(tmp_path):
    """Files that parse but are not what they claim: a message and exit 2, no traceback (they exited 1)."""
    (tmp_path / "scaling.json").write_text(json.dumps({"kind": "scaling", "schema": 1, "workload": "reduce"}))
    rc, out, err = cli("report", "render", "scaling.json", cwd=tmp_path)
    assert rc == 2 and "scaling.json: not a scaling.json of spmd scale (missing or malformed: series)" in err, err
    (tmp_path / "a.json").write_text(json.dumps({"schema": 1, "timings": {}, "config": {}}))
    rc, out, err = cli("report", "merge", "a.json", "a.json", "--out", "m", cwd=tmp_path)
    assert rc == 2 and "a.json: not a report.json of spmd run (missing or malformed: workload)" in err, err
    (tmp_path / "latin.json").write_bytes(b'{"kind": "scaling", "workload": "caf\xe9"}')
    rc, out, err = cli("report", "compare", "latin.json", "a.json", cwd=tmp_path)
    assert rc == 2 and "latin.json: cannot read a JSON report" in err, err
    assert "Traceback" not in err and not (tmp_path / "m").exists()


def test_jobscripts_a_cluster_user_can_submit_as_they_are(tmp_path):
    """--cpus-per-task (default io.threads), the prologue and --env lines (values quoted), set -euo pipefail and
    the threads and NCCL environment in every job; every script valid bash; one node count: no merge job."""
    config = small("reduce.yaml", tmp_path, **{"generate.shape": [1000], "io": {"threads": 6}})
    (tmp_path / "modules.sh").write_text("module load openmpi/4.1\nsource /opt/site/env.sh\n")
    rc, out, err = cli(
        "jobscript",
        config,
        "--nodes",
        "1,2",
        "--gpus-per-node",
        "2",
        "--out",
        "jobs",
        "--prologue",
        "modules.sh",
        "--env",
        "NCCL_DEBUG=WARN",
        "--env",
        "WEIRD=a b $(touch pwned) 'q'",
        cwd=tmp_path,
        env=fake_sinfo(tmp_path, 16),
    )
    assert rc == 0, err
    jobs = tmp_path / "jobs"
    scripts = sorted(jobs.glob("*.sbatch")) + [jobs / "submit.sh"]
    for script in scripts:
        check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert check.returncode == 0, (script.name, check.stderr)
    for script in jobs.glob("*.sbatch"):
        text = script.read_text()
        runs = script.name.startswith(("strong", "weak"))
        assert f"#SBATCH --cpus-per-task={6 if runs else 1}" in text and "\nset -euo pipefail\n" in text, script.name
        assert not runs or "# --cpus-per-task=6: io.threads: 6 reader threads, within a rank's share" in text
        assert text.index("set -euo pipefail") > max(text.rindex("#SBATCH"), 0)  # after the #SBATCH header
        assert "set +u\nmodule load openmpi/4.1\nsource /opt/site/env.sh\nset -u" in text, script.name
        assert "export NCCL_DEBUG=WARN" in text and "export WEIRD='a b $(touch pwned) '\"'\"'q'\"'\"''" in text
        assert 'export OMP_NUM_THREADS="${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}"' in text
        assert 'export SRUN_CPUS_PER_TASK="${SLURM_CPUS_PER_TASK:-1}"' in text
        assert 'export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"' in text
    env = {**LAUNCH_ENV, "PATH": f"{stubs(tmp_path)}:{LAUNCH_ENV['PATH']}", "STUB_LOG": str(tmp_path / "calls.log")}
    run = subprocess.run(
        ["bash", str(jobs / "strong-2n.sbatch")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**env, "PATH": f"{tmp_path / 'bin'}:{env['PATH']}"},
        timeout=60,
    )
    assert run.returncode != 0 and "module: command not found" in run.stderr  # set -e: a failed prologue stops it
    assert not list(tmp_path.rglob("pwned"))

    rc, out, err = cli(
        "jobscript",
        config,
        "--nodes",
        "2",
        "--gpus-per-node",
        "2",
        "--cpus-per-task",
        "3",
        "--out",
        "one",
        cwd=tmp_path,
    )
    assert rc == 0 and "one node count: no scaling report" in out, err
    assert sorted(p.name for p in (tmp_path / "one").glob("*.sbatch")) == ["generate.sbatch", "strong-2n.sbatch"]
    assert "merge" not in (tmp_path / "one/submit.sh").read_text()
    assert "#SBATCH --cpus-per-task=3" in (tmp_path / "one/strong-2n.sbatch").read_text()
    rc, out, err = cli("jobscript", config, "--nodes", "1,2", "--gpus-per-node", "2", "--out", "both", cwd=tmp_path)
    assert rc == 0 and "strong: 1, 2 node(s); weak: 1 (strong-1n), 2 node(s)" in out, out


@pytest.mark.parametrize(
    "args, why",
    [
        (["--prologue", "sbatch.sh"], "an #SBATCH line there would be ignored"),
        (["--prologue", "broken.sh"], "not valid shell"),
        (["--prologue", "missing.sh"], "--prologue 'missing.sh': not a regular file"),
        (["--env", "1X=2"], "KEY=VALUE, KEY of letters"),
        (["--env", "A=b\nc"], "a value of one line"),
        (["--env", "NOEQUALS"], "KEY=VALUE"),
        (["--cpus-per-task", "0"], "--cpus-per-task 0: from 1 to 4096"),
    ],
)
def test_jobscript_refuses_a_prologue_or_env_it_cannot_carry(tmp_path, args, why):
    config = small("reduce.yaml", tmp_path, **{"generate.shape": [1000]})
    (tmp_path / "sbatch.sh").write_text("#SBATCH --mem=1G\nmodule load x\n")
    (tmp_path / "broken.sh").write_text("if then fi (\n")
    rc, out, err = cli(
        "jobscript", config, "--nodes", "1,2", "--gpus-per-node", "2", *args, "--out", "jobs", cwd=tmp_path
    )
    assert rc == 2 and why in err, err
    assert not (tmp_path / "jobs").exists()


def test_jobscript_will_not_write_over_a_users_file(tmp_path):
    config = small("reduce.yaml", tmp_path, **{"generate.shape": [1000]})
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs/submit.sh").write_text("#!/bin/bash\necho my own submit script\n")
    rc, out, err = cli("jobscript", config, "--nodes", "1,2", "--gpus-per-node", "2", "--out", "jobs", cwd=tmp_path)
    assert rc == 2 and "submit.sh exists and was not written by spmd" in err, err
    assert (tmp_path / "jobs/submit.sh").read_text() == "#!/bin/bash\necho my own submit script\n"
    assert sorted(p.name for p in (tmp_path / "jobs").iterdir()) == ["submit.sh"]
    (tmp_path / "jobs/submit.sh").unlink()
    assert cli("jobscript", config, "--nodes", "1,2", "--gpus-per-node", "2", "--out", "jobs", cwd=tmp_path)[0] == 0
    assert cli("jobscript", config, "--nodes", "1,2", "--gpus-per-node", "2", "--out", "jobs", cwd=tmp_path)[0] == 0


def test_a_series_on_the_users_own_input_weak_scales_copies_and_merges(tmp_path):
    """A series of jobs on a user's own file (no generate section): the strong jobs read it as it is, the weak
    job a copy that repeats it (made by the generate job, under the base job's results), and spmd report merge
    puts each report in its series. The user's file is never written."""
    from helpers import write_dataset

    users = np.random.default_rng(3).normal(size=(2001, 3))
    (tmp_path / "data").mkdir()
    write_dataset(tmp_path / "data/events.h5", users)
    before = (tmp_path / "data/events.h5").read_bytes()
    (tmp_path / "job.yaml").write_text(
        json.dumps(
            {"workload": "reduce", "device": "cpu", "repeats": 2, "input": {"path": "data/events.h5", "dataset": "x"}}
        )
    )
    rc, out, err = cli(
        "jobscript",
        "job.yaml",
        "--nodes",
        "1,2",
        "--gpus-per-node",
        "0",
        "--tasks-per-node",
        "1",
        "--out",
        "jobs",
        cwd=tmp_path,
    )
    assert rc == 0, err
    jobs = tmp_path / "jobs"
    weak = yaml.safe_load((jobs / "configs/weak-2n.yaml").read_text())
    copy = jobs / "results/strong-1n/weak-inputs/x2/events.h5"
    assert weak["input"]["path"] == str(copy) and weak["generate"]["copy_of"] == ["data/events.h5"]
    generate = (jobs / "generate.sbatch").read_text()
    assert "generate --skip-user-files" in generate and "weak-2n.yaml" in generate and "strong-1n.yaml" not in generate
    assert spmd("generate", "--skip-user-files", jobs / "configs/weak-2n.yaml", cwd=tmp_path, ranks=1)[0] == 0
    for name, ranks in (("strong-1n", 1), ("strong-2n", 2), ("weak-2n", 2)):
        rc, out, err, _ = spmd("run", jobs / f"configs/{name}.yaml", cwd=tmp_path, ranks=ranks)
        assert rc == 0, (name, err)
    weak_sum = json.loads((jobs / "results/weak-2n/report.json").read_text())["result"]["sum"]
    np.testing.assert_allclose(weak_sum, 2 * users.sum(axis=0), rtol=1e-12)
    rc, out, err = cli("report", "merge", *sorted(jobs.glob("results/*/report.json")), "--out", "m", cwd=tmp_path)
    assert rc == 0, err
    scaling = json.loads((tmp_path / "m/scaling.json").read_text())
    assert {m: [r["ranks"] for r in rows] for m, rows in scaling["series"].items()} == {
        "strong": [1, 2],
        "weak": [1, 2],
    }
    assert (tmp_path / "data/events.h5").read_bytes() == before


def test_srun_mpi_answers_without_starting_mpi(tmp_path):
    """The command the scripts run: one tab-separated line, and exit 0, on a machine whose srun may be absent."""
    done = subprocess.run([sys.executable, "-m", "spmd", "srun-mpi"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    plugin, why = done.stdout.rstrip("\n").split("\t")
    assert plugin and why and "\n" not in why
