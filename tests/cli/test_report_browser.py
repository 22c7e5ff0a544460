"""The HTML reports opened in a real browser (headless Chromium, Debian's package): a screenshot of report.html of a
3-rank run with a straggler shows the timeline, the per-rank bars and the per-repeat lines drawn with their colours;
scaling.html shows a per-rank figure for each run. CI installs Chromium (.ci/run); without it these tests fail
under CI=true and skip elsewhere, saying why."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import reduce_config
from mpi_job import spmd

from spmd.report.svg import CATEGORY_COLORS, PANELS, PHASE_COLORS, RANK_COLORS

Image = pytest.importorskip("PIL.Image", reason="the test extra brings Pillow")


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found:
        return found
    why = "no Chromium on PATH (Debian: apt-get install chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why} (CI=true: the browser tests must run, not skip)", pytrace=False)
    pytest.skip(why)


def screenshot(page: Path, out: Path, height: int = 3000) -> np.ndarray:
    """``page`` rendered by headless Chromium at 1280 x ``height``, as an RGB array."""
    done = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={out.parent / 'chromium-profile'}",
            "--hide-scrollbars",
            f"--window-size=1280,{height}",
            f"--screenshot={out}",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and out.exists(), done.stderr[-2000:]
    return np.asarray(Image.open(out).convert("RGB"))


def rgb(color: str) -> np.ndarray:
    return np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)])


def mask(image: np.ndarray, color: str) -> np.ndarray:
    return np.all(np.abs(image.astype(int) - rgb(color)) <= 2, axis=-1)


def panel(image: np.ndarray, name: str) -> np.ndarray:
    """The screenshot's pixels inside the bounding box of a figure's panel (its own background colour)."""
    ys, xs = np.nonzero(mask(image, PANELS[name]))
    assert len(ys) > 5000, f"no {name} panel drawn"
    return image[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]


def inked(area: np.ndarray, color: str) -> int:
    return int(mask(area, color).sum())


def bands(area: np.ndarray, *colors: str) -> int:
    """How many separate horizontal bands of the picture hold any of ``colors`` (a figure's rows, its legend's)."""
    rows = sum(mask(area, color) for color in colors).sum(axis=1) >= 3
    return int(np.sum(rows[1:] & ~rows[:-1]) + rows[0])


def columns(area: np.ndarray, color: str) -> int:
    """How many columns of the picture hold ``color`` (a line across a plot, not its legend's swatch)."""
    return int(np.sum(mask(area, color).any(axis=0)))


@pytest.fixture(scope="module")
def straggler_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("browser")
    rc, _, err, _ = spmd(
        "run", reduce_config(folder, repeats=4), env={"SPMD_FAULT": "rank=1,phase=read,kind=slow,seconds=0.05"}
    )
    assert rc == 0, err
    return folder


def test_report_html_draws_the_timeline_the_rank_bars_and_the_repeat_lines(straggler_run):
    image = screenshot(straggler_run / "out/report.html", straggler_run / "report.png")
    timeline = panel(image, "timeline")
    phases = [PHASE_COLORS[p] for p in ("read", "wait", "compute", "comm")]
    assert bands(timeline, *phases) == 3 + 1  # each rank's row of phases, and the legend
    assert bands(timeline, PHASE_COLORS["wait"]) >= 2 + 1  # ranks 0 and 2 wait for rank 1, and the legend
    bars = panel(image, "ranks")
    inks = list(CATEGORY_COLORS.values())
    assert bands(bars, *inks) == 3 + 1  # a bar per rank, and the legend
    per_row = sum(mask(bars, c) for c in inks).sum(axis=1)
    assert np.sort(per_row)[-10:].min() >= 0.9 * 510  # whole bars: the shares add up to the 510-pixel scale
    assert bands(bars, CATEGORY_COLORS["wait"]) >= 2 + 1  # ranks 0 and 2 waited, and the legend
    lines = panel(image, "repeats")
    for color in RANK_COLORS[:3]:  # a line per rank across the plot (a legend swatch is 11 pixels wide)
        assert columns(lines, color) > 300, color


def test_the_straggler_shows_as_the_rank_with_the_long_read_in_the_timeline(straggler_run):
    image = screenshot(straggler_run / "out/report.html", straggler_run / "report2.png")
    timeline = panel(image, "timeline")
    read = mask(timeline, PHASE_COLORS["read"]).sum(axis=1)  # read pixels per row of the picture
    # one bar of long reads: rank 1's lane, one run of consecutive rows; any other read row under a quarter of it
    # (the others' reads may be too short to draw at all, so a median over the read rows would count on them)
    wide = np.nonzero(read > read.max() / 4)[0]
    assert read.max() > 100 and len(wide) > 2 and np.all(np.diff(wide) == 1), wide


def test_scaling_html_has_a_per_rank_figure_for_each_run(tmp_path):
    config = reduce_config(tmp_path, repeats=3)
    rc, _, err, _ = spmd("scale", config, "--mode", "both", "--out", tmp_path / "scaling", ranks=2)
    assert rc == 0, err
    html = (tmp_path / "scaling/scaling.html").read_text()
    runs = json.loads((tmp_path / "scaling/scaling.json").read_text())["runs"]
    measured = {json.dumps(r["report"], sort_keys=True) for r in runs}  # weak at 1 rank reuses strong's run
    assert html.count('aria-label="share of a repeat per rank"') == len(measured) == 3
    image = screenshot(tmp_path / "scaling/scaling.html", tmp_path / "scaling.png", height=4000)
    assert inked(panel(image, "ranks"), CATEGORY_COLORS["compute"]) > 200
