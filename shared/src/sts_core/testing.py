"""Test support shipped with sts-core: tiny models built from configs and real-data gates.

A pytest plugin that loads only where it is asked for (``-p sts_core.testing`` in a
package's ``[tool.pytest.ini_options] addopts``, as each method package and the repository
do; or ``pytest_plugins = ["sts_core.testing"]`` in a top-level conftest), not in every
pytest run of an environment with sts-core installed. It registers the project's markers
(:data:`MARKERS`) and gives these fixtures:

- ``tiny_bert_dir`` / ``tiny_llama_dir``: a 2-layer BERT (WordPiece tokenizer) and a
  2-layer Llama decoder (word-level tokenizer, no pad token), saved to a temporary folder.
  No downloads; ``make_tiny_bert`` / ``make_tiny_llama`` build more of them.
- ``tiny_bert_nodropout_dir``: the tiny BERT with dropout 0 (deterministic training);
  ``torch_one_thread``: torch on one thread for a test module; ``no_model_loading``:
  loading a ``SentenceEncoder`` fails the test.
- ``sts_data_dir``, ``sts_models_dir``, ``minilm_dir``, ``mpnet_dir``, ``smollm_dir``: the
  real benchmark folder and models, skipping the test with the reason when
  ``STS_DATA_DIR`` / ``STS_MODELS_DIR`` are unset.

The helpers a method package's tests share (option checks, bad-recipe checks, the
end-to-end value test against a plain-torch loop, two-process workers) are listed in
docs/testing.md, "Test support for method packages".
"""

from __future__ import annotations

import os
import string
from dataclasses import dataclass
from functools import cached_property
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


#: 16 sentence pairs with STS scores 0–5 (a paraphrase and an unrelated sentence for most
#: first sentences, ties and middle scores among them) for tiny training runs
TOY_STS_PAIRS: list[tuple[str, str, float]] = [
    ("a man is playing the guitar", "a man plays the guitar", 4.8),
    ("a man is playing the guitar", "a woman is slicing an onion", 0.2),
    ("a dog runs in the park", "a dog is running in the park", 4.5),
    ("a dog runs in the park", "a girl is eating food", 0.5),
    ("two boys play soccer", "two children are playing soccer", 4.0),
    ("two boys play soccer", "a cat sits on the car", 0.0),
    ("a woman is riding a horse", "someone rides a horse", 3.8),
    ("a woman is riding a horse", "the man is swimming in the water", 0.8),
    ("a small white cat", "a small black cat", 3.0),
    ("a small white cat", "people are standing on the beach", 0.2),
    ("the child plays piano", "a child is playing the piano", 4.6),
    ("the child plays piano", "a big car on the street", 0.0),
    ("three men are sitting", "three people sit", 3.4),
    ("three men are sitting", "a boy is cutting a tomato", 1.0),
    ("this sentence means one thing", "this sentence means something different", 2.0),
    ("a person rides a bike", "a man is riding a bike", 4.2),
]
#: sentences to embed before and after a save
TOY_PROBES = ["a man plays the guitar", "a dog is running in the park", "children playing soccer"]


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
) -> type:
    """The three checks of a method config's options, as a pytest test class (bind it to a
    ``Test…`` name in the package's test module): each option of ``ranges`` ((option, bad
    values, the words of the one-line error)) out of its range stops the parse naming it
    and the recipe; each of ``choice_errors`` ((settings, the whole message of the
    ValueError the config raises)) is refused with its message; each of ``accepted`` (the
    settings next to a refused one) is accepted."""

    class ConfigOptionTests:
        @pytest.mark.parametrize(("name", "value", "words"), range_cases(ranges))
        def test_an_option_out_of_range_stops_the_parse_naming_it(
            self, tmp_path: Path, name: str, value: str, words: str
        ) -> None:
            assert words in option_parse_error(config_class, tmp_path, name, value)

        @pytest.mark.parametrize(("settings", "message"), choice_errors)
        def test_a_bad_choice_or_combination_is_refused_with_its_whole_message(
            self, settings: dict, message: str
        ) -> None:
            assert config_error(config_class, **settings) == message

        @pytest.mark.parametrize("settings", accepted)
        def test_the_settings_next_to_a_refused_one_are_accepted(self, settings: dict) -> None:
            config_accepts(config_class, **settings)

    ConfigOptionTests.__name__ = f"Test{config_class.__name__}Options"
    return ConfigOptionTests


