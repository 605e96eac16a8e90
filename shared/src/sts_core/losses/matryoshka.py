"""Matryoshka representation learning over any registered loss (``matryoshka_dims``).

    L = Σᵢ wᵢ · L_base({column: normalize(e[..., :dᵢ])}, labels)

Kusupati et al., "Matryoshka Representation Learning", NeurIPS 2022: the loss of the
base loss (``loss``, or the ``loss_weights`` sum) on the embeddings cut to each width
``dᵢ`` (their first ``dᵢ`` dimensions) and L2-normalised again, weighted by ``wᵢ``
(``matryoshka_weights``, 1 each by default), so that the model's first ``dᵢ`` dimensions
are an embedding on their own. It is sentence-transformers' ``MatryoshkaLoss`` with every
width trained at every step (its ``n_dims_per_step=-1``; ``shrink``: cut, then normalise).
Each width's loss is logged unweighted as ``matryoshka_<d>``; the base loss's own logged
parts, and the batches it found degenerate, are those of the widest width listed.

A loss with a head (it reads the pooled embeddings at the encoder's width) cannot be cut:
:func:`matryoshka_loss_class` refuses it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from torch import Tensor, nn

from sts_core.encoder.model_shape import ModelShapeError
from sts_core.losses.registry import EmbeddingLoss, HeadLoss, loss_and_parts

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig

logger = logging.getLogger(__name__)

MATRYOSHKA_CITATION = """@inproceedings{kusupati2022matryoshka,
  title={Matryoshka Representation Learning},
  author={Kusupati, Aditya and Bhatt, Gantavya and Rege, Aniket and Wallingford, Matthew and
    Sinha, Aditya and Ramanujan, Vivek and Howard-Snyder, William and Chen, Kaifeng and
    Kakade, Sham and Jain, Prateek and Farhadi, Ali},
  booktitle={Advances in Neural Information Processing Systems},
  year={2022}
}"""


def parse_matryoshka(
    dims: Sequence[Any] | None, weights: Sequence[Any] | None
) -> tuple[tuple[int, ...], tuple[float, ...]] | None:
    """``matryoshka_dims`` and ``matryoshka_weights`` checked (ValueError naming the field
    and the entry): distinct whole widths ≥ 1, weights finite and ≥ 0 (one per width, not
    all 0; default 1 each); returned sorted by width, widest first. None without dims."""
    if not dims:
        if weights:
            raise ValueError("matryoshka_weights needs matryoshka_dims")
        return None
    widths = []
    for dim in dims:
        whole = isinstance(dim, int | float) and math.isfinite(dim) and dim == int(dim)
        if isinstance(dim, bool) or not whole:
            raise ValueError(f"matryoshka_dims: {dim!r} is not a whole number")
        if dim < 1:
            raise ValueError(f"matryoshka_dims: {dim!r} must be at least 1")
        widths.append(int(dim))
    if len(set(widths)) != len(widths):
        raise ValueError(f"matryoshka_dims: {list(dims)} names a width twice")
    given = [1.0] * len(widths) if not weights else [float(w) for w in weights]
    if len(given) != len(widths):
        raise ValueError(
            f"matryoshka_weights: {len(given)} weights for {len(widths)} matryoshka_dims"
        )
    for weight in given:
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"matryoshka_weights: {weight!r} must be finite and ≥ 0")
    if not any(given):
        raise ValueError("matryoshka_weights: every weight is 0, so nothing would train")
    ordered = sorted(zip(widths, given, strict=True), key=lambda pair: -pair[0])
    return tuple(w for w, _ in ordered), tuple(g for _, g in ordered)


def check_widths(dims: Sequence[int] | None, dimension: int | None, source: str) -> None:
    """:class:`~sts_core.encoder.model_shape.ModelShapeError` when a width of ``dims`` is
    wider than the model's embeddings (``dimension``, read from ``source``; None: not
    known, nothing checked). The one check of it: before the weights load (the model's
    config files) and, where they do not say, when the loss is built on the loaded model."""
    if isinstance(dimension, int) and dims and max(dims) > dimension:
        raise ModelShapeError(
            f"matryoshka_dims {list(dims)}: {max(dims)} is wider than the model's "
            f"embeddings ({dimension} dimensions, {source})"
        )


class MatryoshkaLoss(EmbeddingLoss):
    """Σᵢ wᵢ · L_base on the embeddings cut to each width and normalised; built by
    :func:`matryoshka_loss_class`, which sets the class attributes from the base loss."""

    base_class: ClassVar[type[EmbeddingLoss]] = EmbeddingLoss  # type: ignore[type-abstract]  # set by matryoshka_loss_class
    dims: ClassVar[tuple[int, ...]] = ()
    weights: ClassVar[tuple[float, ...]] = ()
    citation = MATRYOSHKA_CITATION

    def __init__(self, base: EmbeddingLoss) -> None:
        super().__init__()
        self.base = base

    @classmethod
    def display_name(cls) -> str:
        widths = ", ".join(f"{w:g}·{d}" for d, w in zip(cls.dims, cls.weights, strict=True))
        return f"matryoshka({cls.base_class.display_name()}; {widths})"

    @classmethod
    def describe(cls) -> str:
        return f"Matryoshka over {cls.base_class.describe()} at widths {list(cls.dims)}"

    @classmethod
    def from_config(cls, config: BaseConfig | None, model: Any = None) -> MatryoshkaLoss:
        """The base loss built from ``config``, wrapped; ValueError when a width is wider
        than the model's embeddings (``model.dimension``)."""
        dimension = getattr(model, "dimension", None)
        check_widths(cls.dims, dimension, "the loaded model")
        if isinstance(dimension, int) and dimension not in cls.dims:
            logger.warning(
                "matryoshka_dims %s leave out the model's whole width (%d): its full "
                "embedding is not trained, only its first %d dimensions",
                list(cls.dims),
                dimension,
                max(cls.dims),
            )
        return cls(cls.base_class.from_config(config, model))

    @classmethod
    def prepare_model(cls, model: Any, config: BaseConfig | None) -> None:
        cls.base_class.prepare_model(model, config)

    @classmethod
    def check_saved_heads(
        cls, heads: Mapping[str, Any], config: BaseConfig | None, dimension: int
    ) -> None:
        cls.base_class.check_saved_heads(heads, config, dimension)

    @classmethod
    def required_label_kind(cls, config: BaseConfig | None) -> str | None:
        return cls.base_class.required_label_kind(config)

    def config_dict(self) -> dict[str, Any]:
        return {
            "matryoshka_dims": list(self.dims),
            "matryoshka_weights": list(self.weights),
            "base": self.base.config_dict(),
        }

    def forward(
        self,
        embeddings: Mapping[str, Tensor],
        labels: Tensor | None,
        text_ids: Mapping[str, Tensor] | None = None,
    ) -> dict[str, Tensor]:
        total: Tensor | float = 0.0
        logged: dict[str, Tensor] = {}
        for index, (dim, weight) in enumerate(zip(self.dims, self.weights, strict=True)):
            cut = {k: nn.functional.normalize(v[..., :dim], dim=-1) for k, v in embeddings.items()}
            output, parts = loss_and_parts(self.base, cut, labels, text_ids)
            # the widest width's degenerate batches, once: the others are the same batches
            for event in self.base.pop_degenerate():
                if index == 0:
                    self.note_degenerate(*event)
            if index == 0:  # the widest: the base loss's own parts, as without Matryoshka
                logged.update(parts)
            logged[f"matryoshka_{dim}"] = output.detach()
            total = total + weight * output
        return {"loss": total, **logged}  # type: ignore[dict-item]


