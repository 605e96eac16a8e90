"""The documents link to what exists: every relative link of the README, the CHANGELOG,
docs/, the packages' READMEs and benchmarks/README.md names a file or folder of the
repository, and a link to ``file.md#anchor`` (or ``#anchor``) names a heading of that file
by its GitHub slug; every module, class, function and option docs/architecture.md names in
code imports from the core; no file writes how many methods or distributions there are. The
README stays a short user's guide: at most 420 lines, no issue numbers."""

from __future__ import annotations

import ast
import importlib
import re
import types
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

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


# ------------------------------------------------------- no written count of the methods
# A new method is its folder and the root pyproject.toml: no file of the repository says how
# many methods (packages, papers), distributions (wheels, sdists) or built artifacts there
# are — the history (CHANGELOG.md) and the recorded results (benchmarks/results/) aside.
NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve thirteen".split()
NOT_COUNTED = ("CHANGELOG.md", "uv.lock", "benchmarks/results/")


def count_pattern(methods: int) -> re.Pattern[str]:
    """A written count of ``methods`` methods, their distributions (and sts-core's) or
    their artifacts (a wheel and an sdist each): "N methods", "N + 1 project wheels",
    "all 2(N + 1)", in words or digits."""

    def number(count: int) -> str:
        return rf"(?:{NUMBERS[count]}|{count})" if count < len(NUMBERS) else str(count)

    distributions, artifacts = number(methods + 1), number(2 * (methods + 1))
    return re.compile(
        "|".join(
            [
                rf"\b{number(methods)}(?:\s+[\w-]+)?\s+(?:methods|papers'?|packages)(?![\w-])",
                rf"\b{distributions}(?:\s+[\w-]+)?\s+(?:distributions|wheels|sdists|packages)"
                r"(?![\w-])",
                rf"\b{artifacts}(?:\s+[\w-]+)?\s+(?:artifacts|files)(?![\w-])",
                rf"\ball\s+(?:{distributions}|{artifacts})\b",
            ]
        ),
        re.I,
    )


