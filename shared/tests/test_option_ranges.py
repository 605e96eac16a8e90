"""Issue 30, case 5: a numeric option whose value cannot be right (nan, inf, 0 for a rate,
a negative weight, a probability above 1) stops at parse time with one line naming the
option, by the one rule of :func:`sts_core.options.check_number`; a
``learning_rate_mapping`` pattern that matches no trained parameter is a ConfigError when
the optimizer is built, and the log names what each pattern matched."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import torch
from torch import nn

from sts_core.options import POSITIVE, check_number, number_range
from sts_core.testing import one_line_error, write_fixture_recipe
from sts_core.training import BaseConfig, ConfigError, ConfigParser
from sts_core.training.optimization import regroup_parameters
from sts_core.training.run import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"

NOT_FINITE = ["nan", "inf", "-inf"]
POSITIVE_BAD = [*NOT_FINITE, "0", "-1e-5"]
NON_NEGATIVE_BAD = [*NOT_FINITE, "-0.5"]
BELOW_ONE_BAD = ["nan", "inf", "-0.1", "1", "1.5"]  # [0, 1)
UP_TO_ONE_BAD = ["nan", "inf", "0", "-0.5", "1.5"]  # (0, 1]

#: (option, bad values, the words of the one-line error)
CASES = [
    ("learning_rate", POSITIVE_BAD, "learning_rate must be finite and > 0"),
    ("weight_decay", NON_NEGATIVE_BAD, "weight_decay must be finite and ≥ 0"),
    ("warmup_steps", NON_NEGATIVE_BAD, "warmup_steps must be finite and ≥ 0"),
    ("num_train_epochs", NON_NEGATIVE_BAD, "num_train_epochs must be finite and ≥ 0"),
    ("max_grad_norm", NON_NEGATIVE_BAD, "max_grad_norm must be finite and ≥ 0"),
    ("adam_beta1", BELOW_ONE_BAD, "adam_beta1 must be in [0, 1)"),
    ("adam_beta2", BELOW_ONE_BAD, "adam_beta2 must be in [0, 1)"),
    ("adam_epsilon", NON_NEGATIVE_BAD, "adam_epsilon must be finite and ≥ 0"),
    ("label_smoothing_factor", BELOW_ONE_BAD, "label_smoothing_factor must be in [0, 1)"),
    ("neftune_noise_alpha", NON_NEGATIVE_BAD, "neftune_noise_alpha must be finite and ≥ 0"),
    ("logging_steps", NON_NEGATIVE_BAD, "logging_steps must be finite and ≥ 0"),
    ("eval_steps", NON_NEGATIVE_BAD, "eval_steps must be finite and ≥ 0"),
    ("save_steps", NON_NEGATIVE_BAD, "save_steps must be finite and ≥ 0"),
    ("eval_delay", NON_NEGATIVE_BAD, "eval_delay must be finite and ≥ 0"),
    ("layer_lr_decay", UP_TO_ONE_BAD, "layer_lr_decay must be in (0, 1]"),
    ("teacher_weight", UP_TO_ONE_BAD, "teacher_weight must be in (0, 1]"),
    ("backbone_dropout", BELOW_ONE_BAD, "backbone_dropout must be in [0, 1)"),
    ("lora_dropout", BELOW_ONE_BAD, "lora_dropout must be in [0, 1)"),
    ("weight_averaging_start", BELOW_ONE_BAD, "weight_averaging_start must be in [0, 1)"),
    ("ema_decay", ["nan", "inf", "0", "1", "-0.5"], "ema_decay must be in (0, 1)"),
    ("seed", ["-1"], "seed must be at least 0"),
    ("data_seed", ["-1"], "data_seed must be at least 0"),
    ("dataloader_num_workers", ["-1"], "dataloader_num_workers must be at least 0"),
    ("save_total_limit", ["0", "-1"], "save_total_limit must be at least 1"),
    ("eval_accumulation_steps", ["0"], "eval_accumulation_steps must be at least 1"),
    ("weight_averaging_every", ["0"], "weight_averaging_every must be ≥ 1"),
    ("teacher_neighbours", ["-1"], "teacher_neighbours must be 0 or more"),
    ("gradient_cache_batch_size", ["0"], "gradient_cache_batch_size must be at least 1"),
    ("max_seq_length", ["0"], "max_seq_length must be at least 1"),
    ("max_train_samples", ["0"], "max_train_samples must be at least 1"),
]
PARAMETERS = [
    pytest.param(name, value, words, id=f"{name}={value}")
    for name, values, words in CASES
    for value in values
]

#: mapping options: (option, JSON value, words)
MAPPING_CASES = [
    ("learning_rate_mapping", '{"^head\\\\.": NaN}', "learning_rate_mapping: '^head\\\\.' must"),
    ("learning_rate_mapping", '{"head": Infinity}', "learning_rate_mapping: 'head' must be"),
    ("learning_rate_mapping", '{"head": 0}', "'head' must be finite and > 0, got 0.0"),
    ("learning_rate_mapping", '{"head": -1e-3}', "'head' must be finite and > 0, got -0.001"),
    ("loss_weights", '{"cosine_mse": NaN}', "loss_weights: cosine_mse must be finite and ≥ 0"),
    ("loss_weights", '{"cosine_mse": Infinity}', "cosine_mse must be finite and ≥ 0, got inf"),
    ("loss_weights", '{"cosine_mse": -1}', "cosine_mse must be finite and ≥ 0, got -1.0"),
]


def write_recipe(tmp_path: Path, **lines: str) -> Path:
    text = "".join(
        f"{key}: {value}\n"
        for key, value in {"model_name_or_path": "some/model", "report_to": "none", **lines}.items()
    )
    path = tmp_path / "recipe.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def parse_error(argv: list[str]) -> str:
    with pytest.raises(ConfigError) as caught:
        ConfigParser(BaseConfig).parse(argv)
    message = str(caught.value)
    assert "\n" not in message.strip()
    return message


@pytest.mark.parametrize(("name", "value", "words"), PARAMETERS)
def test_a_bad_number_in_a_recipe_stops_the_parse_naming_the_option(
    tmp_path: Path, name: str, value: str, words: str
) -> None:
    recipe = write_recipe(tmp_path, **{name: value})
    message = parse_error(["--config", str(recipe)])
    assert words in message and str(recipe) in message


@pytest.mark.parametrize(("name", "value", "words"), PARAMETERS)
def test_a_bad_number_on_the_command_line_stops_the_parse_naming_the_option(
    tmp_path: Path, name: str, value: str, words: str
) -> None:
    recipe = write_recipe(tmp_path)
    assert words in parse_error(["--config", str(recipe), f"--{name}={value}"])


@pytest.mark.parametrize(("name", "value", "words"), MAPPING_CASES)
def test_a_bad_rate_or_weight_in_a_mapping_is_refused(
    tmp_path: Path, name: str, value: str, words: str
) -> None:
    recipe = write_recipe(tmp_path)
    assert words in parse_error(["--config", str(recipe), f"--{name}", value])


@pytest.mark.parametrize("bounds", ["[0, nan]", "[nan, 5]", "[-inf, 5]", "[0, .inf]"])
def test_score_range_bounds_must_be_finite(tmp_path: Path, bounds: str) -> None:
    recipe = write_recipe(tmp_path, score_range=bounds)
    assert "score_range must be a finite number" in parse_error(["--config", str(recipe)])


def test_yaml_nan_and_inf_spellings_are_refused_too(tmp_path: Path) -> None:
    for value in (".nan", ".inf", "-.inf", "NaN"):
        recipe = write_recipe(tmp_path, learning_rate=value)
        assert "learning_rate must be finite and > 0" in parse_error(["--config", str(recipe)])


def test_values_at_the_edges_of_the_ranges_still_parse(tmp_path: Path) -> None:
    recipe = write_recipe(
        tmp_path,
        weight_decay="0",
        warmup_steps="0",
        max_grad_norm="0",
        layer_lr_decay="1",
        teacher_weight="1",
        backbone_dropout="0",
        lora_dropout="0",
        adam_beta1="0",
        weight_averaging_start="0",
        seed="0",
        learning_rate_mapping='{"head": 1.0e-3}',
        loss_weights="{cosine_mse: 1, pearson: 0}",
    )
    _, _, config = ConfigParser(BaseConfig).parse(["--config", str(recipe)])
    assert config.layer_lr_decay == 1 and config.learning_rate_mapping == {"head": 1e-3}


# ----------------------------------------------------------------- the helper
@pytest.mark.parametrize(
    ("bounds", "words"),
    [
        (POSITIVE, "finite and > 0"),
        ({"minimum": 0}, "finite and ≥ 0"),
        ({"maximum": 1, "max_inclusive": False}, "finite and < 1"),
        ({"minimum": 0, "maximum": 1}, "in [0, 1]"),
        ({"minimum": 0, "maximum": 1, "min_inclusive": False, "max_inclusive": False}, "in (0, 1)"),
        ({}, "a finite number"),
    ],
)
def test_check_number_says_the_range_the_same_way_everywhere(bounds: dict, words: str) -> None:
    assert number_range(**bounds) == words
    for bad in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValueError, match=f"^x must be {re.escape(words)}, got -?(nan|inf)$"):
            check_number("x", bad, **bounds)


def test_check_number_passes_unset_and_in_range_values_and_refuses_non_numbers() -> None:
    check_number("x", None, **POSITIVE)
    check_number("x", 0.5, minimum=0, maximum=1)
    check_number("x", 1, minimum=0, maximum=1)
    with pytest.raises(ValueError, match=r"^x must be finite and > 0, got 0$"):
        check_number("x", 0, **POSITIVE)
    with pytest.raises(ValueError, match=r"x must be a number \(finite and > 0\), got 'fast'"):
        check_number("x", "fast", **POSITIVE)
    with pytest.raises(ValueError, match=r"x must be a number .*, got True"):
        check_number("x", True, **POSITIVE)


# ----------------------------------------------------------------- end to end
def test_a_nan_learning_rate_stops_the_run_with_one_line_before_the_model_loads(
    tiny_bert_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    def not_loaded(*args, **kwargs):
        raise AssertionError("the model was loaded before the options were checked")

    monkeypatch.setattr("sts_core.encoder.model.SentenceEncoder.from_pretrained", not_loaded)
    recipe = fixture_recipe(tmp_path, tiny_bert_dir)
    assert main(["--config", str(recipe), "--learning_rate", "nan"]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "learning_rate must be finite and > 0, got nan" in line
    assert not (tmp_path / "out").exists()


def test_a_mapping_pattern_that_matches_no_parameter_stops_the_run_with_one_line(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    recipe = fixture_recipe(
        tmp_path, tiny_bert_dir, learning_rate_mapping='{"^regresion\\\\.": 1.0e-2}'
    )
    assert main(["--config", str(recipe)]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err  # besides a loading progress bar
    line = errors[0]
    assert "learning_rate_mapping: '^regresion\\\\.' matches no trained parameter" in line
    assert "backbone.embeddings.word_embeddings.weight" in line  # names to compare with


def fixture_recipe(tmp_path: Path, model: Path, **overrides: str) -> Path:
    return write_fixture_recipe(
        tmp_path / "recipe.yaml",
        "option ranges",
        model,
        FIXTURES / "sts-train.csv",
        FIXTURES / "sts-dev.csv",
        tmp_path / "out",
        score_range="[0, 5]",
        **overrides,
    )


# ----------------------------------------------------------------- regroup_parameters
class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Module()
        self.backbone.layer = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])
        self.head = nn.Linear(2, 1)
        self.temperature = nn.Parameter(torch.tensor(1.0))


def _optimizer(model: nn.Module) -> torch.optim.Optimizer:
    trained = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW([{"params": trained, "weight_decay": 0.01}], lr=1e-3)


def test_an_unmatched_pattern_is_a_config_error_naming_it_and_some_parameters() -> None:
    model = _Model()
    mapping = {r"^head\.": 1e-2, r"^haed\.": 1e-2}
    with pytest.raises(ConfigError) as caught:
        regroup_parameters(_optimizer(model), model.named_parameters(), mapping)
    message = str(caught.value)
    assert "'^haed\\\\.' matches no trained parameter" in message
    assert "head.weight" in message and "\n" not in message


def test_a_pattern_that_matches_only_frozen_parameters_is_a_config_error() -> None:
    model = _Model()
    model.backbone.requires_grad_(False)
    with pytest.raises(ConfigError, match="matches only parameters that are not trained"):
        regroup_parameters(_optimizer(model), model.named_parameters(), {r"^backbone\.": 1e-2})


def test_the_log_says_which_parameters_each_pattern_matched(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = _Model()
    mapping = {r"^backbone\.": 1e-4, r"^head\.": 1e-2, r"weight": 5e-3}
    with caplog.at_level(logging.INFO, logger="sts_core.training.optimization"):
        regroup_parameters(_optimizer(model), model.named_parameters(), mapping)
    lines = [r.getMessage() for r in caplog.records if "learning_rate_mapping" in r.getMessage()]
    assert len(lines) == 3, lines
    backbone, head, weight = lines
    assert "'^backbone\\\\.' (lr 0.0001): 4 parameter(s): backbone.layer.0.weight" in backbone
    assert "(4 in all)" in backbone  # the first few names, then the count
    assert "'^head\\\\.' (lr 0.01): 2 parameter(s): head.weight, head.bias" in head
    # every weight is taken by an earlier pattern: said, not an error
    assert "'weight' (lr 0.005): 0 parameter(s) (every match taken by an earlier" in weight


def test_every_pattern_that_matches_keeps_its_rate() -> None:
    model = _Model()
    optimizer = _optimizer(model)
    regroup_parameters(optimizer, model.named_parameters(), {r"^head\.": 1e-2})
    names = {id(p): n for n, p in model.named_parameters()}
    rates = {names[id(p)]: g["lr"] for g in optimizer.param_groups for p in g["params"]}
    assert rates["head.weight"] == rates["head.bias"] == 1e-2
    assert rates["backbone.layer.0.weight"] == 1e-3
