"""Arguments: ``ModelArguments``, ``DataArguments`` and ``BaseConfig(TrainingArguments)``.

A method package subclasses ``BaseConfig`` with only its own fields (each with
``metadata={"help": ...}``), in the manner of TRL's ``*Config`` classes.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from transformers import TrainingArguments

from sts_core.encoder.packing import padding_free_mode
from sts_core.options import (
    BELOW_ONE,
    FINITE,
    NON_NEGATIVE,
    POSITIVE,
    UP_TO_ONE,
    check_number,
    check_ranges,
    parse_json_mapping,
)
from sts_core.training.averaging import check_weight_averaging
from sts_core.training.distill import check_teacher_settings
from sts_core.training.grad_cache import check_token_rule, gradient_cache_option


@dataclass
class ModelArguments:
    """What to train: the backbone and how its token states become a sentence vector."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Model folder or hub id (a transformers, sentence-transformers or saved "
            "SentenceEncoder folder). Required."
        },
    )
    pooling: str | None = field(
        default=None,
        metadata={
            "help": "mean, cls, max, first_last_avg or last_token (default: what the folder "
            "records, else mean)."
        },
    )
    prompt: str | None = field(
        default=None,
        metadata={
            "help": "Prompt template for decoder LLMs: prompteol, promptsth, promptsum or a "
            "string with one [X]."
        },
    )
    max_seq_length: int | None = field(
        default=None,
        metadata={"help": "Truncation length in tokens (default: the model's, ≤ 512)."},
    )
    normalize_embeddings: bool | None = field(
        default=None, metadata={"help": "L2-normalise the sentence vectors."}
    )
    freeze_backbone: bool = field(
        default=False,
        metadata={
            "help": "Train only what sits beside the backbone (a loss's head, loss "
            "parameters): the backbone's weights get no gradient and stay as loaded (the "
            "regression paper's first stage for contrastive models, §4.2). Dropout still "
            "runs in training mode. Not with use_lora."
        },
    )
    trust_remote_code: bool = field(
        default=False,
        metadata={
            "help": "Run the modelling code a model folder or hub model ships (Jina "
            "Embeddings v2, Nomic Embed); such a backbone is not packed (padding_free)."
        },
    )
    padding_free: str = field(
        default="auto",
        metadata={
            "help": "Training without padding: auto (a varlen attention kernel on a GPU that "
            "has one, packed rows with a block-diagonal mask on a CPU, padding otherwise), "
            "true (pack wherever the backbone allows), false (pad), varlen or block_mask "
            "(that path). The run logs the path it takes and why."
        },
    )
    pack_to_multiple_of: int = field(
        default=0,
        metadata={
            "help": "On the varlen path, fill each batch's packed row of real tokens up to a "
            "multiple of this many tokens (pad tokens in a sequence of their own, dropped "
            "before pooling), so batch shapes repeat: for CUDA graphs "
            "(torch_compile_mode: reduce-overhead) and other per-shape compiling. 0 "
            "(default): the exact token count."
        },
    )
    padding_side: str | None = field(
        default=None,
        metadata={"help": "Tokenizer padding side, left or right (default: the tokenizer's)."},
    )
    backbone_dropout: float | None = field(
        default=None,
        metadata={
            "help": "Dropout probability of the backbone in training (every dropout layer "
            "and the config's hidden/attention dropout, recorded in the saved config.json); "
            "default: the model's own (0.1 for BERT). SimCSE-style methods set it (SIFTER: "
            "0.15)."
        },
    )
    model_dtype: str | None = field(
        default=None,
        metadata={
            "help": "dtype the backbone weights load in: float32 (default), bfloat16, float16 "
            "or auto. For mixed precision keep float32 and set bf16: true."
        },
    )
    use_lora: bool = field(
        default=False,
        metadata={
            "help": "Train LoRA adapters on the frozen backbone (needs sts-core[peft]); the "
            "output folder holds the adapter and records the base model (or merged weights "
            "with merge_lora). A model_name_or_path that is an adapter folder: its adapter "
            "is trained further."
        },
    )
    lora_r: int = field(default=8, metadata={"help": "LoRA rank r (default 8)."})
    lora_alpha: int = field(
        default=16, metadata={"help": "LoRA alpha: the update is scaled by alpha / r (16)."}
    )
    lora_dropout: float = field(
        default=0.05, metadata={"help": "Dropout on the LoRA input, in [0, 1) (0.05)."}
    )
    lora_target_modules: list[str] | None = field(
        default_factory=lambda: ["all-linear"],
        metadata={
            "help": "Modules LoRA wraps: all-linear (default: every linear layer but the "
            "output layer), or module names such as q_proj v_proj; none: peft's default "
            "for the architecture."
        },
    )
    merge_lora: bool = field(
        default=False,
        metadata={
            "help": "Save merged full weights (loadable by transformers and "
            "sentence-transformers like any other save) instead of the adapter; the "
            "adapter is kept in lora_adapter/. Needs use_lora; not with load_in_4bit."
        },
    )
    load_in_4bit: bool = field(
        default=False,
        metadata={
            "help": "QLoRA: load the backbone in 4-bit NF4 (needs a CUDA GPU and "
            "sts-core[bitsandbytes]; implies use_lora)."
        },
    )

    def __post_init__(self) -> None:
        """Names and ranges, checked before anything is loaded (ValueError)."""
        from sts_core.pooling import check_pooling_mode
        from sts_core.prompts import resolve_prompt

        if self.pooling is not None:
            check_pooling_mode(self.pooling)
        resolve_prompt(self.prompt)
        require_at_least(1, max_seq_length=self.max_seq_length, lora_r=self.lora_r)
        require_at_least(0, pack_to_multiple_of=self.pack_to_multiple_of)
        self._check_lora()
        check_number("backbone_dropout", self.backbone_dropout, **BELOW_ONE)
        self.padding_free = padding_free_mode(self.padding_free)
        if self.padding_side not in (None, "left", "right"):
            raise ValueError(f"padding_side must be left or right, got {self.padding_side!r}")
        if self.model_dtype is not None and self.model_dtype not in MODEL_DTYPES:
            raise ValueError(
                f"model_dtype {self.model_dtype!r} is not one of {', '.join(MODEL_DTYPES)}"
            )
        if self.model_dtype in ("float16", "fp16") and not (self.use_lora or self.load_in_4bit):
            raise ValueError(
                "model_dtype float16: float16 weights cannot be trained directly (no loss "
                "scaling; small updates round to zero and the model degrades). Keep float32 "
                "weights and set fp16: true (mixed precision with a loss scaler, CUDA GPU) or "
                "bf16: true; float16 is fine for a frozen base under use_lora"
            )

    def _check_lora(self) -> None:
        """The LoRA options (ValueError)."""
        if not self.lora_alpha > 0:
            raise ValueError(f"lora_alpha must be above 0, got {self.lora_alpha}")
        check_number("lora_dropout", self.lora_dropout, **BELOW_ONE)
        targets = self.lora_target_modules
        if isinstance(targets, str):
            targets = self.lora_target_modules = [targets]
        if targets is not None:
            if not targets or any(not isinstance(t, str) or not t.strip() for t in targets):
                raise ValueError(
                    f"lora_target_modules must be module names or all-linear, got {targets!r}"
                )
            if "all-linear" in targets and len(targets) > 1:
                raise ValueError(
                    "lora_target_modules: all-linear stands alone (it means every linear "
                    f"layer), got {targets}"
                )
        if self.freeze_backbone and (self.use_lora or self.load_in_4bit):
            raise ValueError(
                "freeze_backbone with use_lora (or load_in_4bit, which implies it): LoRA "
                "already keeps the base weights frozen and trains only its adapters; set one "
                "of them"
            )
        if self.merge_lora and not (self.use_lora or self.load_in_4bit):
            raise ValueError("merge_lora: true needs use_lora: true (there is no adapter)")
        if self.merge_lora and self.load_in_4bit:
            raise ValueError(
                "merge_lora with load_in_4bit: the adapter cannot be merged into 4-bit "
                "weights without loss; save the adapter (merge_lora: false) and merge it on a "
                "float base with SentenceEncoder.from_pretrained(<output_dir>, merge_lora=True)"
            )
        folder = Path(str(self.model_name_or_path or "")).expanduser()
        adapter_folder = (
            bool(self.model_name_or_path)
            and (folder / "adapter_config.json").is_file()
            and not (folder / "config.json").is_file()
        )
        if adapter_folder and not (self.use_lora or self.load_in_4bit):
            raise ValueError(
                f"model_name_or_path {self.model_name_or_path} is a LoRA adapter folder: set "
                "use_lora: true to train its adapter further (its base stays frozen), or "
                "start from a merge_lora save to train every weight"
            )