def written_counts(files: list[str], root: Path = REPO) -> list[str]:
    """``file:line: words`` for each written count of the repository's methods."""
    pattern = count_pattern(len(list(root.glob("packages/*/pyproject.toml"))))
    found = []
    for name in files:
        if name.startswith(NOT_COUNTED) or not (root / name).is_file():
            continue
        try:
            text = (root / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{name}:{line}: {match.group(0)}")
    return found


def test_no_file_counts_the_methods_or_their_distributions() -> None:
    from doc_commands import repository_files

    counts = written_counts(repository_files())
    assert not counts, "written counts that a new method makes wrong:\n" + "\n".join(counts)


def test_a_written_count_is_found(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / "packages" / name).mkdir(parents=True)
        (tmp_path / "packages" / name / "pyproject.toml").write_text("", encoding="utf-8")
    (tmp_path / "doc.md").write_text(
        "# Three papers' losses\n3 methods, the three packages; four project wheels and 4\n"
        "sdists, all four of them, eight artifacts; all eight.\n"
        "Not: three seeds, five wheels, two methods, four steps, thirty methods.\n",
        encoding="utf-8",
    )
    (tmp_path / "CHANGELOG.md").write_text("three methods\n", encoding="utf-8")
    assert written_counts(["doc.md", "CHANGELOG.md"], tmp_path) == [
        "doc.md:1: Three papers'",
        "doc.md:2: 3 methods",
        "doc.md:2: three packages",
        "doc.md:2: four project wheels",
        "doc.md:2: 4\nsdists",
        "doc.md:3: all four",
        "doc.md:3: eight artifacts",
        "doc.md:3: all eight",
    ]


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


# ---------------------------------------------------------------- the names a page gives
# docs/architecture.md names the core's modules, classes, functions and options in code
# spans; each must import. A name is qualified (`sts_core.training.distill:check_teacher`),
# dotted from a module's or a class's short name (`distill.load_teacher`,
# `TrainingRun.check`), or bare (`check_teacher_data`, `teacher_model`): bare, it is a
# module, a module-level object, a class's attribute or a dataclass field of the core, or a
# test of the repository (`test_…`); an entry-point group (`sts_core.methods`) has
# installed entries. A call's arguments and a keyword's `=` are dropped.
NAMED_DOCUMENTS = ["docs/architecture.md"]
CORE_SRC = REPO / "shared" / "src"
NAME_SPAN = re.compile(r"(?P<name>[A-Za-z_]\w*(?:[.:][A-Za-z_]\w*)*)(?:\(.*\)|=)?")
TEST_SPAN = re.compile(r"(?P<file>[\w./-]+\.py)::(?P<test>\w+)")
# code spans of those pages that are option values or columns, not objects
NOT_OBJECTS = {"auto", "true", "false", "varlen", "block_mask", "score"}


def code_spans(text: str) -> list[str]:
    """The inline code of a markdown text (fenced blocks left out), in order."""
    text = FENCE.sub("", text)
    return [match.group(0).strip("`").strip() for match in INLINE_CODE.finditer(text)]


class CoreIndex:
    """Where each name of ``sts_core`` is defined, read from the sources (nothing imported
    until a name is resolved): modules by their last component, module-level names, and
    the classes whose attributes (inherited ones too) and dataclass fields a bare name may
    be."""

    def __init__(self, src: Path = CORE_SRC) -> None:
        self.modules: dict[str, list[str]] = {}
        self.top: dict[str, list[str]] = {}
        self.classes: list[tuple[str, str]] = []
        for path in sorted(src.rglob("*.py")):
            parts = list(path.relative_to(src).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            module = ".".join(parts)
            self.modules.setdefault(parts[-1], []).append(module)
            for name, is_class in top_level_names(path):
                self.top.setdefault(name, []).append(module)
                if is_class:
                    self.classes.append((module, name))

    def heads(self, name: str) -> list[Any]:
        """The objects a name's first component may be: modules, then module-level objects."""
        found: list[Any] = [importlib.import_module(m) for m in self.modules.get(name, [])]
        found += [getattr(importlib.import_module(m), name) for m in self.top.get(name, [])]
        return found

    def is_member(self, name: str) -> bool:
        """Some class of the core has ``name`` as an attribute or a dataclass field."""
        for module, class_name in self.classes:
            cls = getattr(importlib.import_module(module), class_name)
            if hasattr(cls, name) or name in getattr(cls, "__dataclass_fields__", {}):
                return True
        return False


def top_level_names(path: Path) -> Iterator[tuple[str, bool]]:
    """(name, is a class) for each def, class and assignment at a module's top level."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, isinstance(node, ast.ClassDef)
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        yield from ((t.id, False) for t in targets if isinstance(t, ast.Name))


def attribute_path(start: Any, parts: list[str]) -> bool:
    """``start.a.b…`` exists, importing a package's submodule where an attribute is one."""
    current = start
    for part in parts:
        if not hasattr(current, part) and isinstance(current, types.ModuleType):
            try:
                importlib.import_module(f"{current.__name__}.{part}")
            except ModuleNotFoundError:
                return False
        if not hasattr(current, part):
            fields = getattr(current, "__dataclass_fields__", {})
            return part == parts[-1] and part in fields
        current = getattr(current, part)
    return True


def is_a_test(name: str, file: str | None = None) -> bool:
    """A test function of the repository named ``name`` (in ``file`` when given)."""
    files = [REPO / file] if file else [*REPO.glob("tests/*.py"), *REPO.glob("*/tests/*.py")]
    if not file:
        files += REPO.glob("packages/*/tests/*.py")
    pattern = re.compile(rf"^\s*def {re.escape(name)}\(", re.M)
    return any(path.is_file() and pattern.search(path.read_text("utf-8")) for path in files)


def resolves(span: str, index: CoreIndex) -> bool:
    """The name a code span gives exists (see above); a span that is no name resolves."""
    test = TEST_SPAN.fullmatch(span)
    if test:
        return is_a_test(test["test"], test["file"])
    match = NAME_SPAN.fullmatch(span)
    if match is None or span in NOT_OBJECTS:
        return True
    name = match["name"]
    if metadata.entry_points(group=name):
        return True
    if ":" in name:
        module, _, qualified = name.partition(":")
        try:
            return attribute_path(importlib.import_module(module), qualified.split("."))
        except ModuleNotFoundError:
            return False
    head, *rest = name.split(".")
    if any(attribute_path(found, rest) for found in index.heads(head)):
        return True
    if head.startswith("test_") and not rest:
        return is_a_test(head)
    return not rest and index.is_member(head)


def unresolved_names(document: Path, index: CoreIndex) -> list[str]:
    return [span for span in code_spans(document.read_text("utf-8")) if not resolves(span, index)]


@pytest.fixture(scope="module")
def core_index() -> CoreIndex:
    return CoreIndex()


@pytest.mark.parametrize("document", NAMED_DOCUMENTS)
def test_every_name_a_page_gives_imports(document: str, core_index: CoreIndex) -> None:
    missing = unresolved_names(REPO / document, core_index)
    assert not missing, (
        f"{document} names what the core does not have (renamed or moved?): {missing}; a "
        "value or column written as code goes in NOT_OBJECTS"
    )


def test_a_renamed_or_moved_name_is_reported(tmp_path: Path, core_index: CoreIndex) -> None:
    document = tmp_path / "doc.md"
    document.write_text(
        "`sts_core.training.distill:check_teacher` `distill.load_teacher` `TrainingRun.check`\n"
        "`training.encoder_setup.build_encoder` `teacher_model` `SentenceEncoder.__init__`\n"
        "`trainer_class(method, config)` `method=` `if TYPE_CHECKING:` `auto` `a/b.py`\n"
        "`shared/tests/test_structure.py::"
        "test_no_import_cycle_in_the_sources_benchmarks_or_tools`\n"
        "`sts_core.methods`\n"
        "```\n`training.gone`\n```\n"
        "`training.model.build_encoder` `sts_core.training.distill:gone` `distill.gone`\n"
        "`TrainingRun.gone` `gone_function` `sts_core.gone` `gone.module:f` `sts_core.gone:f`\n"
        "`shared/tests/test_structure.py::test_gone` `test_gone`\n",
        encoding="utf-8",
    )
    assert unresolved_names(document, core_index) == [
        "training.model.build_encoder",
        "sts_core.training.distill:gone",
        "distill.gone",
        "TrainingRun.gone",
        "gone_function",
        "sts_core.gone",
        "gone.module:f",
        "sts_core.gone:f",
        "shared/tests/test_structure.py::test_gone",
        "test_gone",
    ]
