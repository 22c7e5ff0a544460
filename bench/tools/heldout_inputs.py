"""What the held-out design tools share: the ``--engines`` option (a links file whose host's reads by engine stand in
where a round's stored links file predates them), a round's stored runs with their inputs unpacked (the links given
them), and whether a checked prediction's measured time fell inside its interval."""

import argparse
import json
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.suites import heldout


def parsed(parser: argparse.ArgumentParser) -> tuple[argparse.Namespace, dict | None]:
    """A design tool's arguments with ``--engines`` added, and the host's reads by engine of the file it names (None
    where none is given)."""
    parser.add_argument("--engines", type=Path, help="a links file whose host_read engines stand in where missing")
    args = parser.parse_args()
    return args, json.loads(args.engines.read_text())["host_read"]["engines"] if args.engines else None


def give_engines(links: Path, engines: dict | None) -> None:
    """The unpacked links file ``links`` given ``engines`` where its host's reads have none (a copy: stored inputs are
    never edited)."""
    data = json.loads(links.read_text())
    if engines and data.get("host_read") and "engines" not in data["host_read"]:
        data["host_read"]["engines"] = engines
        links.write_text(json.dumps(data))


def stored_runs(folder: Path, tmp: Path, engines: dict | None, keep: Callable) -> Iterator[tuple]:
    """The suite's stored runs (heldout.stored_runs) of ``folder`` that ``keep(record)`` holds, each links file (an
    unpacked copy) given ``engines``."""
    for record, run, files in heldout.stored_runs(folder, tmp, keep):
        if "links" in files:
            give_engines(files["links"], engines)
        yield record, run, files


def inside(row: dict) -> bool:
    """Whether a checked prediction's measured time fell inside its interval."""
    return row["interval"][0] <= row["measured_s"] <= row["interval"][1]