def required_model(model_args: ModelArguments) -> str:
    """``model_name_or_path``, which every run needs (ValueError when unset; the recipe
    parser refuses such a recipe first, saying where to set it)."""
    if not model_args.model_name_or_path:
        raise ValueError("model_name_or_path is required: the model folder or hub id to train")
    return model_args.model_name_or_path


#: how final_eval_datasets are scored
FINAL_EVAL_TASKS = ("sts", "classification", "ranking")


@dataclass
class DataArguments:
    """What to train and select on. After ``__post_init__``, ``train_specs`` holds the
    training sets of ``train_datasets`` as a mapping, parsed once
    (:class:`~sts_core.training.multi_dataset.TrainDatasetSpec` each, in the recipe's
    order), or None for a list; it is not an option (not a field)."""

    data_dir: str | None = field(
        default=None, metadata={"help": "Benchmark data folder (default: $STS_DATA_DIR)."}
    )
    # after __post_init__: a list of references, or {name: {path, loss, weight, prompt,
    # columns}} for the mapping form (sts_core.training.multi_dataset)
    train_datasets: list[str] = field(
        default_factory=lambda: ["stsb"],
        metadata={
            "help": "Training sets: registry names (stsb, sickr, nli-triplets, …), "
            "name:split, or file paths; several in a list are concatenated and train one "
            "loss. Or a mapping name: {path, loss, weight, prompt, columns} (JSON on the "
            "command line): every batch comes from one set and trains on that set's loss "
            "(a registered name; default the method's) times its weight (default 1), with "
            "its prompt (a string, or {column: prompt}) before its texts; see "
            "multi_dataset_sampler."
        },
    )
    train_format: str | None = field(
        default=None,
        metadata={
            "help": "Format of training files given by path, when the name does not say "
            "(table: any file with a header; nli: a table whose label column holds NLI "
            "classes, names or 0 entailment, 1 neutral, 2 contradiction, -1 no gold label)."
        },
    )
    # a mapping, or its JSON text (the command line) until __post_init__ parses it: typed as
    # TrainingArguments types its dict options, which HfArgumentParser reads as text
    columns: dict[str, str] | str | None = field(
        default=None,
        metadata={
            "help": "The columns of the training tables (files with a header, save_to_disk "
            "folders, hub ids): project column: file column as a YAML mapping or JSON, e.g. "
            "{sentence1: text_a, sentence2: text_b, score: sim}; unset: found by the "
            "reader's rules (docs/data.md, which lists where they differ from "
            "sentence-transformers'). Not for registry names."
        },
    )
    eval_dataset: str | None = field(
        default="stsb:dev",
        metadata={"help": "Dev set for model selection (name:split or a path); none to skip."},
    )
    eval_columns: dict[str, str] | str | None = field(  # as columns
        default=None,
        metadata={
            "help": "The columns of the evaluation tables (eval_dataset, final_eval_datasets, "
            "threshold_dataset), as columns is for the training tables."
        },
    )
    data_variant: str = field(
        default="senteval", metadata={"help": "senteval (tokenized) or raw data files."}
    )
    filter_test_overlap: bool = field(
        default=False,
        metadata={
            "help": "Drop training pairs that appear (either order) in the STS12–16, STS-B or "
            "SICK-R test sets (regression paper, Appendix A)."
        },
    )
    sick_to_sts_scale: bool = field(
        default=True,
        metadata={
            "help": "Rescale SICK scores 1–5 to 0–5 by 5·(x−1)/4 when SICK is a training set."
        },
    )
    score_range: list[float] | None = field(
        default=None,
        metadata={"help": "Rescale training and dev scores from this [low, high] range to [0, 1]."},
    )
    label_mapping: dict[str, Any] | str | None = field(  # as columns
        default=None,
        metadata={
            "help": "Map the training labels (the loss's label column) to new values before "
            "training: {old: new} as a YAML mapping or JSON; a key is a value of the column "
            "or an NLI class name (entailment, neutral, contradiction), e.g. "
            "{contradiction: 0, neutral: 1, entailment: 2}. Every value in the data needs "
            "an entry. Applied before score_range; not to the dev set."
        },
    )
    max_train_samples: int | None = field(
        default=None,
        metadata={"help": "Keep the first N training pairs (after shuffling with the seed)."},
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "Keep the first N dev pairs."}
    )
    streaming: bool = field(
        default=False,
        metadata={
            "help": "Train on the training tables as a stream, shard by shard (each table "
            "file named, or each table file of a folder named), each shard checked as it "
            "is read; needs max_steps. A folder of table files streams without it. See "
            "docs/data.md (Large tables)."
        },
    )
    shuffle_buffer: int = field(
        default=10_000,
        metadata={
            "help": "With streaming: rows shuffled in a buffer of this many (and the shards' "
            "order shuffled), seeded by data_seed or seed; 0 keeps the files' order."
        },
    )
    final_eval_datasets: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Pair sets (name:split or paths) to score the final model on, e.g. "
            "stsb-zh:test or mrpc:test: Spearman/Pearson of its similarity against the labels."
        },
    )
    final_eval_task: str = field(
        default="sts",
        metadata={
            "help": "How final_eval_datasets are scored: sts (Spearman/Pearson against the "
            "labels), classification (F1, accuracy, precision, recall, average precision; "
            "thresholds chosen on threshold_dataset) or ranking (MRR, MAP, P@1, nDCG@k, "
            "HasPositive@k over the query_id groups, e.g. wikiqa:test)."
        },
    )
    threshold_dataset: str | None = field(
        default=None,
        metadata={
            "help": "With final_eval_task classification: the pair set (name:split or path) "
            "the accuracy and F1 thresholds are chosen on, e.g. quora:dev; unset: the "
            "evaluated set itself (an optimistic bound; its metrics end in _oracle)."
        },
    )
    final_sts_tasks: list[str] = field(
        default_factory=list,
        metadata={
            "help": "STS tasks to evaluate the final model on (e.g. sts12 … sickr); the table "
            "goes to metrics.json."
        },
    )

    final_sts_sentence_edit: str | None = field(
        default=None,
        metadata={
            "help": "Edit the test sentences of final_sts_tasks before encoding, as a "
            "paper's evaluation script does: pcc-tuning (append '.' where a sentence does "
            "not end in . ? \" ', \" → ', final ? → .); none by default. The table says so."
        },
    )

    def __post_init__(self) -> None:
        """Names and ranges, checked before any data is read (ValueError)."""
        from sts_core.evaluation.sentence_edits import check_sentence_edit
        from sts_core.evaluation.sts import STS_TASKS

        check_sentence_edit(self.final_sts_sentence_edit)
        if self.final_eval_task not in FINAL_EVAL_TASKS:
            raise ValueError(
                f"final_eval_task {self.final_eval_task!r} is not one of "
                f"{', '.join(FINAL_EVAL_TASKS)}"
            )
        if self.threshold_dataset is not None and self.final_eval_task != "classification":
            raise ValueError("threshold_dataset is used only with final_eval_task: classification")

        unknown = [task for task in self.final_sts_tasks if task not in STS_TASKS]
        if unknown:
            raise ValueError(
                f"final_sts_tasks: unknown task(s) {', '.join(unknown)}; "
                f"choose from {', '.join(STS_TASKS)}"
            )
        from sts_core.training.multi_dataset import read_train_datasets

        if not self.train_datasets:
            raise ValueError("train_datasets is empty: name at least one training set")
        # the mapping form stays a mapping (what the run records): a type HfArgumentParser
        # cannot read (it refuses a union without str); train_specs holds it typed
        self.train_datasets, self.train_specs = read_train_datasets(self.train_datasets)  # type: ignore[assignment]
        if self.data_variant not in ("senteval", "raw"):
            raise ValueError(f"data_variant must be senteval or raw, got {self.data_variant!r}")
        require_at_least(
            1, max_train_samples=self.max_train_samples, max_eval_samples=self.max_eval_samples
        )
        require_at_least(0, shuffle_buffer=self.shuffle_buffer)
        self.label_mapping = parse_json_mapping(self.label_mapping, "label_mapping")
        from sts_core.data import parse_columns_option

        self.columns = parse_columns_option(self.columns, "columns")
        self.eval_columns = parse_columns_option(self.eval_columns, "eval_columns")
        if self.label_mapping is not None:
            from sts_core.data import resolve_label_mapping

            resolve_label_mapping(self.label_mapping, "label")  # names and numbers, early
        for bound in self.score_range or ():
            check_number("score_range", bound, **FINITE)
        if self.score_range is not None and (
            len(self.score_range) != 2 or self.score_range[0] >= self.score_range[1]
        ):
            raise ValueError(
                f"score_range must be [low, high] with low < high, got {self.score_range}"
            )


