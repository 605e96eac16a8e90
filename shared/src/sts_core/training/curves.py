"""A run's learning curves: the series ``metrics.json`` keeps (``curves``) and the chart
``learning_curves.png`` drawn from them in the output folder, which the model card shows.

Series, each ``[[step, value], …]`` from the Trainer's log history: ``loss`` (the training
loss), each logged part (``loss_<name>`` of a ``loss_weights`` sum, ``matryoshka_<d>``),
``learning_rate``, and every dev metric (``eval_*``, e.g. ``eval_spearman``; not the
evaluation's timing), from the untrained model's at step 0 when the run has a dev set. A
series of one point (a single evaluation) is drawn as a marker. The chart needs matplotlib
(``pip install 'sts-core[plots]'``; the workspace has it); without it the run says so once
and the series are still written.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sts_core.command_files import writing

logger = logging.getLogger(__name__)

CURVES_IMAGE = "learning_curves.png"
#: the evaluation's bookkeeping, not a score
_NOT_CURVES = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "eval_loss")


def is_curve(key: str) -> bool:
    """Whether a log-history key is a series of the chart."""
    if key in _NOT_CURVES:
        return False
    return key in ("loss", "learning_rate") or key.startswith(("loss_", "matryoshka_", "eval_"))


def learning_curve_series(log_history: Iterable[Mapping[str, Any]]) -> dict[str, list[list]]:
    """Each curve's ``[step, value]`` points in the order logged (finite numbers only)."""
    series: dict[str, list[list]] = {}
    for entry in log_history:
        step = entry.get("step")
        for key, value in entry.items():
            if is_curve(key) and isinstance(value, int | float) and math.isfinite(value):
                series.setdefault(key, []).append([step, float(value)])
    return series


def draw_learning_curves(series: Mapping[str, list[list]], path: Path) -> bool:
    """Draw the chart at ``path``: the training loss and its parts, the dev metrics, the
    learning rate, one panel each; False (and one log line) when matplotlib is missing or
    there is nothing to draw."""
    panels = _panels(series)
    if not panels:
        logger.info(
            "%s not drawn: the run logged no loss, learning rate or dev score (it ran fewer "
            "steps than logging_steps: lower logging_steps to draw one)",
            CURVES_IMAGE,
        )
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.info(
            "%s not drawn: matplotlib is not installed (pip install 'sts-core[plots]'); "
            "the series are in metrics.json (curves)",
            CURVES_IMAGE,
        )
        return False
    figure = curves_figure(series)
    with writing(path) as temporary:
        figure.savefig(temporary, dpi=110, format=Path(path).suffix.lstrip(".") or "png")
    plt.close(figure)
    return True


def curves_figure(series: Mapping[str, list[list]]) -> Any:
    """The chart's matplotlib figure (matplotlib needed; at least one series): a panel for
    each of the training loss and its parts, the dev metrics and the learning rate; a
    series of a single point (one evaluation) is a marker, since a line needs two."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(series)
    figure, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.6), squeeze=False)
    for axis, (title, keys) in zip(axes[0], panels.items(), strict=True):
        for key in keys:
            steps, values = zip(*series[key], strict=True)
            axis.plot(
                steps,
                values,
                label=key,
                linewidth=2 if key == "loss" else 1.2,
                marker="o" if len(steps) == 1 else None,
            )
        axis.set_title(title)
        axis.set_xlabel("step")
        axis.legend(fontsize=7)
    figure.tight_layout()
    return figure


def _panels(series: Mapping[str, list[list]]) -> dict[str, list[str]]:
    groups = {
        "training loss": [
            k for k in series if k == "loss" or k.startswith(("loss_", "matryoshka_"))
        ],
        "dev": [k for k in series if k.startswith("eval_")],
        "learning rate": [k for k in series if k == "learning_rate"],
    }
    return {title: keys for title, keys in groups.items() if keys}
