"""The Trainers of a run: ``AnyModelTrainer`` (any model) and ``BaseTrainer`` (a
``SentenceEncoder`` with the method's registered loss: the base of the methods' Trainers,
``<Method>Trainer(BaseTrainer)``, as the design names it).

The loss, the model and the data checks come from the run's method
(:class:`sts_core.method.Method`, which the run hands to the Trainer: ``method=``; the
core's cosine-MSE method when none is given); a Trainer
subclass changes only the training loop (e.g. :meth:`BaseTrainer.build_epoch_batches`), or
trains another kind of model (an ``AnyModelTrainer`` subclass with its own ``compute_loss``).
Evaluation runs the dev evaluator (Spearman on STS-B dev by default) so
``metric_for_best_model`` and ``load_best_model_at_end`` work unchanged; checkpoints are
atomic (:mod:`.checkpoints`); ``BaseTrainer`` saves through
``SentenceEncoder.save_pretrained``, so every checkpoint loads with ``AutoModel``,
``SentenceEncoder`` and ``SentenceTransformer``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from sts_core.losses import (
    EmbeddingLoss,
    pooled_embeddings,
)
from sts_core.saving import STAGING_DIR
from sts_core.training.averaging import WeightAverager
from sts_core.training.checkpoints import TRAINING_ARGS_NAME, Checkpoints
from sts_core.training.collator import (
    SentenceCollator,
    TrainSetsCollator,
    batch_text_ids,
    split_features,
    text_columns_with,
)
from sts_core.training.divergence import DivergenceGuard
from sts_core.training.epoch_batches import EpochBatches
from sts_core.training.evaluating import Evaluating
from sts_core.training.grad_cache import gradient_cache_option
from sts_core.training.loss_parts import LossParts
from sts_core.training.method_registry import CORE_METHOD
from sts_core.training.model_card import render_model_card
from sts_core.training.multi_dataset import (
    DATASET_NAME_KEY,
    TrainDatasets,
    TrainSet,
    set_loss_class,
    training_prompts,
)
from sts_core.training.optimization import regroup_parameters

if TYPE_CHECKING:
    from sts_core.encoder import SentenceEncoder
    from sts_core.method import Method
    from sts_core.training.config import BaseConfig

logger = logging.getLogger(__name__)

# A warning after training when at least this share of the batches gave no usable pairs.
DEGENERATE_WARNING_SHARE = 0.1


LOSS_MODULE_NAME = "sts_loss"


def attach_loss_parameters(model: Any, loss_module: Any) -> None:
    """A loss with trainable parameters of its own (a temperature) becomes the submodule
    ``sts_loss`` of the model, so the optimizer, DDP's gradient averaging and checkpoints
    (resume) include it; its learning rate comes from ``learning_rate_mapping``
    (``{"sts_loss\\.": rate}``)."""
    shared = {id(p) for p in model.parameters()}
    if any(id(p) not in shared for p in loss_module.parameters()):
        model.add_module(LOSS_MODULE_NAME, loss_module)


def attach_loss_modules(model: Any, modules: dict[str, Any]) -> None:
    """:func:`attach_loss_parameters` for the run's losses: one loss as ``sts_loss``; with
    several (training sets with different losses), those with parameters of their own as
    ``sts_loss.<loss name>``."""
    if len(modules) == 1:
        attach_loss_parameters(model, next(iter(modules.values())))
        return
    shared = {id(p) for p in model.parameters()}
    own = {
        name: module
        for name, module in modules.items()
        if any(id(p) not in shared for p in module.parameters())
    }
    if own:
        model.add_module(LOSS_MODULE_NAME, torch.nn.ModuleDict(own))


def record_prompts(model: Any, prompts: tuple[dict[str, str], str | None]) -> None:
    """The training sets' prompts on the encoder (:func:`training_prompts`), so its saves
    record them and ``encode`` (the dev evaluation too) applies the default one. A run
    without prompts leaves the model's own."""
    named, default = prompts
    if not named:
        return
    model.set_prompts({**model.prompts, **named}, default)
    if default is None:
        logger.info(
            "the training sets' prompts differ (%s): the saved model records them without a "
            "default; encode(prompt_name=...) applies one",
            ", ".join(f"{name}: {text!r}" for name, text in named.items()),
        )
    else:
        logger.info("every training text had the prompt %r: encode applies it", named[default])