@dataclass
class SoftmaxHeadOptions:
    """The option of the core's ``softmax`` loss (SBERT's classifier), for a method config
    that offers it: ``class MyConfig(BaseConfig, SoftmaxHeadOptions)``."""

    num_labels: int = field(
        default=3,
        metadata={"help": "Classes of the softmax classifier (label column = label); ≥ 2."},
    )

    def check_softmax_options(self) -> None:
        require_at_least(2, num_labels=self.num_labels)


@dataclass
class GatherOptions:
    """For a method whose losses work over the batch (ranking, InfoNCE, Pearson): the
    option to use every process's batch, ``class MyConfig(BaseConfig, GatherOptions)``."""

    gather_across_processes: bool = field(
        default=False,
        metadata={
            "help": "Compute the loss over every process's batch (embeddings or scores "
            "all-gathered, gradient through the local part, scaled so the step equals one "
            "process over the whole batch), not only the local batch."
        },
    )


@dataclass
class InfoNCEOptions:
    """The options of the core's ``infonce`` loss, for a method config that offers it."""

    infonce_temperature: float = field(
        default=0.05, metadata={"help": "τ of the in-batch InfoNCE loss (above 0)."}
    )
    positive_threshold: float | None = field(
        default=None,
        metadata={
            "help": "InfoNCE: pairs with label ≥ this are the positives (e.g. 4.0 on 0–5 "
            "scores, 1 for binary labels; a finite number on the labels' scale); none = every "
            "pair."
        },
    )

    def check_infonce_options(self) -> None:
        check_ranges(self, {"infonce_temperature": POSITIVE, "positive_threshold": FINITE})


