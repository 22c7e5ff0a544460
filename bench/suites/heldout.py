"""Held-out validation of ``spmd predict``: cases chosen after its model was frozen at FROZEN (the files of
MODEL_PATHS unchanged since), none used while designing it (other seeds, sizes, per-GPU batches, precisions, and a
model family never used before, a Vision Transformer). Each is fitted on one GPU as a user with one GPU would
(``spmd scale --ranks 1 --shares 2``), predicted for 2 GPUs of one node from two kinds of input, the ``nvlink4``
preset (what a user can look up) and the target's own link test (``spmd bench comm --links``, a minute there), and
then measured there (``spmd scale --ranks 1,2``). Published apart from the in-sample tables (docs/validation.md), the
frozen commit named; a unit test fails on a record measured with other model files."""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml

from ..env import ROOT
from ..records import Measure, read_records
from . import Case
from .predict import checked, error_record, links, save_inputs, slug
from .scaling import workload

# the prediction model as frozen before any held-out case was measured; records of other model files are refused
FROZEN = "bf351ebbf8c721bf8a05bdaeb46c15993d096706"
MODEL_PATHS = (
    "spmd/scale/models",
    "spmd/scale/prediction",
    "spmd/scale/sweep/analysis.py",
    "spmd/scale/sweep/calibrate.py",
)
# the kinds of input a prediction is made from (held_against's sources: a preset's prediction neither reads the
# links file nor keeps it among its inputs, bench recheck alike)
INPUT_KINDS = {
    "preset nvlink4": ("intra=nvlink4,", "fit", "measured", None, "1 GPU"),
    "the target's link test": ("", "fit", "measured", "links", "1 GPU"),
}


def array_job(env, name: str, shape: list[int], seed: int, dtype: str = "float32") -> dict:
    """The scaling suite's job of ``name`` on other data: its shape, seed and dtype (matmul's B alike)."""
    job = workload(env, name)
    job["generate"] = {**job["generate"], "shape": shape, "seed": seed, "dtype": dtype}
    b = (job.get("params") or {}).get("b")
    if b:  # matmul: B square like A
        b["generate"] = {**b["generate"], "shape": shape, "seed": seed + 1, "dtype": dtype}
    return job


def torch_job(env, base: str, generate: dict, **params) -> dict:
    """The example's job of ``base`` (gpt2, or resnet50: torchvision's) as the torch models suite sizes it, on other
    data and params, unverified (timing is what is predicted; the torch suites measure verification and its cost)."""
    name = "gpt2" if base == "gpt2" else "resnet"
    job = yaml.safe_load((ROOT / f"examples/torch/{name}.yaml").read_text())
    job.update(device=env.device, verify="none", repeats=3, output=str(env.work / f"heldout-{base}-out"))
    job["input"]["path"] = str(env.work / f"heldout-{base}-{generate['seed']}.h5")
    job["generate"] = {**job["generate"], **generate}
    p = job["params"]
    p["model"] = str(ROOT / ("examples/torch/resnet.py:torchvision_resnet50" if base == "resnet50" else p["model"]))
    if ":" in str(p.get("loss", "")):
        p["loss"] = str(ROOT / p["loss"])
    p.update(steps=20, save=None, **params)
    return job


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the held-out list, fixed before it was measured."""
    n = 6144 if env.gpus else 1536
    vit = str(ROOT / "bench/models/vit.py:build")
    both = ("strong", "weak")
    return {
        "reduce, seed 11, float64": (array_job(env, "reduce", [1 << 26 if env.gpus else 1 << 23], 11, "float64"), both),
        f"matmul, {n} square": (array_job(env, "matmul", [n, n], 5), both),
        f"stencil, a {n} grid": (array_job(env, "stencil", [n, n], 9), both),
        "train, the large MLP at batch 512": (_large_mlp(env), both),
        "gpt2, 16 x 512 tokens, fp32": (torch_job(env, "gpt2", {"shape": [1024, 512], "seed": 13}, batch=16,
                                                precision="fp32"), both),
        "resnet50, batch 64 of 3x160x160": (torch_job(env, "resnet50", {"shape": [1024, 3, 160, 160], "seed": 17},
                                                    batch=64), both),
        "vit-b/16, batch 64 of 3x128x128, bf16": (
            torch_job(env, "resnet50", {"shape": [1024, 3, 128, 128], "seed": 19}, batch=64, model=vit,
                   options={"classes": 100, "image": 128}), both),
    }  # fmt: skip


def _large_mlp(env) -> dict:
    return mlp_job(env, [16384, 4812], 23, "large", 512)


def mlp_job(env, shape: list[int], seed: int, model, batch: int) -> dict:
    """The train suite's job on other data (``shape``: samples x features, ``seed``), another MLP (``model``: its
    widths or a named size) and per-GPU ``batch``, 20 steps."""
    job = workload(env, "train")
    job["generate"] = {**job["generate"], "shape": shape, "seed": seed}
    job["params"] = {**job["params"], "model": model, "batch": batch, "steps": 20}
    return job


def stencil_job(env, grid: int, iterations: int, seed: int) -> dict:
    """The scaling suite's stencil on a ``grid`` square of other data, ``iterations`` a repeat: {its name: (the job,
    both modes)}."""
    job = array_job(env, "stencil", [grid, grid], seed)
    job["params"] = {**job["params"], "iterations": iterations}
    return {f"stencil, a {grid} grid, {iterations} iterations": (job, ("strong", "weak"))}


def predictions(cases: dict) -> int:
    """How many predictions the list makes: each case's modes times the kinds of input."""
    return sum(len(modes) for _, modes in cases.values()) * len(INPUT_KINDS)


