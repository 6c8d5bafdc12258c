"""The documents a user reads: README stays a short front door, every link between the documents reaches a file
and a heading that exist, and no table cell grows into a paragraph."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.specs import ROOT

DOCUMENTS = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]*)\)")
CODE_BLOCK = re.compile(r"^```.*?^```", re.S | re.M)


def anchors(document: Path) -> set[str]:
    """The anchors GitHub makes of a document's headings: lower case, punctuation dropped, spaces as '-'."""
    headings = re.findall(r"^#+ (.*)$", CODE_BLOCK.sub("", document.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_readme_is_a_short_front_door_that_links_every_doc() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    linked = {target.split("#")[0] for target in LINK.findall(readme)}
    pages = {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")}
    assert sorted(pages - linked) == [], "pages README does not link"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_reaches_a_file_and_heading(document: Path) -> None:
    broken = []
    for target in LINK.findall(CODE_BLOCK.sub("", document.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_table_cell_is_a_paragraph(document: Path) -> None:
    text = CODE_BLOCK.sub("", document.read_text(encoding="utf-8"))
    rows = [line for line in text.splitlines() if line.startswith("|")]
    long_cells = [cell[:60] for row in rows for cell in re.split(r"(?<!\\)\|", row) if len(cell.strip()) > 300]
    assert long_cells == []