MODEL_DTYPES = ("float32", "fp32", "bfloat16", "bf16", "float16", "fp16", "auto")

#: the real-valued options of ``BaseConfig`` (its own and ``TrainingArguments``') and their
#: ranges (:func:`sts_core.options.check_number`); the counts are ``require_at_least``'s,
#: weight averaging's are ``check_weight_averaging``'s
TRAINING_RANGES: dict[str, dict] = {
    "learning_rate": POSITIVE,
    "weight_decay": NON_NEGATIVE,
    "warmup_steps": NON_NEGATIVE,
    "num_train_epochs": NON_NEGATIVE,
    "max_grad_norm": NON_NEGATIVE,
    "adam_beta1": BELOW_ONE,
    "adam_beta2": BELOW_ONE,
    "adam_epsilon": NON_NEGATIVE,
    "label_smoothing_factor": BELOW_ONE,
    "neftune_noise_alpha": NON_NEGATIVE,
    "logging_steps": NON_NEGATIVE,
    "eval_steps": NON_NEGATIVE,
    "save_steps": NON_NEGATIVE,
    "eval_delay": NON_NEGATIVE,
    "layer_lr_decay": UP_TO_ONE,
    "teacher_weight": UP_TO_ONE,
}


def require_at_least(minimum: int, **values: int | float | None) -> None:
    """ValueError naming the first option below ``minimum`` (unset options pass)."""
    for name, value in values.items():
        if value is not None and value < minimum:
            raise ValueError(f"{name} must be at least {minimum}, got {value}")