def one_line_error(err: str) -> str:
    """The one line a command printed on standard error for a bad input (``error: …``),
    asserting there is nothing else (no traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def refusal(main: Any, argv: list[str], capsys: Any) -> str:
    """``main(argv)`` exits with status 2 after one ``error: …`` line on standard error (no
    traceback): the line."""
    assert main(list(argv)) == 2
    return one_line_error(capsys.readouterr().err)


def bad_recipe_tests(main: Any, write_recipe: Any, cases: list[tuple[dict[str, str], str]]) -> type:
    """A package's bad-input check of ``main`` (its train.py), as a pytest test class (bind
    it to a ``Test…`` name): for each of ``cases`` ((recipe lines over the package's fixture
    recipe, the words of the error)), ``main`` on ``write_recipe(path, model, output_dir,
    **lines)`` exits with status 2 and one ``error:`` line holding the words, before any
    model loads and without making the output folder."""

    class BadRecipeTests:
        @pytest.mark.usefixtures("no_model_loading")
        @pytest.mark.parametrize(("overrides", "words"), cases, ids=[w for _, w in cases])
        def test_bad_input_stops_with_one_line_before_the_model_loads(
            self, overrides: dict, words: str, tiny_bert_dir: Path, tmp_path: Path, capsys: Any
        ) -> None:
            recipe = write_recipe(tmp_path / "r.yaml", tiny_bert_dir, tmp_path / "out", **overrides)
            assert words in refusal(main, ["--config", str(recipe)], capsys)
            assert not (tmp_path / "out").exists()

    return BadRecipeTests


# Two-process workers (spawned children: they import torch and these, not transformers).
def load_module_by_path(name: str, path: str | os.PathLike) -> Any:
    """A module from its file, registered as ``name``: a worker loads a torch-only module
    (a loss) this way instead of importing its package (which pulls in transformers)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def seeded_linear(d_in: int, d_out: int, bias: bool = True, seed: int = 0) -> tuple[Any, Any]:
    """The same ``nn.Linear`` in every process (weights, then bias, drawn from a generator
    seeded with ``seed``) and that generator, to draw the batch from next."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    layer = torch.nn.Linear(d_in, d_out, bias=bias)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(d_out, d_in, generator=generator))
        if bias:
            layer.bias.copy_(torch.randn(d_out, generator=generator))
    return layer, generator


def join_gloo_group(rank: int, world: int, port: int) -> None:
    """Join the test's process group (gloo, rendezvous on 127.0.0.1:``port``)."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )


def ddp_average(grad: Any, world: int) -> Any:
    """A gradient averaged over the processes, as DDP does (a copy)."""
    import torch.distributed as dist

    grad = grad.clone()
    dist.all_reduce(grad)
    return grad / world


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


def decays_like_transformers(name: str) -> bool:
    """Whether the Trainer's AdamW decays parameter ``name`` (not biases or LayerNorm)."""
    return not (name.endswith("bias") or "LayerNorm" in name)


@dataclass(frozen=True)
class PlainLoop:
    """The optimizer of an end-to-end value test, on both sides: ``main`` runs ``steps``
    steps of ``batch`` examples from :meth:`recipe_lines` (AdamW, the rate decaying linearly
    from ``learning_rate`` without warm-up, clipping at ``max_grad_norm``, one checkpoint at
    the end for :func:`step_log`), and a plain-torch loop repeats them with
    :meth:`optimizer`.

    The defaults pin two settings for these comparisons. ``eps`` 1e-3, not 1e-8: the
    training forward packs the sentences (``padding_free: auto`` on a CPU) and the package
    sums in another order, so a gradient differs from the plain loop's by float32 rounding,
    which Adam's ``m / (√v + ε)`` amplifies up to ~lr for a gradient element near 0 when ε
    is tiny (measured on CoSENT: a weight off by 1e-4 with ε 1e-8, still 1.2× the tolerance
    with ε 1e-5, 0.1× with ε 1e-3). ``weight_decay`` 0.1 (not 0.01): decaying the wrong
    parameters then moves them by more than the tolerance.
    """

    batch: int
    steps: int = 2
    learning_rate: float = 1e-3
    weight_decay: float = 0.1
    max_grad_norm: float = 1.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-3

    def recipe_lines(self) -> dict[str, str]:
        """The recipe lines (YAML text) that make ``main`` train like this loop."""
        return {
            "max_steps": str(self.steps),
            "per_device_train_batch_size": str(self.batch),
            "learning_rate": str(self.learning_rate),
            "weight_decay": str(self.weight_decay),
            "lr_scheduler_type": "linear",
            "warmup_steps": "0",
            "max_grad_norm": str(self.max_grad_norm),
            "adam_epsilon": str(self.eps),
            "eval_steps": str(self.steps),
            "save_steps": str(self.steps),
        }

    def rate(self, step: int) -> float:
        """The learning rate of step ``step`` (1, 2, …): linear decay, no warm-up."""
        return self.learning_rate * (self.steps - (step - 1)) / self.steps

    def rates(self) -> list[float]:
        return [self.rate(step) for step in range(1, self.steps + 1)]

    def optimizer(
        self,
        named: list[tuple[str, Any]],
        decays: Any = decays_like_transformers,
        rate_factor: Any = None,
    ) -> PlainAdamW:
        """AdamW over ``named`` parameters, decaying those where ``decays(name)``, each at
        the step's rate times ``rate_factor(name)`` when given."""
        return PlainAdamW(self, named, decays, rate_factor)


