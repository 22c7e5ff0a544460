"""Comments and docstrings say why; history and measurements live in git and in the rendered docs. A comment
or docstring in spmd/, bench/ or tests/ that names an issue by number or a commit by its hash fails here (both
age into pointers nobody can follow from the code), and so do spmd's comments that quote a device's measured
rate or ratio (figures belong in docs rendered from committed records)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest
from helpers import chained_sentences

REPO = Path(__file__).resolve().parents[2]
ISSUE = re.compile(r"""\bissues? #?\d+|\bpytorch#\d+|(?<![\w&"'])#\d{2,}\b""", re.I)
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
# a figure of a named device: "on an H200 ... 4.07 TB/s", "0.978x of a device copy"
MEASURED = re.compile(r"\b(H100|H200|A100|B200)\b.*\d|\d+(\.\d+)? ?(TB/s|GB/s|TFLOP/s)\b|\b\d\.\d{3}x\b")


def sources(*folders: str, suffixes=(".py", ".cu")) -> list[Path]:
    return sorted(p for f in folders for p in (REPO / f).rglob("*") if p.suffix in suffixes and p.is_file())


def comments(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python or CUDA file."""
    text = path.read_text()
    if path.suffix == ".cu":
        return [(i, line.split("//", 1)[1]) for i, line in enumerate(text.splitlines(), 1) if "//" in line]
    out = [
        (t.start[0], t.string)
        for t in tokenize.generate_tokens(io.StringIO(text).readline)
        if t.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((node.body[0].lineno, doc))
    return out


def offending(paths: list[Path], pattern: re.Pattern) -> list[str]:
    return [
        f"{p.relative_to(REPO)}:{line}: {m.group(0)!r}"
        for p in paths
        for line, text in comments(p)
        for m in [pattern.search(text)]
        if m
    ]


@pytest.mark.parametrize("what, pattern", [("an issue number", ISSUE), ("a commit hash", COMMIT)])
def test_no_comment_names_an_issue_or_a_commit(what, pattern):
    found = offending(sources("spmd", "bench", "tests", "examples"), pattern)
    assert not found, f"{what} in a comment or docstring:\n" + "\n".join(found)


def test_spmd_comments_quote_no_measured_figures():
    found = offending(sources("spmd"), MEASURED)
    assert not found, "a measured figure in spmd's comments (render it into docs instead):\n" + "\n".join(found)


def test_the_patterns_catch_what_they_are_for():
    assert ISSUE.search("as issue 26 found") and ISSUE.search("see #37") and ISSUE.search("pytorch#144455")
    assert not ISSUE.search('stroke="#666"') and not ISSUE.search("a 2-D grid")
    assert COMMIT.search("in git at 58ac96b") and not COMMIT.search("sha256 of the buffer, deadbeef")
    assert MEASURED.search("4.07 TB/s = 0.978x of a device copy") and MEASURED.search("on an H200 that cost 15 us")
    assert not MEASURED.search("a 64-element boundary (256 B in float32)") and not MEASURED.search("1.80x-1.90x")


def test_code_keeps_to_the_formatters_width():
    """ruff format leaves long strings, comments and docstrings as they are: this holds them to its 120 columns,
    in Python, shell scripts and the Makefile (bench's Jinja templates of table rows aside)."""
    files = [*sources("spmd", "bench", "tests", "examples", "ci"), *sources("bench", "ci", suffixes=(".sh",))]
    wide = [
        f"{path.relative_to(REPO)}:{n}"
        for path in [*files, REPO / "Makefile"]
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if len(line) > 120
    ]
    assert not wide, wide


def docstring_paragraphs(path: Path) -> list[str]:
    """The prose paragraphs of a file's docstrings, lines joined: field lists (Args:, one item a line) left out."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            for para in re.split(r"\n\s*\n", ast.get_docstring(node) or ""):
                if not re.match(r"\s*(Attributes|Args|Returns|Raises|Yields):", para) and not re.search(
                    r"^\s*- ", para, re.M
                ):
                    out.append(" ".join(para.split()))
    return out


def test_docstrings_say_things_in_sentences_not_chains_of_colons():
    chained = {
        str(path.relative_to(REPO)): found
        for path in sources("spmd", "bench", "tests", suffixes=(".py",))
        if (found := [s for para in docstring_paragraphs(path) for s in chained_sentences(para)])
    }
    assert not chained, chained
