"""The documents link to what exists: every relative link of the README, the CHANGELOG,
docs/, the packages' READMEs and benchmarks/README.md names a file or folder of the
repository, and a link to ``file.md#anchor`` (or ``#anchor``) names a heading of that file
by its GitHub slug. The README stays a short user's guide: at most 420 lines, no issue
numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 420

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.M | re.S)
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto:, …


def documents() -> list[Path]:
    found = {REPO / "README.md", REPO / "CHANGELOG.md", REPO / "benchmarks" / "README.md"}
    found.update((REPO / "docs").glob("*.md"))
    found.update((REPO / "packages").glob("*/README.md"))
    return sorted(path for path in found if path.is_file())


def without_code(text: str) -> str:
    """The text with fenced blocks and inline code blanked (their brackets are no links)."""
    text = FENCE.sub(lambda match: "\n" * match.group(0).count("\n"), text)
    return INLINE_CODE.sub(" ", text)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: the rendered text, lower-cased, with every character
    but letters, digits, ``_``, ``-`` and spaces removed, spaces turned into ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown file (a repeated slug gets -1, -2, … as on GitHub)."""
    seen: dict[str, int] = {}
    result = set()
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    for match in HEADING.finditer(text):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def broken_links(document: Path, root: Path = REPO) -> list[str]:
    """``target (why)`` for each relative link of ``document`` that names nothing."""
    problems = []
    for target in LINK.findall(without_code(document.read_text(encoding="utf-8"))):
        if EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (document.parent / file_part).resolve() if file_part else document
        if not linked.exists():
            problems.append(f"{target} (no such file)")
            continue
        if root.resolve() not in (linked, *linked.parents):
            problems.append(f"{target} (outside the repository)")
            continue
        markdown = linked.is_file() and linked.suffix == ".md"
        if anchor and markdown and anchor not in anchors(linked):
            problems.append(f"{target} (no heading #{anchor} in {linked.name})")
    return problems


@pytest.mark.parametrize("document", documents(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_names_a_file_and_heading(document: Path) -> None:
    problems = broken_links(document)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_documents_are_found() -> None:
    names = {str(path.relative_to(REPO)) for path in documents()}
    assert {"README.md", "CHANGELOG.md", "benchmarks/README.md"} <= names
    assert any(name.startswith("docs/") for name in names)
    assert any(name.startswith("packages/") for name in names)


def test_the_readme_is_short_and_has_no_issue_numbers() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    assert re.findall(r"\bissues? \d+", text, flags=re.I) == []


def test_slugs_follow_github() -> None:
    assert slug("Reference numbers (measured here)") == "reference-numbers-measured-here"
    assert slug("The loss (`loss: bsc`)") == "the-loss-loss-bsc"
    assert slug("SIFTER-LSTM (§4, `sts-sifter-lstm`)") == "sifter-lstm-4-sts-sifter-lstm"
    assert slug("CPU, several processes — GPUs") == "cpu-several-processes--gpus"
    assert slug("Data (`DataArguments`)") == "data-dataarguments"


def test_a_broken_link_or_anchor_is_reported(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## A part\n\n## A part\n", encoding="utf-8")
    (tmp_path / "folder").mkdir()
    document = tmp_path / "doc.md"
    document.write_text(
        "# Doc\n\n[ok](other.md#a-part) [ok](other.md#a-part-1) [ok](#doc) [ok](folder)\n"
        "[web](https://example.org/missing) `[code](missing.md)`\n\n"
        "```\n[block](missing.md)\n```\n\n"
        "[gone](missing.md) [no anchor](other.md#nothing) [here](#nowhere)\n",
        encoding="utf-8",
    )
    assert broken_links(document, root=tmp_path) == [
        "missing.md (no such file)",
        "other.md#nothing (no heading #nothing in other.md)",
        "#nowhere (no heading #nowhere in doc.md)",
    ]
