"""Prose that can be skimmed, read from the source (nothing is imported).

- A module docstring in `yuxi_dash/`, `app_pages/` or `app.py` is at most
  `MAX_DOCSTRING_LINES` lines: what the module owns and its rules. History
  and measured figures belong in commit messages and `bench/`.
- No paragraph, list item or table cell of README.md or docs/*.md is over
  `MAX_WORDS` words. Fenced code blocks are not prose and are skipped.

Each failure names the file and the line where the offender starts.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_DOCSTRING_LINES = 15  # the rule is 15 lines: what the module owns and its rules
MAX_WORDS = 200

_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def _source_files() -> list[Path]:
    return [
        *sorted((REPO / "yuxi_dash").rglob("*.py")),
        *sorted((REPO / "app_pages").glob("*.py")),
        REPO / "app.py",
    ]


def _prose_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _words(text: str) -> int:
    return len(text.split())


def prose_blocks(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, text) of every paragraph, list item and table cell.

    A paragraph ends at a blank line, a heading, a fence or the next list item;
    a list item's indented continuation lines belong to it.
    """
    lines = text.splitlines()
    in_fence = False
    start = 0
    block: list[str] = []

    def flush() -> Iterator[tuple[int, str]]:
        if block:
            yield start, " ".join(block)
            block.clear()

    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            yield from flush()
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if not stripped or stripped.startswith("#"):
            yield from flush()
            continue
        if stripped.startswith("|"):
            yield from flush()
            for cell in stripped.strip("|").split("|"):
                yield number, cell
            continue
        item = _LIST_ITEM.match(line)
        if item:
            yield from flush()
            stripped = line[item.end() :].strip()
        if not block:
            start = number
        block.append(stripped)
    yield from flush()


def test_module_docstrings_are_short() -> None:
    long: list[str] = []
    for path in _source_files():
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=True)
        if docstring is None:
            continue
        count = len(docstring.splitlines())
        if count > MAX_DOCSTRING_LINES:
            long.append(f"{path.relative_to(REPO)}: {count} lines")
    assert not long, (
        f"module docstrings over {MAX_DOCSTRING_LINES} lines (say what the module owns "
        "and its rules; history goes to commit messages): " + "; ".join(long)
    )


def test_readme_and_docs_paragraphs_are_short() -> None:
    long: list[str] = []
    for path in _prose_files():
        for line, block in prose_blocks(path.read_text(encoding="utf-8")):
            if _words(block) > MAX_WORDS:
                long.append(f"{path.relative_to(REPO)}:{line}: {_words(block)} words")
    assert not long, f"paragraphs or table cells over {MAX_WORDS} words: " + "; ".join(long)


def test_the_checker_sees_paragraphs_items_and_cells() -> None:
    text = "\n".join(
        [
            "one two",
            "three",
            "",
            "- four five",
            "  six",
            "- seven",
            "```",
            "not prose at all",
            "```",
            "| a b | c |",
        ]
    )
    assert [(n, _words(b)) for n, b in prose_blocks(text)] == [
        (1, 3),
        (4, 3),
        (6, 1),
        (10, 2),
        (10, 1),
    ]
