"""README's picture of a run's timeline: report.html rendered again from a committed report.json, opened in headless
Chromium, and its timeline panel cut out as a PNG.

    python -m bench.tools.timeline_picture docs/results/cpu-2core/trace/straggler-report.json \
        docs/images/straggler-timeline.png

The report came from (3 ranks on the 2-core CPU machine, rank 1's read slowed by 0.2 s in every repeat):

    SPMD_FAULT=rank=1,phase=read,kind=slow,seconds=0.2 mpiexec -n 3 spmd run inputs/reduce.yaml --trace t.json
"""

from __future__ import annotations

from bench.usage import answer_help

answer_help(
    __doc__, "python -m bench.tools.timeline_picture REPORT_JSON OUT_PNG"
)  # before the libraries a machine may lack

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from spmd.report.html import run_html  # noqa: E402
from spmd.report.svg import PANELS  # noqa: E402


def main() -> None:
    report_path, out = Path(sys.argv[1]), Path(sys.argv[2])
    report = json.loads(report_path.read_text())
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(run_html(report))
        shot = Path(tmp) / "shot.png"
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp}/profile",
                "--hide-scrollbars",
                "--force-device-scale-factor=1.5",
                "--window-size=1280,3000",
                f"--screenshot={shot}",
                page.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        image = Image.open(shot).convert("RGB")
    pixels = np.asarray(image)
    panel = np.array([int(PANELS["timeline"][i : i + 2], 16) for i in (1, 3, 5)])
    ys, xs = np.nonzero(np.all(np.abs(pixels.astype(int) - panel) <= 2, axis=-1))
    out.parent.mkdir(parents=True, exist_ok=True)
    image.crop((xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)).save(out, optimize=True)
    print(f"wrote {out} ({xs.max() - xs.min() + 1} x {ys.max() - ys.min() + 1})")


if __name__ == "__main__":
    main()
