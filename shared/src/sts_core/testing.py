"""Test support shipped with sts-core: tiny models built from configs and real-data gates.

Registered as a pytest plugin (entry point ``pytest11``), so the tests of the core and of
every method package get these fixtures without a conftest:

- ``tiny_bert_dir`` / ``tiny_llama_dir``: a 2-layer BERT (WordPiece tokenizer) and a
  2-layer Llama decoder (word-level tokenizer, no pad token), saved to a temporary folder.
  No downloads; ``make_tiny_bert`` / ``make_tiny_llama`` build more of them.
- ``tiny_bert_nodropout_dir``: the tiny BERT with dropout 0 (deterministic training);
  ``torch_one_thread``: torch on one thread for a test module.
- ``sts_data_dir``, ``sts_models_dir``, ``minilm_dir``, ``mpnet_dir``, ``smollm_dir``: the
  real benchmark folder and models, skipping the test with the reason when
  ``STS_DATA_DIR`` / ``STS_MODELS_DIR`` are unset.
"""

from __future__ import annotations

import os
import string
from pathlib import Path
from typing import Any

import pytest

WORDS = [
    "a",
    "an",
    "the",
    "is",
    "are",
    "was",
    "were",
    "man",
    "woman",
    "men",
    "women",
    "boy",
    "girl",
    "dog",
    "cat",
    "child",
    "children",
    "playing",
    "plays",
    "play",
    "guitar",
    "piano",
    "eating",
    "eats",
    "food",
    "ball",
    "soccer",
    "running",
    "runs",
    "riding",
    "horse",
    "bike",
    "car",
    "street",
    "in",
    "on",
    "at",
    "of",
    "with",
    "and",
    "to",
    "by",
    "for",
    "from",
    "into",
    "slicing",
    "cutting",
    "onion",
    "tomato",
    "sitting",
    "sits",
    "standing",
    "beach",
    "park",
    "water",
    "swimming",
    "someone",
    "somebody",
    "people",
    "person",
    "two",
    "three",
    "small",
    "big",
    "black",
    "white",
    "not",
    "no",
    "something",
    "different",
    "very",
    "similar",
    "same",
    "this",
    "that",
    "sentence",
    "means",
    "one",
    "word",
]


def _vocab() -> dict[str, int]:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    pieces = [f"##{c}" for c in string.ascii_lowercase + string.digits]
    tokens = dict.fromkeys(specials + chars + pieces + WORDS)
    return {token: index for index, token in enumerate(tokens)}


def make_tiny_bert(folder: Path, seed: int = 0) -> Path:
    """A 2-layer BERT (hidden 32) with a WordPiece tokenizer, saved to ``folder``."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = BertTokenizerFast(vocab=_vocab(), do_lower_case=True)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def make_tiny_llama(folder: Path, seed: int = 0) -> Path:
    """A 2-layer Llama decoder (hidden 32) with a word-level tokenizer and no pad token."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {tok: i for i, tok in enumerate(["<unk>", "<s>", "</s>", *WORDS, *string.punctuation])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(seed)
    LlamaModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


QUICK_TRAINING_ARGS: dict[str, Any] = {
    "learning_rate": 1e-3,
    "warmup_steps": 0,
    "logging_steps": 1,
    "eval_strategy": "no",
    "save_strategy": "no",
    "metric_for_best_model": None,
    "report_to": "none",
    "disable_tqdm": True,
    "seed": 0,
    "dataloader_pin_memory": False,
}


def quick_training_args(config_class: type, output_dir: str | os.PathLike, **overrides: Any) -> Any:
    """``config_class`` (BaseConfig or a method's) for a few fast, logged, unsaved steps."""
    return config_class(output_dir=str(output_dir), **{**QUICK_TRAINING_ARGS, **overrides})


FIXTURE_RECIPE_SETTINGS: dict[str, str] = {
    "max_steps": "4",
    "per_device_train_batch_size": "8",
    "learning_rate": "1e-3",  # a string for PyYAML (YAML 1.1)
    "warmup_steps": "0",
    "logging_steps": "1",
    "eval_strategy": "steps",
    "eval_steps": "2",
    "save_strategy": "steps",
    "save_steps": "2",
    "report_to": "none",
    "disable_tqdm": "true",
    "dataloader_pin_memory": "false",
    "seed": "0",
}


