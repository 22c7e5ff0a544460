"""docs/commands.md rendered from spmd's own parsers: ``spmd`` and every subcommand, each flag with its help.

The layout is this module's, at a fixed width, not argparse's help (whose layout changes with the Python version),
so the page is the same wherever it is rendered. ``bench report --check`` holds it."""

from __future__ import annotations

import argparse
import textwrap

from spmd.cli.arguments import build_parser

WIDTH = 100
NAME_COLUMN = 28  # where the help starts; a longer flag puts its help on the next line

HEADER = """# Commands

Every command and flag of `spmd`, rendered from its parsers by `python -m bench report`.
`spmd COMMAND --help` prints the same flags.
Where a flag sets a config key, [configs.md](configs.md) says more.
"""


def markdown() -> str:
    parser = build_parser()
    out = [HEADER]
    for prog, about, sub in _commands(parser, "spmd", parser.description):
        about = "\n".join(textwrap.wrap(about, WIDTH))
        out.append(f"## `{prog}`\n\n{about}\n\n```text\n{_text(prog, sub)}\n```\n")
    return "\n".join(out)


def _commands(parser: argparse.ArgumentParser, prog: str, about: str):
    """(prog, what it does, parser) for the parser and every subcommand below it, depth first."""
    yield prog, about, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, f"{prog} {name}", _help_of(action, name))


def _text(prog: str, parser: argparse.ArgumentParser) -> str:
    actions = [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    words = [prog, *(_name(a) for a in actions if not a.option_strings)]
    if subcommands:
        words.append("COMMAND")
    if any(a.option_strings for a in actions):
        words.append("[options]")
    lines = [" ".join(words)]
    if subcommands:
        lines += ["", "commands:"]
        lines += _rows((name, _help_of(subcommands[0], name)) for name in subcommands[0].choices)
    positional = [(_name(a), a.help or "") for a in actions if not a.option_strings]
    if positional:
        lines += ["", "arguments:", *_rows(positional)]
    options = [(_flag(a), _help(a)) for a in actions if a.option_strings]
    if options:
        lines += ["", "options:", *_rows(options)]
    return "\n".join(lines)


def _help_of(subparsers: argparse._SubParsersAction, name: str) -> str:
    return next((a.help or "" for a in subparsers._choices_actions if a.dest == name), "")


def _name(action: argparse.Action) -> str:
    if action.metavar:
        return action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    name = action.dest.upper()
    return f"{name} [{name} ...]" if action.nargs == "+" else name


def _flag(action: argparse.Action) -> str:
    flags = ", ".join(action.option_strings)
    if action.nargs == 0:  # a switch: store_true, version
        return flags
    value = "|".join(str(c) for c in action.choices) if action.choices else _name(action)
    return f"{flags} {value}"


def _help(action: argparse.Action) -> str:
    text = (action.help or "").replace("%(prog)s", "spmd")
    return f"{text} (required)" if action.required else text


def _rows(rows) -> list[str]:
    out = []
    for name, text in rows:
        indent = " " * (2 + NAME_COLUMN)
        if len(name) + 2 > NAME_COLUMN - 2:
            out.append(f"  {name}")
            first = indent
        else:
            first = f"  {name}".ljust(2 + NAME_COLUMN)
        out += textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=indent) or [first.rstrip()]
    return out
