"""``sts_core.method.Method``: one declaration a method package makes, and what reads it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sts_core import launch
from sts_core.losses import CosineMSELoss, EmbeddingLoss, InfoNCELoss, register_loss
from sts_core.method import Method, QualityRow, import_trainer, method_table
from sts_core.training import BaseConfig
from sts_core.training.method_registry import CORE_METHOD, load_methods
from sts_core.training.parser import ConfigParser
from sts_core.training.run import main as sts_train

DOCS = Path(__file__).resolve().parents[2] / "docs" / "methods.md"


@dataclass
class TwoLossConfig(BaseConfig):
    loss: str = field(default="infonce")


@dataclass
class NoLossFieldConfig(BaseConfig):
    """The core's fields only: the method's first loss is the default."""


TWO = Method(
    name="test_two",
    title="two losses (test)",
    config=TwoLossConfig,
    losses=(CosineMSELoss, InfoNCELoss),
    quality_rows=(QualityRow("two", "ours: two"),),
)
FIRST = Method(
    name="test_first", title="first (test)", config=NoLossFieldConfig, losses=(InfoNCELoss,)
)


def test_the_default_loss_is_the_configs_field_else_the_first() -> None:
    assert TWO.default_loss == "infonce"  # the config's field, not the first listed
    assert FIRST.default_loss == "infonce"
    assert TWO.loss_names == ("cosine_mse", "infonce")


def test_a_config_knows_its_losses_and_checks_its_loss(tmp_path: Path) -> None:
    assert TwoLossConfig.declared_losses == ("cosine_mse", "infonce")
    assert TwoLossConfig.declaring_method == "test_two"
    assert BaseConfig.declared_losses == ("cosine_mse",)  # the core's method declares it
    with pytest.raises(ValueError) as error:
        TwoLossConfig(output_dir=str(tmp_path), loss="cosent")
    assert str(error.value) == "loss 'cosent' is not one of cosine_mse, infonce"


def test_a_default_the_method_does_not_declare_is_refused() -> None:
    @dataclass
    class WrongDefault(BaseConfig):
        loss: str = "pearson"

    with pytest.raises(ValueError, match="loss default 'pearson' is not one of its losses"):
        Method(name="test_wrong", title="t", config=WrongDefault, losses=(CosineMSELoss,))


def test_a_trainer_named_module_colon_class_is_imported_by_trainer_for(tmp_path: Path) -> None:
    """``trainer="module:Class"``: the declaration imports nothing; ``trainer_for`` imports
    the class. Another form is refused by the declaration, a name that is not a class by
    ``trainer_for``."""
    from sts_core.training import BaseTrainer

    @dataclass
    class NamedTrainerConfig(BaseConfig):
        pass

    reference = "sts_core.training.trainer:BaseTrainer"
    with pytest.raises(ValueError, match="trainer 'sts_core.training.trainer.BaseTrainer' is no"):
        Method(
            name="test_named_trainer",
            title="t",
            config=NamedTrainerConfig,
            losses=(CosineMSELoss,),
            trainer=reference.replace(":", "."),
        )
    named = Method(
        name="test_named_trainer",
        title="t",
        config=NamedTrainerConfig,
        losses=(CosineMSELoss,),
        trainer=reference,
    )
    assert named.trainer_for(NamedTrainerConfig(output_dir=str(tmp_path))) is BaseTrainer
    assert import_trainer(BaseTrainer) is BaseTrainer and import_trainer(None) is None
    with pytest.raises(TypeError, match="'sts_core.training.trainer:logger' is not a class"):
        import_trainer("sts_core.training.trainer:logger")


def test_an_unregistered_loss_and_a_shared_config_are_refused() -> None:
    class Unregistered(EmbeddingLoss):
        def forward(self, embeddings, labels):
            return labels.sum()

    with pytest.raises(ValueError, match="Unregistered is not a registered loss"):
        Method(name="test_bad", title="t", config=NoLossFieldConfig, losses=(Unregistered,))
    with pytest.raises(ValueError, match="config of method 'test_first' already"):
        Method(name="test_other", title="t", config=NoLossFieldConfig, losses=(InfoNCELoss,))
    with pytest.raises(ValueError, match="declares no loss"):
        Method(name="test_none", title="t", config=NoLossFieldConfig, losses=())


def test_the_citation_defaults_to_the_first_losss() -> None:
    assert TWO.citation == CosineMSELoss.citation and TWO.citation
    assert TWO.paper() == {"name": "two losses (test)", "citation": CosineMSELoss.citation}


def test_the_loss_help_lists_each_loss_with_its_title() -> None:
    parser = ConfigParser.for_method(TWO)
    (action,) = [a for a in parser.parser._actions if a.dest == "loss"]
    assert action.help == f"cosine_mse: {CosineMSELoss.title}; infonce: {InfoNCELoss.title}"
    shown = " ".join(parser.parser.format_help().split())
    assert shown.count("(default: infonce)") == 1  # the help adds the default, once


def test_the_loss_class_follows_loss_weights(tmp_path: Path) -> None:
    plain = TwoLossConfig(output_dir=str(tmp_path), loss="cosine_mse")
    assert TWO.loss_class(plain) is CosineMSELoss
    weighted = TwoLossConfig(
        output_dir=str(tmp_path), loss="cosine_mse", loss_weights={"cosine_mse": 1, "infonce": 2}
    )
    assert set(TWO.loss_class(weighted).part_classes) == {"cosine_mse", "infonce"}


def test_a_class_loss_reads_the_label_column(tmp_path: Path) -> None:
    @register_loss("test_class_kind")
    class ClassKind(EmbeddingLoss):
        label_kind = "class"

        def forward(self, embeddings, labels):
            return labels.sum()

    @dataclass
    class ClassConfig(BaseConfig):
        """The core's fields only."""

    method = Method(name="test_class", title="t", config=ClassConfig, losses=(ClassKind,))
    assert method.label_column(ClassConfig(output_dir=str(tmp_path))) == "label"
    assert method.label_column(ClassConfig(output_dir=str(tmp_path), label_column="y")) == "y"
    assert TWO.label_column(TwoLossConfig(output_dir=str(tmp_path))) == "score"


