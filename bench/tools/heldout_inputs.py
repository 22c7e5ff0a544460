"""What the held-out design tools share: the ``--engines`` option (a links file whose host's reads by engine stand in
where a round's stored links file predates them), a stored links file given them, and one prediction checked."""

import argparse
import json
from pathlib import Path

from bench.suites.predict import checked


def add_engines_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engines", type=Path, help="a links file whose host_read engines stand in where missing")


def engines_of(path: Path | None) -> dict | None:
    """The host's reads by engine of the links file ``path`` (None where no file is given)."""
    return json.loads(path.read_text())["host_read"]["engines"] if path else None


def give_engines(links: Path, engines: dict | None) -> None:
    """The unpacked links file ``links`` given ``engines`` where its host's reads have none (a copy: stored inputs are
    never edited)."""
    data = json.loads(links.read_text())
    if engines and data.get("host_read") and "engines" not in data["host_read"]:
        data["host_read"]["engines"] = engines
        links.write_text(json.dumps(data))


def checked_row(files: dict, target: str, mode: str, ranks: int) -> dict:
    """The prediction of ``files['fit']`` for ``target`` held against the measured run of ``mode`` at ``ranks``."""
    (row,) = [c for c in checked(files, target) if (c["mode"], c["ranks"]) == (mode, ranks)]
    return row