# Bad values of a numeric option by its range (``sts_core.options.check_number``), for the
# range tests of the core and of each package.
NOT_FINITE = ("nan", "inf", "-inf")
POSITIVE_BAD = (*NOT_FINITE, "0", "-0.5")
NON_NEGATIVE_BAD = (*NOT_FINITE, "-0.5")


def range_cases(cases: list[tuple[str, Any, str]]) -> list[Any]:
    """``pytest.param(option, value, words)`` for each bad value of each
    ``(option, bad values, words of the error)``."""
    return [
        pytest.param(name, value, words, id=f"{name}={value}")
        for name, values, words in cases
        for value in values
    ]


def config_error(config_class: type, **settings: Any) -> str:
    """The whole message of the ValueError that ``config_class(**settings)`` raises (the
    config is built directly, without a recipe); AssertionError when it raises none."""
    with pytest.raises(ValueError) as caught:
        config_class(output_dir="unused", report_to="none", **settings)
    return str(caught.value)


def config_accepts(config_class: type, **settings: Any) -> Any:
    """``config_class(**settings)``, which must not raise (the boundary of a check)."""
    return config_class(output_dir="unused", report_to="none", **settings)


def option_parse_error(config_class: type, folder: Path, name: str, value: str) -> str:
    """The one-line ConfigError that parsing a recipe with ``name: value`` gives (it names
    the recipe)."""
    from sts_core.training import ConfigError, ConfigParser

    recipe = folder / "recipe.yaml"
    recipe.write_text(
        f"model_name_or_path: some/model\nreport_to: none\n{name}: {value}\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError) as caught:
        ConfigParser(config_class).parse(["--config", str(recipe)])
    message = str(caught.value)
    assert "\n" not in message.strip() and str(recipe) in message
    return message


def config_option_tests(
    config_class: type,
    ranges: list[tuple[str, Any, str]],
    choice_errors: list[tuple[dict[str, Any], str]],
    accepted: list[dict[str, Any]],
) -> tuple[Any, Any, Any]:
    """The three checks of a method config's options, as pytest test functions (bind them to
    ``test_*`` names in the package's test module): each option of ``ranges`` ((option,
    bad values, the words of the one-line error)) out of its range stops the parse naming it;
    each of ``choice_errors`` ((settings, the whole message)) is refused with its message;
    each of ``accepted`` (the settings next to a refused one) is accepted."""

    @pytest.mark.parametrize(("name", "value", "words"), range_cases(ranges))
    def test_an_option_out_of_range_stops_the_parse_naming_it(
        tmp_path: Path, name: str, value: str, words: str
    ) -> None:
        assert words in option_parse_error(config_class, tmp_path, name, value)

    @pytest.mark.parametrize(("settings", "message"), choice_errors)
    def test_a_bad_choice_or_combination_is_refused_with_its_whole_message(
        settings: dict, message: str
    ) -> None:
        assert config_error(config_class, **settings) == message

    @pytest.mark.parametrize("settings", accepted)
    def test_the_settings_next_to_a_refused_one_are_accepted(settings: dict) -> None:
        config_accepts(config_class, **settings)

    return (
        test_an_option_out_of_range_stops_the_parse_naming_it,
        test_a_bad_choice_or_combination_is_refused_with_its_whole_message,
        test_the_settings_next_to_a_refused_one_are_accepted,
    )


def one_line_error(err: str) -> str:
    """The one line a command printed on standard error for a bad input (``error: …``),
    asserting there is nothing else (no traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (a process group's rendezvous in a test)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def read_stsb_pairs(path: Path) -> tuple[list[str], list[str], Any]:
    """An STS-B file's (SentEval layout) first sentences, second sentences and scores."""
    import torch

    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]
    return [r[5] for r in rows], [r[6] for r in rows], torch.tensor([float(r[4]) for r in rows])


def step_log(output_dir: Path, steps: int) -> list[dict[str, Any]]:
    """The log line of each of the first ``steps`` steps, from ``checkpoint-<steps>``."""
    import json

    state_file = output_dir / f"checkpoint-{steps}" / "trainer_state.json"
    state = json.loads(state_file.read_text(encoding="utf-8"))
    logged = [entry for entry in state["log_history"] if "loss" in entry]
    assert [entry["step"] for entry in logged] == list(range(1, steps + 1))
    return logged