def require_trainable_parameters(model: Any, loss_name: str) -> None:
    """ValueError when no parameter of the model would train (a frozen backbone and a loss
    without a head or parameters of its own)."""
    if not any(parameter.requires_grad for parameter in model.parameters()):
        raise ValueError(
            f"nothing to train: no parameter of the model needs a gradient (freeze_backbone "
            f"with loss {loss_name}, which has no head or parameters of its own)"
        )


def check_gradient_cache(args: BaseConfig, loss_module: EmbeddingLoss, loss_name: str) -> None:
    """ValueError for gradient caching (``gradient_cache_batch_size`` or
    ``gradient_cache_tokens``) with a loss that has parameters (a head, a trainable
    temperature): gradient caching computes the loss outside the model's forward, where
    DDP would not reduce their gradients."""
    option = gradient_cache_option(args)
    if option is None:
        return
    if any(True for _ in loss_module.parameters()):
        raise ValueError(
            f"{option} with loss {loss_name}, which has a head or parameters "
            f"of its own: gradient caching supports losses over the embeddings alone; drop "
            f"{option} (or use gradient_accumulation_steps)"
        )


class AnyModelTrainer(Checkpoints, EpochBatches, Evaluating):
    """The Trainer of a run, for any model: the method (``method``), the dev
    evaluator, atomic checkpoints and resume, weight averaging, the divergence guard, the
    count of batches that gave the loss nothing, parameter groups and the model card. A
    method with another kind of model subclasses it (CoSENT's cross-encoder); a
    ``SentenceEncoder`` trains with :class:`BaseTrainer`.

    Args:
        model: the model to train.
        args: a ``BaseConfig`` (or a method's subclass).
        evaluator: a callable ``model -> {metric: value}`` with ``primary_metric``
            (e.g. a ``PairEvaluator`` on STS-B dev); ``None`` disables evaluation.
        method: the :class:`~sts_core.method.Method` trained (its loss, label column and
            model card); default: the core's
            (:data:`~sts_core.training.method_registry.CORE_METHOD`, which trains any
            registered loss ``args.loss`` names).
        Other arguments go to ``transformers.Trainer``.
    """

    loss_is_scaled_for_ga = False  # our losses are per-batch means
    # set by TrainingRun (read with getattr: a Trainer built by hand has none)
    final_sts_evaluator: Callable[[Any], Any] | None
    curves_image: str

    def __init__(
        self,
        model: Any,
        args: BaseConfig,
        evaluator: Any | None = None,
        method: Method | None = None,
        **kwargs: Any,
    ) -> None:
        self.method = method if method is not None else CORE_METHOD
        args.label_column = self.method.label_column(args)
        if evaluator is not None and kwargs.get("eval_dataset") is None:
            kwargs["eval_dataset"] = ["dev set scored by the evaluator"]  # Trainer checks it is set
        super().__init__(model=model, args=args, **kwargs)
        self.weight_averager = self._add_weight_averager(args)
        self.divergence_guard = DivergenceGuard()
        self.divergence_guard.trainer = self
        self.add_callback(self.divergence_guard)
        self._loss_sum_before_resume: float | None = None  # from a checkpoint
        self.evaluator = evaluator
        self.model_card_data: dict[str, Any] = {}
        self._loss_parts = LossParts()  # on the device until a log line reads them
        self._batches_seen = 0
        self._degenerate_batches: dict[str, Any] = defaultdict(int)
        self._epoch_batches: tuple[int, Sequence[Any]] | None = None  # the current epoch's
        self._resumed_epoch_batches: dict[int, list[list[int]]] = {}
        self._dataset_batches: dict[str, int] = {}  # batches trained, by training set

    def _add_weight_averager(self, args: BaseConfig) -> WeightAverager | None:
        """``weight_averaging``'s callback (:mod:`sts_core.training.averaging`), if asked."""
        averager = WeightAverager.from_config(args)
        if averager is None:
            return None
        plugin = getattr(self.accelerator.state, "deepspeed_plugin", None)
        if self.is_deepspeed_enabled and plugin is not None and plugin.zero_stage == 3:
            raise ValueError(
                "weight_averaging under DeepSpeed ZeRO-3: each process holds a shard of the "
                "weights; launch with ZeRO-2 or DDP, or set weight_averaging: none"
            )
        self.add_callback(averager)
        return averager

    def create_optimizer(self, model: Any = None) -> torch.optim.Optimizer:
        """The Trainer's AdamW groups, then ``learning_rate_mapping``, ``layer_lr_decay`` and
        no weight decay on scalar parameters
        (:func:`sts_core.training.optimization.regroup_parameters`)."""
        optimizer = super().create_optimizer(model)
        inner: Any = getattr(optimizer, "optimizer", optimizer)  # accelerate's wrapper
        if getattr(inner, "sts_regrouped", False):  # DeepSpeed asks for it twice
            return self.optimizer  # type: ignore[return-value]  # super() has set it
        target: Any = self.model if model is None else model
        mapping = getattr(self.args, "learning_rate_mapping", None)
        decay = getattr(self.args, "layer_lr_decay", None)
        regroup_parameters(inner, target.named_parameters(), mapping, decay)
        inner.sts_regrouped = True
        return self.optimizer  # type: ignore[return-value]  # super() has set it

    def log_loss_parts(self, parts: dict[str, torch.Tensor]) -> None:
        """Record named parts of a loss; they are averaged into the next log line. They stay
        on their device until then (:class:`~sts_core.training.loss_parts.LossParts`): no
        host sync per step."""
        for name, value in parts.items():
            self._loss_parts.add(name, value)

    def record_degenerate_batch(self, reason: str, happened: torch.Tensor | bool = True) -> None:
        """Count a training batch that gave the loss nothing to learn from (``reason``: e.g.
        "no two distinct labels"); :meth:`degenerate_batch_report` sums them up.
        ``happened`` may be a boolean tensor: it is added on its device (no GPU sync)."""
        if isinstance(happened, torch.Tensor):
            happened = happened.detach().to(torch.int64)
        self._degenerate_batches[reason] = self._degenerate_batches[reason] + happened

    def training_step(self, *args: Any, **kwargs: Any) -> torch.Tensor:  # Any: Trainer's own
        self._batches_seen += 1
        loss = super().training_step(*args, **kwargs)
        self.divergence_guard.observe(loss, self.state.global_step + 1)
        return loss

    def check_finite(self) -> None:
        """:class:`~sts_core.training.divergence.TrainingDiverged` if a step's loss or a
        trainable weight is not finite (before the final save: a diverged run publishes
        no model)."""
        self.divergence_guard.check(self.accelerator.unwrap_model(self.model))

    def degenerate_batch_report(self) -> dict[str, Any]:
        """Batches seen in training and those without usable pairs, by reason; a warning
        when they are at least ``DEGENERATE_WARNING_SHARE`` of the batches."""
        reasons = {reason: int(count) for reason, count in self._degenerate_batches.items()}
        reasons = {reason: count for reason, count in reasons.items() if count}
        useless = sum(reasons.values())
        report = {
            "batches": self._batches_seen,
            "without_usable_pairs": useless,
            "reasons": reasons,
        }
        if useless and useless >= DEGENERATE_WARNING_SHARE * max(self._batches_seen, 1):
            logger.warning(
                "%d of %d training batches gave the loss nothing to learn from (%s): check "
                "the batch size and the labels",
                useless,
                self._batches_seen,
                ", ".join(f"{k}: {v}" for k, v in reasons.items()),
            )
        return report

    def count_dataset_batch(self, name: str) -> None:
        """Count a training batch of the training set ``name`` (restored on a resume)."""
        self._dataset_batches[name] = self._dataset_batches.get(name, 0) + 1

    def batch_plan_report(self) -> dict[str, Any]:
        """What ``metrics.json`` records of the batches under several training sets or
        ``no_duplicates`` (empty otherwise): ``datasets``, each set's rows, loss, weight and
        the batches it trained on (this process's count: every process trains on a part
        of each global batch); ``batch_plan``, the samplers, the batches of an epoch and
        each epoch's report (batches by set, rows ``round_robin`` left out,
        ``no_duplicates``' kept, deferred and with-duplicate rows)."""
        report: dict[str, Any] = {}
        dataset = self.train_dataset
        if isinstance(dataset, TrainDatasets):
            report["datasets"] = {
                s.name: {
                    "rows": len(s.dataset),
                    "loss": s.loss,
                    "weight": s.weight,
                    "batches": self._dataset_batches.get(s.name, 0),
                }
                for s in dataset.sets
            }
        plan = None if self.builds_own_batches() else self.batch_plan()
        if plan is not None:
            report["batch_plan"] = {
                "batch_sampler": self.args.batch_sampler,
                "multi_dataset_sampler": plan.sampler,
                "batches_per_epoch": plan.num_batches,
                "epochs": [plan.reports[epoch] for epoch in sorted(plan.reports)],
            }
        return report

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self._loss_parts:
            logs.update(self._loss_parts.means())
        super().log(logs, start_time)

    def model_card_text(self) -> str:
        """A README for the saved folder: method, citation, base model, data and scores."""
        return render_model_card(
            method=self.method.name,
            trainer_name=type(self).__name__,
            paper=self.method.paper(),
            encoder=self.accelerator.unwrap_model(self.model),
            card_data=self.model_card_data,
            state=self.state,
            curves_image=getattr(self, "curves_image", None),  # set by the run's last save
        )


