"""The settings a resume may change are derived from transformers' ``TrainingArguments`` by
section (issue 62, item 3), not kept as a list of names: they are the ones the hand-kept
list named, and a field transformers adds to a free section (logging, hub…) is free too."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sts_core.training import BaseConfig
from sts_core.training.changeable_settings import (
    ALWAYS,
    FREE_BUT,
    FREE_SECTIONS,
    OWN,
    OWN_WITHOUT_SELECTION,
    SELECTION_SECTIONS,
    field_sections,
    may_change,
    may_change_without_selection,
)
from sts_core.training.config import DataArguments, ModelArguments
from sts_core.training.resume_settings import MAY_CHANGE, MAY_CHANGE_WITHOUT_SELECTION

#: the hand-kept list the derivation replaced (transformers 5.23)
HAND_KEPT = frozenset(
    {
        *("output_dir", "overwrite_output_dir", "resume_from_checkpoint", "check_only"),
        *("logging_strategy", "logging_steps", "logging_first_step", "logging_nan_inf_filter"),
        *("log_on_each_node", "log_level", "log_level_replica", "disable_tqdm", "report_to"),
        *("run_name", "project", "trackio_space_id", "trackio_bucket_id"),
        *("trackio_static_space_id", "include_num_input_tokens_seen", "skip_memory_metrics"),
        *("debug", "per_device_eval_batch_size", "eval_accumulation_steps"),
        *("eval_do_concat_batches", "eval_use_gather_object", "prediction_loss_only"),
        *("include_for_metrics", "batch_eval_metrics", "bf16_full_eval", "fp16_full_eval"),
        *("save_total_limit", "save_on_each_node", "save_only_model", "enable_jit_checkpoint"),
        *("push_to_hub", "hub_token", "hub_private_repo", "hub_model_id", "hub_strategy"),
        *("hub_always_push", "hub_revision", "dataloader_num_workers", "dataloader_pin_memory"),
        *("dataloader_persistent_workers", "dataloader_prefetch_factor"),
        *("dataloader_multiprocessing_context", "use_cpu", "torch_empty_cache_steps"),
        *("gradient_checkpointing", "gradient_checkpointing_kwargs", "activation_checkpointing"),
        *("activation_checkpointing_kwargs", "ddp_timeout", "ddp_backend", "ddp_bucket_cap_mb"),
        *("ddp_find_unused_parameters", "local_rank", "trust_remote_code", "do_train"),
        *("do_eval", "do_predict", "final_eval_datasets", "final_eval_task", "threshold_dataset"),
        *("final_sts_tasks", "final_sts_sentence_edit"),
    }
)
HAND_KEPT_WITHOUT_SELECTION = frozenset(
    {
        *("eval_strategy", "eval_steps", "eval_delay", "eval_on_start", "save_strategy"),
        *("save_steps", "eval_dataset", "eval_columns", "max_eval_samples"),
        *("metric_for_best_model", "greater_is_better"),
    }
)


def run_options() -> set[str]:
    return {
        f.name
        for arguments in (ModelArguments, DataArguments, BaseConfig)
        for f in dataclasses.fields(arguments)
    }


def test_the_derived_settings_are_the_hand_kept_ones() -> None:
    """Every option of the run the hand-kept lists named is derived; what the derivation
    adds is a field transformers added later to a section open to new fields (or to a
    selection section), none on the locked 5.23, never one of a section that decides the
    weights."""
    options = run_options()
    assert len(HAND_KEPT) == 66 and len(HAND_KEPT_WITHOUT_SELECTION) == 11
    assert HAND_KEPT & options <= MAY_CHANGE
    assert HAND_KEPT_WITHOUT_SELECTION & options <= MAY_CHANGE_WITHOUT_SELECTION
    sections = field_sections()
    open_sections = {*FREE_SECTIONS, *FREE_BUT}  # where a new field is free
    assert all(sections.get(name) in open_sections for name in MAY_CHANGE - HAND_KEPT)
    added = MAY_CHANGE_WITHOUT_SELECTION - HAND_KEPT_WITHOUT_SELECTION
    assert all(sections.get(name) in SELECTION_SECTIONS for name in added)
    assert not MAY_CHANGE & MAY_CHANGE_WITHOUT_SELECTION


def test_the_seed_the_optimizer_and_the_data_order_are_never_free() -> None:
    for name in ("seed", "learning_rate", "optim", "dataloader_drop_last", "ddp_static_graph"):
        assert name in field_sections()
        assert name not in MAY_CHANGE | MAY_CHANGE_WITHOUT_SELECTION, name
    assert "load_best_model_at_end" not in MAY_CHANGE | MAY_CHANGE_WITHOUT_SELECTION


@dataclass
class NewerTrainingArguments:
    """A later TrainingArguments: a field added to a logging section, one to the optimizer's,
    one to the dataloader's, and a new selection metric."""

    # --- Output ---
    output_dir: str = "out"
    # --- Optimizer ---
    learning_rate: float = 1e-3
    optim_new_knob: float = 0.5
    # --- Logging & Monitoring ---
    logging_steps: int = 500
    logging_to_a_new_place: bool = False
    # --- Dataloader ---
    dataloader_num_workers: int = 0
    dataloader_new_order: str = "shuffled"
    # --- Best Model Tracking ---
    load_best_model_at_end: bool = False
    metric_for_best_model: str | None = None
    best_model_new_tiebreak: str = "first"


def test_a_field_added_to_a_free_section_is_free() -> None:
    derived = may_change(NewerTrainingArguments)
    assert derived == ALWAYS | OWN | {"logging_steps", "logging_to_a_new_place"} | {
        "dataloader_num_workers"
    }
    assert may_change_without_selection(NewerTrainingArguments) == OWN_WITHOUT_SELECTION | {
        "metric_for_best_model",
        "best_model_new_tiebreak",
    }


@dataclass
class UnsectionedTrainingArguments:
    logging_steps: int = 500
    output_dir: str = "out"


def test_without_sections_only_what_makes_a_resume_is_free() -> None:
    """A transformers whose source has no sections: the output folder, the resume and the
    run's own options may still change; every other field is recorded."""
    assert field_sections(UnsectionedTrainingArguments) == {}
    derived = may_change(UnsectionedTrainingArguments)
    assert derived == ALWAYS | OWN and "logging_steps" not in derived
    for name in ("output_dir", "overwrite_output_dir", "resume_from_checkpoint", "local_rank"):
        assert name in derived, name
