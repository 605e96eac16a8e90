"""The shape of the source: no class over 300 lines, no import cycle among the modules of
``sts_core``, the method packages, ``benchmarks/`` and ``tools/`` (one graph: a benchmark
importing ``sts_core`` is an arrow like any other) — counting the imports inside functions
(which run later, but still tie the modules together) and the package ``__init__`` an
import runs first; only those under ``if TYPE_CHECKING:`` are left out. Both read the files
with ``ast`` (nothing is imported)."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "shared" / "src"
SOURCE_ROOTS = [CORE, *sorted((ROOT / "packages").glob("*/src"))]
# Each a folder on sys.path: the benchmarks and tools are scripts run from their folder
# (``import _common``, ``from grid_search.cells import …``), the sources are installed.
IMPORT_ROOTS = [*SOURCE_ROOTS, ROOT / "benchmarks", ROOT / "tools"]

MAX_CLASS_LINES = 300


# ----------------------------------------------------------------- class length
def class_lengths(roots: list[Path], base: Path = ROOT) -> Iterator[tuple[str, int]]:
    """``("path:Class", lines)`` of every class (nested ones too) under ``roots``, the path
    relative to ``base``; the lines from ``class`` to the end of its body."""
    for root in roots:
        for file in sorted(root.rglob("*.py")):
            tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    where = f"{file.relative_to(base).as_posix()}:{node.name}"
                    yield where, node.end_lineno - node.lineno + 1


def test_no_class_is_over_300_lines() -> None:
    lengths = dict(class_lengths(SOURCE_ROOTS))
    offenders = [
        f"{where}: {lines} lines" for where, lines in lengths.items() if lines > MAX_CLASS_LINES
    ]
    assert not offenders, f"classes over {MAX_CLASS_LINES} lines: {'; '.join(offenders)}"


def test_the_class_counter_counts_every_class_from_class_to_its_end(tmp_path: Path) -> None:
    (tmp_path / "long.py").write_text(
        "class Long:\n" + "    x = 1\n" * MAX_CLASS_LINES + "\n\ndef f():\n"
        "    class Inner:\n        pass\n",
        encoding="utf-8",
    )
    assert dict(class_lengths([tmp_path], base=tmp_path)) == {
        "long.py:Long": MAX_CLASS_LINES + 1,
        "long.py:Inner": 2,
    }


# ----------------------------------------------------------------- import cycles
def module_files(src: Path, top: str) -> dict[str, Path]:
    """Module name → file for the package ``top`` under ``src`` (a package is its
    ``__init__``)."""
    modules = {}
    for file in sorted((src / top).rglob("*.py")):
        parts = list(file.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = file
    return modules


def root_modules(src: Path) -> dict[str, Path]:
    """Module name → file of every module that the folder ``src`` gives when it is on
    ``sys.path``: its scripts (``src/_common.py`` is ``_common``) and its packages (a
    folder with an ``__init__.py``, by :func:`module_files`)."""
    modules = {file.stem: file for file in sorted(src.glob("*.py"))}
    for init in sorted(src.glob("*/__init__.py")):
        modules.update(module_files(src, init.parent.name))
    return modules


def is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return name == "TYPE_CHECKING"


def runtime_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that can run: at module level and inside functions, but not
    those under ``if TYPE_CHECKING:`` (read by type checkers only)."""
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and is_type_checking(node.test):
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))


