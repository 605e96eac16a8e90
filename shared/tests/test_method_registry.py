"""The method registry (entry-point group ``sts_core.methods``): a name means one method.

Two installed distributions declaring one method name are refused, naming both, wherever
the name is asked for (``sts-train --method``, ``--check_only``, ``sts-launch NAME``) and
in the whole list (``load_methods``: the benchmarks' rows, the method table); a duplicate
of a name the run does not ask for does not stop it. The second distribution here is a
real one as far as ``importlib.metadata`` is concerned: a ``.dist-info`` folder on
``sys.path``, its entry point a module beside it."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from sts_core import launch
from sts_core.testing import refusal, write_fixture_recipe
from sts_core.training.method_registry import CORE_METHOD, installed_method, load_methods
from sts_core.training.parser import ConfigError
from sts_core.training.run import main as sts_train

REPO = Path(__file__).resolve().parents[2]
CPU_CONFIG = REPO / "accelerate_configs" / "cpu.yaml"
FIXTURES = Path(__file__).parent / "fixtures" / "training"
FORK = '''
from dataclasses import dataclass

from sts_core.losses.similarity import CosineMSELoss
from sts_core.method import Method
from sts_core.training import BaseConfig


@dataclass
class ForkConfig(BaseConfig):
    """A fork's config."""


METHOD = Method(name={name!r}, title="a fork", config=ForkConfig, losses=(CosineMSELoss,))
'''
_modules = itertools.count()


def install_fork(root: Path, monkeypatch: pytest.MonkeyPatch, name: str, declared: str) -> str:
    """Put on ``sys.path`` the distribution ``sts-fork`` whose entry point ``declared``
    names a Method called ``name`` (in a module of its own); return that entry point's
    value."""
    module = f"sts_fork_{next(_modules)}"
    root.mkdir()
    (root / f"{module}.py").write_text(FORK.format(name=name), encoding="utf-8")
    info = root / "sts_fork-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sts-fork\nVersion: 1.0\n", encoding="utf-8"
    )
    value = f"{module}:METHOD"
    entry_points = f"[sts_core.methods]\n{declared} = {value}\n"
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))
    return value


def assert_names_both(line: str, fork_value: str) -> None:
    assert "method 'cosent' is declared by 2 installed distributions" in line, line
    assert "sts-cosent (cosent = sts_cosent.method:METHOD)" in line, line
    assert f"sts-fork (cosent = {fork_value})" in line, line


def test_sts_train_and_check_only_refuse_a_method_two_distributions_declare(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    fork = install_fork(tmp_path / "site", monkeypatch, "cosent", "cosent")
    recipe = write_fixture_recipe(
        tmp_path / "recipe.yaml",
        "the core's settings only",
        tiny_bert_dir,
        FIXTURES / "sts-train.csv",
        FIXTURES / "sts-dev.csv",
        tmp_path / "out",
    )
    for extra in ([], ["--check_only", "true"]):
        argv = ["--method", "cosent", "--config", str(recipe), *extra]
        assert_names_both(refusal(sts_train, argv, capsys), fork)
    assert not (tmp_path / "out").exists()


def test_sts_launch_refuses_a_method_two_distributions_declare_before_any_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    fork = install_fork(tmp_path / "site", monkeypatch, "cosent", "cosent")
    launched, checked = [], []
    monkeypatch.setattr(launch, "launch", lambda args: launched.append(args) or 0)
    monkeypatch.setattr("sts_core.training.run.main", lambda argv: checked.append(argv) or 0)
    argv = ["--config_file", str(CPU_CONFIG), "cosent", "--config", "r.yaml"]
    assert launch.main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sts-launch: error: "), lines
    assert_names_both(lines[0], fork)
    assert launched == [] and checked == []


def test_a_duplicate_stops_only_the_runs_that_name_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the package of the name asked for is imported: a duplicate ``cosent`` does not
    stop a ``regression`` run, but the whole list (benchmarks, the method table) is
    refused."""
    install_fork(tmp_path / "site", monkeypatch, "cosent", "cosent")
    assert installed_method("regression").name == "regression"
    with pytest.raises(ConfigError, match="declared by 2 installed distributions"):
        load_methods()


def test_a_package_declaring_core_is_refused_when_core_is_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fork(tmp_path / "site", monkeypatch, "core", "core")
    with pytest.raises(ConfigError) as refused:
        installed_method("core")
    assert "sts-core (built in" in str(refused.value) and "sts-fork (core = " in str(refused.value)
    assert installed_method("cosent").name == "cosent"


def test_an_entry_point_must_carry_its_methods_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry point ``cosent2`` whose Method is called ``cosent`` would train under one
    name and describe itself by the other."""
    install_fork(tmp_path / "site", monkeypatch, "cosent", "cosent2")
    with pytest.raises(ConfigError, match="declares method 'cosent': the entry"):
        installed_method("cosent2")
    assert installed_method("cosent") is not installed_method("core")


def test_an_unknown_name_lists_the_installed_methods(monkeypatch, capsys) -> None:
    launched = []
    monkeypatch.setattr(launch, "launch", lambda args: launched.append(args) or 0)
    assert launch.main(["--config_file", str(CPU_CONFIG), "cosnet", "--config", "r.yaml"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    installed = [CORE_METHOD.name, *load_methods()]
    assert {"cosent", "bsc"} <= set(installed)
    assert lines == [
        "sts-launch: error: 'cosnet' is neither an installed method (installed: "
        f"{', '.join(installed)}) nor a training script (no file cosnet)"
    ]
    assert launched == []


def test_a_package_that_fails_to_import_is_named_only_when_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One line naming the entry point instead of the import's traceback; the other
    methods still load."""
    install_fork(tmp_path / "site", monkeypatch, "broken", "broken")
    (tmp_path / "site" / "sts_fork_broken.py").write_text("import no_such_module\n")
    entry_points = tmp_path / "site" / "sts_fork-1.0.dist-info" / "entry_points.txt"
    entry_points.write_text("[sts_core.methods]\nbroken = sts_fork_broken:METHOD\n")
    with pytest.raises(ConfigError, match="entry point sts-fork .broken = sts_fork_broken"):
        installed_method("broken")
    assert installed_method("cosent").name == "cosent"