def test_every_installed_package_declares_a_method_with_its_rows() -> None:
    methods = load_methods()
    assert set(methods) >= {"bsc", "cosent", "pcctuning", "regression", "sifter"}
    for name, method in methods.items():
        assert method.name == name and method.config.declaring_method == name
        assert method.config.declared_losses == method.loss_names
        assert method.readme == f"packages/{name}/README.md"
        assert (Path(__file__).resolve().parents[2] / method.readme).is_file()
        assert method.quality_rows, f"{name} declares no benchmark row"


def test_the_docs_method_table_is_the_declarations() -> None:
    text = DOCS.read_text(encoding="utf-8")
    table = re.search(r"<!-- method-table[^\n]*-->\n(.*?)<!-- end method-table -->", text, re.S)
    assert table is not None, "docs/methods.md has no generated method table"
    expected = method_table(list(load_methods().values()), link_prefix="../")
    assert table.group(1).strip() == expected


def test_method_table_marks_the_default_first() -> None:
    lines = method_table([TWO]).splitlines()
    assert lines[2] == "| `test_two` | two losses (test) | `infonce`, `cosine_mse` |"


def test_sts_train_refuses_an_unknown_method_in_one_line(capsys) -> None:
    assert sts_train(["--method", "nope", "--config", "r.yaml"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --method 'nope' is not an installed method (installed: core")


def test_sts_launch_takes_a_method_name_and_checks_it_first(monkeypatch) -> None:
    launched = []
    monkeypatch.setattr(launch, "launch", lambda args: launched.append(args) or 0)
    checked = []
    monkeypatch.setattr("sts_core.training.run.main", lambda argv: checked.append(list(argv)) or 0)
    assert launch.main(["--num_processes", "1", "cosent", "--config", "r.yaml"]) == 0
    assert checked == [["--method", "cosent", "--config", "r.yaml", "--check_only", "true"]]
    (args,) = launched
    assert args.module and args.training_script == "sts_core.training.run"
    assert args.training_script_args == ["--method", "cosent", "--config", "r.yaml"]
    assert launch.method_named("packages/cosent/train.py") is None
    assert launch.method_named("nope") is None


def test_a_loss_without_from_config_reads_its_arguments_from_same_named_fields(
    tmp_path: Path,
) -> None:
    @register_loss("test_scaled_by_field")
    class Scaled(EmbeddingLoss):
        def __init__(self, infonce_temperature: float = 0.5, absent_field: int = 7) -> None:
            super().__init__()
            self.infonce_temperature, self.absent_field = infonce_temperature, absent_field

        def forward(self, embeddings, labels):
            return labels.sum()

    @dataclass
    class WithTemperature(BaseConfig):
        infonce_temperature: float = 0.25

    built = Scaled.from_config(WithTemperature(output_dir=str(tmp_path)))
    assert (built.infonce_temperature, built.absent_field) == (0.25, 7)  # no such field: default
    assert Scaled.from_config(None).infonce_temperature == 0.5


def test_the_method_option_is_taken_out_in_either_form() -> None:
    from sts_core.training.run import method_from_arguments

    cosent = load_methods()["cosent"]
    assert method_from_arguments(["--method", "cosent", "--config", "r.yaml"]) == (
        cosent,
        ["--config", "r.yaml"],
    )
    assert method_from_arguments(["--config", "r.yaml", "--method=core"]) == (
        CORE_METHOD,
        ["--config", "r.yaml"],
    )
    assert method_from_arguments(["--config", "r.yaml"]) == (CORE_METHOD, ["--config", "r.yaml"])