def optimizer_recipe(
    steps: int,
    batch: int,
    learning_rate: float,
    weight_decay: float,
    max_grad_norm: float,
    eps: float,
) -> dict[str, str]:
    """Recipe lines of a short run that a hand-written loop can follow: ``steps`` steps of
    ``batch`` pairs, AdamW, linear decay without warm-up, clipping, one checkpoint at the
    end (for :func:`step_log`)."""
    return {
        "max_steps": str(steps),
        "per_device_train_batch_size": str(batch),
        "learning_rate": str(learning_rate),
        "weight_decay": str(weight_decay),
        "lr_scheduler_type": "linear",
        "warmup_steps": "0",
        "max_grad_norm": str(max_grad_norm),
        "adam_epsilon": str(eps),
        "eval_steps": str(steps),
        "save_steps": str(steps),
    }


def decays_like_transformers(name: str) -> bool:
    """Whether the Trainer's AdamW decays parameter ``name`` (not biases or LayerNorm)."""
    return not (name.endswith("bias") or "LayerNorm" in name)


def clipped_adamw_step(
    named: list[tuple[str, Any]],
    moments: dict[str, tuple[Any, Any]],
    step: int,
    rate: float,
    weight_decay: float,
    max_grad_norm: float,
    betas: tuple[float, float],
    eps: float,
    decays: Any = decays_like_transformers,
    rate_factor: Any = None,
) -> float:
    """One optimizer step of a plain-torch reference loop, written out: the Trainer's
    clipping to a global gradient norm of ``max_grad_norm``, then AdamW (decoupled weight
    decay where ``decays(name)``, bias-corrected moments) at the step's learning rate
    ``rate``, times ``rate_factor(name)`` when given. Parameters
    without a gradient are left alone. Returns the norm before clipping."""
    import math

    import torch

    with torch.no_grad():
        grads = [p.grad for _, p in named if p.grad is not None]
        norm = torch.sqrt(sum((g * g).sum() for g in grads)).item()
        clip = min(1.0, max_grad_norm / (norm + 1e-6))
        for name, p in named:
            if p.grad is None:
                continue
            lr = rate * (rate_factor(name) if rate_factor is not None else 1.0)
            g = p.grad * clip
            first, second = moments[name]
            first.mul_(betas[0]).add_((1 - betas[0]) * g)
            second.mul_(betas[1]).add_((1 - betas[1]) * g * g)
            if decays(name):
                p.mul_(1 - lr * weight_decay)
            denominator = second.sqrt() / math.sqrt(1 - betas[1] ** step) + eps
            p.sub_(lr / (1 - betas[0] ** step) * first / denominator)
    return norm


def write_stsb_file(path: Path, scores: list[float]) -> Path:
    """An STS-B file (SentEval layout) with one pair per score, e.g. an unusable dev set."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        f"main-news\theadlines\t2016\t{i:04d}\t{score:.3f}\ta man plays {i} .\ta dog runs {i} ."
        for i, score in enumerate(scores)
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def write_fixture_recipe(
    path: Path,
    comment: str,
    model: str | os.PathLike,
    train: str | os.PathLike,
    dev: str | os.PathLike,
    output_dir: str | os.PathLike,
    **overrides: str,
) -> Path:
    """A YAML recipe for a few logged, evaluated and saved steps of a tiny model on fixture
    files; ``overrides`` replace or add lines (values are YAML text)."""
    lines = {
        "model_name_or_path": str(model),
        "train_datasets": f"[{train}]",
        "eval_dataset": str(dev),
        **FIXTURE_RECIPE_SETTINGS,
        "output_dir": str(output_dir),
        **overrides,
    }
    text = f"# {comment}\n" + "".join(f"{key}: {value}\n" for key, value in lines.items())
    path.write_text(text, encoding="utf-8")
    return path


EVERY_STEP_SELECTION_ARGS: dict[str, Any] = {
    "eval_strategy": "steps",
    "eval_steps": 1,
    "save_strategy": "steps",
    "save_steps": 1,
    "load_best_model_at_end": True,
    "metric_for_best_model": "fake_spearman",
}


class ScriptedEvaluator:
    """A dev evaluator whose ``fake_spearman`` follows a script, one value per call, so a
    test knows which checkpoint must be selected (use with ``EVERY_STEP_SELECTION_ARGS``).

    Args:
        scores: the score returned at the 1st, 2nd, … call.
        model_type: when given, every call asserts the evaluated model is of this type.
    """

    primary_metric = "fake_spearman"
    greater_is_better = True

    def __init__(self, scores: list[float], model_type: type | None = None) -> None:
        self.scores = list(scores)
        self.model_type = model_type
        self.calls = 0

    def __call__(self, model: Any) -> dict[str, float]:
        if self.model_type is not None:
            assert isinstance(model, self.model_type), type(model)
        self.calls += 1
        return {"fake_spearman": self.scores[self.calls - 1], "fake_pearson": 0.0}


def load_train_script(package: Path) -> Any:
    """``packages/<m>/train.py`` imported by path, as ``python train.py`` runs it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        f"{package.name}_train_script", package / "train.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def embed_pairs(encoder: Any, data: Any) -> tuple[Any, Any]:
    """Embeddings of both sides of every pair of ``data`` (``sentence1``/``sentence2``), by
    the encoder in eval mode, without gradient: a reference for a loss's first step."""
    import torch

    encoder.eval()
    with torch.no_grad():
        u = encoder(**encoder.tokenize(list(data["sentence1"])))
        v = encoder(**encoder.tokenize(list(data["sentence2"])))
    return u, v