def imported_modules(name: str, is_package: bool, tree: ast.Module, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` imports (:func:`runtime_imports`):
    ``import a.b`` imports ``a.b``; ``from a import b`` imports ``a.b`` when that is a
    module, else ``a``; relative imports are resolved against the module's package. An
    import of ``a.b.c`` runs the package ``a.b`` first, so it counts too, unless ``name``
    lies inside ``a.b`` (then ``a.b`` is already being imported)."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in runtime_imports(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for target in targets:
            while target and target not in known:  # import a.b.c of a non-module c: a.b
                target = target.rpartition(".")[0]
            if target:
                found.add(target)
                found.update(enclosing_packages(target, package, known))
    return found


def enclosing_packages(target: str, package: str, known: set[str]) -> set[str]:
    """The packages of ``known`` that importing ``target`` runs first (``a.b`` for
    ``a.b.c``), less those that enclose ``package``, the importer's own."""
    parts = target.split(".")
    enclosing = {".".join(parts[:end]) for end in range(1, len(parts))}
    own = {package, *enclosing_packages_of(package)}
    return {p for p in enclosing if p in known and p not in own}


def enclosing_packages_of(package: str) -> set[str]:
    parts = package.split(".")
    return {".".join(parts[:end]) for end in range(1, len(parts))}


def import_graph(src: Path, top: str) -> dict[str, set[str]]:
    """Module → the modules of the same top package it imports (:func:`imported_modules`)."""
    return graph_of(module_files(src, top))


def roots_import_graph(roots: list[Path]) -> dict[str, set[str]]:
    """Module → the modules it imports, over all the modules of the folders ``roots``
    (:func:`root_modules`), across folders too. A name two folders give is refused: which
    of the two an import means would depend on the order of ``sys.path``."""
    files: dict[str, Path] = {}
    for root in roots:
        for name, file in root_modules(root).items():
            if name in files:
                raise ValueError(f"module {name} is both {files[name]} and {file}")
            files[name] = file
    return graph_of(files)


def graph_of(files: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module → the modules of ``files`` it imports (:func:`imported_modules`)."""
    known = set(files)
    return {
        name: imported_modules(
            name,
            file.name == "__init__.py",
            ast.parse(file.read_text(encoding="utf-8"), filename=str(file)),
            known,
        )
        for name, file in files.items()
    }


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, …, a]``) in each strongly connected component that has one
    (:func:`looping_components`)."""
    return [cycle_through(graph, component) for component in looping_components(graph)]


def looping_components(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components (sorted modules) that hold a cycle (Tarjan's
    algorithm; a module importing itself is a cycle too)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [
        component
        for component in components
        if len(component) > 1 or component[0] in graph.get(component[0], ())
    ]


def loop_ties(graph: Mapping[str, set[str]], component: list[str]) -> list[str]:
    """``a → b`` for each import between two modules of ``component``: every tie that one
    loop of modules has, so that none of them is missed when the loop is broken."""
    members = set(component)
    return [f"{a} → {b}" for a in component for b in sorted(graph[a] & members)]


def cycle_through(graph: Mapping[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle from the first module of ``component`` back to it, inside it."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for successor in sorted(graph.get(node, ())):
                if successor == start:
                    return [*paths[node], start]
                if successor in members and successor not in paths:
                    paths[successor] = [*paths[node], successor]
                    following.append(successor)
        frontier = following
    raise AssertionError(f"{component} is not a cycle")  # pragma: no cover


def test_the_cycle_finder_finds_a_cycle_and_only_cycles() -> None:
    graph = {
        "a": {"b"},
        "b": {"c", "d"},
        "c": {"a"},  # a → b → c → a
        "d": {"e"},
        "e": set(),
        "f": {"f"},  # a module importing itself
        "g": {"a"},  # leads into the cycle, not part of it
    }
    assert sorted(import_cycles(graph)) == [["a", "b", "c", "a"], ["f", "f"]]
    del graph["c"]
    del graph["f"]
    assert import_cycles(graph) == []


def write_package(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


def test_the_import_graph_counts_imports_in_functions_and_not_type_checking_ones(
    tmp_path: Path,
) -> None:
    write_package(
        tmp_path / "pkg",
        {
            "__init__.py": "from pkg.sub import thing\n",
            "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.b\n"
            "def f():\n    import pkg.c\n",
            "b.py": "from . import c\nfrom .sub.d import name\n",
            "c.py": "import pkg.sub.d\n"
            "try:\n    from pkg import a\nexcept ImportError:\n    pass\n",
            "sub/__init__.py": "thing = 1\n",
            "sub/d.py": "from .. import b\nfrom ..sub import thing\n",
        },
    )
    assert import_graph(tmp_path, "pkg") == {
        "pkg": {"pkg.sub"},
        "pkg.a": {"pkg.c"},  # inside a function: counted; under TYPE_CHECKING: not
        "pkg.b": {"pkg.c", "pkg.sub.d", "pkg.sub"},  # pkg.sub.d runs pkg.sub first
        "pkg.c": {"pkg.sub.d", "pkg.sub", "pkg.a"},
        "pkg.sub": set(),
        "pkg.sub.d": {"pkg.b", "pkg.sub"},
    }
    assert import_cycles(import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.c", "pkg.a"]]


def test_a_cycle_through_a_package_init_is_found(tmp_path: Path) -> None:
    """``registry`` imports ``train.config``, which runs ``train/__init__``, which imports
    ``train.run``, which imports ``registry``: a cycle no import statement names."""
    write_package(
        tmp_path / "pkg",
        {
            "__init__.py": "",
            "registry.py": "from pkg.train.config import Config\n",
            "train/__init__.py": "from pkg.train.run import run\n",
            "train/config.py": "class Config: ...\n",
            "train/run.py": "from pkg.train.config import Config\n"
            "def run():\n    from pkg.registry import X\n",
        },
    )
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.train.run"] == {"pkg.train.config", "pkg.registry"}  # its own package: not
    assert import_cycles(graph) == [["pkg.registry", "pkg.train", "pkg.train.run", "pkg.registry"]]


def test_the_graph_of_several_roots_has_their_scripts_packages_and_the_arrows_between(
    tmp_path: Path,
) -> None:
    """A folder of scripts (as ``benchmarks/``): its scripts import each other and its
    package by their top-level names, and the installed source; a cycle among the
    scripts is found, one through the source too."""
    write_package(tmp_path / "src" / "pkg", {"__init__.py": "", "a.py": "import json\n"})
    write_package(
        tmp_path / "scripts",
        {
            "_common.py": "import pkg.a\ndef f():\n    import helper\n",
            "helper.py": "import _common\nfrom grid import cells\n",
            "grid/__init__.py": "",
            "grid/cells.py": "import _common as common\nfrom pkg import a\n",
            "notes/readme.py": "import helper\n",  # no __init__.py: no package, not read
        },
    )
    graph = roots_import_graph([tmp_path / "src", tmp_path / "scripts"])
    assert graph == {
        "pkg": set(),
        "pkg.a": set(),
        "_common": {"pkg", "pkg.a", "helper"},
        "helper": {"_common", "grid", "grid.cells"},
        "grid": set(),
        "grid.cells": {"_common", "pkg", "pkg.a"},
    }
    assert import_cycles(graph) == [["_common", "helper", "_common"]]
    write_package(tmp_path / "scripts", {"grid/cells.py": "import helper\n"})
    graph = roots_import_graph([tmp_path / "src", tmp_path / "scripts"])
    assert looping_components(graph) == [["_common", "grid.cells", "helper"]]
    assert loop_ties(graph, ["_common", "grid.cells", "helper"]) == [
        "_common → helper",
        "grid.cells → helper",
        "helper → _common",
        "helper → grid.cells",
    ]


def test_two_roots_giving_one_module_name_are_refused(tmp_path: Path) -> None:
    write_package(tmp_path, {"one/m.py": "", "two/m.py": ""})
    with pytest.raises(ValueError, match="module m is both"):
        roots_import_graph([tmp_path / "one", tmp_path / "two"])


@pytest.fixture(scope="module")
def repository_graph() -> dict[str, set[str]]:
    """The import graph of :data:`IMPORT_ROOTS`, read once for the tests below."""
    return roots_import_graph(IMPORT_ROOTS)


def test_the_import_graph_has_every_file_of_the_sources_benchmarks_and_tools(
    repository_graph: dict[str, set[str]],
) -> None:
    graph = repository_graph
    read = {file for root in IMPORT_ROOTS for file in root_modules(root).values()}
    assert read == {file for root in IMPORT_ROOTS for file in root.rglob("*.py")}
    assert {"sts_core", "sts_cosent", "_common", "grid_search.search", "generate_docs"} <= set(
        graph
    )
    assert graph["quality_search"] >= {"_common", "grid_search", "grid_search.cells"}
    assert "sts_core.command_files" in graph["record_results"]  # a tool, into the source


def test_no_import_cycle_in_the_sources_benchmarks_or_tools(
    repository_graph: dict[str, set[str]],
) -> None:
    graph = repository_graph
    loops = [
        f"{' → '.join(cycle_through(graph, component))} (all its ties: "
        f"{', '.join(loop_ties(graph, component))})"
        for component in looping_components(graph)
    ]
    assert not loops, f"import cycles: {'; '.join(loops)}"


# ----------------------------------------------------------------- option checks
ARCHITECTURE = ROOT / "docs" / "architecture.md"
CHECKED_OPTIONS = ("teacher_model", "padding_free", "score_range", "matryoshka_dims")


def raising_functions(src: Path, top: str, option: str) -> set[str]:
    """``module:function`` (``Class.method`` for methods) of each function under ``src/top``
    that raises an error whose message text names ``option``, or (for a function that
    returns the message for its callers to raise) returns a text naming it in a message."""
    found = set()
    for name, file in module_files(src, top).items():
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
        for where, node in functions_of(tree):
            for statement in ast.walk(node):
                if isinstance(statement, ast.Raise | ast.Return) and names_option(
                    statement, option
                ):
                    found.add(f"{name}:{where}")
    return found


def functions_of(tree: ast.Module, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    """(qualified name, node) of each function and method, nested ones under their own."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef):
            yield from functions_of(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield f"{prefix}{node.name}", node


def names_option(statement: ast.Raise | ast.Return, option: str) -> bool:
    """The raised exception's or the returned value's string parts name ``option`` as a
    word (``score_range [``, not ``score_ranges``), in an error message (a raise), or in
    a returned f-string message."""
    value = statement.exc if isinstance(statement, ast.Raise) else statement.value
    if value is None or (
        isinstance(statement, ast.Return) and not isinstance(value, ast.JoinedStr)
    ):
        return False
    texts = [
        c.value for c in ast.walk(value) if isinstance(c, ast.Constant) and isinstance(c.value, str)
    ]
    return any(re.search(rf"\b{option}\b", text) for text in texts)


def documented_checks(option: str) -> set[str]:
    """The functions docs/architecture.md's table says check ``option``."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    table = text.split("<!-- option-checks -->")[1].split("<!-- end option-checks -->")[0]
    rows = [line.split("|") for line in table.splitlines() if line.startswith(f"| `{option}`")]
    return {re.search(r"`(sts_core[^`]+)`", row[3]).group(1) for row in rows}


def test_each_option_is_checked_where_this_page_says() -> None:
    for option in CHECKED_OPTIONS:
        found = raising_functions(CORE, "sts_core", option)
        assert found == documented_checks(option), (
            f"{option}: the functions raising an error naming it are {sorted(found)}; "
            f"docs/architecture.md lists {sorted(documented_checks(option))}: check it in "
            "the one function of its concern (or document a new concern there)"
        )


def test_the_check_finder_finds_raises_and_returned_messages_only(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg" / "m.py").write_text(
        "class C:\n"
        "    def check(self, x):\n"
        "        raise ValueError(f'opt must be > 0, got {x}')\n"
        "def problem(x):\n"
        "    return f'opt {x} is outside'\n"
        "def plain():\n"
        "    return 'opt'\n"  # a returned constant, not a message: not counted
        "def other():\n"
        "    raise ValueError('options are wrong')\n",  # not the word opt
        encoding="utf-8",
    )
    assert raising_functions(tmp_path, "pkg", "opt") == {"pkg.m:C.check", "pkg.m:problem"}


def test_no_two_core_modules_share_a_name() -> None:
    """``model.py`` twice, ``registry.py`` twice: a reader (and a traceback) cannot tell
    them apart by name."""
    names: dict[str, list[str]] = {}
    for name, file in module_files(CORE, "sts_core").items():
        if file.name != "__init__.py":
            names.setdefault(file.name, []).append(name)
    shared = {file: modules for file, modules in names.items() if len(modules) > 1}
    assert not shared, f"modules sharing a file name: {shared}"


def standard_library_imports_in_functions(src: Path) -> list[str]:
    """``file:line`` of each standard-library import inside a function under ``src``."""
    found = []
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for statement in ast.walk(node):
                if isinstance(statement, ast.Import):
                    names = [alias.name for alias in statement.names]
                elif isinstance(statement, ast.ImportFrom) and statement.level == 0:
                    names = [statement.module or ""]
                else:
                    continue
                if any(name.partition(".")[0] in sys.stdlib_module_names for name in names):
                    found.append(f"{path.relative_to(src)}:{statement.lineno}")
    return found


def test_imports_inside_functions_are_of_libraries_that_cost_start_up_time(
    tmp_path: Path,
) -> None:
    """A function-level import must buy something (docs/architecture.md): a heavy or
    optional library loaded on first use. The standard library's are at the top."""
    assert standard_library_imports_in_functions(CORE) == []
    write_package(tmp_path, {"m.py": "def f():\n    import json\n    import torch\n"})
    assert standard_library_imports_in_functions(tmp_path) == ["m.py:2"]