class BaseTrainer(AnyModelTrainer):
    """Trainer for a ``SentenceEncoder`` with the method's registered loss over the
    embeddings (the core's method: cosine MSE on pairs); saving goes through
    ``SentenceEncoder.save_pretrained``, so every checkpoint loads with ``AutoModel``,
    ``SentenceEncoder`` and ``SentenceTransformer``. Arguments as :class:`AnyModelTrainer`'s.
    """

    def __init__(
        self,
        model: Any,
        args: BaseConfig,
        evaluator: Any | None = None,
        method: Method | None = None,
        **kwargs: Any,
    ) -> None:
        method = method if method is not None else CORE_METHOD
        args.label_column = method.label_column(args)
        train_sets = kwargs.get("train_dataset")
        sets = train_sets.sets if isinstance(train_sets, TrainDatasets) else None
        loss_types = self._loss_types(method, args, sets)
        self.text_columns = text_columns_with(
            column for loss_type in loss_types.values() for column in loss_type.columns
        )
        if kwargs.get("data_collator") is None:
            kwargs["data_collator"] = self._collator(model, args, loss_types, sets)
        if kwargs.get("processing_class") is None:
            kwargs["processing_class"] = model.tokenizer
        modules = {}
        for name, loss_type in loss_types.items():
            loss_type.prepare_model(model, args)  # a loss's head
            modules[name] = loss_type.from_config(args, model)
            check_gradient_cache(args, modules[name], name)
        attach_loss_modules(model, modules)
        if getattr(args, "matryoshka_dims", None):  # every save records the widths
            model.matryoshka_dims = list(args.matryoshka_dims or ())
        require_trainable_parameters(model, " and ".join(modules))
        super().__init__(model, args, evaluator=evaluator, method=method, **kwargs)
        self.loss_modules: dict[str, EmbeddingLoss] = modules  # by loss name
        self.loss_module: EmbeddingLoss = next(iter(modules.values()))  # the first set's
        self.set_losses = (
            {} if sets is None else {s.name: (modules[s.loss], s.weight) for s in sets}
        )
        self._describe_losses(loss_types, modules, sets)
        if sets is not None:
            record_prompts(model, training_prompts(sets, self.text_columns))

    @staticmethod
    def _loss_types(
        method: Method, args: BaseConfig, sets: list[TrainSet] | None
    ) -> dict[str, type[EmbeddingLoss]]:
        """The loss classes of the run by name: the method's, or each training set's (as the
        run resolved it, or for a set built by hand as :func:`set_loss_class` does)."""
        if sets is None:
            return {method.loss_name(args): method.loss_class(args)}
        return {s.loss: s.loss_class or set_loss_class(method, args, s.loss) for s in sets}

    def _collator(
        self,
        model: SentenceEncoder,
        args: BaseConfig,
        loss_types: dict[str, type[EmbeddingLoss]],
        sets: list[TrainSet] | None,
    ) -> Any:
        """The run's collator: one :class:`SentenceCollator`, or one a training set (its
        label column and prompts) behind a :class:`TrainSetsCollator`."""
        if sets is None:
            (loss_type,) = loss_types.values()
            return SentenceCollator(
                model,
                label_column=args.label_column,
                text_id_columns=loss_type.text_id_columns,
                text_columns=self.text_columns,
            )
        return TrainSetsCollator(
            {
                s.name: SentenceCollator(
                    model,
                    label_column=s.label_column,
                    text_id_columns=loss_types[s.loss].text_id_columns,
                    text_columns=self.text_columns,
                    prompts=s.prompts,
                )
                for s in sets
            }
        )

    def _describe_losses(
        self, loss_types: dict[str, Any], modules: dict[str, Any], sets: list[TrainSet] | None
    ) -> None:
        """The model card's loss lines (with several training sets, each set's)."""

        def module_text(name: str) -> str:
            module = modules[name]
            settings = ", ".join(f"{k} {v}" for k, v in module.config_dict().items())
            shown = f"`{loss_types[name].display_name()}` ({type(module).__name__}"
            return shown + (f": {settings})" if settings else ")")

        if sets is None:
            (name,) = loss_types
            self.model_card_data["loss"] = loss_types[name].describe()
            self.model_card_data["loss_module"] = module_text(name)
            return
        self.model_card_data["loss"] = "; ".join(
            f"{s.name}: {loss_types[s.loss].describe()}"
            + (f" (weight {s.weight:g})" if s.weight != 1 else "")
            for s in sets
        )
        self.model_card_data["loss_module"] = "; ".join(module_text(n) for n in loss_types)

    def embed(
        self,
        model: Any,
        inputs: dict[str, torch.Tensor],
        then: Callable[[dict[str, torch.Tensor]], Any] | None = None,
    ) -> Any:
        """Embeddings of each text column of a collated batch: ``{"sentence1": (N, d), …}``.

        One call of ``model`` (the wrapped model in training) with every column
        (``SentenceEncoder.forward(columns=…)``): a padding-free encoder packs them into one
        forward, others embed each column apart, as sentence-transformers does. ``then``, a
        function of the embeddings by column, runs inside that call and its result is
        returned instead: what it uses of the model (a loss's head, loss parameters) is
        then part of the forward DDP tracks.
        """
        groups = split_features(inputs, self.text_columns)
        return model(columns=groups, then=then)

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, Any],  # tensors, and the batch's training set by name
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
        **kwargs: Any,
    ) -> torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The registered loss (``loss_module``) on the batch's embeddings and labels, computed
        inside the model's forward (:meth:`embed` with ``then``); a loss with parts logs each
        of them. A loss that ``reads_pooled`` gets the embeddings before the encoder's L2
        normalisation (:func:`~sts_core.losses.pooled_embeddings`). With several training
        sets the batch's set (``dataset_name``) picks the loss, its weight multiplies it and
        its value is logged as ``loss_<set>``. Methods with another kind of model override
        this."""
        train_set = inputs.pop(DATASET_NAME_KEY, None)
        if train_set is not None and model.training:
            self.count_dataset_batch(train_set)
        loss_module = self.set_losses[train_set][0] if train_set else self.loss_module
        if getattr(loss_module, "reads_pooled", False):
            with pooled_embeddings(self.accelerator.unwrap_model(model)):
                return self._compute_loss(model, inputs, return_outputs, train_set)
        return self._compute_loss(model, inputs, return_outputs, train_set)

    def _compute_loss(
        self,
        model: Any,
        inputs: dict[str, torch.Tensor],
        return_outputs: bool,
        train_set: str | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """:meth:`compute_loss` with the encoder as it is."""
        embeddings: dict[str, torch.Tensor] = {}

        def loss_of(by_column: dict[str, torch.Tensor]) -> torch.Tensor:
            embeddings.update(by_column)
            labels, ids = inputs.get("labels"), batch_text_ids(inputs)
            if train_set is None:
                return self.apply_loss(by_column, labels, ids)
            return self.apply_set_loss(train_set, by_column, labels, ids)

        cached = gradient_cache_option(self.args) is not None
        if cached and model.training and torch.is_grad_enabled():
            from sts_core.training.grad_cache import cached_loss

            loss, embeddings = cached_loss(
                model,
                split_features(inputs, self.text_columns),
                loss_of,
                getattr(self.args, "gradient_cache_batch_size", None),
                token_budget=getattr(self.args, "gradient_cache_tokens", None),
                token_rule=getattr(self.args, "gradient_cache_token_rule", "sorted"),
            )
        else:
            loss = self.embed(model, inputs, then=loss_of)
        return (loss, embeddings) if return_outputs else loss

    def apply_loss(
        self,
        embeddings: dict[str, torch.Tensor],
        labels: Any,
        text_ids: dict[str, torch.Tensor] | None = None,
        loss_module: EmbeddingLoss | None = None,
        prefix: str = "",
    ) -> torch.Tensor:
        """Call ``loss_module`` (default :attr:`loss_module`; with ``text_ids`` when it asks
        for them: ``text_id_columns``); log its parts (named ``prefix`` + part), count its
        degenerate batches."""
        module = self.loss_module if loss_module is None else loss_module
        if module.text_id_columns:
            output = module(embeddings, labels, text_ids=text_ids or {})
        else:
            output = module(embeddings, labels)
        for reason, happened in module.pop_degenerate():
            self.record_degenerate_batch(prefix + reason, happened)
        if isinstance(output, dict):
            self.log_loss_parts({prefix + k: v for k, v in output.items() if k != "loss"})
            return output["loss"]
        return output

    def apply_set_loss(
        self,
        train_set: str,
        embeddings: dict[str, torch.Tensor],
        labels: Any,
        text_ids: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """The loss of a batch of the training set ``train_set``: ``weight · L`` with ``L``
        that set's loss, logged unweighted as ``loss_<set>`` (its parts as
        ``<set>/<part>``)."""
        module, weight = self.set_losses[train_set]
        loss = self.apply_loss(embeddings, labels, text_ids, module, prefix=f"{train_set}/")
        self.log_loss_parts({f"loss_{train_set}": loss})
        return loss * weight if weight != 1 else loss

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        output_dir = output_dir or self.args.output_dir
        if not self.args.should_save:
            return
        encoder = self.accelerator.unwrap_model(self.model, keep_torch_compile=False)
        checkpoint = STAGING_DIR in Path(output_dir).parts  # the adapter only, never merged
        encoder.save_pretrained(
            output_dir,
            state_dict=state_dict,
            model_card=self.model_card_text(),
            write_extra=lambda folder: torch.save(self.args, folder / TRAINING_ARGS_NAME),
            **({"merge_lora": False} if checkpoint else {}),
        )

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        if self.is_deepspeed_enabled or self.is_fsdp_enabled:
            return super()._load_from_checkpoint(resume_from_checkpoint, model)
        target = model if model is not None else self.model
        self.accelerator.unwrap_model(target).load_weights(resume_from_checkpoint)

    def _load_best_model(self) -> None:
        if self.is_deepspeed_enabled or self.is_fsdp_enabled:
            return super()._load_best_model()
        logger.info(
            "Loading best model from %s (score: %s).",
            self.state.best_model_checkpoint,
            self.state.best_metric,
        )
        self.accelerator.unwrap_model(self.model).load_weights(self.state.best_model_checkpoint)


def trainer_class(method: Method, config: BaseConfig) -> type[AnyModelTrainer]:
    """The Trainer class of a run of ``method`` under ``config``: the method's
    (:meth:`~sts_core.method.Method.trainer_for`), else :class:`BaseTrainer`."""
    return method.trainer_for(config) or BaseTrainer


def builds_own_batches(method: Method, config: BaseConfig) -> bool:
    """Whether the method's Trainer under ``config`` builds its own batches (overrides
    :meth:`~sts_core.training.epoch_batches.EpochBatches.build_epoch_batches`)."""
    trainer = trainer_class(method, config)
    return trainer.build_epoch_batches is not EpochBatches.build_epoch_batches
