"""One GPU against the targets set for it: each kernel, the read path and training held to a ratio of the ceiling
or peer measured beside it (reduce 0.97x CuPy's sum, the stencil 0.95x a device copy, the direct read 0.9x the
same bytes by N-thread pread, training 1.5x PyTorch's strongest setup in fp32 and 1.3x in bf16), and where one is
missed, the measurement that shows what bounds it, from the same call's raw files. ``python -m bench report``
renders these rows into docs/benchmarks.md; nothing here is typed by hand but the targets.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .records import Record, ratios, strongest, summary
from .suites.kernels import REDUCE_ALTERNATIVES

STENCIL_TARGET_N = 16384


def _find(records: list[Record], case: str, role: str, subject: str | None = None) -> Record | None:
    return next(
        (r for r in records if r.case == case and r.role == role and (subject is None or r.subject == subject)), None
    )


def _peers(records: list[Record], case: str) -> list[Record]:
    return [r for r in records if r.case == case and r.role == "peer"]


def _row(what: str, target: float | None, result: Record | None, reference: Record | None, limit: str = "") -> dict:
    paired = ratios(result, reference) if result and reference else []
    median = summary(paired)["median"] if paired else None
    met = None if median is None or target is None else median >= target
    return {
        "what": what,
        "target": target,
        "against": reference.subject if reference else "",
        "ratios": paired,
        "met": met,
        "limit": limit if met is False or median is None else "",
    }


# the reduce sweep's variants that change the kernel (not only its launch shape), as the limit names them
KERNEL_CHANGES = {"registers": "rounds loaded into registers", "ring": "rounds through a ring in shared memory"}


def _sweeps(folder: Path) -> dict:
    path = folder / "sweeps.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _same_call(sweeps: dict, name: str, manifest: dict, case: str) -> bool:
    """Whether sweep ``name`` ran in the call that measured ``case``: the sweep's own ``commit`` (else the
    file's) against the case's (a case merged from a later ``--only`` call carries its own, else the manifest's)."""
    entry = next((c for c in manifest.get("cases", []) if c.get("case") == case), {})
    commit = entry.get("commit", manifest.get("commit"))
    return bool(sweeps.get(name)) and sweeps[name].get("commit", sweeps.get("commit")) == commit


def _reduce_f32_case(records: list[Record]) -> str | None:
    """The reduce case on float32 data (the one held to its target), if the records have it."""
    return next((r.case for r in records if r.case.startswith("reduce: moments") and r.case.endswith("float32")), None)


def kernel_rows(records: list[Record], manifest: dict, folder: Path) -> list[dict]:
    rows = []
    sweeps = _sweeps(folder)
    f32 = _reduce_f32_case(records)
    if f32:
        result, ceiling = _find(records, f32, "result"), _find(records, f32, "ceiling")
        rows.append(
            _row(f32.removeprefix("reduce: "), 0.97, result, ceiling, _reduce_limit(records, f32, sweeps, manifest))
        )
    for r in records:
        match = re.match(r"stencil: .* of (\d+)\^2 float32", r.case)
        if not match or r.role != "result":
            continue
        n = int(match[1])
        limit = ""
        if n == STENCIL_TARGET_N and _same_call(sweeps, "stencil", manifest, "stencil step"):
            st = sweeps["stencil"]
            name, best = max(st["variants_TBps"].items(), key=lambda kv: kv[1])
            limit = (
                f"the run's launch shape was {st['fused']}; the sweep of the same call (sweeps.json) reached "
                f"{best / st['copy_TBps']:.3f}x with {name.replace(' col', ' column(s)')} per thread (threads x rows)"
                + (", spmd's shape since" if _current_stencil_shape() == name else "")
            )
        rows.append(
            _row(
                r.case.removeprefix("stencil: "),
                0.95 if n == STENCIL_TARGET_N else None,
                r,
                _find(records, r.case, "ceiling"),
                limit,
            )
        )
    return rows


def _reduce_limit(records: list[Record], f32: str, sweeps: dict, manifest: dict) -> str:
    """What the same call measured beside reduce's float32 figure: the kernel on float64 data of the same bytes
    (half the elements: where it is much closer to its ceiling, the float32 gap is per-element work), and the
    launch-shape sweep's best float32 shape against spmd's default."""
    parts = []
    f64 = f32.replace("float32", "float64")
    result64, ceiling64 = _find(records, f64, "result"), _find(records, f64, "ceiling")
    if result64 and ceiling64:
        on64 = summary(ratios(result64, ceiling64))["median"]
        on32 = summary(ratios(_find(records, f32, "result"), _find(records, f32, "ceiling")))["median"]
        parts.append(
            f"the same kernel reads float64 data of the same size (half the elements) at {on64:.3f}x its ceiling"
        )
        if on64 > on32 + 0.02:
            parts[-1] += (
                ": with half the elements per byte it keeps up with memory, so the float32 gap is per-element work"
            )
    parts += _alternatives(records, f32)
    if _same_call(sweeps, "reduce", manifest, "reduce moments"):
        sweep = sweeps["reduce"]
        f32_rows = [v for v in sweep["variants"] if v["dtype"] == "float32"]

        def share(v):  # against the CuPy sum timed beside the row (older sweeps: the one at the sweep's start)
            return v["TBps"] / v.get("ceiling_TBps", sweep["ceiling_TBps"])

        best = max(f32_rows, key=share)
        default = next((v for v in f32_rows if v.get("variant") == "default"), None)
        text = (
            f"the launch-shape sweep of the same call ({len(f32_rows)} float32 shapes, sweeps.json) peaked at "
            f"{share(best):.3f}x its CuPy sum with {best['loads']} loads x "
            f"{best['blocks_per_sm']} blocks/SM ({best.get('variant', 'default')})"
        )
        for variant, what in KERNEL_CHANGES.items():  # what each change to the kernel reached, where it was not best
            rows = [v for v in f32_rows if v.get("variant") == variant]
            if rows and best not in rows:
                text += f", {what} at best {max(map(share, rows)):.3f}x"
        if default:
            text += f" (spmd's default: {share(default):.3f}x)"
        parts.append(text)
    return "; ".join(parts)


def _alternatives(records: list[Record], f32: str) -> list[str]:
    """Each of spmd's reduce kernel changed one way (REDUCE_ALTERNATIVES), as timed by turns beside it: its rate
    over spmd's, run by run."""
    default, parts = _find(records, f32, "result"), []
    for subject, what in REDUCE_ALTERNATIVES.items():
        other = _find(records, f32, "result", subject)
        if default and other:
            paired = summary(ratios(other, default))
            parts.append(
                f"{what}, timed by turns with spmd's kernel in the same runs: {paired['median']:.3f}x its rate "
                f"({paired['min']:.3f} - {paired['max']:.3f})"
            )
    return parts


def notes(entries: dict) -> list[str]:
    """What a machine kind's target table does not say but its records do: how the reduce kernel's alternatives
    (spmd's choice among them included: the one at 1.00x) fared beside it, met or not."""
    if "kernels" not in entries:
        return []
    e = entries["kernels"]
    f32 = _reduce_f32_case(e["records"])
    parts = _alternatives(e["records"], f32) if f32 else []
    out = [f"Reduce, float32 ({f32.removeprefix('reduce: ')}): " + "; ".join(parts) + "."] if parts else []
    sweeps = _sweeps(e["folder"])
    floors = (
        sweeps.get("reduce", {}).get("floors")
        if _same_call(sweeps, "reduce", e["manifest"], "reduce moments")
        else None
    )
    if floors:
        out.append(
            "What spmd's grid and loads read float32 data at when a kernel does less per value (the same call's "
            "sweeps.json, each timed by turns with CuPy's sum): "
            + ", ".join(f"{f['work']} {f['TBps'] / f['ceiling_TBps']:.3f}x" for f in floors)
            + "."
        )
    return out


def _current_stencil_shape() -> str:
    """spmd's stencil launch shape as bench/tools/stencil_kernel.py names its variants ('64x4x2, 4 col')."""
    import numpy as np

    from spmd.workloads.stencil.kernel import BLOCK, ROWS_PER_THREAD, VECTOR

    vector = 16 // np.dtype(np.float32).itemsize if VECTOR is None else VECTOR
    return f"{BLOCK[0]}x{BLOCK[1]}x{ROWS_PER_THREAD}, {vector} col"


def io_rows(records: list[Record]) -> list[dict]:
    rows = []
    # the direct engine against the N-thread pread beside it, on one rank and on every rank of a GPU box
    for case in dict.fromkeys(r.case for r in records if r.case.startswith("read ") and " rank(s)" in r.case):
        ceiling = _find(records, case, "ceiling")
        direct = _find(records, case, "result", "direct")
        if direct:
            rows.append(_row(f"{case}: direct", 0.9, direct, ceiling))
        mapped = _find(records, case, "peer", "file to GPU (mapped, locked at set-up)")
        to_gpu = _find(records, case, "result", "file to GPU (direct, copies as pieces land)")
        auto = next((r for r in records if r.subject == "io.engine auto"), None)
        if mapped and to_gpu and auto:
            gain = summary(ratios(mapped, to_gpu))["median"]
            chose = auto.params.get("engines")
            rows.append(
                {
                    "what": f"{auto.case}: io.engine auto picks the fastest safe engine",
                    "target": None,
                    "against": "",
                    "ratios": [],
                    "met": chose == ["mapped"],
                    "limit": (
                        f"auto read with "
                        f"{' and '.join(chose) if chose else 'direct (the runs before auto could choose mapped)'}; "
                        f"mapped (pages locked once at set-up) moved the same bytes to the GPU {gain:.2f}x as fast as "
                        f"direct in the same run"
                    )
                    if chose != ["mapped"]
                    else "",
                }
            )
    return rows


SGD_BYTES = 20  # a parameter's bytes through SGD with momentum in float32: w, g, v read; w, v written


def copy_rate(records: list[Record]) -> tuple[float, str] | None:
    """The device copy's bytes/s (read + write) at the kernels suite's largest stencil field, and that case."""
    copies = {
        int(m[1]): r
        for r in records
        if r.role == "ceiling" and r.subject.startswith("device copy") and (m := re.search(r"(\d+)\^2", r.case))
    }
    if not copies:
        return None
    best = copies[max(copies)]
    return summary(best.values)["median"] * 1e12, best.case


def _update_inside(records: list[Record], model: str, batch: str) -> list[tuple[str, float]]:
    """Each arrangement of case update inside backward: (subject, its rate over the default's, median over median)."""
    case = f"{model} batch {batch}, fp32, 1 GPU: where the update runs"
    after = _find(records, case, "peer")
    if after is None:
        return []
    base = summary(after.values)["median"]
    return [(r.subject, summary(r.values)["median"] / base) for r in records if r.case == case and r.role == "result"]


def train_rows(records: list[Record], kernels: list[Record] | None = None) -> list[dict]:
    """``kernels``: the same machine kind's kernels records, whose device copy bounds the optimizer's pass."""
    from spmd.workloads.train.layout import PRESETS, Layout

    copy = copy_rate(kernels or [])
    rows = []
    gemms = {
        (m[1], m[2], m[3]): r
        for r in records
        if r.role == "result" and (m := re.match(r"train GEMMs of one step: (\w+) batch (\d+), (\w+)", r.case))
    }
    for r in records:
        match = re.match(r"(\w+) batch (\d+) per GPU, (\w+), 1 GPU\(s\)", r.case)
        if not match or r.role != "result":
            continue
        model, batch, precision = match.groups()
        peer = strongest(_peers(records, r.case))
        limit = ""
        gemm = gemms.get((model, batch, precision))
        if peer and gemm:
            step_us = int(batch) / summary(r.values)["median"] * 1e6
            peer_us = int(batch) / summary(peer.values)["median"] * 1e6
            gemm_us = summary(gemm.values)["median"]
            other = strongest(_peers(records, gemm.case))
            beside = f"; {other.subject}: {summary(other.values)['median']:.0f} us" if other else ""
            limit = (
                f"its GEMMs alone take {gemm_us:.0f} us ({gemm.subject}{beside}), {gemm_us / step_us:.0%} of spmd's "
                f"{step_us:.0f} us step: a step of nothing but those GEMMs would be "
                f"{peer_us / gemm_us:.2f}x {peer.subject}"
            )
            if copy and precision == "fp32" and model in PRESETS:
                moved = Layout(PRESETS[model]).parameters * SGD_BYTES
                sgd_us = moved / copy[0] * 1e6
                limit += (
                    f"; SGD's pass moves {moved / 1e6:.0f} MB ({SGD_BYTES} B a parameter), {sgd_us:.0f} us at this "
                    f"machine's device copy rate ({copy[0] / 1e12:.2f} TB/s, kernels suite, {copy[1]}): GEMMs and "
                    f"that pass alone would be {peer_us / (gemm_us + sgd_us):.2f}x"
                )
                inside = _update_inside(records, model, batch)
                if inside:
                    limit += "; against the default (update after backward, case update inside backward): " + ", ".join(
                        f"{subject.removeprefix('spmd, ')} {ratio:.2f}x" for subject, ratio in inside
                    )
        rows.append(_row(r.case, 1.5 if precision == "fp32" else 1.3, r, peer, limit))
    return rows


def rows(entries: dict) -> list[dict]:
    """The target rows of one machine kind; ``entries``: {suite: the report's entry for that kind}."""
    out = []
    if "kernels" in entries:
        e = entries["kernels"]
        out += kernel_rows(e["records"], e["manifest"], e["folder"])
    if "io" in entries:
        out += io_rows(entries["io"]["records"])
    if "train" in entries:
        out += train_rows(entries["train"]["records"], entries["kernels"]["records"] if "kernels" in entries else None)
        fp32 = any(" fp32, 1 GPU" in r["what"] for r in out)
        if fp32 and not any(" bf16, " in r["what"] for r in out):
            out.append(
                {
                    "what": "train bf16 against PyTorch's autocast",
                    "target": 1.3,
                    "against": "",
                    "ratios": [],
                    "met": None,
                    "limit": "not measured by this machine's train results (the suite's bf16 case came after them)",
                }
            )
    return out
