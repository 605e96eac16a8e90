"""ConfigParser: a YAML recipe gives defaults, command-line flags override, unknown keys fail."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sts_core.training import BaseConfig, ConfigError, ConfigParser, read_recipe


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    return write(
        tmp_path / "recipe.yaml",
        "model_name_or_path: some/model\n"
        "pooling: cls\n"
        "learning_rate: 2e-5\n"  # YAML 1.1 (PyYAML) reads this as the string '2e-5'
        "num_train_epochs: 3\n"
        "train_datasets: [stsb, sickr:train]\n"
        "score_range: [0, 5]\n"
        "filter_test_overlap: true\n"
        "sick_to_sts_scale: false\n"
        "normalize_embeddings: yes\n"
        "max_seq_length: 64\n"
        "output_dir: runs/a\n"
        "report_to: none\n",
    )


def test_recipe_keys_become_values(recipe: Path) -> None:
    model, data, config = ConfigParser().parse(["--config", str(recipe)])
    assert model.model_name_or_path == "some/model"
    assert model.pooling == "cls"
    assert model.max_seq_length == 64
    assert data.train_datasets == ["stsb", "sickr:train"]
    assert data.filter_test_overlap is True
    assert data.sick_to_sts_scale is False
    assert model.normalize_embeddings is True
    assert config.output_dir == "runs/a"
    assert config.num_train_epochs == 3


def test_yaml_values_get_the_field_types(recipe: Path) -> None:
    model, data, config = ConfigParser().parse(["--config", str(recipe)])
    assert isinstance(config.learning_rate, float) and config.learning_rate == 2e-5
    assert isinstance(config.num_train_epochs, float)
    assert isinstance(model.max_seq_length, int)
    assert all(isinstance(name, str) for name in data.train_datasets)
    assert data.score_range == [0.0, 5.0]
    assert all(isinstance(v, float) for v in data.score_range)
    assert isinstance(data.filter_test_overlap, bool)


def test_scalar_yaml_value_for_a_list_field_becomes_a_one_item_list(tmp_path: Path) -> None:
    path = write(
        tmp_path / "r.yaml",
        "model_name_or_path: m\ntrain_datasets: data/sts-train.csv\nfinal_sts_tasks: stsb\n",
    )
    _, data, _ = ConfigParser().parse(["--config", str(path)])
    assert data.train_datasets == ["data/sts-train.csv"]
    assert data.final_sts_tasks == ["stsb"]


def test_command_line_flags_override_the_recipe(recipe: Path) -> None:
    model, data, config = ConfigParser().parse(
        [
            "--config",
            str(recipe),
            "--learning_rate",
            "1e-4",
            "--pooling",
            "mean",
            "--train_datasets",
            "a.csv",
            "b.csv",
            "--filter_test_overlap",
            "false",
        ]
    )
    assert config.learning_rate == 1e-4
    assert model.pooling == "mean"
    assert data.train_datasets == ["a.csv", "b.csv"]
    assert data.filter_test_overlap is False
    assert model.max_seq_length == 64  # untouched recipe value stays


def test_flags_before_config_also_override(recipe: Path) -> None:
    _, _, config = ConfigParser().parse(["--num_train_epochs", "7", "--config", str(recipe)])
    assert config.num_train_epochs == 7.0


def test_unknown_yaml_key_names_file_key_and_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", "model_name_or_path: m\nlearning_rat: 1e-3\n")
    with pytest.raises(ConfigError) as info:
        ConfigParser().parse(["--config", str(path)])
    message = str(info.value)
    assert str(path) in message
    assert "learning_rat" in message
    assert "learning_rate" in message  # the close match


def test_unknown_yaml_key_without_close_match(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", "model_name_or_path: m\nzzzqqq: 1\n")
    with pytest.raises(ConfigError, match="zzzqqq"):
        ConfigParser().parse(["--config", str(path)])


def test_unknown_command_line_flag_is_a_config_error(recipe: Path) -> None:
    with pytest.raises(ConfigError, match="--no_such_flag"):
        ConfigParser().parse(["--config", str(recipe), "--no_such_flag", "1"])


def test_missing_recipe_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="not found") as info:
        ConfigParser().parse(["--config", str(missing)])
    assert str(missing) in str(info.value)


def test_invalid_yaml_and_non_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        read_recipe(write(tmp_path / "a.yaml", "a: [1, 2\n"))
    with pytest.raises(ConfigError, match="mapping"):
        read_recipe(write(tmp_path / "b.yaml", "- a\n- b\n"))
    assert read_recipe(write(tmp_path / "c.yaml", "")) == {}


def test_model_name_or_path_is_required(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="model_name_or_path"):
        ConfigParser().parse([])
    path = write(tmp_path / "r.yaml", "pooling: mean\n")
    with pytest.raises(ConfigError, match="model_name_or_path"):
        ConfigParser().parse(["--config", str(path)])
    model, _, _ = ConfigParser().parse(["--config", str(path), "--model_name_or_path", "x"])
    assert model.model_name_or_path == "x"


def test_base_config_defaults_from_its_docstring() -> None:
    _, data, config = ConfigParser().parse(["--model_name_or_path", "m"])
    assert config.output_dir == "outputs/run"
    assert config.learning_rate == 2e-5
    assert config.weight_decay == 0.01
    assert config.warmup_steps == 0.1
    assert config.per_device_train_batch_size == 16
    assert config.per_device_eval_batch_size == 64
    assert config.num_train_epochs == 1
    assert config.logging_steps == 10
    assert config.eval_strategy == "epoch"
    assert config.save_strategy == "epoch"
    assert config.save_total_limit == 2
    assert config.metric_for_best_model == "stsb_dev_spearman"
    assert config.greater_is_better is True
    assert config.remove_unused_columns is False
    assert config.label_column == "score"
    assert data.train_datasets == ["stsb"]
    assert data.eval_dataset == "stsb:dev"
    # the same defaults when the class is built directly
    direct = BaseConfig(report_to="none")
    assert direct.learning_rate == 2e-5 and direct.save_total_limit == 2
    assert direct.eval_strategy == "epoch" and direct.remove_unused_columns is False


@dataclass
class _MethodConfig(BaseConfig):
    temperature: float = field(default=0.05, metadata={"help": "Softmax temperature."})


def test_subclass_fields_are_known_keys(tmp_path: Path) -> None:
    path = write(tmp_path / "r.yaml", "model_name_or_path: m\ntemperature: 5e-2\n")
    _, _, config = ConfigParser(_MethodConfig).parse(["--config", str(path)])
    assert isinstance(config, _MethodConfig)
    assert config.temperature == pytest.approx(0.05)
    _, _, config = ConfigParser(_MethodConfig).parse(
        ["--config", str(path), "--temperature", "0.1"]
    )
    assert config.temperature == pytest.approx(0.1)
    with pytest.raises(ConfigError, match="temperature"):
        ConfigParser(BaseConfig).parse(["--config", str(path)])


def test_parser_can_be_reused_with_another_recipe(tmp_path: Path) -> None:
    first = write(tmp_path / "a.yaml", "model_name_or_path: m\npooling: cls\n")
    second = write(tmp_path / "b.yaml", "model_name_or_path: m\n")
    parser = ConfigParser()
    assert parser.parse(["--config", str(first)])[0].pooling == "cls"
    assert parser.parse(["--config", str(second)])[0].pooling is None


def test_yaml_1_1_spellings(tmp_path: Path) -> None:
    path = write(
        tmp_path / "r.yaml",
        "model_name_or_path: m\neval_strategy: no\nsave_strategy: no\n"
        "save_total_limit: 1e1\nwarmup_steps: 50\nnum_train_epochs: '2'\n",
    )
    _, _, config = ConfigParser().parse(["--config", str(path)])
    assert config.eval_strategy == "no" and config.save_strategy == "no"
    assert config.save_total_limit == 10 and isinstance(config.save_total_limit, int)
    assert config.warmup_steps == 50.0 and isinstance(config.warmup_steps, float)
    assert config.num_train_epochs == 2.0


@pytest.mark.parametrize(
    "line", ["learning_rate: fast", "save_total_limit: 2.5", "filter_test_overlap: maybe"]
)
def test_value_of_the_wrong_type_names_file_and_key(tmp_path: Path, line: str) -> None:
    path = write(tmp_path / "r.yaml", f"model_name_or_path: m\n{line}\n")
    key = line.split(":")[0]
    with pytest.raises(ConfigError) as info:
        ConfigParser().parse(["--config", str(path)])
    assert str(path) in str(info.value) and key in str(info.value)


def test_environment_variables_in_recipe_values_are_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_MODELS", "/models")
    path = tmp_path / "env.yaml"
    path.write_text(
        "model_name_or_path: ${MY_MODELS}/mini\ntrain_datasets: [$MY_MODELS/a.csv, stsb]\n",
        encoding="utf-8",
    )
    values = read_recipe(path)
    assert values["model_name_or_path"] == "/models/mini"
    assert values["train_datasets"] == ["/models/a.csv", "stsb"]
    monkeypatch.delenv("MY_MODELS")
    with pytest.raises(ConfigError, match=r"env\.yaml:1: model_name_or_path: .*MY_MODELS.*not set"):
        read_recipe(path)


def test_use_cpu_turns_on_without_an_accelerator_unless_deepspeed(monkeypatch) -> None:
    from sts_core.training.config import accelerator_available, cpu_launch_settings

    if accelerator_available():
        pytest.skip("this machine has a GPU: use_cpu stays as given")
    monkeypatch.delenv("ACCELERATE_USE_DEEPSPEED", raising=False)
    config = BaseConfig(output_dir="x")
    assert config.use_cpu is True
    config.use_cpu = False
    assert cpu_launch_settings(config) == {"use_cpu": True}
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")  # what `accelerate launch` sets
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert cpu_launch_settings(config) == {}  # use_cpu would turn DeepSpeed off
    monkeypatch.setenv("LOCAL_RANK", "0")  # one of several launched processes
    assert cpu_launch_settings(config) == {"ddp_backend": "gloo"}


def test_deepspeed_with_use_cpu_is_an_error(monkeypatch) -> None:
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    with pytest.raises(ValueError, match="use_cpu turns DeepSpeed off"):
        BaseConfig(output_dir="x", use_cpu=True)


def test_fsdp_without_an_accelerator_is_an_error_not_plain_ddp(monkeypatch) -> None:
    """accelerate runs FSDP only on accelerators: on a CPU machine the FSDP config would
    train as MULTI_CPU DDP with exit 0, so the config stops it."""
    import sts_core.training.config as config_module

    monkeypatch.setattr(config_module, "accelerator_available", lambda: False)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")  # what fsdp.yaml makes accelerate set
    with pytest.raises(ValueError, match="FSDP needs GPUs.*cpu.yaml.*deepspeed_zero3.yaml"):
        BaseConfig(output_dir="x")
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    with pytest.raises(ValueError, match="FSDP needs GPUs"):
        BaseConfig(output_dir="x", fsdp="full_shard")  # the recipe's own field
    assert BaseConfig(output_dir="x").fsdp in (None, "", [], False)  # no FSDP: no error


def test_deepspeed_json_that_does_not_exist_is_an_error(tmp_path) -> None:
    pytest.importorskip("deepspeed")
    missing = tmp_path / "zero9.json"
    with pytest.raises(ValueError, match=r"deepspeed: .*zero9\.json: file not found"):
        BaseConfig(output_dir="x", deepspeed=str(missing))


def test_deepspeed_config_without_deepspeed_stops_in_one_line(monkeypatch, tmp_path) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "deepspeed", None)  # `import deepspeed` fails
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model_name_or_path: /models/mini\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        ConfigParser(BaseConfig).parse(["--config", str(recipe)])
    message = str(raised.value)
    assert "DeepSpeed is not installed" in message and "sts-core[deepspeed]" in message
    assert "\n" not in message


def test_a_run_built_without_a_model_is_refused_naming_the_option() -> None:
    """Built without the parser (which refuses it first), a run with no model_name_or_path
    is a ValueError naming the option, not a loader's error about None."""
    from sts_core.training.config import ModelArguments, required_model
    from sts_core.training.encoder_setup import build_encoder

    assert required_model(ModelArguments("some-org/some-model")) == "some-org/some-model"
    with pytest.raises(ValueError, match="model_name_or_path is required"):
        build_encoder(ModelArguments())
