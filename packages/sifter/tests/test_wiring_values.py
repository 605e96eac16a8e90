"""Issue 31: SIFTER's options that change a number, off their defaults, against values
written here from the paper (Yu et al., 2024):

* the λs of eq. 2 (``lambda_xy``, ``lambda_xz``, ``lambda_yz``) and τ, read by
  ``SifterLoss.from_config`` and by the trainer's loss (SimCSE's MLP included), against
  the weighted sum of the three InfoNCE terms computed in numpy from the embeddings;
* the backbone of §3.2 (the root and its core dependents, as the paper's example "I like
  this apple because it looks so fresh." → "I like apple.") on parses with what
  ``parses.conllu`` lacks: a copula (kept: "He is a doctor in Paris." → "He is doctor."),
  and obliques on the root (dropped, like the adverbial clause of the paper's example).
  The expected strings are written from that rule, not from running the code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Dataset

from sts_core.encoder import SentenceEncoder
from sts_core.testing import quick_training_args
from sts_core.training import BaseTrainer
from sts_sifter import SifterConfig
from sts_sifter.augment import AugmentOptions, augment, backbone_text
from sts_sifter.loss import SifterLoss
from sts_sifter.parsing import Sentence, sentence_text

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures"
LAMBDAS = {"lambda_xy": 0.5, "lambda_xz": 2.0, "lambda_yz": 0.25}  # default 1, 1, 1
TAU = 0.1  # default 0.05


@pytest.fixture(scope="module")
def parses() -> dict[str, Sentence]:
    """backbones.conllu's sentences by their text (UD relations, as stanza writes them)."""
    pytest.importorskip("stanza", reason="the CoNLL-U reader is stanza's: sts-sifter[stanza]")
    from sts_sifter.parsing import sentences_from_conllu

    text = (FIXTURES / "backbones.conllu").read_text(encoding="utf-8")
    return {sentence_text(tokens): tokens for tokens in sentences_from_conllu(text)}


def test_the_fixture_holds_a_copula_and_obliques_on_the_root(
    parses: dict[str, Sentence],
) -> None:
    assert set(parses) == {
        "He is a doctor in Paris.",
        "She reads a book in the park.",
        "The soup is very hot.",
    }
    doctor = parses["He is a doctor in Paris."]
    assert [(t.text, t.head, t.deprel) for t in doctor[:4]] == [
        ("He", 4, "nsubj"),
        ("is", 4, "cop"),
        ("a", 4, "det"),
        ("doctor", 0, "root"),
    ]
    assert (doctor[5].text, doctor[5].head, doctor[5].deprel) == ("Paris", 4, "obl")
    park = parses["She reads a book in the park."]
    assert (park[6].text, park[6].head, park[6].deprel) == ("park", 2, "obl")


def test_a_copular_backbone_keeps_the_copula_and_drops_the_oblique(
    parses: dict[str, Sentence],
) -> None:
    """UD makes the predicate nominal the root: subject + copula + root, the article and
    the oblique "in Paris" out."""
    text = "He is a doctor in Paris."
    assert backbone_text([parses[text]]) == "He is doctor."
    result = augment(text, [parses[text]], AugmentOptions())
    assert result.with_backbone == "He is a doctor in Paris. He is doctor."
    assert result.has_backbone
    assert backbone_text([parses["The soup is very hot."]]) == "Soup is hot."


def test_an_oblique_on_a_verbal_root_is_dropped(parses: dict[str, Sentence]) -> None:
    park = parses["She reads a book in the park."]
    assert backbone_text([park]) == "She reads book."
    # relations: all keeps every direct dependent of the root but punctuation
    assert backbone_text([park], relations="all") == "She reads book park."


def reference_infonce(anchors: np.ndarray, positives: np.ndarray, tau: float) -> float:
    """−(1/N) Σ_i log(e^{cos(a_i, p_i)/τ} / Σ_j e^{cos(a_i, p_j)/τ}), float64."""
    a = anchors / np.linalg.norm(anchors, axis=1, keepdims=True)
    p = positives / np.linalg.norm(positives, axis=1, keepdims=True)
    logits = a @ p.T / tau
    return float(np.mean([np.log(np.exp(row).sum()) - row[i] for i, row in enumerate(logits)]))


def reference_eq2(x: np.ndarray, y: np.ndarray, z: np.ndarray, tau: float) -> float:
    """Eq. 2 (mean over the batch): λ_XY·ℓ(X, Y) + λ_XZ·ℓ(X, Z) + λ_YZ·ℓ(Y, Z)."""
    return (
        LAMBDAS["lambda_xy"] * reference_infonce(x, y, tau)
        + LAMBDAS["lambda_xz"] * reference_infonce(x, z, tau)
        + LAMBDAS["lambda_yz"] * reference_infonce(y, z, tau)
    )


def test_from_config_weights_the_three_terms_with_the_lambdas(tmp_path: Path) -> None:
    config = SifterConfig(
        output_dir=str(tmp_path), infonce_temperature=TAU, use_mlp=False, **LAMBDAS
    )
    rng = np.random.default_rng(3)
    x, y, z = (rng.normal(size=(5, 8)) for _ in range(3))
    loss = SifterLoss.from_config(config, None)
    out = loss(
        {
            "sentence": torch.tensor(x),
            "with_backbone": torch.tensor(y),
            "without_function_words": torch.tensor(z),
        },
        None,
    )
    assert float(out["loss"]) == pytest.approx(reference_eq2(x, y, z, TAU), rel=1e-10)
    unweighted = sum(reference_infonce(*pair, TAU) for pair in ((x, y), (x, z), (y, z)))
    assert float(out["loss"]) != pytest.approx(unweighted, rel=1e-2)


def test_the_trainers_loss_is_eq_2_with_the_configured_lambdas_over_the_mlp(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """The trainer's loss on a batch of (X, Y, Z) rows: SimCSE's MLP (tanh(W h + b), the
    head the trainer added) over the model's embeddings, then eq. 2 with the λs and τ."""
    rows = {
        "sentence": ["a man plays the guitar.", "a dog runs in the park.", "two boys play soccer."],
        "with_backbone": [
            "a man plays the guitar. man plays guitar.",
            "a dog runs in the park. dog runs.",
            "two boys play soccer. boys play soccer.",
        ],
        "without_function_words": [
            "man plays guitar.",
            "dog runs in park.",
            "two boys play soccer.",
        ],
    }
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = quick_training_args(
        SifterConfig, tmp_path, infonce_temperature=TAU, per_device_train_batch_size=3, **LAMBDAS
    )
    trainer = BaseTrainer(encoder, args, train_dataset=Dataset.from_dict(rows))
    head = encoder.heads["mlp"]
    weight = head.weight.detach().double().numpy()
    bias = head.bias.detach().double().numpy()
    encoder.eval()
    with torch.no_grad():
        pooled = {
            column: encoder(**encoder.tokenize(texts)).double().numpy()
            for column, texts in rows.items()
        }
    x, y, z = (np.tanh(pooled[c] @ weight.T + bias) for c in rows)
    batch = trainer.data_collator([{c: rows[c][i] for c in rows} for i in range(3)])
    with torch.no_grad():
        got = float(trainer.compute_loss(encoder, batch))
    assert got == pytest.approx(reference_eq2(x, y, z, TAU), rel=1e-5)
