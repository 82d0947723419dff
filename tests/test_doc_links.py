"""Every relative link in README.md and docs/ leads somewhere: the file exists and, for a
`#fragment`, the page has a heading whose anchor it is (GitHub's rule: lower case,
punctuation dropped, spaces to hyphens, a repeated heading numbered -1, -2, ...).
A page renamed or a heading reworded breaks the links to it, and this test names them."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *ROOT.glob("docs/**/*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: Counter[str] = Counter()
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        base = anchor(heading)
        found.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return found


def relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    return [link for link in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", link)]


def shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def broken_links(page: Path) -> list[str]:
    broken = []
    for link in relative_links(page):
        path, _, fragment = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no file {shown(target)}")
        elif fragment and target.suffix == ".md" and fragment not in anchors(target):
            broken.append(f"{link}: no heading with anchor #{fragment} in {shown(target)}")
    return broken


@pytest.mark.parametrize("page", [p for p in PAGES if p.exists()], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_anchor_follows_githubs_rule() -> None:
    assert anchor("Seeds until a precision target (`seeds: until`)") == "seeds-until-a-precision-target-seeds-until"
    assert anchor("The quickstart's wall time") == "the-quickstarts-wall-time"
    assert anchor("1. Run it") == "1-run-it"


def test_a_wrong_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title\n\n## Real heading\n\n[x](b.md) [y](#real-heading) [z](#missing)\n")
    found = broken_links(tmp_path / "a.md")
    assert [line.split(":")[0] for line in found] == ["b.md", "#missing"]
