"""The README's "Writing a method package" example, run as written in this process: its loss
is registered and follows its formula, its declaration binds its config, and its ``main``
trains with its recipe's settings. (``tests/test_method_package_example.py`` installs the
same blocks as a package and launches it.)"""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pytest
import torch
import yaml

from sts_core.losses import LOSSES
from sts_core.testing import write_fixture_recipe
from sts_core.training import cli_main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

README = Path(__file__).resolve().parents[2] / "README.md"
FIXTURES = Path(__file__).parent / "fixtures" / "training"


def section_blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Writing a method package", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)


def test_the_example_is_at_most_sixty_lines() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Writing a method package", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```\w+\n.*?```", section, flags=re.S)
    assert [b.split("\n", 1)[0] for b in blocks] == ["```python", "```toml", "```yaml"]
    assert sum(len(block.splitlines()) for block in blocks) <= 60


@pytest.fixture(scope="module")
def example() -> dict:
    """The Python block executed as one importable module (the Trainer pickles the config)."""
    module = types.ModuleType("readme_method_example")
    sys.modules[module.__name__] = module
    if "margin_mse" in LOSSES:  # a rerun in the same process
        del LOSSES["margin_mse"]
    (block,) = section_blocks("python")
    exec(compile(block, str(README), "exec"), module.__dict__)
    return module.__dict__


def test_the_example_loss_is_registered_and_follows_its_formula(example: dict) -> None:
    loss = LOSSES["margin_mse"](margin=0.1)
    u = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    v = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    labels = torch.tensor([0.5, 0.7])  # cosines 1 and 0.7071
    expected = (max(0.0, 0.5 - 0.1) ** 2 + max(0.0, abs(0.70711 - 0.7) - 0.1) ** 2) / 2
    got = loss({"sentence1": u, "sentence2": v}, labels)
    assert got.item() == pytest.approx(expected, rel=1e-4)


def test_the_declaration_binds_its_config_and_reads_the_margin(example: dict) -> None:
    method, config_class = example["METHOD"], example["MarginConfig"]
    assert config_class.declared_losses == method.loss_names
    assert method.default_loss == "margin_mse"
    built = method.losses[0].from_config(config_class(output_dir="unused", margin=0.3))
    assert built.margin == 0.3


def test_the_example_package_trains_with_its_recipe(
    example: dict, tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    recipe = yaml.safe_load(section_blocks("yaml")[0])
    assert set(recipe) <= {
        "model_name_or_path",
        "train_datasets",
        "score_range",
        "margin",
        "final_sts_tasks",
        "output_dir",
    }
    config = write_fixture_recipe(
        tmp_path / "r.yaml",
        "the README example on fixture files",
        tiny_bert_nodropout_dir,
        FIXTURES / "sts-train.csv",
        FIXTURES / "sts-dev.csv",
        tmp_path / "out",
        score_range="[0, 5]",
        margin=str(recipe["margin"]),
    )
    assert cli_main(example["METHOD"], ["--config", str(config)]) == 0
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["train"]["train_loss"] > 0
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "Margin MSE (an example)" in card and "`marginmse` method" in card
    assert "- Loss module: `margin_mse` (MarginMSELoss)" in card
