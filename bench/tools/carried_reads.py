"""A host's reads carried to more ranks than measured them, in-sample: each stored run of a held-out round predicted
from the fit's own link test carried to the target (its host's reads measured by fewer readers than the target puts on a
host), by the model as it is and with the readers' shared rate taken as the host's whole (as before
spmd.scale.prediction.reads.shared_rate), beside the host's reads each links file measured, alone and together.

    python -m bench.tools.carried_reads docs/results/h200x4/heldout2
"""

import argparse
import gzip
import json
import tempfile
from pathlib import Path
from unittest import mock

from bench.suites.heldout import checked_row
from bench.suites.heldout2 import CARRIED
from bench.tools.heldout_inputs import stored_runs
from spmd.scale.prediction import predict, reads


def _reads(folder: Path, stored: str) -> str:
    reads = json.loads(gzip.decompress((folder / stored).read_bytes())).get("host_read") or {}
    if not reads:
        return "none"
    return (
        f"{reads['readers']} readers: {reads['alone_Bps'] / 1e9:.1f} GB/s alone, "
        f"{reads['together_Bps'] / 1e9:.1f} together"
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    print(
        "| run | the readers' rate as the host's whole: error, read measured / predicted (ms) | carried: the same | "
        "the fit's host reads | the target's |"
    )
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for folder in parser.parse_args().folders:
            for record, run, files in stored_runs(folder, Path(scratch), None, lambda r: r.params["kind"] == CARRIED):
                cells = []
                for whole in (True, False):
                    rate = (lambda host, ranks: host["together_Bps"]) if whole else reads.shared_rate
                    with mock.patch.object(predict, "shared_rate", rate):
                        c = checked_row(files, run["target"], run["mode"], run["ranks"])
                    read = c.get("phases", {}).get("read")
                    shown = f"{read[0] * 1e3:.2f} / {read[1] * 1e3:.2f}" if read else "no read"
                    cells.append(f"{c['error']:+.1%}, {shown}")
                fit_links = run["inputs"]["links"]
                target_links = fit_links.replace("-links-fit", "-links-target")
                print(
                    f"| {record.case.removeprefix('held-out ').split(', fitted')[0]} | {cells[0]} | {cells[1]} | "
                    f"{_reads(folder, fit_links)} | {_reads(folder, target_links)} |"
                )


if __name__ == "__main__":
    main()
