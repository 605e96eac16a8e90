"""``encode``'s batches: by sentences or by a token budget (``max_batch_tokens``), padded
or padding-free (the varlen path, here on its exact per-sentence reference kernel: the
fused kernels are CUDA-only), tokenized at once or in chunks ahead in a background thread.
Each way gives the vectors of one-by-one encoding, in input order with duplicates, for a
BERT and a left-padded Llama with last-token pooling; the budget defaults per device as
documented; bad budgets are refused naming the option; ``sts-eval --max-batch-tokens``."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import sts_core.encoder.encoding as encoding
import sts_core.encoder.packing as packing_module
from sts_core.cli import eval_main, load_encoder, make_eval_parser
from sts_core.encoder import SentenceEncoder
from sts_core.encoder.encoding import (
    CUDA_TOKENS_PER_SENTENCE,
    batch_bounds,
    default_max_batch_tokens,
    resolve_max_batch_tokens,
)
from sts_core.mining_cli import main as mine_main
from sts_core.mining_cli import make_parser as make_mine_parser

pytestmark = pytest.mark.usefixtures("torch_one_thread")

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures" / "data"
SENTENCES = [
    "a man is playing a guitar",
    "two dogs run",
    "a woman is slicing an onion on the board in the kitchen",
    "the cat",
    "two dogs run",  # a duplicate, encoded once
    "a man plays the guitar loudly on the street",
    "dogs",
    "a man is playing a guitar",
    "a child is riding a horse in the park near the big house",
]


def encoders(folder: Path, model: str, path: str) -> tuple[SentenceEncoder, SentenceEncoder]:
    """The encoder on ``path`` (``padded``, or ``varlen`` forced) and a padded twin."""
    settings: dict[str, Any] = {"pooling": "mean"}
    if model == "llama":
        settings = {"pooling": "last_token", "padding_side": "left"}
    mode = "varlen" if path == "varlen" else "false"
    return tuple(  # type: ignore[return-value]
        SentenceEncoder.from_pretrained(folder, padding_free=m, **settings) for m in (mode, "false")
    )


class Batches:
    """The batches an encoder's forward received: (rows, padded tokens, real tokens)."""

    def __init__(self, encoder: SentenceEncoder) -> None:
        self.seen: list[tuple[int, int, int]] = []
        encoder.register_forward_pre_hook(self.record, with_kwargs=True)

    def record(self, module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        mask = kwargs["attention_mask"]
        self.seen.append((mask.shape[0], mask.numel(), int(mask.sum())))

    def take(self) -> list[tuple[int, int, int]]:
        seen, self.seen = self.seen, []
        return seen


@pytest.mark.parametrize("path", ["padded", "varlen"])
@pytest.mark.parametrize("model", ["bert", "llama"])
def test_every_batching_gives_the_one_by_one_vectors_in_input_order(
    tiny_bert_dir: Path,
    tiny_llama_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    path: str,
) -> None:
    encoder, padded = encoders(tiny_bert_dir if model == "bert" else tiny_llama_dir, model, path)
    assert encoder.eval().packing_path()[0] == path
    one_by_one = np.stack([padded.encode(s, show_progress_bar=False) for s in SENTENCES])
    assert np.abs(one_by_one[0] - one_by_one[1]).max() > 1e-3  # the sentences differ
    kernel_calls = []
    reference = packing_module.reference_varlen_attention
    monkeypatch.setattr(
        packing_module,
        "reference_varlen_attention",
        lambda *a, **k: kernel_calls.append(1) or reference(*a, **k),
    )
    batches = Batches(encoder)
    distinct = len(set(SENTENCES))

    def check(vectors: np.ndarray) -> None:
        np.testing.assert_allclose(vectors, one_by_one, atol=1e-5, rtol=1e-5)

    check(encoder.encode(SENTENCES, batch_size=2, show_progress_bar=False))
    assert [rows for rows, _, _ in batches.take()] == [2, 2, 2, 1]  # on a CPU: by count
    for budget in (20, 40, 1):
        check(encoder.encode(SENTENCES, max_batch_tokens=budget, show_progress_bar=False))
        seen = batches.take()
        assert sum(rows for rows, _, _ in seen) == distinct
        counted = 2 if path == "varlen" else 1  # real tokens packed, padded ones padded
        assert all(batch[0] == 1 or batch[counted] <= budget for batch in seen)
        if budget == 40:
            assert max(rows for rows, _, _ in seen) > 2  # more sentences than batch_size 2
        if budget == 1:
            assert all(rows == 1 for rows, _, _ in seen)
    # chunks of 3 sentences, each next one tokenized in a background thread
    chunks: list[tuple[int, str]] = []
    tokenize = encoder.tokenize

    def spy(sentences: list[str], padding: bool | str = True) -> Any:
        chunks.append((len(sentences), threading.current_thread().name))
        return tokenize(sentences, padding=padding)

    monkeypatch.setattr(encoder, "tokenize", spy)
    monkeypatch.setattr(encoding, "tokenize_chunk", lambda device: 3)
    check(encoder.encode(SENTENCES, max_batch_tokens=20, show_progress_bar=False))
    check(encoder.encode(SENTENCES, batch_size=2, show_progress_bar=False))
    assert [size for size, _ in chunks] == [3, 3, 1] * 2
    assert all(name.startswith("sts-tokenize") for _, name in chunks)
    assert bool(kernel_calls) == (path == "varlen")


def test_batch_bounds_by_count_by_padded_and_by_real_tokens() -> None:
    lengths = np.array([10, 6, 5, 5, 2, 2, 2, 1])
    assert batch_bounds(lengths, 3) == [(0, 3), (3, 6), (6, 8)]
    # padded, 12: 1 × 10, then 2 × 6, then 2 × 5, then the last three (3 × 2)
    assert batch_bounds(lengths, 3, max_batch_tokens=12) == [(0, 1), (1, 3), (3, 5), (5, 8)]
    # real, 12: 10, then 6 + 5, then 5 + 2 + 2 + 2 + 1
    assert batch_bounds(lengths, 3, 12, packed=True) == [(0, 1), (1, 3), (3, 8)]
    for packed in (False, True):  # at least one sentence a batch
        assert batch_bounds(np.array([40, 3]), 3, 12, packed) == [(0, 1), (1, 2)]


def test_the_default_budget_per_device_is_the_documented_one(
    tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert default_max_batch_tokens("cpu", 64) is None  # a CPU: batch_size sentences
    assert default_max_batch_tokens(torch.device("cuda:1"), 64) == 64 * 256 == 16_384
    assert default_max_batch_tokens("cuda", 8) == 8 * CUDA_TOKENS_PER_SENTENCE
    documented = (ROOT / "docs" / "encoders.md").read_text(encoding="utf-8")
    assert "`batch_size` × 256 tokens (16,384 at the default 64)" in documented
    assert "× 256 (16,384 at batch size 64)" in " ".join(SentenceEncoder.encode.__doc__.split())
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    assert resolve_max_batch_tokens(encoder, 64, None) is None
    assert resolve_max_batch_tokens(encoder, 64, 300) == 300
    monkeypatch.setattr(SentenceEncoder, "device", property(lambda self: torch.device("cuda")))
    assert resolve_max_batch_tokens(encoder, 64, None) == 16_384
    assert resolve_max_batch_tokens(encoder, 32, None) == 8_192
    encoder.max_batch_tokens = 500  # what sts-eval --max-batch-tokens sets
    assert resolve_max_batch_tokens(encoder, 64, None) == 500
    assert resolve_max_batch_tokens(encoder, 64, 300) == 300  # the call's own wins


def test_bad_budgets_are_refused_naming_the_option(tiny_bert_dir: Path) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    for bad in (0, -5, True, 2.5, "64"):
        with pytest.raises(ValueError, match=r"max_batch_tokens must be an integer ≥ 1, got"):
            encoder.encode(SENTENCES, max_batch_tokens=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"token_budget must be an integer ≥ 1, got"):
            encoder.encode(SENTENCES, token_budget=bad)  # type: ignore[arg-type]
    encoder.max_batch_tokens = 0
    with pytest.raises(ValueError, match="max_batch_tokens must be an integer"):
        encoder.encode(SENTENCES)
    encoder.max_batch_tokens = None
    with pytest.raises(TypeError, match="max_batch_tokens or token_budget"):
        encoder.encode(SENTENCES, max_batch_tokens=20, token_budget=20)
    by_old_name = encoder.encode(SENTENCES, token_budget=20, show_progress_bar=False)
    by_new_name = encoder.encode(SENTENCES, max_batch_tokens=20, show_progress_bar=False)
    np.testing.assert_array_equal(by_old_name, by_new_name)


def test_the_evaluation_path_packs_only_where_a_fused_kernel_applies(
    tiny_bert_dir: Path, tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bert = SentenceEncoder.from_pretrained(tiny_bert_dir).eval()
    llama = SentenceEncoder.from_pretrained(tiny_llama_dir, pooling="last_token").eval()
    assert bert.packing_path() == ("padded", "evaluation pads: no varlen kernel on cpu")
    bert.padding_free = "varlen"
    assert bert.packing_path() == (
        "varlen",
        "evaluation, padding_free: varlen (reference varlen kernel)",
    )
    monkeypatch.setattr(SentenceEncoder, "device", property(lambda self: torch.device("cuda")))
    monkeypatch.setattr(packing_module, "varlen_kernel", lambda device: "torch")
    bert.padding_free = "auto"
    path, reason = bert.packing_path()
    assert path == "padded" and "computes in fp16 or bf16 only" in reason  # float32
    for encoder in (bert, llama):
        encoder.backbone.to(torch.bfloat16)
        # torch's kernel has no attention dropout; evaluation has none either (BERT's 0.1)
        assert encoder.packing_path() == (
            "varlen",
            "evaluation, padding_free: auto (torch varlen kernel)",
        )
    bert.padding_free = "false"
    assert bert.packing_path() == ("padded", "evaluation pads: padding_free: false")
    bert.padding_free = "block_mask"
    assert bert.packing_path()[0] == "padded"
    monkeypatch.setattr(packing_module, "varlen_kernel", lambda device: None)
    assert llama.packing_path() == ("padded", "evaluation pads: no varlen kernel on cuda")


@pytest.mark.parametrize("make_parser", [make_eval_parser, make_mine_parser])
def test_the_encoder_commands_take_max_batch_tokens(
    make_parser: Callable[[], argparse.ArgumentParser], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--max-batch-tokens`` is an encoder option (``add_encoder_arguments``): sts-eval
    and sts-mine refuse a bad one naming it and parse a good one."""
    parser = make_parser()
    required = ["--model", "m", "--pairs", "p.csv", "--output", "o.csv"]
    for bad in ("0", "-3", "x"):
        with pytest.raises(SystemExit):
            parser.parse_args([*required, "--max-batch-tokens", bad])
        assert "--max-batch-tokens" in capsys.readouterr().err
    assert parser.parse_args([*required, "--max-batch-tokens", "96"]).max_batch_tokens == 96


def test_sts_mine_encodes_by_max_batch_tokens(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    budgets = spy_on_budgets(monkeypatch)
    source = tmp_path / "pairs.csv"
    source.write_text("sentence1,sentence2\na cat sat,a cat sits\na dog ran,a dog runs\n")
    argv = ["--model", str(tiny_bert_dir), "--pairs", str(source), "--device", "cpu"]
    argv += ["--output", str(tmp_path / "mined.csv"), "--num-negatives", "1"]
    assert mine_main([*argv, "--max-batch-tokens", "40"]) == 0
    assert budgets and set(budgets) == {40}


def spy_on_budgets(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The token budgets ``encode`` resolves from now on."""
    budgets: list[int | None] = []
    resolve = encoding.resolve_max_batch_tokens

    def spy(encoder: SentenceEncoder, batch_size: int, value: int | None) -> int | None:
        budgets.append(resolve(encoder, batch_size, value))
        return budgets[-1]

    monkeypatch.setattr(encoding, "resolve_max_batch_tokens", spy)
    return budgets


def test_sts_eval_encodes_by_max_batch_tokens(
    tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = make_eval_parser()
    for bad in ("0", "-3", "x"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--model", "m", "--max-batch-tokens", bad])
        assert "--max-batch-tokens" in capsys.readouterr().err
    args = parser.parse_args(["--model", str(tiny_bert_dir), "--max-batch-tokens", "96"])
    assert load_encoder(args).max_batch_tokens == 96
    args = parser.parse_args(["--model", str(tiny_bert_dir)])
    assert load_encoder(args).max_batch_tokens is None  # the device's default
    budgets = spy_on_budgets(monkeypatch)
    argv = ["--model", str(tiny_bert_dir), "--data-dir", str(FIXTURES), "--quiet"]
    assert eval_main([*argv, "--tasks", "stsb", "--max-batch-tokens", "96"]) == 0
    assert budgets and set(budgets) == {96}