def job_config(env, suite: str, name: str, job: dict, modes: tuple) -> tuple[Path, str]:
    """A case's config written under the run's scratch and its input generated: (the config, the ``--mode`` of its
    modes)."""
    cfg = env.work / f"{suite}-{slug(name)}.yaml"
    cfg.write_text(yaml.safe_dump(job))
    env.spmd("generate", cfg, ranks=None)
    return cfg, "both" if len(modes) == 2 else modes[0]


def held_against(name: str, ranks: int, files: dict, inputs: dict, kinds: dict, frozen: str) -> list[Measure]:
    """One case's records, a prediction at ``ranks`` GPUs of one node for each kind of input held against the
    measured sweep. ``kinds[kind]`` is (the target's keys, the fit's role, the measured sweep's role, the links' role
    or None, what it was fitted on[, the host reads' role]); ``files`` maps each role to its path here, ``inputs`` to
    its stored copy."""
    out = []
    for kind, (keys, fit, there, measured_links, fitted_on, *reads) in kinds.items():
        target = f"{keys}gpus_per_node={ranks},nodes=1,name={kind}"
        roles = {"fit": fit, "measured": there, **({"links": measured_links} if measured_links else {})}
        if reads:
            roles["host_read"] = reads[0]
        given = {role: files[source] for role, source in roles.items()}
        kept = {role: inputs[source] for role, source in roles.items()}
        for c in checked(given, target):
            if c["ranks"] == ranks:
                case = f"held-out {name}, {c['mode']}, fitted on {fitted_on}, predicted at {ranks}: {kind}"
                out.append(error_record(case, c, inputs=kept, target=target, frozen=frozen, kind=kind))
    return out


def measured(env, name: str, job: dict, modes: tuple) -> list[Measure]:
    """One case: fitted on one GPU with the share of 2, measured at 1 and 2, predicted from each kind of input."""
    cfg, mode = job_config(env, "heldout", name, job, modes)
    fit, there = env.work / f"heldout-{slug(name)}-fit", env.work / f"heldout-{slug(name)}-2"
    env.spmd("scale", cfg, "--ranks", "1", "--shares", "2", "--mode", mode, "--out", fit, "-q", ranks=1)
    env.spmd("scale", cfg, "--ranks", "1,2", "--mode", mode, "--out", there, "-q", ranks=2)
    files = {
        "fit": fit / "scaling.json",
        "measured": there / "scaling.json",
        "links": links(env, "held-out", ({}, None)),
    }
    inputs = save_inputs(env, f"{slug(name)}", files, suite="heldout")
    return held_against(name, 2, files, inputs, INPUT_KINDS, FROZEN)


def cases_of(listed: dict, measure, torch_cases: tuple[str, ...]) -> list[Case]:
    """A round's list as bench cases, each one run of ``measure(env, name, job, modes)`` (its own fitting and measuring
    launches); a case whose name starts with one of ``torch_cases`` needs PyTorch and transformers."""
    return [
        Case(
            f"held-out {name}",
            lambda e, n=name, j=job, m=modes: measure(e, n, j, m),
            needs=("gpu", "ranks2", *(("torch", "transformers") if name.startswith(torch_cases) else ())),
            runs=1,
        )
        for name, (job, modes) in listed.items()
    ]


def cases(env) -> list[Case]:
    return cases_of(cases_list(env), measured, ("gpt2", "resnet50", "vit"))