def _default(value: object, help_text: str) -> Any:  # a field of any type (as field())
    return field(default=value, metadata={"help": help_text})


@dataclass
class BaseConfig(TrainingArguments):
    """``TrainingArguments`` with this project's defaults.

    Defaults that differ from ``TrainingArguments`` (docs/options.md lists them): the
    fields below that it has too, each with its help; accelerator_config
    ``{"non_blocking": true}`` (pinned batches copied to the GPU without blocking the
    host); use_cpu true on a machine without an accelerator unless DeepSpeed is configured
    (so a multi-process CPU launch is really distributed, with gloo); for DeepSpeed on such
    a machine, ddp_backend gloo instead (use_cpu would turn DeepSpeed off). The optimizer
    stays transformers' default, the fused AdamW kernel (``adamw_torch_fused``).

    A DeepSpeed config (``--deepspeed`` or an accelerate DeepSpeed config) stops here with a
    ValueError when DeepSpeed is not installed, the JSON file is missing or use_cpu is set;
    so does an FSDP config (``accelerate_configs/fsdp.yaml`` or ``fsdp``) on a machine
    without an accelerator (accelerate would train plain DDP instead), and a numeric
    option out of its range (``TRAINING_RANGES``, checked by
    :func:`sts_core.options.check_number`: ``learning_rate must be finite and > 0, got nan``).

    ``declared_losses`` (a class attribute, set by the :class:`~sts_core.method.Method`
    that declares this config class, with ``declaring_method``, its name) are the losses
    a ``loss`` field may name; it is checked here, the one place.
    """

    declaring_method: ClassVar[str | None] = None  # set by the Method declaring this class
    declared_losses: ClassVar[tuple[str, ...]] = ()  # and its losses' names

    output_dir: str = _default("outputs/run", "Where checkpoints and the final model go.")
    learning_rate: float = _default(2e-5, "Peak learning rate (AdamW); finite, > 0.")
    weight_decay: float = _default(0.01, "Weight decay; finite, ≥ 0.")
    warmup_steps: float = _default(
        0.1, "Warm-up: steps (≥ 1) or a ratio of all steps (in [0, 1)); finite, ≥ 0."
    )
    per_device_train_batch_size: int = _default(16, "Training batch size per process.")
    per_device_eval_batch_size: int = _default(64, "Encoding batch size of the dev evaluator.")
    num_train_epochs: float = _default(1.0, "Epochs.")
    logging_steps: float = _default(10, "Log every N steps.")
    eval_strategy: str = _default("epoch", "When to evaluate on the dev set: no, steps, epoch.")
    save_strategy: str = _default("epoch", "When to save a checkpoint: no, steps, epoch, best.")
    save_total_limit: int | None = _default(2, "Checkpoints kept (the best one is never deleted).")
    metric_for_best_model: str | None = _default("stsb_dev_spearman", "Dev metric for selection.")
    greater_is_better: bool | None = _default(True, "Whether a larger dev metric is better.")
    remove_unused_columns: bool = _default(
        False, "Must stay false: the collator reads text columns."
    )
    logging_nan_inf_filter: bool = _default(
        False,
        "Replace a non-finite step loss in the logged mean (true reads each step's loss on "
        "the host: a GPU wait a step). Off: the divergence guard stops a run at its first.",
    )
    label_column: str = _default(
        "score",
        "Which of the project's label columns the loss reads: score or label (a loss over "
        "classes reads label). A table's own column names are mapped with columns.",
    )
    overwrite_output_dir: bool = _default(
        False,
        "Replace what sts-core wrote in an output_dir that holds an earlier run (files it "
        "did not write are never removed: such a folder is refused; without this, or "
        "resume_from_checkpoint, an output_dir that holds anything is refused).",
    )
    # a mapping, or its JSON text (the command line) until __post_init__ parses it: typed as
    # TrainingArguments types its dict options, which HfArgumentParser reads as text
    learning_rate_mapping: dict[str, float] | str | None = _default(
        None,
        "Learning rates by parameter name: a mapping of regular expression → learning rate "
        "(YAML mapping, or JSON on the command line), e.g. {'sts_loss\\.': 1e-3}. Parameters "
        "whose name matches (re.search, first match) get that rate (finite, > 0); others "
        "learning_rate. A pattern that matches no trained parameter is an error; the log "
        "names the parameters each pattern matched. Scalar parameters (a trainable "
        "temperature) never get weight decay.",
    )
    loss_weights: dict[str, float] | str | None = _default(  # as learning_rate_mapping
        None,
        "Train on a weighted sum of registered losses instead of `loss` alone: a mapping of "
        "loss name → weight (YAML mapping, or JSON on the command line), e.g. "
        "{cosine_mse: 1.0, pearson: 0.5, cosent: 0.05}; it must include the method's `loss`. "
        "Each part is built from this config (a loss of another installed package with "
        "its defaults for fields this config lacks) and logged unweighted as loss_<name>.",
    )
    matryoshka_dims: list[int] | None = _default(
        None,
        "Matryoshka embeddings: also train the loss (or the loss_weights sum) on the "
        "embeddings cut to each of these widths and normalised again, e.g. [384, 256, 128, "
        "64] (each at most the model's dimension), so that the first D dimensions are an "
        "embedding on their own (Kusupati et al., 2022; sentence-transformers' "
        "MatryoshkaLoss). Not with a loss that has a head.",
    )
    matryoshka_weights: list[float] | None = _default(
        None, "The weight of each matryoshka_dims width's loss, in the same order (default 1)."
    )
    weight_averaging: str = _default(
        "none",
        "Average the trainable weights over the end of the run, and save the average: none, "
        "uniform (the mean after every weight_averaging_every-th step from "
        "weight_averaging_start: stochastic weight averaging) or ema (moving average, decay "
        "ema_decay). Needs load_best_model_at_end false; not under DeepSpeed ZeRO-3.",
    )
    weight_averaging_start: float = _default(
        0.5, "When the average starts: a fraction of the run's optimizer steps, in [0, 1)."
    )
    weight_averaging_every: int = _default(1, "Add the weights to the average every N steps.")
    ema_decay: float = _default(0.999, "Decay of weight_averaging: ema, in (0, 1).")
    teacher_model: str | None = _default(
        None,
        "Distil a teacher's similarities: a model folder (or hub id) whose score of each "
        "training pair, α·teacher + (1 − α)·label, becomes the pair's label before training "
        "(α = teacher_weight): a bi-encoder's cosine, or a cross-encoder's score (a "
        "sentence-transformers CrossEncoder folder or sts-cosent's). For losses over scores.",
    )
    teacher_weight: float = _default(
        1.0,
        "α of teacher_model, in (0, 1]: 1 trains on the teacher's similarities alone; below 1 "
        "the labels must be on the cosine's scale (score_range).",
    )
    teacher_neighbours: int = _default(
        0,
        "With teacher_model: also pair each distinct training sentence with its k nearest "
        "other training sentences by the teacher's cosine (Augmented SBERT's semantic-search "
        "sampling; a cross-encoder teacher scores the neighbours the student, as it starts, "
        "finds), labelled by the teacher alone; 0: the training pairs only.",
    )
    layer_lr_decay: float | None = _default(
        None,
        "Layer-wise learning-rate decay: the backbone's top layer trains at learning_rate, "
        "each layer below at this factor times the one above (layer i of L at "
        "learning_rate · decay^(L−1−i)); embeddings, heads and loss parameters at "
        "learning_rate. In (0, 1]; none: off. The regression paper's code uses 0.95. "
        "learning_rate_mapping takes precedence for the parameters it names.",
    )
    gradient_cache_batch_size: int | None = _default(
        None,
        "Gradient caching (GradCache, the technique of sentence-transformers' Cached* "
        "losses; a mini-batch here is rows of every column, there rows of one column): embed "
        "the batch in mini-batches of this many rows without gradient, compute the loss over the "
        "whole batch, then back-propagate mini-batch by mini-batch. Same loss and gradients "
        "as the whole batch at once, with the memory of one mini-batch (at the cost of a "
        "second forward). none: off. Not with DeepSpeed, nor with a loss that has a head or "
        "parameters of its own.",
    )
    gradient_cache_tokens: int | None = _default(
        None,
        "Gradient caching with mini-batches of at most this many real tokens, made by "
        "gradient_cache_token_rule (the default, sorted, is not sentence-transformers' "
        "mini_batch_num_tokens: the same budget makes other mini-batches; the gradients are "
        "the whole batch's under both). Not with gradient_cache_batch_size. none: off.",
    )
    gradient_cache_token_rule: str = _default(
        "sorted",
        "How gradient_cache_tokens makes mini-batches: sorted (rows sorted by their tokens "
        "summed over all text columns, each mini-batch rows of every column) or per_column "
        "(sentence-transformers' mini_batch_num_tokens: each column alone, consecutive rows "
        "while that column's tokens fit, a longer text alone). Only with the budget.",
    )
    batch_sampler: str = _default(
        "default",
        "How rows make a batch: default (random batches) or no_duplicates (no text appears "
        "twice in a global batch: a row whose text is already in the batch waits for a "
        "later one, as in sentence-transformers' NoDuplicatesBatchSampler; for losses "
        "with in-batch negatives). The epoch keeps its number of batches, where the peer "
        "makes more at the end (docs/data.md); the rows kept in "
        "place, deferred and (when unavoidable) placed with a duplicate are logged and "
        "written to metrics.json. With several training sets, within each set.",
    )
    multi_dataset_sampler: str = _default(
        "proportional",
        "With train_datasets as a mapping of several sets, the order of their batches "
        "(each batch from one set): proportional (every batch of every set, in a random "
        "order: each row once an epoch) or round_robin (one batch of each set in turn "
        "until the set with the fewest batches runs out; the other sets' remaining rows "
        "are not used that epoch, and their count is reported), as sentence-transformers.",
    )
    check_only: bool = _default(
        False,
        "Check the recipe, data, model folder and output_dir, say what would run, and stop "
        "without loading weights or training.",
    )

    def __post_init__(self) -> None:
        self._check_numbers()
        self._check_loss()
        self.learning_rate_mapping = parse_learning_rate_mapping(self.learning_rate_mapping)
        self._check_loss_weights()
        self._check_matryoshka()
        check_weight_averaging(self)
        check_teacher_settings(self)
        if self.num_train_epochs <= 0 and self.max_steps <= 0:
            raise ValueError("num_train_epochs must be above 0 (or set max_steps)")
        if (self.fp16 or self.fp16_full_eval) and not accelerator_available():
            raise ValueError(
                "fp16: true needs a GPU (float16 mixed precision with a loss scaler); none is "
                "available here, and on a CPU it would silently train in float32: train in "
                "float32, or use bf16: true"
            )
        if deepspeed_requested(self):
            check_deepspeed_settings(self)
        check_fsdp_settings(self)
        self._check_gradient_cache()
        self._check_samplers()
        for name, value in cpu_launch_settings(self).items():
            setattr(self, name, value)
        if self.accelerator_config is None:
            # batches go to the GPU from pinned memory (dataloader_pin_memory, on by default)
            # without blocking the host; a no-op on a CPU
            self.accelerator_config = {"non_blocking": True}
        super().__post_init__()
        check_reporting_packages(self.report_to)

    # the mapping options as __post_init__ parsed them (the fields are typed for the parser)
    @property
    def parsed_learning_rate_mapping(self) -> dict[str, float] | None:
        """``learning_rate_mapping`` as a mapping (None: unset)."""
        return parse_learning_rate_mapping(self.learning_rate_mapping)

    @property
    def parsed_loss_weights(self) -> dict[str, float] | None:
        """``loss_weights`` as a mapping (None: unset)."""
        from sts_core.losses import parse_loss_weights

        return parse_loss_weights(self.loss_weights)

    def _check_numbers(self) -> None:
        """Every numeric option in its range (ValueError naming the first that is not)."""
        require_at_least(
            1,
            per_device_train_batch_size=self.per_device_train_batch_size,
            per_device_eval_batch_size=self.per_device_eval_batch_size,
            gradient_accumulation_steps=self.gradient_accumulation_steps,
            eval_accumulation_steps=self.eval_accumulation_steps,
            save_total_limit=self.save_total_limit,
            dataloader_prefetch_factor=self.dataloader_prefetch_factor,
        )
        require_at_least(
            0,
            seed=self.seed,
            data_seed=self.data_seed,
            dataloader_num_workers=self.dataloader_num_workers,
        )
        check_ranges(self, TRAINING_RANGES)

    def _check_loss(self) -> None:
        """``loss`` (in a method's config) is one its method declares (ValueError)."""
        loss = getattr(self, "loss", None)
        declared = type(self).declared_losses
        if loss is not None and declared and loss not in declared:
            raise ValueError(f"loss {loss!r} is not one of {', '.join(declared)}")

    def _check_loss_weights(self) -> None:
        from sts_core.losses import parse_loss_weights, weighted_loss_class

        self.loss_weights = weights = parse_loss_weights(self.loss_weights)
        if weights is None:
            return
        loss = getattr(self, "loss", None)
        if loss is not None and loss not in weights:
            raise ValueError(
                f"loss_weights ({', '.join(weights)}) must include the method's "
                f"loss {loss!r}: add it (weight 0 only logs it) or set loss to one of them"
            )
        weighted_loss_class(weights)  # unknown names, disagreeing label kinds

    def _check_matryoshka(self) -> None:
        """``matryoshka_dims`` / ``matryoshka_weights`` checked and sorted widest first, and
        the loss they wrap one without a head (ValueError)."""
        from sts_core.losses import loss_class, weighted_loss_class
        from sts_core.losses.matryoshka import matryoshka_loss_class, parse_matryoshka

        parsed = parse_matryoshka(self.matryoshka_dims, self.matryoshka_weights)
        if parsed is None:
            return
        self.matryoshka_dims, self.matryoshka_weights = list(parsed[0]), list(parsed[1])
        loss = getattr(self, "loss", None)
        if weights := self.parsed_loss_weights:
            matryoshka_loss_class(weighted_loss_class(weights), *parsed)
        elif loss is not None:
            matryoshka_loss_class(loss_class(loss), *parsed)

    def _check_samplers(self) -> None:
        from sts_core.training.batch_plan import SAMPLER_CHOICES, check_sampler

        for name in SAMPLER_CHOICES:
            check_sampler(name, getattr(self, name))

    def _check_gradient_cache(self) -> None:
        require_at_least(1, gradient_cache_batch_size=self.gradient_cache_batch_size)
        require_at_least(1, gradient_cache_tokens=self.gradient_cache_tokens)
        option = gradient_cache_option(self)
        if self.gradient_cache_batch_size is not None and self.gradient_cache_tokens is not None:
            raise ValueError(
                "gradient_cache_batch_size and gradient_cache_tokens both size the gradient "
                "cache's mini-batches (by rows, by tokens): set one"
            )
        check_token_rule(self.gradient_cache_token_rule, self.gradient_cache_tokens)
        if option is not None and deepspeed_requested(self):
            raise ValueError(
                f"{option} with DeepSpeed: the engine owns the backward pass "
                "and steps once per backward, so the mini-batch backward passes of gradient "
                "caching cannot run under it; launch with accelerate_configs/cpu.yaml or "
                f"multi_gpu.yaml (DDP), or drop {option}"
            )