class PlainAdamW:
    """One optimizer step of a plain-torch reference loop, written out: the Trainer's
    clipping to a global gradient norm of ``max_grad_norm``, then AdamW (decoupled weight
    decay, bias-corrected moments). Parameters without a gradient are left alone."""

    def __init__(
        self, loop: PlainLoop, named: list[tuple[str, Any]], decays: Any, rate_factor: Any
    ) -> None:
        import torch

        self.loop, self.named = loop, named
        self.decays, self.rate_factor = decays, rate_factor
        self.moments = {name: (torch.zeros_like(p), torch.zeros_like(p)) for name, p in named}

    def zero_grad(self) -> None:
        for _, parameter in self.named:
            parameter.grad = None

    def step(self, step: int) -> float:
        """Step ``step`` (1, 2, …); returns the gradient norm before clipping."""
        import math

        import torch

        loop = self.loop
        (beta1, beta2), rate = loop.betas, loop.rate(step)
        with torch.no_grad():
            grads = [p.grad for _, p in self.named if p.grad is not None]
            norm = torch.sqrt(sum((g * g).sum() for g in grads)).item()
            clip = min(1.0, loop.max_grad_norm / (norm + 1e-6))
            for name, p in self.named:
                if p.grad is None:
                    continue
                lr = rate * (self.rate_factor(name) if self.rate_factor is not None else 1.0)
                g = p.grad * clip
                first, second = self.moments[name]
                first.mul_(beta1).add_((1 - beta1) * g)
                second.mul_(beta2).add_((1 - beta2) * g * g)
                if self.decays(name):
                    p.mul_(1 - lr * loop.weight_decay)
                denominator = second.sqrt() / math.sqrt(1 - beta2**step) + loop.eps
                p.sub_(lr / (1 - beta1**step) * first / denominator)
        return norm


def mean_pooled(model: Any, tokenizer: Any, texts: list[str]) -> Any:
    """Mean pooling by hand: the average of the last hidden states under the attention
    mask (padded batch, truncation on)."""
    batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    states = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return (states * mask).sum(1) / mask.sum(1)


def saved_weights(output_dir: Path) -> dict[str, Any]:
    """A saved model's weights as a plain loop names them: the backbone's read back with
    ``AutoModel`` under ``backbone.``, and those of the extra-weights file (heads, MLP,
    temperature) under their saved names."""
    from safetensors.torch import load_file
    from transformers import AutoModel

    backbone = AutoModel.from_pretrained(output_dir).state_dict()
    weights = {f"backbone.{name}": value for name, value in backbone.items()}
    extra = output_dir / "sts_extra_modules.safetensors"
    if extra.is_file():
        weights.update(load_file(extra))
    return weights


