"""Issue 31: two steps of ``train.py``'s ``main`` (SIFTER-SimCSE on a small sentence file, the
tiny BERT without dropout) equal an independent plain-torch loop of the same recipe, step for
step: the logged loss and its three terms, gradient norm and learning rate of each step,
every backbone weight of the saved model (read back with ``AutoModel``) and the MLP's.

The positives are written by hand into the positives cache (``augment_cache_dir``) before
the run: with every sentence cached no parser is loaded (the recipe names a stanza models
folder that does not exist), and dropout being off, the positives Y (X followed by its
backbone) and Z (X without articles and conjunctions) are all that differ between the
three views of a sentence. One sentence has no backbone and nothing to delete (Y = Z = X).

The plain loop uses none of the package: ``transformers.AutoModel`` and ``AutoTokenizer``,
mean pooling with the attention mask by hand (cpu_minilm_wiki_sifter.yaml's pooling, with
its ``capitalised_end: abbreviation``), SimCSE's training-only MLP (a linear d → d and
tanh) starting from the weights the run's MLP had when training began (read by a callback:
it is drawn when the trainer is built), eq. 2 of Yu et al. 2024 with cosine similarities
and τ 0.05 — λ_XY·InfoNCE(X, Y) + λ_XZ·InfoNCE(X, Z) + λ_YZ·InfoNCE(Y, Z), each term the
mean over the batch of −log(e^{s(a_i, b_i)/τ} / Σ_j e^{s(a_i, b_j)/τ}), with three different
λs so that a term paired with the wrong λ shows —, gradient clipping at 1.0, and AdamW
written out (β 0.9/0.999, weight decay except on biases and LayerNorm weights, the rate
decaying linearly from 1e-3 over the two steps, no warm-up). The batch is the whole corpus
(8 sentences).

The optimizer settings (``adam_epsilon`` 1e-3, weight decay 0.1; the paper: 0)
are ``sts_core.testing.PlainLoop``'s, which says why they are pinned.
Mean pooling, not the paper's [CLS]: the untrained tiny BERT's [CLS] states are nearly the
same for every sentence, so each term is log 8 to five digits, the gradient norm is 0.0035
and float32 rounding leaves it good to 2e-3 only.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModel, AutoTokenizer, TrainerCallback

from sts_core.testing import PlainLoop, ValueCheck, mean_pooled, read_metrics
from sts_core.training.run import TrainingRun
from sts_sifter.augment import Augmented, AugmentOptions
from sts_sifter.corpus import cache_folder, chunk_path, write_chunk

pytestmark = pytest.mark.usefixtures("torch_one_thread")


#: X, Y = X + its backbone, Z = X without articles and conjunctions
CORPUS = [
    (
        "A man is playing the guitar.",
        "A man is playing the guitar. Man is playing guitar.",
        "man is playing guitar.",
    ),
    (
        "The dog runs in the park and the cat sits.",
        "The dog runs in the park and the cat sits. Dog runs.",
        "dog runs in park cat sits.",
    ),
    (
        "Two boys play soccer on the beach.",
        "Two boys play soccer on the beach. Boys play soccer.",
        "Two boys play soccer on beach.",
    ),
    (
        "A woman is slicing an onion.",
        "A woman is slicing an onion. Woman is slicing onion.",
        "woman is slicing onion.",
    ),
    (
        "The child eats food because he is hungry.",
        "The child eats food because he is hungry. Child eats food.",
        "child eats food he is hungry.",
    ),
    (
        "People are standing on the street.",
        "People are standing on the street. People are standing.",
        "People are standing on street.",
    ),
    (
        "Three people sit at the piano.",
        "Three people sit at the piano. People sit.",
        "Three people sit at piano.",
    ),
    (
        "this sentence means one thing",
        "this sentence means one thing",
        "this sentence means one thing",
    ),
]
LOOP = PlainLoop(batch=len(CORPUS))  # the whole corpus
CHECK = ValueCheck(__file__, LOOP)
TEMPERATURE = 0.05
LAMBDAS = {"xy": 1.0, "xz": 0.5, "yz": 0.25}
PARSER = "stanza:/nonexistent/stanza-models"  # never loaded: every sentence is cached


class MLPAtStart(TrainerCallback):
    """The MLP's weights when training begins (``mlp.*`` of the model)."""

    weights: dict[str, torch.Tensor] | None = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.weights = {
            name.removeprefix("mlp."): p.detach().clone()
            for name, p in model.named_parameters()
            if name.startswith("mlp.")
        }