def parse_learning_rate_mapping(value: object) -> dict[str, float] | None:
    """``learning_rate_mapping`` as {regex: rate}: from a mapping or its JSON text."""

    value = parse_json_mapping(value, "learning_rate_mapping")
    if value is None:
        return None
    mapping = {}
    for pattern, rate in value.items():
        try:
            re.compile(pattern)
            mapping[str(pattern)] = float(rate)
        except (re.error, TypeError, ValueError) as error:
            raise ValueError(f"learning_rate_mapping: {pattern!r}: {rate!r}: {error}") from error
        check_number(f"learning_rate_mapping: {pattern!r}", mapping[str(pattern)], **POSITIVE)
    return mapping


def cpu_launch_settings(config: TrainingArguments) -> dict[str, object]:
    """What a machine without an accelerator needs for a multi-process launch to be real.

    - Without DeepSpeed: ``use_cpu``. Otherwise transformers treats a CPU process started by
      ``accelerate launch --num_processes 2`` (torchrun, gloo) as not distributed, and each
      process would train alone on the whole data.
    - With DeepSpeed (which use_cpu would turn off), in a launched process: ``ddp_backend``
      gloo. Otherwise accelerate finds no backend and counts one process, so each would read
      the whole data and DeepSpeed's batch-size check would fail.
    """
    if accelerator_available():
        return {}
    if not deepspeed_requested(config):
        return {} if config.use_cpu else {"use_cpu": True}
    if config.ddp_backend is None and "LOCAL_RANK" in os.environ:
        return {"ddp_backend": "gloo"}
    return {}