@dataclass
class ValueCheck:
    """A package's end-to-end value test: its ``train.py``'s ``main`` on a fixture recipe
    against a plain-torch loop of the same recipe (``loop``), step for step; ``test_file``
    is the test module's ``__file__`` (:class:`PackageFiles`)."""

    test_file: str | os.PathLike
    loop: PlainLoop

    @cached_property
    def files(self) -> PackageFiles:
        """The package's fixture files and ``main`` (loaded once)."""
        return PackageFiles(self.test_file)

    def run_main(
        self,
        folder: Path,
        comment: str,
        model: str | os.PathLike,
        train: str | os.PathLike | None = None,
        **settings: str,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """``main`` on a recipe written in ``folder``: the fixture files (``train`` for the
        training file when given), ``settings`` and the loop's optimizer; the log line of
        each step and the saved weights (:func:`saved_weights`)."""
        output_dir = folder / "out"
        recipe = write_fixture_recipe(
            folder / "recipe.yaml",
            comment,
            model,
            train or self.files.train,
            self.files.dev,
            output_dir,
            **settings,
            **self.loop.recipe_lines(),
        )
        assert self.files.main(["--config", str(recipe)]) == 0
        return step_log(output_dir, self.loop.steps), saved_weights(output_dir)

    def test_class(
        self,
        run_main: Any,
        plain_loop: Any,
        model_fixture: str = "tiny_bert_nodropout_dir",
        learning_rates: bool = True,
    ) -> type:
        """The value test as a pytest test class (bind it to a ``Test…`` name): the model
        folder of ``model_fixture``; ``run_main(model, tmp_path, monkeypatch)`` gives the
        log, the saved weights and the starting weights of what the run draws itself (a
        fresh head; None when nothing), ``plain_loop(model, start)`` the loop's steps,
        gradient norms and final weights; :meth:`assert_equal` compares them."""
        check = self

        class ValueTest:
            def test_two_steps_of_main_equal_a_plain_torch_loop(
                self, request: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
            ) -> None:
                model = request.getfixturevalue(model_fixture)
                logged, trained, start = run_main(model, tmp_path, monkeypatch)
                steps, norms, expected = plain_loop(model, start)
                check.assert_equal(logged, trained, steps, norms, expected, learning_rates)

        return ValueTest

    def assert_equal(
        self,
        logged: list[dict[str, Any]],
        trained: dict[str, Any],
        steps: list[dict[str, float]],
        norms: list[float],
        expected: dict[str, Any],
        learning_rates: bool = True,
    ) -> None:
        """Step for step, the run's log equals the plain loop's values (every key of
        ``steps``: the loss and its parts), gradient norms (clipping exercised: one is above
        ``max_grad_norm``) and learning rates (unless ``learning_rates`` is false: the log
        shows one group's rate), and every saved weight equals the loop's final one."""
        import torch

        for name in steps[0]:
            assert [e[name] for e in logged] == pytest.approx([s[name] for s in steps], rel=1e-5)
        assert [e["grad_norm"] for e in logged] == pytest.approx(norms, rel=1e-5)
        assert max(norms) > self.loop.max_grad_norm  # the clipping is exercised
        if learning_rates:
            assert [e["learning_rate"] for e in logged] == pytest.approx(self.loop.rates())
        assert set(trained) == set(expected)
        for name, value in expected.items():
            torch.testing.assert_close(trained[name], value, rtol=1e-5, atol=1e-6, msg=name)


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


@dataclass
class PackageFiles:
    """A method package's test fixtures (``tests/fixtures/sts-{train,dev,test}.csv``, STS-B
    layout) and its ``train.py``'s ``main``, found from a test module's ``__file__``."""

    test_file: str | os.PathLike

    @property
    def package(self) -> Path:
        return Path(self.test_file).resolve().parents[1]

    @property
    def fixtures(self) -> Path:
        return self.package / "tests" / "fixtures"

    @property
    def train(self) -> Path:
        return self.fixtures / "sts-train.csv"

    @property
    def dev(self) -> Path:
        return self.fixtures / "sts-dev.csv"

    @property
    def test(self) -> Path:
        return self.fixtures / "sts-test.csv"

    @cached_property
    def main(self) -> Any:
        return load_train_script(self.package).main

    def recipe(
        self,
        path: Path,
        comment: str,
        model: str | os.PathLike,
        output_dir: str | os.PathLike,
        train: str | os.PathLike | None = None,
        **lines: str,
    ) -> Path:
        """:func:`write_fixture_recipe` on the fixture files (``train`` instead of the
        training file when given), the test file as the final evaluation set."""
        lines = {"final_eval_datasets": f"[{self.test}]", **lines}
        train = train or self.train
        return write_fixture_recipe(path, comment, model, train, self.dev, output_dir, **lines)


def read_metrics(output_dir: Path) -> dict[str, Any]:
    """A run's ``metrics.json``."""
    import json

    return json.loads((output_dir / "metrics.json").read_text(encoding="utf-8"))


SELECTION_SCORES = [10.0, 50.0, 20.0, 30.0]  # the dev score of steps 1–4: best at step 2


def checkpoint_selection_run(
    method: Any, output_dir: Path, model_dir: str | os.PathLike, train_dataset: Any
) -> dict[str, Any]:
    """A ``BaseTrainer`` run of 4 steps of 8 pairs of ``method`` (its config class), each
    step evaluated by a :class:`ScriptedEvaluator` (``SELECTION_SCORES``) and saved, the
    best model loaded at the end and saved to ``output_dir / "final"``, the model card
    naming "tiny-bert" and "toy pairs": its ``trainer``, ``encoder``, ``evaluator``,
    ``output_dir`` and ``final_dir``."""
    from sts_core.encoder import SentenceEncoder
    from sts_core.training import BaseTrainer

    evaluator = ScriptedEvaluator(SELECTION_SCORES, model_type=SentenceEncoder)
    args = quick_training_args(
        method.config,
        output_dir,
        max_steps=4,
        per_device_train_batch_size=8,
        **EVERY_STEP_SELECTION_ARGS,
    )
    encoder = SentenceEncoder.from_pretrained(model_dir)
    trainer = BaseTrainer(
        model=encoder, args=args, train_dataset=train_dataset, evaluator=evaluator, method=method
    )
    final_dir = train_and_save(trainer, output_dir)
    return {
        "trainer": trainer,
        "encoder": encoder,
        "evaluator": evaluator,
        "output_dir": output_dir,
        "final_dir": final_dir,
    }


def checkpoint_selection_fixture(method: Any, train_dataset: Any) -> Any:
    """A module-scoped pytest fixture (bind it to a name in the test module) of
    :func:`checkpoint_selection_run` on the tiny BERT without dropout and
    ``train_dataset()``."""

    @pytest.fixture(scope="module")
    def selected_run(
        tiny_bert_nodropout_dir: Path, tmp_path_factory: pytest.TempPathFactory
    ) -> dict[str, Any]:
        output_dir = tmp_path_factory.mktemp("selected")
        return checkpoint_selection_run(
            method, output_dir, tiny_bert_nodropout_dir, train_dataset()
        )

    return selected_run


def train_and_save(trainer: Any, output_dir: Path) -> Path:
    """``trainer.train()`` with a model card naming "tiny-bert" and "toy pairs", then the
    model saved to ``output_dir / "final"`` (returned)."""
    trainer.model_card_data.update(base_model="tiny-bert", train_data="toy pairs")
    trainer.train()
    final_dir = output_dir / "final"
    trainer.save_model(str(final_dir))
    return final_dir


def assert_best_checkpoint_selected(run: dict[str, Any]) -> None:
    """Every step of :func:`checkpoint_selection_run` was evaluated and step 2 (the best
    dev score) is the selected checkpoint."""
    state = run["trainer"].state
    assert run["evaluator"].calls == len(SELECTION_SCORES)
    assert state.best_metric == max(SELECTION_SCORES)
    assert Path(state.best_model_checkpoint) == run["output_dir"] / "checkpoint-2"


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


#: the markers of the project's tests, registered by :func:`pytest_configure`
MARKERS = {
    "real_data": "needs STS_DATA_DIR (the benchmark data folder); skipped when unset",
    "real_model": "needs STS_MODELS_DIR (local pretrained models); skipped when unset",
    "slow": "takes more than a few seconds",
    "cuda": "needs a CUDA GPU; skipped elsewhere (benchmarks/gpu_check.py runs them)",
}


def pytest_configure(config: pytest.Config) -> None:
    """Register :data:`MARKERS` (a package's own run has no repository ini listing them)."""
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


@pytest.fixture
def no_model_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a ``SentenceEncoder`` fails the test: every check must come before it."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr("sts_core.encoder.model.SentenceEncoder.from_pretrained", refuse)


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
    """The local models folder (tools/offline_models.py makes it), or skip: set
    STS_MODELS_DIR."""
    value = os.environ.get("STS_MODELS_DIR")
    if not value or not Path(value).is_dir():
        pytest.skip("STS_MODELS_DIR is not set to the local pretrained-models folder")
    return Path(value)


def _model_in(models_dir: Path, name: str) -> Path:
    path = models_dir / name
    if not (path / "config.json").is_file():
        pytest.skip(
            f"{path} is missing: run uv run --with pip python tools/offline_models.py {models_dir}"
        )
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
