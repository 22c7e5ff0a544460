"""The guides say how to use a feature, what it assumes and how sure it is; what was measured lives in rendered
blocks and in the records (docs/validation.md, docs/benchmarks.md). A figure typed into a guide's prose goes stale
the day a model or a machine changes, so none is: no time, bandwidth or speedup figure, no commit hash and no
"was X, now Y" history outside a block ``python -m bench report`` renders (or a code block)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import chained_sentences, paragraphs, written_lines

ROOT = Path(__file__).resolve().parents[2]

GUIDES = ["README.md", "docs/scaling.md"]  # the prediction's guide, apart from its record (docs/validation.md)

FIGURE = re.compile(
    r"\d[\d.,]*\s?(ms|us|µs|GB/s|MB/s)\b"  # a time or a bandwidth
    r"|\b\d+(\.\d+)?x\b"  # a speedup or a ratio
    r"|`[0-9a-f]{7,40}`|\bcommit [0-9a-f]{7,40}\b"  # a commit
    r"|\bwas\b[^.;]*\bnow\b"  # a history
)


def typed(text: str) -> list[tuple[int, str]]:
    """(line, figure) of every typed figure in ``text``'s prose: rendered blocks and fenced code left out."""
    return [(number, m.group(0)) for number, line in written_lines(text) for m in FIGURE.finditer(line)]


@pytest.mark.parametrize("guide", GUIDES)
def test_a_guide_types_no_measured_figure_outside_a_rendered_block(guide):
    assert typed((ROOT / guide).read_text()) == []


def test_the_check_finds_what_it_is_for():
    text = "took 12.5 ms\n<!-- bench:table x -->\n| 3 ms |\n<!-- /bench:table -->\n```\n4 ms\n```\n1.9x at `abc1234`"
    assert typed(text) == [(1, "12.5 ms"), (8, "1.9x"), (8, "`abc1234`")]
    assert typed("reduce was 22% off, now 5%") == [(1, "was 22% off, now")]


WIDTH = 120  # the formatter's line length, for prose as for code

RENDERED_WHOLE = {"benchmarks.md", "commands.md"}  # written by bench report, not by hand

LINK = re.compile(r"\]\([^)]*\)")  # a link's target: the URL the width leaves aside


def long_prose(text: str) -> list[tuple[int, int]]:
    """(line, width) of every prose line wider than WIDTH, counted without link targets: tables, rendered blocks
    and fenced code left out."""
    out = []
    for number, line in written_lines(text):
        width = len(LINK.sub("]", line))
        if width > WIDTH and not line.startswith("|") and not re.search(r"https?://\S{40,}", line):
            out.append((number, width))
    return out


def test_docs_prose_keeps_to_the_formatters_width():
    docs = [ROOT / "README.md", *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in RENDERED_WHOLE)]
    wide = {p.name: long_prose(p.read_text()) for p in docs}
    assert not any(wide.values()), {name: lines for name, lines in wide.items() if lines}


def test_the_width_check_leaves_tables_code_blocks_and_link_targets_aside():
    wide = "word " * 30
    text = f"{wide}\n| {wide} |\n```\n{wide}\n```\n[a](https://example.org/{'x' * 200})\n"
    assert long_prose(text) == [(1, len(wide))]


def test_docs_say_things_in_sentences_not_chains_of_colons():
    """architecture.md's catalogues of modules (a list item per module or folder) are lists, not sentences."""
    docs = [ROOT / "README.md", *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in RENDERED_WHOLE)]
    chained = {
        p.name: [s for para in paragraphs(p.read_text(), skip_catalogue=True) for s in chained_sentences(para)]
        for p in docs
    }
    assert not any(chained.values()), {name: found for name, found in chained.items() if found}


def test_a_chain_of_colons_is_found_and_code_is_left_aside():
    assert chained_sentences("One: two: three: four. Short: fine.") == ["One: two: three: four."]
    assert chained_sentences("Run `a: b: c: d` here: once.") == []
    assert paragraphs("- `x.py` (a): b: c: d\n\nText: one.\n```\nno: no: no: no\n```\n", skip_catalogue=True) == [
        "Text: one."
    ]


def test_the_readme_stays_within_200_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a markdown file (fenced code left out)."""
    return {slug(line.lstrip("#")) for _, line in written_lines(path.read_text()) if re.match(r"#{1,6} ", line)}


def test_every_link_to_a_section_of_the_docs_finds_its_heading():
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = []
    for doc in docs:
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?#([\w-]+)\)", doc.read_text()):
            path = (doc.parent / target).resolve() if target else doc
            if path.exists() and anchor not in anchors(path):
                missing.append(f"{doc.name}: {target}#{anchor}")
    assert not missing, missing


def test_a_heading_s_anchor_is_github_s():
    assert slug("Held-out cases on CPUs, sixth round: the same model, a rank's history") == (
        "held-out-cases-on-cpus-sixth-round-the-same-model-a-ranks-history"
    )
    assert slug("`spmd predict` on links") == "spmd-predict-on-links"