def deepspeed_requested(config: TrainingArguments) -> bool:
    """DeepSpeed is asked for by ``--deepspeed`` or by an accelerate DeepSpeed config."""
    from_accelerate = os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"
    return bool(config.deepspeed) or from_accelerate


def check_deepspeed_settings(config: TrainingArguments) -> None:
    """Stop before training when a DeepSpeed run cannot be what was asked (ValueError)."""

    try:
        importlib.import_module("deepspeed")  # the Trainer imports it next anyway
    except ImportError as error:
        raise ValueError(
            "a DeepSpeed config is given but DeepSpeed is not installed: "
            "`pip install 'sts-core[deepspeed]'`, or launch with accelerate_configs/cpu.yaml "
            "or multi_gpu.yaml"
        ) from error
    path = config.deepspeed if isinstance(config.deepspeed, str) else None
    if path and not path.lstrip().startswith("{") and not Path(path).is_file():
        raise ValueError(f"deepspeed: {config.deepspeed}: file not found")
    if config.use_cpu:
        raise ValueError(
            "use_cpu turns DeepSpeed off: remove use_cpu (DeepSpeed finds the CPU by itself)"
        )


def fsdp_requested(config: TrainingArguments) -> bool:
    """FSDP is asked for by an accelerate FSDP config (``accelerate_configs/fsdp.yaml``) or
    by the recipe's ``fsdp`` field."""
    from_accelerate = os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
    return bool(config.fsdp) or from_accelerate


