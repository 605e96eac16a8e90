"""The settings a resume may change (:mod:`sts_core.training.resume_settings`), derived
from transformers' ``TrainingArguments`` by category.

A resume may change what decides where and how the run writes, logs and reports, how
fast the data is fed (not which data, nor its order), memory and device placement, and
what the final model is scored on — not the trained weights. transformers groups the
fields of ``TrainingArguments`` into sections of its source (``# --- Logging & Monitoring
---``, ``# --- Hub Integration ---`` …): every field of a section of
:data:`FREE_SECTIONS` may change (so does one transformers adds to it later), and of the
sections of :data:`FREE_BUT` and :data:`FREE_ONLY` the fields they say. Of the fields that
decide which checkpoint becomes the final model (:data:`SELECTION_SECTIONS`,
:data:`SELECTION_TIMING`), a resume may change them while ``load_best_model_at_end`` is
off. The run's own options that a resume may change are named (:data:`OWN`,
:data:`OWN_WITHOUT_SELECTION`), with the fields that make a resume at all
(:data:`ALWAYS`: its output folder, the resume itself, the process's place in a launch),
free on a transformers whose source has no sections.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import re
from pathlib import Path

from transformers import TrainingArguments

#: transformers' sections whose every field a resume may change, with what they decide
FREE_SECTIONS = {
    "Output": "where the run writes",
    "External Script Flags": "what the calling script does, the resume itself, the rank",
    "Logging & Monitoring": "logging",
    "Log Levels": "logging",
    "Experiment Tracking": "reporting",
    "Debugging": "reporting",
    "Metrics": "the cost of an evaluation",
    "Hub Integration": "uploads",
    "Activation Checkpointing": "memory",
    "Hardware": "device placement",
}

#: when evaluations and saves happen: which checkpoints ``load_best_model_at_end`` picks from
SELECTION_TIMING = frozenset(
    {"eval_strategy", "eval_steps", "eval_delay", "eval_on_start", "save_strategy", "save_steps"}
)

#: sections whose fields a resume may change but these (when evaluations and saves happen)
FREE_BUT = {
    "Evaluation": SELECTION_TIMING,  # the rest is the cost of an evaluation
    "Checkpointing & Saving": SELECTION_TIMING,  # the rest: the checkpoints kept, how
}

#: sections of which a resume may change only these fields
FREE_ONLY = {
    "Mixed Precision": frozenset({"bf16_full_eval", "fp16_full_eval"}),  # the evaluation's
    "Additional Optimizations": frozenset({"torch_empty_cache_steps"}),  # memory
    "DDP": frozenset(  # the launch (not the buffers' broadcast nor the static graph)
        {"ddp_timeout", "ddp_backend", "ddp_bucket_cap_mb", "ddp_find_unused_parameters"}
    ),
    "Dataloader": frozenset(  # how fast the batches are fed (their order is the sampler's)
        {
            "dataloader_num_workers",
            "dataloader_pin_memory",
            "dataloader_persistent_workers",
            "dataloader_prefetch_factor",
            "dataloader_multiprocessing_context",
        }
    ),
}

#: sections whose fields (but ``load_best_model_at_end`` itself) decide the final model
#: only when ``load_best_model_at_end`` picks it among the evaluated checkpoints
SELECTION_SECTIONS = ("Best Model Tracking",)

#: free whatever transformers' version: the output folder, the resume, the rank
ALWAYS = frozenset(
    {"output_dir", "overwrite_output_dir", "resume_from_checkpoint", "local_rank", "check_only"}
)

#: the run's own options (not transformers') a resume may change: the model's code's
#: origin, and what the final model is scored on
OWN = frozenset(
    {
        "trust_remote_code",
        "final_eval_datasets",
        "final_eval_task",
        "threshold_dataset",
        "final_sts_tasks",
        "final_sts_sentence_edit",
    }
)

#: the run's own options that pick the final model only under ``load_best_model_at_end``
OWN_WITHOUT_SELECTION = frozenset({"eval_dataset", "eval_columns", "max_eval_samples"})

_SECTION = re.compile(r"^\s*# --- (?P<name>.+?) ---\s*$")


@functools.cache
def field_sections(arguments: type = TrainingArguments) -> dict[str, str]:
    """Each field of the dataclass ``arguments`` → the section of its source it is declared
    in (the nearest ``# --- <section> ---`` line above it); a field declared before any
    section, or every field when the source cannot be read, is left out."""
    body = _class_body(arguments)
    if body is None:
        return {}
    node, lines = body
    starts = [
        (number, match["name"])
        for number in range(node.lineno, node.end_lineno or node.lineno)
        if (match := _SECTION.match(lines[number - 1]))
    ]
    names = {f.name for f in dataclasses.fields(arguments)}
    sections = {}
    for statement in node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            above = [name for number, name in starts if number < statement.lineno]
            if statement.target.id in names and above:
                sections[statement.target.id] = above[-1]
    return sections


def _class_body(arguments: type) -> tuple[ast.ClassDef, list[str]] | None:
    """The class statement of ``arguments`` (a module-level class) and its module's
    lines; None when the source cannot be read."""
    try:
        source = Path(inspect.getsourcefile(arguments) or "").read_text(encoding="utf-8")
    except (OSError, TypeError):
        return None
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == arguments.__name__:
            return node, source.splitlines()
    return None


def may_change(arguments: type = TrainingArguments) -> frozenset[str]:
    """The settings a resume may change whatever ``load_best_model_at_end`` says."""
    sections = field_sections(arguments)
    return ALWAYS | OWN | {name for name, section in sections.items() if free(name, section)}


def free(name: str, section: str) -> bool:
    """Whether a resume may change field ``name`` of ``section`` (:data:`FREE_SECTIONS`,
    :data:`FREE_BUT`, :data:`FREE_ONLY`)."""
    if section in FREE_BUT:
        return name not in FREE_BUT[section]
    return section in FREE_SECTIONS or name in FREE_ONLY.get(section, ())


def may_change_without_selection(arguments: type = TrainingArguments) -> frozenset[str]:
    """The settings a resume may change while ``load_best_model_at_end`` is off (besides
    :func:`may_change`'s)."""
    chosen = set(OWN_WITHOUT_SELECTION)
    for name, section in field_sections(arguments).items():
        if name in SELECTION_TIMING or (
            section in SELECTION_SECTIONS and name != "load_best_model_at_end"
        ):
            chosen.add(name)
    return frozenset(chosen)
