"""Tiny runs and their files: fixture recipes, a package's test files, scripted evaluation,
checkpoint selection."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sts_core.testing.models import WORDS
from sts_core.testing.option_checks import quick_training_args

if TYPE_CHECKING:
    from datasets import Dataset

    from sts_core.method import Method
    from sts_core.training import AnyModelTrainer

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


# Two-process workers (spawned children: they import torch and these, not transformers).
def load_module_by_path(name: str, path: str | os.PathLike) -> Any:
    """A module from its file, registered as ``name``: a worker loads a torch-only module
    (a loss) this way instead of importing its package (which pulls in transformers)."""

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def write_scored_pairs(path: Path, rows: int, seed: int, words: int = 5) -> Path:
    """A headed CSV (``sentence1,sentence2,score``) of ``rows`` random pairs of ``words``
    words from :data:`WORDS` each, scores in [0, 5]; the same for the same ``seed``."""
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["sentence1", "sentence2", "score"])
        for _ in range(rows):
            a, b = (" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(2))
            writer.writerow([a, b, round(rng.uniform(0, 5), 2)])
    return path


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

    return json.loads((output_dir / "metrics.json").read_text(encoding="utf-8"))


SELECTION_SCORES = [10.0, 50.0, 20.0, 30.0]  # the dev score of steps 1–4: best at step 2


def checkpoint_selection_run(
    method: Method, output_dir: Path, model_dir: str | os.PathLike, train_dataset: Dataset
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


def checkpoint_selection_fixture(
    method: Method, train_dataset: Callable[[], Dataset]
) -> Callable[..., dict[str, Any]]:
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


def train_and_save(trainer: AnyModelTrainer, output_dir: Path) -> Path:
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

    spec = importlib.util.spec_from_file_location(
        f"{package.name}_train_script", package / "train.py"
    )
    assert spec is not None and spec.loader is not None, package
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


def mined_triplets(model: str | os.PathLike, folder: Path, rows: int = 12) -> Path:
    """``sts-mine``'s output (one negative per pair) for ``rows`` made-up (anchor, positive)
    pairs, written in ``folder``: the CSV a recipe trains on as it is."""
    from sts_core.mining_cli import main as mine

    pairs = folder / "pairs.csv"
    lines = [f"a man plays a guitar {i},a man plays music {i}" for i in range(rows)]
    pairs.write_text("anchor,positive\n" + "\n".join(lines) + "\n", encoding="utf-8")
    mined = folder / "mined.csv"
    argv = ["--model", str(model), "--pairs", str(pairs), "--output", str(mined)]
    assert mine([*argv, "--num-negatives", "1", "--device", "cpu"]) == 0
    return mined
