"""``spmd predict`` started as a user starts it: a recorded sweep carried to a target into the report, a target's
links or keys refused naming the cause, and a scaling.json of an earlier schema read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINKS = ROOT / "tests/fixtures/links"
SWEEP = ROOT / "tests/fixtures/reports/gpu-kmeans-scaling.json"  # a real sweep (2 H200s)


def spmd(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "spmd", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_predict_end_to_end_into_the_report(tmp_path):
    """A recorded GPU sweep carried to 2 nodes of 2 GPUs: rows at 2 and 4 ranks, the report's section and its
    table, the comm priced higher across nodes than inside one, speedups against the sweep's one rank."""
    sweep = SWEEP
    done = spmd("predict", sweep, "--target", "gpus_per_node=2,nodes=[1,2],intra=nvlink4,inter=eth-100g,name=two boxes",
                "--out", tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    scaling = json.loads((tmp_path / "scaling.json").read_text())
    (p,) = scaling["other_machines"]
    assert p["target"]["name"] == "two boxes" and p["target"]["inter"]["busbw_Bps"] == 12e9
    rows = {(r["mode"], r["ranks"]): r for r in p["rows"]}
    assert {n for _, n in rows} == {2, 4}
    for r in p["rows"]:
        assert 0 < r["interval"][0] <= r["predicted_s"] <= r["interval"][1]
        assert r["predicted_s"] >= sum(v for k, v in r["phases"].items() if k != "comm_overlapped") - 1e-12
    assert "On other machines: two boxes" in (tmp_path / "scaling.md").read_text()
    assert "on two boxes" in done.stdout and "break-even at 4 ranks" in done.stdout
    assert any(n.startswith("preset eth-100g is unvalidated: no held-out measurement") for n in p["notes"])
    assert any(n.startswith("preset nvlink4 met a held-out measurement on 2 H200s") for n in p["notes"])
    # what it was priced from, level by level, kept and said
    assert p["priced_from"] == [
        "inside a node: preset nvlink4 (looked up: published figures)",
        "between nodes: preset eth-100g (looked up: published figures)",
    ]
    assert "priced from: between nodes: preset eth-100g (looked up: published figures)" in done.stdout
    assert "priced from inside a node: preset nvlink4" in (tmp_path / "scaling.md").read_text()
    # the original sweep stays as it was
    assert "other_machines" not in json.loads(sweep.read_text())


def test_predict_refuses_links_of_another_backend(tmp_path):
    links = json.loads((LINKS / "h100x2-p2p-off.json").read_text())
    links["backend"] = "mpi"
    (tmp_path / "links.json").write_text(json.dumps(links))
    done = spmd("predict", SWEEP, "--target", f"links={tmp_path}/links.json",
                "--out", tmp_path / "out")  # fmt: skip
    assert done.returncode == 2 and "measured over mpi" in done.stderr


def test_predict_bad_target_exits_2_naming_the_key(tmp_path):
    target = tmp_path / "t.yaml"
    target.write_text("gpus_per_node: 2\nnodes: 2\nintra: nvlink4\nlatency: 3\n")
    done = spmd("predict", SWEEP, "--target", target, "--out", tmp_path / "o")
    assert done.returncode == 2 and "unknown key 'latency'" in done.stderr


def test_predict_reads_the_previous_schema_and_refuses_an_unknown_one_naming_it(tmp_path):
    """A schema-1 scaling.json (before the decision was kept) is decided again and predicted from; schema 3 is
    refused with exit 2 naming the file and the schemas this spmd reads."""
    sweep = json.loads((SWEEP).read_text())
    assert sweep["schema"] == 1 and "decision" not in sweep
    done = spmd("predict", SWEEP, "--target", "gpus_per_node=4,nodes=1,intra=nvlink4",
                "--out", tmp_path / "old")  # fmt: skip
    assert done.returncode == 0, done.stderr
    again = json.loads((tmp_path / "old/scaling.json").read_text())
    assert again["schema"] == 3 and again["decision"]["lead"] and again["verdict"].startswith("Verdict: ")
    assert f"  the sweep: {again['verdict']}" in done.stdout.splitlines()
    (tmp_path / "new.json").write_text(json.dumps({**sweep, "schema": 4}))
    done = spmd("predict", tmp_path / "new.json", "--target", "gpus_per_node=4,nodes=1,intra=nvlink4",
                "--out", tmp_path / "o")  # fmt: skip
    assert done.returncode == 2 and "new.json: scaling schema 4; this spmd reads schema 1, 2, 3" in done.stderr


def test_a_one_rank_sweep_with_shares_predicts_the_rank_counts_it_could_not_run(tmp_path):
    """One rank (a one-GPU machine) runs the strong problem and, with --shares 2, the half of it each of 2 ranks
    holds: the model's local phases are fitted on both sizes per rank, and spmd predict carries the
    sweep to 2 ranks with the target's links, saying what it could not measure. Without the share nothing is fitted
    and predict refuses."""
    import yaml
    from mpi_job import spmd as launched

    cfg = tmp_path / "job.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "workload": "reduce",
                "device": "cpu",
                "warmup": 1,
                "repeats": 3,
                "input": {"path": str(tmp_path / "x.h5"), "dataset": "x"},
                "generate": {"shape": [400_000], "dtype": "float32", "seed": 3},
                "output": str(tmp_path / "out"),
            }
        )
    )
    rc, _, err, _ = launched("scale", cfg, "--ranks", "1", "--shares", "2", "--out", tmp_path / "s", "-q", ranks=1)
    assert rc == 0, err
    scaling = json.loads((tmp_path / "s/scaling.json").read_text())
    (share,) = scaling["share_runs"]
    assert share["share_of"] == 2 and share["ranks"] == 1
    assert share["report"]["problem"]["bytes"] * 2 == scaling["series"]["strong"][0]["problem_bytes"]
    assert [r["mode"] for r in scaling["runs"]] == ["strong"]  # the share is no point of a series
    model = scaling["model"]
    points = {p["mode"]: p for p in model["points"]}
    assert points["share"]["problem_bytes"] == share["report"]["problem"]["bytes"] and points["share"]["fitted"]
    # every local phase fitted on two sizes per rank: the whole problem and the share
    assert model["points_fitted"] == 2 and all(fit["shares"] == 2 for fit in model["local"].values()), model
    done = spmd("predict", tmp_path / "s/scaling.json", "--target", "gpus_per_node=2,nodes=1,intra=pcie4",
                "--out", tmp_path / "p")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (p,) = json.loads((tmp_path / "p/scaling.json").read_text())["other_machines"]
    assert {(r["mode"], r["ranks"]) for r in p["rows"]} == {("strong", 2)}
    assert any("the sweep ran one rank" in a for a in p["assumes"]), p["assumes"]
    # the same sweep without its share: one size, nothing fitted, nothing predicted
    rc, _, err, _ = launched("scale", cfg, "--ranks", "1", "--out", tmp_path / "alone", "-q", ranks=1)
    assert rc == 0, err
    target = "gpus_per_node=2,intra=pcie4"
    done = spmd("predict", tmp_path / "alone/scaling.json", "--target", target, "--out", tmp_path / "q")
    assert done.returncode == 2 and "needs two sizes measured" in done.stderr and "--shares" in done.stderr


