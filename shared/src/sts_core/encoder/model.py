"""The :class:`SentenceEncoder`: its state and public API, each concern delegated to a
module of the package (whose docstring describes the saved folder)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
import torch
from torch import nn

from sts_core.encoder import encoding, files, head_set, loading, lora, packing
from sts_core.encoder.location import absolute_location
from sts_core.encoder.named_prompts import NamedPrompts
from sts_core.pooling import check_pooling_mode
from sts_core.prompts import resolve_prompt

if TYPE_CHECKING:
    from transformers import PretrainedConfig


class _Checkpointing(Protocol):
    """transformers' gradient checkpointing switch (a peft model passes it on)."""

    def gradient_checkpointing_enable(
        self, gradient_checkpointing_kwargs: dict[str, Any] | None = None
    ) -> None: ...


class SentenceEncoder(NamedPrompts, nn.Module):
    """A backbone (encoder or decoder) followed by pooling into one vector a sentence.

    Args:
        backbone: a transformers base model (``AutoModel``), e.g. BertModel or LlamaModel.
        tokenizer: its tokenizer. A decoder tokenizer without a pad token gets its EOS.
        pooling: one of ``mean``, ``cls``, ``max``, ``first_last_avg``, ``last_token``.
        prompt: a template name (``prompteol``, ``promptsth``, ``promptsum``) or a string
            with one ``[X]`` slot; applied to every sentence before tokenisation.
        max_length: truncation length in tokens (default: the tokenizer's, capped at 512).
        normalize: L2-normalise the output vectors.
        padding_free: in training mode, run the batch's real tokens without padding
            (the padded forward's embeddings up to float rounding): ``auto`` (default),
            ``true``, ``false`` (pad), ``varlen`` or ``block_mask``, each described by
            :meth:`packing_path` (:func:`~sts_core.encoder.packing.choose_path`).
    """

    accepts_loss_kwargs = False  # tells the Trainer the loss is a per-batch mean

    def __init__(
        self,
        backbone: nn.Module,
        tokenizer: Any,
        pooling: str = "mean",
        prompt: str | None = None,
        max_length: int | None = None,
        normalize: bool = False,
        padding_free: bool | str = "auto",
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooling = check_pooling_mode(pooling)
        self.prompt = resolve_prompt(prompt)
        self.max_length = encoding.checked_max_length(max_length, tokenizer, backbone)
        self.normalize = normalize
        self.padding_free = packing.padding_free_mode(padding_free)
        # the training forwards taken, (path, why), in the order first taken (each logged once)
        self.training_paths: dict[tuple[str, str], None] = {}
        if getattr(tokenizer, "pad_token", None) is None:
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        # where the weights came from (set by from_pretrained): a LoRA save records it as
        # the base model
        self.name_or_path: str | None = None
        # a LoRA encoder's save: merged full weights (True) or the adapter (False)
        self.merge_lora = False
        # encode()'s width (None: the whole embedding) and the widths a Matryoshka
        # training recorded (saved in sts_encoder_config.json)
        self.truncate_dim: int | None = None
        # encode()'s token budget when a call gives none (None: the device's default)
        self.max_batch_tokens: int | None = None
        # the varlen path's packed row filled up to a multiple of this many tokens (0: not)
        self.pack_to_multiple_of = 0
        self.matryoshka_dims: list[int] | None = None
        self._head_names: list[str] = []
        self._pair_scorer: str | None = None
        # a peft backbone passes its keyword arguments on to the model it wraps
        accepted = inspect.signature(lora.inner_model(backbone).forward).parameters
        self._forward_keys = {"input_ids", "attention_mask", "token_type_ids"} & set(accepted)
        self._takes_use_cache = "use_cache" in accepted
        self._takes_position_ids = "position_ids" in accepted
        packing.check_forced_path(self)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike,
        *,
        pooling: str | None = None,
        prompt: str | None = None,
        max_length: int | None = None,
        normalize: bool | None = None,
        padding_side: str | None = None,
        dtype: str | torch.dtype | None = None,
        padding_free: bool | str = "auto",
        merge_lora: bool = False,
        base_model: str | os.PathLike | None = None,
        trust_remote_code: bool = False,
        **model_kwargs: Any,
    ) -> SentenceEncoder:
        """Load a backbone and its tokenizer; settings saved in the folder are the defaults.

        ``dtype`` defaults to float32 (weights to train); pass ``"bfloat16"`` or ``"auto"``
        to load otherwise. Extra keyword arguments go to ``AutoModel.from_pretrained``.

        Heads listed in the folder's ``sts_heads.json`` are rebuilt with their weights
        (and the pair scorer set). A LoRA adapter folder (``adapter_config.json``, no
        ``config.json``) loads its base model (``base_model``, else the one recorded in
        ``sts_encoder_config.json``, else the adapter's ``base_model_name_or_path``) and
        applies the adapter with peft (frozen); ``merge_lora`` merges it into the base
        weights (a plain backbone, slightly faster to run). ``trust_remote_code`` runs the
        modelling code a folder or hub model ships (Jina v2, Nomic Embed), for the tokenizer
        and the model; such a backbone is never packed (padding-free needs transformers' own
        BERT).
        """
        location, tokenizer, backbone, stored = loading.load_backbone(
            name_or_path,
            padding_side=padding_side,
            dtype=dtype,
            merge_lora=merge_lora,
            base_model=base_model,
            trust_remote_code=trust_remote_code,
            model_kwargs=model_kwargs,
        )
        settings = loading.encoder_settings(stored, pooling, prompt, max_length, normalize)
        encoder = cls(backbone, tokenizer, **settings, padding_free=padding_free)
        encoder.set_prompts(stored.get("prompts") or {}, stored.get("default_prompt_name"))
        encoder.name_or_path = absolute_location(location)
        encoder.matryoshka_dims = stored.get("matryoshka_dims")
        if Path(location).is_dir():
            head_set.load_heads(encoder, Path(location))
        return encoder

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def config(self) -> PretrainedConfig:
        """The backbone's transformers config (what the Trainer and PEFT look for)."""
        # a transformers model, or a peft model passing it on: nn.Module's __getattr__
        # types any attribute as Tensor | Module
        return cast("PretrainedConfig", self.backbone.config)

    @property
    def _no_split_modules(self) -> list[str]:
        """The backbone's (through LoRA), sorted: FSDP's TRANSFORMER_BASED_WRAP shards them."""
        return sorted(getattr(lora.inner_model(self.backbone), "_no_split_modules", None) or [])

    @property
    def dimension(self) -> int:
        return int(self.config.hidden_size)

    def settings(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in files.setting_names(self)}

    def add_head(self, name: str, head: nn.Module, *, pair_scorer: bool = False) -> nn.Module:
        """Add ``head`` (an instance of a class registered with
        :func:`sts_core.heads.register_head`) as the submodule ``name``: trained with the
        encoder, saved by :meth:`save_pretrained` (``sts_heads.json`` and its weights) and
        rebuilt by :meth:`from_pretrained`. It replaces an earlier head or extra module of
        that name; it is moved to the encoder's device. ``pair_scorer``: score pairs with
        its ``score(u, v)`` (see :meth:`score_pairs`). Returns the head."""
        return head_set.add_head(self, name, head, pair_scorer)

    def remove_head(self, name: str) -> nn.Module:
        """Remove the head ``name`` (and stop scoring pairs with it); return it."""
        return head_set.remove_head(self, name)

    @property
    def heads(self) -> Mapping[str, nn.Module]:
        """The heads added by :meth:`add_head`, by name (read-only)."""
        return head_set.heads(self)

    @property
    def pair_scorer(self) -> str | None:
        """The head whose ``score(u, v)`` scores pairs, or ``None``: cosine similarity."""
        return self._pair_scorer

    @pair_scorer.setter
    def pair_scorer(self, name: str | None) -> None:
        head_set.set_pair_scorer(self, name)

    def score_pairs(self, u: Any, v: Any) -> torch.Tensor:
        """Similarity of each pair of embeddings ``u[i]``, ``v[i]`` (tensors or arrays of
        shape ``(n, dim)``): the cosine similarity, or the pair-scoring head's
        ``score(u, v)`` when :attr:`pair_scorer` names one. Returns ``(n,)``."""
        return head_set.score_pairs(self, u, v)

    def gradient_checkpointing_enable(
        self, gradient_checkpointing_kwargs: dict[str, Any] | None = None
    ) -> None:
        """Delegate to the backbone (called by the Trainer when ``gradient_checkpointing``)."""
        # the backbone is a transformers model (or a peft model passing the call on)
        cast(_Checkpointing, self.backbone).gradient_checkpointing_enable(
            gradient_checkpointing_kwargs=gradient_checkpointing_kwargs
        )

    def tokenize(self, sentences: Sequence[str], padding: bool | str = True) -> Any:
        """Apply the prompt, tokenize with truncation and pad (``return_tensors="pt"``).

        With a prompt, a sentence too long for ``max_length`` is shortened inside the
        template (:func:`~sts_core.encoder.encoding.fit_to_prompt`), so the template's last
        token — the one last-token pooling reads — is never cut off.
        """
        return encoding.tokenize(self, sentences, padding)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        then: Callable[[Any], Any] | None = None,
        columns: Mapping[str, dict[str, torch.Tensor]] | None = None,
        **features: Any,
    ) -> Any:
        """Embed a tokenized batch: returns ``(batch, dim)`` float32 vectors.

        In training mode with ``padding_free`` (and a backbone that allows it) the real
        tokens are packed into rows first (see :meth:`packing_path`): the work then
        scales with the tokens of the batch, not with batch × longest sentence.

        ``columns``: instead of one batch, the tokenized batch of each text column
        (``{"sentence1": {"input_ids": …, "attention_mask": …}, …}``); the result is then
        ``{column: (batch, dim)}`` (:func:`~sts_core.encoder.encoding.embed_columns`: one
        packed forward for all columns when packing, else one padded forward per column).

        ``then``: a function of the embeddings whose result is returned instead (the
        trainer's loss). It runs inside this forward, so under DDP the heads and loss
        parameters it uses belong to the forward DDP tracks (a parameter used after the
        forward breaks DDP's gradient reduction).
        """
        return encoding.forward(self, input_ids, attention_mask, then, columns, features)

    def packing_path(self) -> tuple[str, str]:
        """How :meth:`forward` runs now, and why: ``varlen``, ``block_mask`` or ``padded``.

        ``padding_free: auto``: ``block_mask`` on a CPU; on a GPU in fp16/bf16 ``varlen``
        where a kernel applies the backbone's attention dropout (or it has none), else
        ``padded`` (a dense block mask keeps SDPA off its fast kernels). ``true``: ``varlen``
        where the backbone allows it and a fused kernel runs on the module's device and
        dtype, else ``block_mask``. Evaluation (``encode``): ``varlen`` where a fused
        kernel runs on the device and dtype, else ``padded``
        (:func:`~sts_core.encoder.packing.evaluation_path`).
        """
        return packing.choose_path(self)

    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 64,
        show_progress_bar: bool = True,
        normalize: bool | None = None,
        max_batch_tokens: int | None = None,
        prompt_name: str | None = None,
        progress_desc: str = "Encoding",
        truncate_dim: int | None = None,
        *,
        token_budget: int | None = None,
    ) -> np.ndarray:
        """Embed sentences for evaluation: returns float32 ``(n, dim)`` in input order.

        ``prompt_name``: a named prompt before each sentence (default: the default's);
        ``progress_desc`` names the progress bar (e.g. the task being scored).
        ``truncate_dim``: the first D dimensions of each embedding (default
        :attr:`truncate_dim`, None: all), normalised again when the embeddings are (a
        Matryoshka model's smaller embedding).

        Each distinct sentence is encoded once, the sentences sorted by token length
        (longest first) so each batch pads only to its own longest member, under
        ``torch.no_grad`` on the module's device. ``max_batch_tokens``: batches of up to
        that many tokens instead of ``batch_size`` sentences (at least one sentence a
        batch); default: :attr:`max_batch_tokens` if set, else on a CUDA device
        ``batch_size`` × 256 (16,384 at batch size 64), on a CPU none. ``token_budget`` is
        its earlier name. Padding-free where a varlen kernel applies (CUDA, fp16/bf16), and
        on a GPU the next sentences are tokenized while the device computes:
        :func:`~sts_core.encoder.encoding.encode` says how.
        """
        sentences = self.prompted(sentences, prompt_name)  # (NamedPrompts)
        width = truncate_dim if truncate_dim is not None else self.truncate_dim
        return encoding.encode(
            self, sentences, batch_size, show_progress_bar, normalize, max_batch_tokens,
            progress_desc, width, token_budget,
        )  # fmt: skip

    def save_pretrained(
        self,
        output_dir: str | os.PathLike,
        state_dict: dict[str, torch.Tensor] | None = None,
        model_card: str | None = None,
        safe_serialization: bool = True,
        write_extra: Callable[[Path], None] | None = None,
        merge_lora: bool | None = None,
    ) -> None:
        """Write a folder that loads here, with ``AutoModel`` and with ``SentenceTransformer``.

        ``state_dict`` (keys of this module, e.g. gathered by DeepSpeed) replaces the live
        weights when given. Parameters outside the backbone (heads added by a method) go to
        ``sts_extra_modules.safetensors``, and the heads of :meth:`add_head` are listed in
        ``sts_heads.json``. ``write_extra(folder)`` adds files of the caller's.

        A LoRA encoder (peft backbone) writes its adapter, and ``sts_encoder_config.json``
        records the base model; with ``merge_lora`` (default: the encoder's ``merge_lora``
        attribute, set by ``apply_lora``) the merged full weights instead, with the adapter
        in ``lora_adapter/`` (what :meth:`load_weights` reads to resume a LoRA run).

        The save is atomic (:func:`sts_core.saving.staged_contents`): files are written to a
        staging folder, moved into place, and ``sts_save_complete.json`` is written last; a
        folder without it is refused by :meth:`from_pretrained` and :meth:`load_weights`.
        """
        files.save_folder(
            self, output_dir, state_dict, model_card, safe_serialization, write_extra, merge_lora
        )

    def load_weights(self, folder: str | os.PathLike) -> None:
        """Load the weights of a folder written by :meth:`save_pretrained` (strict); the
        folder must be a complete save (see :mod:`sts_core.saving`). A LoRA encoder loads
        the folder's adapter (the folder itself, or ``lora_adapter/`` of a merged save) and
        its extra weights; its base weights stay as they are (frozen in training)."""
        files.load_weights(self, folder)
