"""SBERT's classification objective: a softmax classifier over a pair's features.

Registered as ``softmax`` (:class:`SoftmaxClassifierLoss`): the classifier is a head
(``softmax_classifier``) trained with the encoder, saved beside it and rebuilt by
``SentenceEncoder.from_pretrained``; STS evaluation ignores it (cosine of the embeddings).
It is the classification baseline of the CoSENT paper (eq. 5) and of the regression paper
(Table 1, "Cross Entropy").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sts_core.heads import LinearHead, pair_features
from sts_core.losses.registry import HeadLoss, compute_dtype, register_loss
from sts_core.losses.similarity import SBERT_CITATION

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig

#: classes of the softmax classifier when the config has no ``num_labels`` (NLI's three)
DEFAULT_NUM_LABELS = 3

SOFTMAX_HEAD = "softmax_classifier"
DEFAULT_PAIR_FEATURES = "u,v,|u-v|"


def class_labels(labels: Tensor, num_classes: int, where: str) -> Tensor:
    """``labels`` as int64 class ids in ``[0, num_classes)`` (ValueError otherwise): integer
    tensors, or floats with integral values (the NLI readers' 2.0/1.0/0.0); not bool."""
    if labels.dtype == torch.bool:
        raise ValueError(f"{where} needs integer class labels, got bool")
    if labels.is_floating_point() and not bool((labels == labels.round()).all()):
        raise ValueError(f"{where} needs integer class labels")
    ids = labels.long()
    if ids.numel() and not bool(((ids >= 0) & (ids < num_classes)).all()):
        raise ValueError(f"class labels must lie in [0, {num_classes})")
    return ids


def softmax_classifier_loss(u: Tensor, v: Tensor, labels: Tensor, classifier: nn.Linear) -> Tensor:
    r"""SBERT's classification objective: cross-entropy of a linear layer on ``[u; v; |u − v|]``.

    .. math::

        h_i = W\,[u_i;\ v_i;\ |u_i - v_i|] + b, \qquad
        \mathcal{L} = -\frac{1}{N}\sum_i \log \frac{e^{h_{i, y_i}}}{\sum_c e^{h_{i,c}}}

    ``W`` (``classifier``) has ``3d`` inputs and one output per class; it is trained with the
    encoder and discarded for STS evaluation. A :class:`~sts_core.heads.LinearHead` built
    with :meth:`~sts_core.heads.LinearHead.for_pairs` reads its own ``pair_features``
    (``(u, v)``, ``(|u − v|)``, … as sentence-transformers' ``SoftmaxLoss`` options); a
    plain ``nn.Linear`` reads ``[u; v; |u − v|]``. Features are cast to the classifier's
    dtype; the cross-entropy is taken in at least float32.

    Args:
        u, v: ``(N, d)`` embeddings of the two sentences of each pair.
        labels: ``(N,)`` class ids in ``[0, C)`` (integers, or floats with integral values
            such as the NLI readers' 2/1/0); anything else raises ``ValueError``.
        classifier: ``nn.Linear(3 * d, C)`` or a pair ``LinearHead`` with ``C`` outputs.

    Returns:
        The mean cross-entropy over the batch (scalar).

    References:
        Reimers and Gurevych, "Sentence-BERT: Sentence Embeddings using Siamese BERT-Networks",
        EMNLP-IJCNLP 2019, §3 (classification objective); Huang et al., CoSENT (TASLP 2024),
        §III-A, eq. 5; Zhang and Li, "Advancing Semantic Textual Similarity Modeling: A
        Regression Framework with Translated ReLU and Smooth K2 Loss", EMNLP 2024, Table 1.

    Inputs:
        +----------------------------------+------------------------+
        | Inputs                           | Labels                 |
        +==================================+========================+
        | ``(u_i, v_i)`` embedding pairs   | class id (e.g. NLI)    |
        +----------------------------------+------------------------+

    Relations:
        - sentence-transformers' ``SoftmaxLoss`` with the same classifier weights: its
          default concatenation is ours (``u``, ``v``, ``|u − v|``), and each of our
          ``pair_features`` is one of its options in its own order, ``u, v, |u − v|, u * v``
          (``u,v``: ``concatenation_sent_difference=False``; ``|u-v|``:
          ``concatenation_sent_rep=False``; ``u,v,|u-v|,u*v``:
          ``concatenation_sent_multiplication=True``); equal values for each
          (``shared/tests/test_losses_peer.py``). Its other combinations with ``u * v``
          (``u * v`` alone, ``u, v, u * v``, ``|u − v|, u * v``) are not offered here.
        - The cosine is never trained here, yet it is what STS evaluation uses; CoSENT's
          motivation (§III-A), and the regression paper's (one output instead of C).
    """
    if u.dim() != 2 or u.shape != v.shape:
        raise ValueError(
            f"expected two (N, d) embedding tensors of the same shape, got {tuple(u.shape)} "
            f"and {tuple(v.shape)}"
        )
    if labels.numel() != u.shape[0]:
        raise ValueError(f"expected {u.shape[0]} labels (one per pair), got {labels.numel()}")
    kind = getattr(classifier, "pair_features", None) or DEFAULT_PAIR_FEATURES
    features = pair_features(u, v, kind).to(classifier.weight.dtype)
    if classifier.in_features != features.shape[1]:
        raise ValueError(
            f"classifier takes {classifier.in_features} features, the pair features {kind!r} "
            f"of {u.shape[1]}-wide embeddings are {features.shape[1]}"
        )
    y = class_labels(labels.reshape(-1).to(u.device), classifier.out_features, "the classifier")
    logits = classifier(features)
    return F.cross_entropy(logits.to(compute_dtype(logits)), y)


@register_loss("softmax")
class SoftmaxClassifierLoss(HeadLoss):
    """:func:`softmax_classifier_loss` with the classifier saved beside the encoder as the
    head ``softmax_classifier``; class labels ``0 … num_labels − 1`` (the ``label`` column).

    Config fields read: ``num_labels`` (C, default 3) and, when the config has it,
    ``pair_features`` (the concatenation, default ``u,v,|u-v|``). Each pair's loss is its
    own, so under DDP every process averages its batch and the gradient averaging gives the
    mean over the global batch (equal local batches).
    """

    title = "SBERT softmax classifier over (u, v, |u − v|)"

    label_kind = "class"
    citation = SBERT_CITATION
    head_name = SOFTMAX_HEAD
    head: nn.Linear  # the classifier (build_head's LinearHead)

    @classmethod
    def build_head(cls, config: BaseConfig | None, dimension: int) -> nn.Module:
        features = getattr(config, "pair_features", None) or DEFAULT_PAIR_FEATURES
        classes = getattr(config, "num_labels", DEFAULT_NUM_LABELS)
        return LinearHead.for_pairs(dimension, classes, features)

    @classmethod
    def from_config(cls, config: BaseConfig | None, model: Any = None) -> SoftmaxClassifierLoss:
        return cls(cls.head_of(model))

    def config_dict(self) -> dict[str, Any]:
        return {"classes": self.head.out_features}

    def forward(self, embeddings: Mapping[str, Tensor], labels: Tensor) -> Tensor:  # type: ignore[override]  # labels needed
        u, v = embeddings["sentence1"], embeddings["sentence2"]
        return softmax_classifier_loss(u, v, labels, self.head)