def unseen_design(folders: list[Path]) -> dict[str, list[float]]:
    """What the held-out runs fitted on one GPU measured that their fit never saw, each run predicted again from its
    stored inputs by the model as it is: per halo call its fit listed (``halo``), or as a share of a training step
    (``coupling``), how far its measured time lay from the prediction without it (the design of
    spmd.scale.prediction.intervals' HALO_CALL_S and COUPLING, their medians), and with it, how far outside the
    interval's other three parts, below and above (``halo_below``, ``halo_above``, ``coupling_below``,
    ``coupling_above``, 0 inside; the design of HALO_SPREAD_S and COUPLING_SPREAD, their 95th percentiles). Fits
    that listed no halos (a lone stencil rank before round 3's freeze) and fits on several GPUs are left out."""
    import tempfile

    from spmd.scale.prediction.intervals import unseen_seconds, unseen_terms

    out = {k: [] for k in ("halo", "halo_below", "halo_above", "coupling", "coupling_below", "coupling_above")}
    with tempfile.TemporaryDirectory() as scratch:
        for folder in folders:
            for _, run, files in stored_runs(folder, Path(scratch)):
                fit = json.loads(files["fit"].read_text())
                unseen = unseen_terms(fit, fit["model"])
                if not unseen or not (unseen["halo_calls"] or unseen["training"]):
                    continue
                row = checked_row(files, run["target"], run["mode"], run["ranks"])
                measured, total = row["measured_s"], row["predicted_s"]
                without = total - row["unseen_s"]
                _, below, above = unseen_seconds(fit, fit["model"], run["ranks"], without)
                half = math.hypot(*row["interval_parts"].values())
                kind, per = ("halo", unseen["halo_calls"]) if unseen["halo_calls"] else ("coupling", without)
                out[kind].append((measured - without) / per)
                out[f"{kind}_below"].append(max(total - half - measured, 0.0) / per)
                out[f"{kind}_above"].append(max(measured - total - half, 0.0) / per)
    return out


def spread_design(folders: list[Path]) -> dict[str, list[float]]:
    """How far each stored held-out run's measured speedup (against its own sweep's one rank: one launch, whose speed
    cancels) lay outside its prediction's interval without the model's own error, as a share of the predicted time,
    below (the measured time faster) and above (slower), 0 on the other side and inside: the sweep's and the links'
    parts in quadrature with it, what the fit never saw beside (the design of
    spmd.scale.prediction.intervals' MODEL_SPREAD, their 95th percentiles), each run predicted again from its stored
    inputs by the model as it is."""
    import tempfile

    out = {"below": [], "above": []}
    with tempfile.TemporaryDirectory() as scratch:
        for folder in folders:
            for _, run, files in stored_runs(folder, Path(scratch)):
                row = checked_row(files, run["target"], run["mode"], run["ranks"])
                if row.get("speedup_error") is None:
                    continue
                total, parts = row["predicted_s"], row["interval_parts"]
                known = math.hypot(parts["sweep"], parts["links"])
                # the measured speedup's miss as the time's: above where the prediction was too fast
                miss = row["speedup_error"] * total
                side, unseen = ("above", row["unseen_above"]) if miss > 0 else ("below", row["unseen_below"])
                beyond = abs(miss) - unseen
                out[side].append(math.sqrt(beyond**2 - known**2) / total if beyond > known else 0.0)
                out["below" if side == "above" else "above"].append(0.0)
    return out


def stored_runs(folder: Path, scratch: Path, keep: Callable = lambda record: True) -> Iterator[tuple]:
    """(record, run, files) for each stored run of the records of a round's ``folder`` that ``keep(record)`` holds,
    its inputs unpacked under ``scratch``."""
    for record in read_records(folder / "records.jsonl"):
        if keep(record):
            for run in record.params.get("runs") or [record.params]:
                yield record, run, {role: _unpacked(folder / stored, scratch) for role, stored in run["inputs"].items()}


def checked_row(files: dict, target: str, mode: str, ranks: int) -> dict:
    """The prediction of ``files['fit']`` for ``target`` held against the measured run of ``mode`` at ``ranks``."""
    (row,) = [c for c in checked(files, target) if (c["mode"], c["ranks"]) == (mode, ranks)]
    return row


def _unpacked(stored: Path, scratch: Path) -> Path:
    """A stored input (gzipped) written out under ``scratch``."""
    path = scratch / stored.name.removesuffix(".gz")
    path.write_bytes(gzip.decompress(stored.read_bytes()))
    return path


def records_with_other_model_files(commits: list[str], repo=ROOT, frozen: str = FROZEN) -> list[str]:
    """The commits, among those the records name, whose MODEL_PATHS differ from ``frozen``'s (or that carry
    uncommitted changes: ``+changes``)."""
    import subprocess

    out = []
    for commit in commits:
        same = subprocess.run(
            ["git", "-C", str(repo), "diff", "--quiet", frozen, commit.split("+")[0], "--", *MODEL_PATHS]
        )
        if same.returncode != 0 or commit.endswith("+changes"):
            out.append(commit)
    return out
