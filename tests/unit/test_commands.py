"""docs/commands.md (bench/commands.py) is rendered from spmd's own parsers, in a layout of its own: every
command and flag appears, and the page does not change with argparse's help layout or the terminal's width."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from bench.commands import WIDTH, markdown
from spmd.cli import arguments
from spmd.cli.arguments import COMMAND_MODULES, build_parser

ROOT = Path(__file__).resolve().parents[2]


def _parsers(parser, prog="spmd"):
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{prog} {name}")


def test_every_command_and_flag_is_on_the_page():
    page = markdown()
    for prog, parser in _parsers(build_parser()):
        section = page.split(f"## `{prog}`\n", 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert re.search(rf"(^|[ ,]){re.escape(flag)}([ ,]|$)", section, re.M), (prog, flag)


def test_the_page_is_the_committed_one_at_any_terminal_width(monkeypatch):
    """argparse wraps its help to $COLUMNS; the page is laid out by bench/commands.py at a fixed width."""
    for columns in ("40", "300"):
        monkeypatch.setenv("COLUMNS", columns)
        assert markdown() == (ROOT / "docs/commands.md").read_text()


def test_the_page_keeps_to_its_width_outside_headings():
    for line in markdown().splitlines():
        assert len(line) <= WIDTH or line.startswith("## "), line


def test_each_command_declares_its_flags_in_its_own_module():
    """The root parser adds none of a command's flags: each module of COMMAND_MODULES has an add_parser."""
    import importlib

    source = Path(arguments.__file__).read_text()
    assert ".add_parser(" in source and source.count("add_argument(") == 3  # --version, config, -o
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"spmd.cli.{name}")
        assert callable(module.add_parser), name
        assert "add_argument(" in Path(module.__file__).read_text(), name