def test_shares_must_be_rank_counts_the_sweep_does_not_run(tmp_path):
    from mpi_job import spmd as launched

    cfg = tmp_path / "job.yaml"
    cfg.write_text("workload: reduce\ninput: {path: x.h5, dataset: x}\ngenerate: {shape: [1000]}\noutput: out\n")
    rc, _, err, _ = launched("scale", cfg, "--ranks", "1", "--shares", "1,4", cwd=tmp_path, ranks=1)
    assert rc == 2 and "--shares '1,4': 1 ranks run in the sweep itself" in err, err


def test_predict_a_preset_target_with_the_hosts_reads_measured_apart(tmp_path):
    """A preset's links beside the host's reads measured with spmd bench comm --host-read (key host_read; recorded
    on one H200 by two ranks sharing it): said in what the prediction was priced from and kept in the report; beside a
    links file it is refused naming the key."""
    recorded = LINKS / "h200-host-read-2-ranks-one-gpu.json"
    reads = json.loads(recorded.read_text())["host_read"]
    done = spmd("predict", SWEEP, "--target", f"gpus_per_node=2,intra=nvlink4,host_read={recorded}",
                "--out", tmp_path / "out")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (p,) = json.loads((tmp_path / "out/scaling.json").read_text())["other_machines"]
    words = "spmd bench comm --host-read, 2 rank(s) reading at once over 1 GPU(s) a host shared by its ranks"
    assert p["priced_from"] == [
        "inside a node: preset nvlink4 (looked up: published figures)",
        f"the host's reads: measured by {words}",
    ]
    assert p["target"]["host_read"] == reads and p["target"]["host_read_source"] == words
    assert f"priced from: the host's reads: measured by {words}" in done.stdout
    done = spmd("predict", SWEEP, "--target", f"links={LINKS}/h200x2-nvlink.json,host_read={recorded}",
                "--out", tmp_path / "out2")  # fmt: skip
    assert done.returncode == 2 and "key host_read: the links file holds the host's reads already" in done.stderr


