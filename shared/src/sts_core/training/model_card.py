"""The README written into every saved model folder."""

from __future__ import annotations

from typing import Any


def _dev_score_lines(log_history: list[dict[str, Any]]) -> list[str]:
    lines = []
    for entry in log_history:
        scores = {k: v for k, v in entry.items() if k.startswith("eval_") and k != "eval_runtime"}
        if scores:
            text = ", ".join(f"{k} {v:.4g}" for k, v in scores.items())
            step = entry.get("step")
            when = f"step {step}" + (" (the untrained model)" if step == 0 else "")
            lines.append(f"- {when}: {text}")
    return lines or ["(none recorded)"]


def _curves_lines(image: str | None) -> list[str]:
    if not image:
        return []
    return [
        "## Learning curves",
        "",
        f"![learning curves]({image})",
        "",
        "The series are in the run's `metrics.json` (`curves`).",
        "",
    ]


def render_model_card(
    method: str,
    trainer_name: str,
    paper: dict[str, str],
    encoder: Any,
    card_data: dict[str, Any],
    state: Any,
    curves_image: str | None = None,
) -> str:
    """Markdown with front matter: method and citation, base model, settings, data, dev
    scores, and the learning curves' chart when ``curves_image`` (a file beside it) is given."""
    base_model = card_data.get("base_model") or getattr(encoder.config, "_name_or_path", "unknown")
    settings = encoder.settings()
    lines = [
        "---",
        "library_name: sentence-transformers",
        "pipeline_tag: sentence-similarity",
        f"tags: [sentence-transformers, sentence-similarity, sts, {method}]",
        "---",
        "",
        f"# {card_data.get('model_name', 'Sentence encoder')}",
        "",
        f"Trained with the `{method}` method ({paper.get('name', '')}; `{trainer_name}`) "
        f"from `{base_model}`.",
        "",
        "- Encoder: " + ", ".join(f"{k} `{v}`" for k, v in settings.items()),
        f"- Loss: {card_data.get('loss', paper.get('name', ''))}",
        *([f"- Loss module: {card_data['loss_module']}"] if card_data.get("loss_module") else []),
        f"- Training data: {card_data.get('train_data', 'unknown')}",
        f"- Steps: {state.global_step}; epochs: {state.epoch}",
        "",
        "## Dev scores",
        "",
        *_dev_score_lines(state.log_history),
        "",
        *_curves_lines(curves_image),
        "## Citation",
        "",
        "```bibtex",
        paper.get("citation", ""),
        "```",
        "",
    ]
    return "\n".join(lines)
