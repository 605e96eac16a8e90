"""``tools/mutation.py`` without running mutmut: how it names and tallies survivors, which
tests it maps to a module, and that every equivalent mutant it lists still names a line of
the current source (a stale entry would hide a new survivor)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("mutation_tool", ROOT / "tools/mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_tool"] = module
    spec.loader.exec_module(module)
    return module


DIFF = """--- src/sts_core/x.py
+++ src/sts_core/x.py
@@ -1,3 +1,3 @@
 def f(a):
-    return a + 1
+    return a - 1
"""


def test_survivors_are_named_by_module_function_and_change(tool) -> None:
    assert tool.readable_function("sts_core.x.xǁLossǁforward__mutmut_3") == "Loss.forward"
    assert tool.readable_function("sts_core.x.x_f__mutmut_12") == "f"
    row = {"name": "sts_core.x.x_f__mutmut_1", "status": "survived", "diff": DIFF}
    assert tool.equivalence_key("shared/src/sts_core/x.py", row) == (
        "shared/src/sts_core/x.py:f: return a + 1 => return a - 1"
    )


def test_the_tally_counts_each_column_and_applies_the_equivalents(tool, monkeypatch) -> None:
    key = "shared/src/sts_core/x.py:f: return a + 1 => return a - 1"
    monkeypatch.setitem(tool.EQUIVALENT, key, "a reason")
    rows = [
        {"name": "sts_core.x.x_f__mutmut_1", "status": "survived", "diff": DIFF},
        {"name": "sts_core.x.x_f__mutmut_2", "status": "killed", "diff": None},
        {"name": "sts_core.x.x_f__mutmut_3", "status": "timeout", "diff": None},
        {
            "name": "sts_core.x.x_g__mutmut_1",
            "status": "survived",
            "diff": DIFF.replace("+ 1", "* 2"),
        },
        {"name": "sts_core.x.x_h__mutmut_1", "status": "no tests", "diff": DIFF},
    ]
    tally = tool.classify("shared/src/sts_core/x.py", rows)
    assert dict(tally) == {
        "mutants": 5,
        "equivalent": 1,
        "killed": 1,
        "timeout": 1,
        "surviving": 1,
        "no tests": 1,
    }
    assert rows[0]["reason"] == "a reason" and "reason" not in rows[3]


def test_a_package_module_is_mapped_to_its_own_tests(tool) -> None:
    tests = tool.tests_for("packages/bsc/src/sts_bsc/loss.py")
    assert tests[:2] == [
        "packages/bsc/tests/test_loss.py",
        "packages/bsc/tests/test_loss_settings.py",
    ]
    assert "packages/bsc/tests/test_end_to_end_value.py" in tests
    assert tool.member_root("packages/bsc/src/sts_bsc/loss.py") == "packages/bsc"
    assert tool.member_root("shared/src/sts_core/soup.py") == "shared"


def test_every_module_has_mapped_tests_and_only_per_package_ones_may_be_absent(tool) -> None:
    """A per-package test file of the shared template (``test_wiring_values.py``) may be
    missing from a package (the run skips it and says so); every other mapped file exists."""
    modules = tool.expand_modules(ROOT, tool.DEFAULT_MODULES)
    for module in modules:
        assert any((ROOT / t).is_file() for t in tool.tests_for(module)), module
    missing = {t for m in modules for t in tool.tests_for(m) if not (ROOT / t).is_file()}
    assert {Path(t).name for t in missing} <= {"test_wiring_values.py"}


def test_every_equivalent_mutant_names_a_line_of_the_current_source(tool) -> None:
    """The key's module exists, is mutated by the default run, and its original line is
    still in the module: change the line and the entry must be reviewed again."""
    modules = set(tool.expand_modules(ROOT, tool.DEFAULT_MODULES))
    stale = []
    for key, reason in tool.EQUIVALENT.items():
        module, _, rest = key.partition(":")
        removed = rest.partition(": ")[2].partition(" => ")[0]
        source = (ROOT / module).read_text(encoding="utf-8") if module in modules else ""
        lines = [part.strip() for part in removed.split(" / ")]
        if not reason or not source or not all(line in source for line in lines):
            stale.append(key)
    assert stale == []
