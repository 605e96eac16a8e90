r"""SIFTER-SimCSE's loss (eq. 2) and unsupervised SimCSE (eq. 1), with SimCSE's training-only
MLP over the pooled embedding.

.. math::

    \ell_i = -\lambda_{XY} \log \frac{e^{s(h_i, h_i^Y)/\tau}}{\sum_j e^{s(h_i, h_j^Y)/\tau}}
             -\lambda_{XZ} \log \frac{e^{s(h_i, h_i^Z)/\tau}}{\sum_j e^{s(h_i, h_j^Z)/\tau}}
             -\lambda_{YZ} \log \frac{e^{s(h_i^Y, h_i^Z)/\tau}}
                                      {\sum_j e^{s(h_i^Y, h_j^Z)/\tau}}

with s the cosine, τ = 0.05 and in-batch negatives; the loss is the mean of ℓ_i over the
batch (the paper sums; only the scale differs). The paper prints each denominator as
Σ_j e^{s(h_j, h_j^Y)/τ} (a typo: that sum does not depend on i and the loss would not
contrast); here, as in SimCSE's eq. 1 which eq. 2 extends, row i is contrasted with every
row's positive.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from torch import Tensor, nn

from sts_core.distributed import all_gather_with_grad, scale_gathered_gradient
from sts_core.heads import LinearHead
from sts_core.losses import HeadLoss, config_settings, register_loss
from sts_core.losses.similarity import SIMCSE_CITATION, in_batch_infonce_loss

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig

CITATION = """@article{yu2024sifter,
  title={SIFTER: A Task-specific Alignment Strategy for Enhancing Sentence Embeddings},
  author={Yu, Chao and Zhu, Wenhao and Liu, Chaoming and Zhang, Xiaoyu and Zhai, Qiuhong},
  year={2024}
}"""
#: the dataset columns of X, Y (X + its backbone) and Z (X without function words)
X, Y, Z = "sentence", "with_backbone", "without_function_words"
PAIRS = {"xy": (X, Y), "xz": (X, Z), "yz": (Y, Z)}


def sifter_loss(
    x: Tensor,
    y: Tensor,
    z: Tensor,
    temperature: float = 0.05,
    weights: Mapping[str, float] | None = None,
) -> dict[str, Tensor]:
    """Eq. 2: Σ_p λ_p · InfoNCE_p over the pairs p = (X, Y), (X, Z), (Y, Z).

    Args:
        x, y, z: ``(N, d)`` embeddings of X, Y and Z, row-aligned.
        temperature: τ > 0.
        weights: ``{"xy": λ_XY, "xz": λ_XZ, "yz": λ_YZ}`` (default all 1); a zero weight's
            term is not computed.

    Returns:
        ``{"loss": total, "xy": …, "xz": …, "yz": …}`` (the unweighted terms computed).
    """
    weights = {"xy": 1.0, "xz": 1.0, "yz": 1.0, **(weights or {})}
    sides = {X: x, Y: y, Z: z}
    parts = {
        name: in_batch_infonce_loss(sides[a], sides[b], temperature)
        for name, (a, b) in PAIRS.items()
        if weights[name] != 0
    }
    if not parts:
        raise ValueError("every λ is 0: the loss has no term")
    total = functools.reduce(operator.add, (weights[name] * value for name, value in parts.items()))
    return {"loss": total, **parts}


class MLPProjectionLoss(HeadLoss):
    """Base of the two losses: SimCSE's MLP (a linear layer and tanh, d → d) over each
    pooled embedding in training only (``use_mlp``; evaluation and ``encode`` use the
    pooled embedding, as SimCSE's ``mlp_only_train``), then InfoNCE terms; gathering
    across processes like the core's ``infonce``."""

    head_name = "mlp"

    def __init__(
        self,
        head: nn.Module | None,
        temperature: float = 0.05,
        gather: bool = False,
    ) -> None:
        super().__init__(head if head is not None else nn.Identity())
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.temperature = temperature
        self.gather = gather

    @classmethod
    def build_head(cls, config: BaseConfig | None, dimension: int) -> nn.Module:
        return LinearHead(dimension, dimension, activation="tanh")

    @staticmethod
    def settings(config: BaseConfig | None) -> dict[str, Any]:
        """τ and gathering from the config's fields (the signature's defaults for those it
        lacks)."""
        return config_settings(
            config, temperature="infonce_temperature", gather="gather_across_processes"
        )

    @classmethod
    def prepare_model(cls, model: Any, config: BaseConfig | None) -> None:
        if getattr(config, "use_mlp", True):
            super().prepare_model(model, config)

    @classmethod
    def head_or_none(cls, model: Any, config: BaseConfig | None) -> nn.Module | None:
        return cls.head_of(model) if getattr(config, "use_mlp", True) else None

    def project(self, embeddings: Mapping[str, Tensor], columns: tuple[str, ...]) -> list[Tensor]:
        """Each column through the MLP (gathered from every process with ``gather``). A
        batch of one sentence has no in-batch negative: its loss is exactly 0 and it is
        counted as degenerate (``dataloader_drop_last: true`` avoids it)."""
        projected = [self.head(embeddings[column]) for column in columns]
        if self.gather:
            projected = [all_gather_with_grad(tensor) for tensor in projected]
        if projected[0].shape[0] < 2:
            self.note_degenerate("one sentence: no in-batch negative")
        return projected

    def finish(self, output: dict[str, Tensor]) -> dict[str, Tensor]:
        if self.gather:
            output["loss"] = scale_gathered_gradient(output["loss"])
        return output


@register_loss("sifter")
class SifterLoss(MLPProjectionLoss):
    """:func:`sifter_loss` on (``sentence``, ``with_backbone``, ``without_function_words``).

    Config fields read: ``infonce_temperature`` (τ, 0.05), ``lambda_xy``, ``lambda_xz``,
    ``lambda_yz`` (1, 1, 1), ``use_mlp``, ``gather_across_processes``. Logs each term.
    """

    title = "SIFTER-SimCSE: InfoNCE between X, X + backbone, X − function words (eq. 2)"

    columns: ClassVar[tuple[str, ...]] = (X, Y, Z)
    label_kind = None
    citation = CITATION

    def __init__(
        self,
        head: nn.Module | None = None,
        temperature: float = 0.05,
        weights: Mapping[str, float] | None = None,
        gather: bool = False,
    ) -> None:
        super().__init__(head, temperature, gather)
        self.weights = {"xy": 1.0, "xz": 1.0, "yz": 1.0, **(weights or {})}

    @classmethod
    def from_config(cls, config: BaseConfig | None, model: Any = None) -> SifterLoss:
        weights = config_settings(config, **{name: f"lambda_{name}" for name in PAIRS})
        return cls(head=cls.head_or_none(model, config), weights=weights, **cls.settings(config))

    def config_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "lambdas": self.weights, "gather": self.gather}

    def forward(self, embeddings: Mapping[str, Tensor], labels: Tensor | None) -> dict:
        x, y, z = self.project(embeddings, self.columns)
        return self.finish(sifter_loss(x, y, z, self.temperature, self.weights))


@register_loss("simcse")
class SimCSELoss(MLPProjectionLoss):
    """Unsupervised SimCSE (Gao et al., 2021, eq. 1): ``sentence1`` and ``sentence2`` hold
    the same sentence, so the two embeddings differ only by their dropout masks; InfoNCE
    with in-batch negatives over the MLP's outputs. Config fields: as :class:`SifterLoss`
    without the λs."""

    title = "unsupervised SimCSE: InfoNCE of a sentence with itself under dropout (eq. 1)"

    columns: ClassVar[tuple[str, ...]] = ("sentence1", "sentence2")
    label_kind = None
    citation = SIMCSE_CITATION

    @classmethod
    def from_config(cls, config: BaseConfig | None, model: Any = None) -> SimCSELoss:
        return cls(head=cls.head_or_none(model, config), **cls.settings(config))

    def config_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "gather": self.gather}

    def forward(self, embeddings: Mapping[str, Tensor], labels: Tensor | None) -> Tensor:
        first, second = self.project(embeddings, self.columns)
        loss = in_batch_infonce_loss(first, second, self.temperature)
        return self.finish({"loss": loss})["loss"]
