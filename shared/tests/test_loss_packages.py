"""Losses of other packages (entry-point group ``sts_core.methods``) in ``loss_weights``: a
package that is installed but fails to import, and a loss whose package is not installed,
are one line naming the package, while the config is parsed (before any weights load)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from sts_core.losses import LOSSES
from sts_core.testing import one_line_error, write_fixture_recipe
from sts_core.training.run import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

GROUP = "sts_core.methods"
FIXTURES = Path(__file__).parent / "fixtures" / "training"
TRAIN = FIXTURES / "sts-train.csv"
DEV = FIXTURES / "sts-dev.csv"
REGRESSION_LOSSES = ("l1", "mse", "translated_relu", "smooth_k2")


def run_with_weights(tmp_path: Path, model: Path, weights: str, capsys) -> tuple[int, str]:
    recipe = write_fixture_recipe(
        tmp_path / "r.yaml", "loss packages", model, TRAIN, DEV, tmp_path / "out"
    )
    status = main(["--config", str(recipe), "--loss_weights", weights])
    return status, capsys.readouterr().err


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, entry_points: list) -> None:
    """The installed packages' entry points of the losses' group are ``entry_points``."""
    real = metadata.entry_points

    def entry_points_of(**selection):
        if selection.get("group") == GROUP:
            return metadata.EntryPoints(entry_points)
        return real(**selection)

    monkeypatch.setattr(metadata, "entry_points", entry_points_of)


def installed(*leave_out: str) -> list:
    """The real entry points of the group, but those named in ``leave_out``."""
    return [e for e in metadata.entry_points(group=GROUP) if e.name not in leave_out]


def test_an_installed_loss_package_that_fails_to_import_is_one_line(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """sts-regression is installed, but its loss module fails to import: its losses name
    the package, the entry point and the import error; the other packages still load."""
    for name in REGRESSION_LOSSES:
        monkeypatch.delitem(LOSSES, name, raising=False)
    broken = tmp_path / "modules"
    (broken / "sts_regression_broken").mkdir(parents=True)
    (broken / "sts_regression_broken" / "__init__.py").write_text("import sts_not_installed\n")
    monkeypatch.syspath_prepend(str(broken))
    (regression,) = [e for e in metadata.entry_points(group=GROUP) if e.name == "regression"]
    failing = metadata.EntryPoint("regression", "sts_regression_broken", GROUP)
    vars(failing).update(dist=regression.dist)  # as importlib.metadata sets it
    fake_entry_points(monkeypatch, [*installed("regression"), failing])
    status, err = run_with_weights(
        tmp_path, tiny_bert_dir, '{"cosine_mse": 1, "smooth_k2": 0.5}', capsys
    )
    assert status == 2
    line = one_line_error(err)
    for fragment in ("'smooth_k2'", "sts-regression", "'regression'", "sts_regression_broken"):
        assert fragment in line, fragment
    assert "No module named 'sts_not_installed'" in line
    assert not (tmp_path / "out").exists()


def test_a_loss_of_a_package_that_is_not_installed_names_the_package(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.delitem(LOSSES, "bsc", raising=False)
    fake_entry_points(monkeypatch, installed("bsc"))
    status, err = run_with_weights(tmp_path, tiny_bert_dir, '{"cosine_mse": 1, "bsc": 0.5}', capsys)
    assert status == 2
    assert one_line_error(err).endswith(
        "unknown loss 'bsc': it is provided by the sts-bsc package "
        "(pip install sts-bsc / ./packages/bsc)"
    )
    assert not (tmp_path / "out").exists()


def test_the_table_of_loss_packages_lists_every_loss_of_the_installed_packages() -> None:
    from sts_core.losses.registry import LOSS_PACKAGES, load_installed_losses

    assert load_installed_losses() == []
    package_of_module = {
        entry.value.partition(".")[0]: entry.dist.name
        for entry in metadata.entry_points(group=GROUP)
    }
    registered = {
        name: package_of_module[loss.__module__.partition(".")[0]]
        for name, loss in LOSSES.items()
        if loss.__module__.partition(".")[0] in package_of_module
    }
    assert registered == LOSS_PACKAGES