def matryoshka_loss_class(
    base: type[EmbeddingLoss], dims: Sequence[int], weights: Sequence[float]
) -> type[MatryoshkaLoss]:
    """The loss class of Matryoshka over ``base`` at ``dims`` with ``weights`` (as
    :func:`parse_matryoshka` returns them); ValueError for a loss with a head."""
    if has_head(base):
        raise ValueError(
            f"matryoshka_dims with loss {base.display_name()}, which reads the pooled "
            "embeddings with a head of the encoder's width: Matryoshka cuts the embeddings "
            "the loss compares, so it needs a loss over the embeddings alone"
        )
    attributes = {
        "base_class": base,
        "dims": tuple(dims),
        "weights": tuple(weights),
        "columns": base.columns,
        "text_id_columns": base.text_id_columns,
        "reads_pooled": False,
        "label_kind": base.label_kind,
        "title": f"Matryoshka over {base.describe()}",
    }
    return type("MatryoshkaLoss", (MatryoshkaLoss,), attributes)


def has_head(loss: type[EmbeddingLoss]) -> bool:
    """Whether ``loss`` (or a part of a ``loss_weights`` sum) scores with a head."""
    if issubclass(loss, HeadLoss) or loss.reads_pooled:
        return True
    return any(has_head(part) for part in getattr(loss, "part_classes", {}).values())


def with_matryoshka(base: type[EmbeddingLoss], config: BaseConfig | None) -> type[EmbeddingLoss]:
    """``base``, or Matryoshka over it when ``config`` sets ``matryoshka_dims`` (checked
    by the config: :func:`parse_matryoshka`)."""
    dims = getattr(config, "matryoshka_dims", None)
    if not dims:
        return base
    weights = getattr(config, "matryoshka_weights", None) or [1.0] * len(dims)
    return matryoshka_loss_class(base, dims, weights)
