"""A weighted sum of registered losses (``loss_weights`` in any recipe).

    L = Σᵢ wᵢ · Lᵢ(embeddings, labels)

e.g. ``loss_weights: {cosine_mse: 1.0, pearson: 0.5, cosent: 0.05}`` trains on the cosine
MSE of sentence-transformers' ``CosineSimilarityLoss`` (Reimers & Gurevych, 2019), plus half
Pcc-tuning's Pearson loss (Zhang & Li, 2024) and a little of CoSENT's ranking loss (Huang
et al., 2024). Every part is built from the same config as it would be alone (its own
fields: ``cosent_scale``, ``gather_across_processes``, …), reads the same batch and labels,
and is logged on its own, unweighted, as ``loss_<name>`` (a part with parts of its own
logs them as ``<name>/<part>``); a weight of 0 logs a loss without training on it.

The parts must agree on the labels: one label kind (``score``, ``binary``, ``class``)
besides losses that read none. The text columns are the union of the parts'.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

from torch import Tensor, nn

from sts_core.losses.registry import EmbeddingLoss, loss_and_parts, loss_class
from sts_core.options import NON_NEGATIVE, check_number, parse_json_mapping

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig


def parse_loss_weights(value: object) -> dict[str, float] | None:
    """``loss_weights`` as {loss name: weight} (a mapping, or its JSON text), checked:
    finite weights ≥ 0, at least one above 0 (ValueError naming the entry)."""
    value = parse_json_mapping(value, "loss_weights")
    if not value:
        return None
    weights: dict[str, float] = {}
    for name, weight in value.items():
        try:
            weights[str(name)] = float(weight)
        except (TypeError, ValueError) as error:
            raise ValueError(f"loss_weights: {name}: {weight!r} is not a number") from error
        check_number(f"loss_weights: {name}", weights[str(name)], **NON_NEGATIVE)
    if not any(weights.values()):
        raise ValueError("loss_weights: every weight is 0, so nothing would train")
    return weights


class WeightedLossSum(EmbeddingLoss):
    """Σᵢ wᵢ · Lᵢ over registered losses; built by :func:`weighted_loss_class`, which sets
    the class attributes from the parts."""

    part_classes: ClassVar[dict[str, type[EmbeddingLoss]]] = {}
    weights: ClassVar[dict[str, float]] = {}

    def __init__(
        self, parts: Mapping[str, EmbeddingLoss], encoder_normalizes: bool = False
    ) -> None:
        super().__init__()
        self.parts = nn.ModuleDict(dict(parts))
        # With a part that reads the pooled embeddings the trainer turns the encoder's
        # normalisation off; the other parts get the unit vectors they would get alone.
        self.normalize_for_others = self.reads_pooled and encoder_normalizes

    def named_parts(self) -> Iterator[tuple[str, EmbeddingLoss]]:
        """The parts by name, in order."""
        for name, part in self.parts.items():
            # nn.ModuleDict is not generic: it holds the EmbeddingLoss parts of __init__
            yield name, cast(EmbeddingLoss, part)

    @classmethod
    def display_name(cls) -> str:
        return " + ".join(f"{w:g}·{name}" for name, w in cls.weights.items())

    @classmethod
    def from_config(cls, config: BaseConfig | None, model: Any = None) -> WeightedLossSum:
        return cls(
            {name: part.from_config(config, model) for name, part in cls.part_classes.items()},
            encoder_normalizes=bool(getattr(model, "normalize", False)),
        )

    @classmethod
    def prepare_model(cls, model: Any, config: BaseConfig | None) -> None:
        for part in cls.part_classes.values():
            part.prepare_model(model, config)

    @classmethod
    def check_saved_heads(
        cls, heads: Mapping[str, Any], config: BaseConfig | None, dimension: int
    ) -> None:
        for part in cls.part_classes.values():
            part.check_saved_heads(heads, config, dimension)

    @classmethod
    def required_label_kind(cls, config: BaseConfig | None) -> str | None:
        kinds = {part.required_label_kind(config) for part in cls.part_classes.values()}
        kinds.discard(None)
        return kinds.pop() if kinds else None

    def config_dict(self) -> dict[str, Any]:
        return {
            name: {"weight": self.weights[name], **part.config_dict()}
            for name, part in self.named_parts()
        }

    def pop_degenerate(self) -> list[tuple[str, Tensor | bool]]:
        """The parts' degenerate batches, each reason prefixed with the part's name (the sum
        notes none of its own)."""
        return [
            (f"{name}: {reason}", happened)
            for name, part in self.named_parts()
            for reason, happened in part.pop_degenerate()
        ]

    def forward(
        self,
        embeddings: Mapping[str, Tensor],
        labels: Tensor | None,
        text_ids: Mapping[str, Tensor] | None = None,
    ) -> dict[str, Tensor]:
        total: Tensor | float = 0.0
        logged: dict[str, Tensor] = {}
        unit = None
        for name, part in self.named_parts():
            seen = embeddings
            if self.normalize_for_others and not part.reads_pooled:
                unit = unit or {k: nn.functional.normalize(v, dim=-1) for k, v in seen.items()}
                seen = unit
            output, parts = loss_and_parts(part, seen, labels, text_ids)
            logged.update({f"{name}/{k}": v for k, v in parts.items()})
            logged[f"loss_{name}"] = output.detach()
            total = total + self.weights[name] * output
        return {"loss": total, **logged}  # type: ignore[dict-item]


def weighted_loss_class(weights: Mapping[str, float]) -> type[WeightedLossSum]:
    """The loss class of ``Σ weights[name] · <registered loss name>`` (ValueError for an
    unknown name or parts that need different label kinds)."""
    parts = {name: loss_class(name) for name in weights}
    kinds = {name: part.label_kind for name, part in parts.items() if part.label_kind}
    if len(set(kinds.values())) > 1:
        listed = ", ".join(f"{name} reads {kind} labels" for name, kind in kinds.items())
        raise ValueError(f"loss_weights: the losses need different labels ({listed})")
    attributes = {
        "part_classes": parts,
        "weights": dict(weights),
        "columns": _union(part.columns for part in parts.values()),
        "text_id_columns": _union(part.text_id_columns for part in parts.values()),
        "reads_pooled": any(part.reads_pooled for part in parts.values()),
        "label_kind": next(iter(kinds.values()), None),
    }
    return type("WeightedLossSum", (WeightedLossSum,), attributes)


def _union(groups: Iterable[Iterable[str]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(column for group in groups for column in group))
