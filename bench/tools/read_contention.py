"""A read-contention rule tried for the seventh round and not frozen, in-sample: the held-out rounds' runs fitted on one
GPU and predicted from the target's link test, their reads priced as the model does (the host's read ceiling as a
floor) or stretched by the host's measured contention (the fit's read times the ranks on a host times one rank's rate
alone over the host's ranks' together, where above 1). Matmul's fits are the ones made again with the sliced share
(``--refits``); where a links file predates the reads by engine, the host's direct reads recorded on the same machine
are added (``--engines``).

    python -m bench.tools.read_contention docs/results/h200x2/heldout* --refits docs/results/h200x1/matmul-sliced \
        --engines tests/fixtures/links/h200x2-read-engines-256m.json
"""

import argparse
import gzip
import statistics
import tempfile
from pathlib import Path

import spmd.scale.prediction.predict as predict
import spmd.scale.prediction.reads as reads
from bench.suites.heldout import checked_row
from bench.suites.heldout3 import TARGETS
from bench.tools.heldout_inputs import parsed, stored_runs


class Stretched:
    """predict's read ceiling and its floor, wrapped: the floor kept (``rule`` 'floor') or the read stretched."""

    def __init__(self):
        self.rule, self.alone = "floor", None
        self.ceiling, self.floor = predict.read_ceiling, predict.host_read_ceiling

    def read_ceiling(self, scaling, model, machine, notes):
        measured = machine.host_read or {}
        engine = reads.read_engine(scaling)
        self.alone = {**measured, **(measured.get("engines") or {}).get(engine, {})}.get("alone_Bps")
        return self.ceiling(scaling, model, machine, notes)

    def host_read_ceiling(self, model, phases, reads, ceiling, host_ranks, readers, whole=False):
        if self.rule == "floor" or ceiling is None or "read" not in phases or host_ranks <= readers:
            return self.floor(model, phases, reads, ceiling, host_ranks, readers, whole)
        read = phases["read"] * max(1.0, host_ranks * self.alone / ceiling)
        return {**phases, "read": read, "total": phases["total"] + read - phases["read"]}


def family(case: str) -> str:
    name = case.removeprefix("held-out ").split(",")[0]
    return name if name in ("stencil", "reduce", "matmul") else "torch and train"


def _from_the_link_test(record) -> bool:
    return record.params.get("kind") == TARGETS and "fitted on 1 GPU" in record.case


def design(folders: list[Path], refits: Path, engines: dict | None) -> list[dict]:
    """Per run (and matmul refit): {family, floor, stretched} (each |error|)."""
    wrap = Stretched()
    predict.read_ceiling, predict.host_read_ceiling = wrap.read_ceiling, wrap.host_read_ceiling
    out = []
    try:
        with tempfile.TemporaryDirectory() as scratch:
            tmp = Path(scratch)
            for folder in folders:
                for r, run, files in stored_runs(folder, tmp, engines, _from_the_link_test):
                    fits = [files["fit"]]
                    if r.case.startswith("held-out matmul"):
                        fits = []
                        for n, packed in enumerate(sorted(refits.glob(f"fit-{folder.name}-*.json.gz"))):
                            fits.append(tmp / f"refit-{n}.json")
                            fits[-1].write_bytes(gzip.decompress(packed.read_bytes()))
                    for fit in fits:
                        row = {"family": family(r.case)}
                        for rule in ("floor", "stretched"):
                            wrap.rule = rule
                            c = checked_row({**files, "fit": fit}, run["target"], run["mode"], run["ranks"])
                            row[rule] = abs(c["error"])
                        out.append(row)
    finally:
        predict.read_ceiling, predict.host_read_ceiling = wrap.ceiling, wrap.floor
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--refits", type=Path, required=True, help="matmul's fits made again (sliced_design's)")
    args, engines = parsed(parser)
    rows = design(args.folders, args.refits, engines)
    print("| runs of | predictions | mean error: the ceiling as a floor | the read stretched |")
    print("|---|---|---|---|")
    for name in [*sorted({r["family"] for r in rows}), "all"]:
        some = [r for r in rows if name in ("all", r["family"])]
        means = [f"{statistics.mean(r[rule] for r in some):.1%}" for rule in ("floor", "stretched")]
        print(f"| {name} | {len(some)} | {means[0]} | {means[1]} |")


if __name__ == "__main__":
    main()