FSDP_NEEDS_AN_ACCELERATOR = (
    "FSDP needs GPUs: accelerate runs FSDP only on accelerators, and on a machine without one "
    "it would train every process as plain DDP instead; here launch with "
    "accelerate_configs/cpu.yaml (DDP) or deepspeed_zero3.yaml (parameters sharded, runs on "
    "CPU processes)"
)


def check_fsdp_settings(config: TrainingArguments) -> None:
    """Stop before training when FSDP is asked for on a machine without an accelerator
    (ValueError): accelerate would silently train without FSDP (``MULTI_CPU`` DDP)."""
    if fsdp_requested(config) and not accelerator_available():
        raise ValueError(FSDP_NEEDS_AN_ACCELERATOR)


def accelerator_available() -> bool:
    import torch

    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "is_available"):
        return accelerator.is_available()
    return torch.cuda.is_available()


def check_reporting_packages(report_to: list[str] | str | None) -> None:
    """``report_to: tensorboard`` without its package: one line before any weights load
    (transformers finds out only when the Trainer is built)."""
    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    if "tensorboard" in names and not any(
        importlib.util.find_spec(module) for module in ("tensorboard", "tensorboardX")
    ):
        raise ValueError(
            "report_to: tensorboard needs the optional package 'tensorboard': install it with "
            "`pip install 'sts-core[tensorboard]'` (or `uv sync --extra tensorboard`)"
        )