def spearman_of_saved_model(folder: str | os.PathLike, pairs_file: Path) -> float:
    """Spearman (×100) of a saved model's cosine on an STS-B-layout file (the score in
    column 5, the sentences in 6 and 7), encoded afresh: what a run's reported score on
    that file must equal once the folder is reloaded."""
    import numpy as np
    from scipy.stats import spearmanr

    from sts_core.encoder import SentenceEncoder

    rows = [line.split("\t") for line in pairs_file.read_text(encoding="utf-8").splitlines()]
    encoder = SentenceEncoder.from_pretrained(folder)
    u = encoder.encode([r[5] for r in rows], show_progress_bar=False)
    v = encoder.encode([r[6] for r in rows], show_progress_bar=False)
    cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    return 100 * spearmanr(cosine, [float(r[4]) for r in rows]).statistic


def trainer_step_losses(trainer: Any) -> dict[int, float]:
    """The training loss logged at each step (``logging_steps: 1``)."""
    return {e["step"]: e["loss"] for e in trainer.state.log_history if "loss" in e}


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_bert_nodropout_dir(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT with dropout 0: training is a deterministic function of the seed."""
    import json
    import shutil

    folder = tmp_path_factory.mktemp("tiny-bert-nodropout")
    shutil.copytree(tiny_bert_dir, folder, dirs_exist_ok=True)
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def torch_one_thread():
    """Torch on one thread for a module: tiny models train many times faster that way,
    above all on a loaded machine. Use with ``pytestmark = pytest.mark.usefixtures(...)``."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def sts_data_dir() -> Path:
    """The real benchmark folder, or skip: set STS_DATA_DIR (CI sets it to ../shared/data)."""
    value = os.environ.get("STS_DATA_DIR")
    if not value or not Path(value).is_dir():
        pytest.skip("STS_DATA_DIR is not set to the benchmark data folder")
    return Path(value)


@pytest.fixture(scope="session")
def sts_models_dir() -> Path:
    """The folder made by shared/bin/offline-models, or skip: set STS_MODELS_DIR."""
    value = os.environ.get("STS_MODELS_DIR")
    if not value or not Path(value).is_dir():
        pytest.skip("STS_MODELS_DIR is not set to the local pretrained-models folder")
    return Path(value)


def _model_in(models_dir: Path, name: str) -> Path:
    path = models_dir / name
    if not (path / "config.json").is_file():
        pytest.skip(f"{path} is missing: run shared/bin/offline-models {models_dir}")
    return path


@pytest.fixture(scope="session")
def minilm_dir(sts_models_dir: Path) -> Path:
    """all-MiniLM-L6-v2 under STS_MODELS_DIR."""
    return _model_in(sts_models_dir, "all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def mpnet_dir(sts_models_dir: Path) -> Path:
    """all-mpnet-base-v2 under STS_MODELS_DIR."""
    return _model_in(sts_models_dir, "all-mpnet-base-v2")


@pytest.fixture(scope="session")
def smollm_dir(sts_models_dir: Path) -> Path:
    """SmolLM2-135M-Instruct (Llama decoder) under STS_MODELS_DIR."""
    return _model_in(sts_models_dir, "SmolLM2-135M-Instruct")