def write_cache(cache_dir: Path) -> None:
    """The corpus's positives where the run looks for them (no parser is needed then)."""
    sentences = [x for x, _, _ in CORPUS]
    folder = cache_folder(cache_dir, sentences, PARSER, AugmentOptions())
    folder.mkdir(parents=True)
    rows = [
        Augmented(x, y, z, has_backbone=y != x, deleted=len(x.split()) - len(z.split()))
        for x, y, z in CORPUS
    ]
    write_chunk(chunk_path(folder, 0), rows)


def run_main(model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``main`` on the recipe; the step log lines, the saved weights (the backbone read with
    ``AutoModel``, the MLP from the extra-weights file) and the MLP's starting weights."""
    recorder = MLPAtStart()
    monkeypatch.setattr(TrainingRun, "build_callbacks", lambda self: [recorder])
    corpus = tmp_path / "sentences.txt"
    corpus.write_text("".join(f"{x}\n" for x, _, _ in CORPUS), encoding="utf-8")
    write_cache(tmp_path / "cache")
    logged, saved = CHECK.run_main(
        tmp_path,
        "SIFTER-SimCSE on cached positives, two full-batch steps",
        model,
        corpus,
        train_format="sentences",
        loss="sifter",
        parser=PARSER,
        augment_cache_dir=str(tmp_path / "cache"),
        lambda_xy=str(LAMBDAS["xy"]),
        lambda_xz=str(LAMBDAS["xz"]),
        lambda_yz=str(LAMBDAS["yz"]),
        infonce_temperature=str(TEMPERATURE),
        use_mlp="true",
        pooling="mean",
        capitalised_end="abbreviation",
        backbone_dropout="0.0",
    )
    assert (
        read_metrics(tmp_path / "out")["data"]["positives"]["cached"] == LOOP.batch
    )  # none parsed
    assert recorder.weights is not None
    return logged, saved, recorder.weights


def plain_loop(
    folder: Path,
    mlp_start: dict[str, torch.Tensor],
    temperature: float = TEMPERATURE,
    lambdas: dict[str, float] = LAMBDAS,
):
    """The recipe in plain torch: each step's loss and terms, pre-clipping gradient norms,
    and the final weights (``backbone.*`` and ``mlp.*``)."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    bert = AutoModel.from_pretrained(folder)
    bert.train()
    dimension = bert.config.hidden_size
    mlp = torch.nn.Linear(dimension, dimension)
    mlp.load_state_dict(mlp_start)
    named = [(f"backbone.{n}", p) for n, p in bert.named_parameters()]
    named += [(f"mlp.{n}", p) for n, p in mlp.named_parameters()]
    optimizer = LOOP.optimizer(named)
    views = {name: [row[i] for row in CORPUS] for i, name in enumerate("xyz")}

    def projected(texts: list[str]) -> torch.Tensor:
        return torch.tanh(mlp(mean_pooled(bert, tokenizer, texts)))

    def info_nce(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        cosines = (a @ b.T) / (a.norm(dim=1)[:, None] * b.norm(dim=1)[None, :])
        logits = cosines / temperature
        return (torch.log(torch.exp(logits).sum(1)) - logits.diag()).mean()

    steps, norms = [], []
    for step in range(1, LOOP.steps + 1):
        h = {name: projected(texts) for name, texts in views.items()}
        terms = {pair: info_nce(h[pair[0]], h[pair[1]]) for pair in lambdas}
        loss = sum(lambdas[pair] * term for pair, term in terms.items())
        steps.append({"loss": loss.item(), **{pair: t.item() for pair, t in terms.items()}})
        optimizer.zero_grad()
        loss.backward()
        norms.append(optimizer.step(step))
    state = {f"backbone.{n}": t for n, t in bert.state_dict().items()}
    state.update({f"mlp.{n}": t for n, t in mlp.state_dict().items()})
    return steps, norms, state


TestSifterValue = CHECK.test_class(run_main, plain_loop)
