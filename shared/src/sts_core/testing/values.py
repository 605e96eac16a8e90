"""Value checks: a plain-torch loop and AdamW to compare a run's steps with, and what a run
logged and saved."""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sts_core.testing.runs import PackageFiles, write_fixture_recipe

if TYPE_CHECKING:
    from transformers import Trainer


def read_stsb_pairs(path: Path) -> tuple[list[str], list[str], Any]:
    """An STS-B file's (SentEval layout) first sentences, second sentences and scores."""
    import torch

    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]
    return [r[5] for r in rows], [r[6] for r in rows], torch.tensor([float(r[4]) for r in rows])


def rows_placed_apart(ours: list[list[int]], theirs: list[list[int]]) -> tuple[set[int], set[int]]:
    """``no_duplicates``' batches against sentence-transformers' ``NoDuplicatesBatchSampler``
    on the same order: the rows the peer puts in batches past our ⌈N/G⌉ (``leftovers``) and
    the rows of ours in another batch than the peer's, leftovers apart (``displaced``)."""
    leftovers = {row for batch in theirs[len(ours) :] for row in batch}
    theirs_of = {row: b for b, batch in enumerate(theirs) for row in batch}
    displaced = {
        row
        for b, batch in enumerate(ours)
        for row in batch
        if row not in leftovers and theirs_of[row] != b
    }
    return leftovers, displaced


def assert_peer_batches_but_for_the_end(
    ours: list[list[int]], theirs: list[list[int]], with_duplicate: int
) -> tuple[set[int], set[int]]:
    """The rule of ``no_duplicates`` against the peer's batches on the same order: batch
    ``i`` holds the peer's batch ``i`` in its order but for the rows placed at the end (its
    leftovers, each in place of at most one displaced row, or with its duplicate)."""
    leftovers, displaced = rows_placed_apart(ours, theirs)
    moved = leftovers | displaced
    for mine, its in zip(ours, theirs, strict=False):
        assert [r for r in mine if r not in moved] == [r for r in its if r not in moved]
    assert len(displaced) <= len(leftovers) - with_duplicate
    if len(theirs) == len(ours):
        assert ours == theirs
    return leftovers, displaced


def table_cosine_spearman(model: Path | str, table: Path) -> float:
    """Spearman × 100 of a saved model's cosine on a table of ``sentence1``,
    ``sentence2``, ``score`` (CSV), computed afresh (numpy, scipy; float64 cosines)."""
    import numpy as np
    from scipy.stats import spearmanr

    from sts_core.encoder import SentenceEncoder

    with open(table, encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    encoder = SentenceEncoder.from_pretrained(str(model))
    u = encoder.encode([r["sentence1"] for r in rows], show_progress_bar=False)
    v = encoder.encode([r["sentence2"] for r in rows], show_progress_bar=False)
    u, v = u.astype(np.float64), v.astype(np.float64)
    cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    return 100 * float(spearmanr(cosine, [float(r["score"]) for r in rows]).statistic)


def step_log(output_dir: Path, steps: int) -> list[dict[str, Any]]:
    """The log line of each of the first ``steps`` steps, from ``checkpoint-<steps>``."""

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


def trainer_step_losses(trainer: Trainer) -> dict[int, float]:
    """The training loss logged at each step (``logging_steps: 1``)."""
    return {int(e["step"]): e["loss"] for e in trainer.state.log_history if "loss" in e}
