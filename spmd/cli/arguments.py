"""The command line's root: ``spmd`` and its subcommands, each declared by its own module beside its body
(``add_parser``), and what several commands share (a config with overrides, a byte size, ``--capture``)."""

from __future__ import annotations

import argparse
import importlib

from ..core.version import __version__

# the modules of spmd.cli that declare a subcommand, in the order ``spmd --help`` lists them
COMMAND_MODULES = ("run", "scale", "report", "predict", "bench", "topo", "info", "generate", "jobscript")

CAPTURE = {
    "type": int,
    "metavar": "STEPS",
    "help": "workload torch: after the timed repeats, STEPS more steps under torch.profiler on every rank, read "
    "kernel by kernel into the report (why each rank's step took what it took; the traces kept beside it); "
    "same as -o capture.steps=STEPS",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spmd", description="SPMD work on GPUs/CPUs under MPI, measured.")
    parser.add_argument("--version", action="version", version=f"spmd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f".{name}", __package__).add_parser(sub)
    return parser


def with_config(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """A command that reads a config: its path and ``-o KEY=VALUE`` overrides."""
    p.add_argument("config", help="YAML config (see docs/configs.md)")
    p.add_argument(
        "-o",
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. -o repeats=3 -o params.ddof=1 (repeatable)",
    )
    return p


def byte_size(text: str) -> int:
    """A size such as 8, 4K or 1M (argparse's type)."""
    from ..core.units import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
