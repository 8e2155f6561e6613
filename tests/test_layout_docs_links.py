"""README and the pages of docs/ as a reader follows them: every relative link (and the heading
it names after ``#``) leads somewhere, README stays short enough to read as a first screen and
an index, every docs page is reachable from it, and its test command is the one CI runs."""

# weight: unit

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.MULTILINE)


def _prose(path: Path) -> str:
    """The text of a markdown file without its fenced code blocks."""
    return _FENCE.sub("", path.read_text("utf-8"))


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``path``: the heading's text as rendered
    (no backticks, a link's text only), lower-cased, punctuation dropped, spaces as hyphens, a
    repeated one numbered."""
    anchors: set[str] = set()
    counts: dict[str, int] = {}
    for heading in _HEADING.findall(_prose(path)):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        count = counts.get(slug, 0)
        counts[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _relative_links(path: Path) -> list[str]:
    return [target for target in _LINK.findall(_prose(path))
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def test_there_are_docs_pages_with_links():
    assert len(PAGES) >= 10 and len(_relative_links(README)) >= len(PAGES)


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file_and_heading(path: Path):
    broken = []
    for target in _relative_links(path):
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.is_file():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    assert broken == []


def test_the_readme_is_at_most_300_lines():
    assert len(README.read_text("utf-8").splitlines()) <= 300


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in _relative_links(README)}
    assert [page.name for page in PAGES if page.resolve() not in linked] == []


def test_the_readme_test_command_is_what_ci_runs():
    """The two set-up commands stay as written, and CI runs exactly the test one."""
    readme = README.read_text("utf-8")
    assert "make serve   # set up, then run collector + replay worker" in readme
    assert "make test    # set up, then lint and run the whole test suite" in readme
    ci = (ROOT / ".ci" / "run").read_text("utf-8").strip().splitlines()
    assert ci[-1] == "make test"


def test_the_anchor_rules_are_githubs():
    """A heading with code, a number and punctuation gets the anchor GitHub gives it."""
    cli = ROOT / "docs" / "cli.md"
    assert {"rewind-record", "which-store-which-worker", "exit-codes"} <= _anchors(cli)
    services = ROOT / "docs" / "services.md"
    assert "4-turn-it-into-a-test" in _anchors(services)