def test_a_matmul_share_holds_only_its_slice_of_b_as_a_rank_of_that_many_does(tmp_path):
    """matmul with b_source allgather: each of N ranks reads and copies 1/N of B's rows and the allgather brings the
    rest, so a one-rank share of N (spmd scale --shares) reads the same slice a rank of N does, not all of B (on 2
    H200s a share holding all of B had its copies in priced 3 ms over what the 2 ranks took), and its C is still
    every element right against float64 from the files; standing for a rank of N on N ranks, or of another B
    source, is refused naming the key. The share and the real rank list B as the operand a rank reads 1/2 of, and
    the share reads and computes with the threads a rank of 2 gets, as the sweep's 1-rank run computes."""
    import yaml
    from mpi_job import spmd as launched

    cfg = tmp_path / "job.yaml"
    job = {
        "workload": "matmul",
        "device": "cpu",
        "repeats": 2,
        "verify": "full",
        "input": {"path": str(tmp_path / "a.h5"), "dataset": "a"},
        "generate": {"shape": [300, 200], "dtype": "float64", "seed": 3},
        "params": {
            "b": {"path": str(tmp_path / "b.h5"), "dataset": "b",
                  "generate": {"shape": [200, 150], "dtype": "float64", "seed": 4}},
            "b_source": "allgather",
        },
        "output": str(tmp_path / "out"),
    }  # fmt: skip
    cfg.write_text(yaml.safe_dump(job))
    rc, _, err, _ = launched("scale", cfg, "--ranks", "1", "--shares", "2", "--mode", "strong", "--out", tmp_path / "s",
                             "-q", ranks=1, env={"OMP_NUM_THREADS": ""})  # fmt: skip
    assert rc == 0, err
    (share,) = json.loads((tmp_path / "s/scaling.json").read_text())["share_runs"]
    report = share["report"]
    assert report["config"]["params"]["b_share_of"] == 2 and report["verified"], report["verification"]
    b_read = [p["source"] for p in report["io"]["per_rank"][0] if "b.h5" in p["source"]]
    # what rank 0 of a real 2-rank run reads of B
    rc, _, err, _ = launched("run", cfg, "-o", f"output={tmp_path / 'two'}", ranks=2)
    assert rc == 0, err
    two = json.loads((tmp_path / "two/report.json").read_text())
    assert b_read == [p["source"] for p in two["io"]["per_rank"][0] if "b.h5" in p["source"]]
    assert b_read == [f"{tmp_path / 'b.h5'}:b rows 0-100, columns 0-150"]
    # the share reads with the threads a rank of 2 gets on this node, not with the whole node's
    from spmd.core.cpus import threads_of_a_rank_of

    assert report["config"]["io"]["threads"] == threads_of_a_rank_of("auto", 2)
    # and computes with a rank of 2's compute threads, as the sweep's own 1-rank run does, not the whole node's
    sweep = json.loads((tmp_path / "s/scaling.json").read_text())
    for run in [share, *sweep["runs"]]:
        (rank,) = run["report"]["host"]["per_rank"]
        assert rank["threads"]["chosen"] == max(1, rank["load"]["node_cpus"] // 2), rank["threads"]
        assert "for 2 rank(s) on the node" in rank["threads"]["how"]
    # both list B as the operand a rank reads its slice of, so the model prices a rank's reads at its share and B / 2
    b_bytes = 200 * 150 * 8
    assert report["problem"]["sliced"] == two["problem"]["sliced"] == {"bytes": b_bytes, "parts": 2}
    for extra, ranks, why in (([], 2, "one rank stands for a rank of 2; this run has 2"),
                              (["-o", "params.b_source=read"], 1, "stands for a rank of algorithm rows")):  # fmt: skip
        rc, _, err, _ = launched("run", cfg, "-o", "params.b_share_of=2", *extra, ranks=ranks)
        assert rc == 2 and f"params.b_share_of: {why}" in err, err
