"""The :class:`SentenceEncoder` (the package's docstring describes its saved folder)."""

from __future__ import annotations

import inspect
import itertools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from sts_core.encoder.files import (
    EXTRA_WEIGHTS_NAME,
    load_weights,
    save_folder,
    saved_settings,
)
from sts_core.encoder.location import (
    absolute_location,
    check_model_location,
    check_tokenizer,
    hub_error,
    is_adapter_folder,
    read_json,
)
from sts_core.encoder.lora import (
    inner_model,
    load_lora_backbone,
    resolve_lora_base,
)
from sts_core.encoder.packing import (
    check_forced_path,
    choose_path,
    concat_features,
    padding_free_mode,
    run_backbone,
)
from sts_core.heads import HEADS_CONFIG_NAME, HEADS_FORMAT, build_head, can_score_pairs, head_entry
from sts_core.pooling import check_pooling_mode, needs_hidden_states, pool
from sts_core.prompts import apply_prompt, resolve_prompt

logger = logging.getLogger(__package__)  # "sts_core.encoder", as every part of the encoder

DEFAULT_MAX_LENGTH = 512


class SentenceEncoder(nn.Module):
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
            (positions restarting at each sentence; the embeddings are the padded
            forward's up to float rounding). ``auto`` (default): packed rows with a
            block-diagonal mask on a CPU (measured faster than padding there), padding on
            a GPU (the varlen kernel path is opt-in until measured on one:
            ``AUTO_TAKES_VARLEN``); ``true``: pack wherever the backbone allows (one row
            and a varlen attention kernel where one exists — CUDA with ``flash-attn`` or
            torch's ``varlen_attn`` — else the block mask); ``false``: pad;
            ``varlen`` or ``block_mask``: that path (``varlen`` on a CPU runs the exact
            per-sentence reference, for tests). See :meth:`packing_path`. Evaluation
            (``encode``) always pads.
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
        if max_length is not None and max_length < 1:
            raise ValueError(f"max_length must be at least 1 (or unset), got {max_length}")
        self.max_length = max_length or self._default_max_length()
        self.normalize = normalize
        self.padding_free = padding_free_mode(padding_free)
        self._paths_logged: set[tuple[str, str]] = set()
        if getattr(tokenizer, "pad_token", None) is None:
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        # where the weights came from (set by from_pretrained): a LoRA save records it as
        # the base model
        self.name_or_path: str | None = None
        # a LoRA encoder's save: merged full weights (True) or the adapter (False)
        self.merge_lora = False
        self._head_names: list[str] = []
        self._pair_scorer: str | None = None
        # a peft backbone passes its keyword arguments on to the model it wraps
        accepted = inspect.signature(inner_model(backbone).forward).parameters
        self._forward_keys = {"input_ids", "attention_mask", "token_type_ids"} & set(accepted)
        self._takes_use_cache = "use_cache" in accepted
        self._takes_position_ids = "position_ids" in accepted
        check_forced_path(self)

    # ----------------------------------------------------------------- loading
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
        from transformers import AutoModel, AutoTokenizer

        location = check_model_location(name_or_path)
        base = resolve_lora_base(location, base_model) if is_adapter_folder(location) else None
        stored = saved_settings(location)
        try:
            # padding_side as a tokenizer argument (not set afterwards), so that
            # tokenizer.save_pretrained records it and a reloaded folder pads the same way
            sides = {} if padding_side is None else {"padding_side": padding_side}
            if trust_remote_code:
                sides["trust_remote_code"] = model_kwargs["trust_remote_code"] = True
            tokenizer = AutoTokenizer.from_pretrained(location, **sides)
            if base is not None:
                backbone = load_lora_backbone(
                    location, base, _resolve_dtype(dtype), merge_lora, model_kwargs
                )
                stored = {**saved_settings(base), **stored}
            else:
                backbone = AutoModel.from_pretrained(
                    location, dtype=_resolve_dtype(dtype), **model_kwargs
                )
        except Exception as error:  # noqa: BLE001 - a model that cannot be read, named
            if Path(location).exists():
                raise OSError(f"could not load model folder {location}: {error}") from error
            if isinstance(error, OSError):
                raise hub_error(location, error) from error
            raise
        check_tokenizer(tokenizer, backbone, location)
        encoder = cls(
            backbone,
            tokenizer,
            pooling=pooling or stored.get("pooling", "mean"),
            prompt=prompt if prompt is not None else stored.get("prompt"),
            max_length=max_length if max_length is not None else stored.get("max_length"),
            normalize=normalize if normalize is not None else stored.get("normalize", False),
            padding_free=padding_free,
        )
        encoder.name_or_path = absolute_location(location)
        if Path(location).is_dir():
            encoder._load_heads(Path(location))
        return encoder

    def _default_max_length(self) -> int:
        candidates = [DEFAULT_MAX_LENGTH, getattr(self.tokenizer, "model_max_length", None)]
        positions = getattr(getattr(self.backbone, "config", None), "max_position_embeddings", None)
        candidates.append(positions)
        return min(int(c) for c in candidates if isinstance(c, int | float) and c > 0)

    # ----------------------------------------------------------------- properties
    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def config(self) -> Any:
        """The backbone's transformers config (what the Trainer and PEFT look for)."""
        return self.backbone.config

    @property
    def dimension(self) -> int:
        return int(self.backbone.config.hidden_size)

    def settings(self) -> dict[str, Any]:
        return {
            "pooling": self.pooling,
            "prompt": self.prompt,
            "max_length": self.max_length,
            "normalize": self.normalize,
        }

    # ----------------------------------------------------------------- heads
    def add_head(self, name: str, head: nn.Module, *, pair_scorer: bool = False) -> nn.Module:
        """Add ``head`` (an instance of a class registered with
        :func:`sts_core.heads.register_head`) as the submodule ``name``: trained with the
        encoder, saved by :meth:`save_pretrained` (``sts_heads.json`` and its weights) and
        rebuilt by :meth:`from_pretrained`. It replaces an earlier head or extra module of
        that name; it is moved to the encoder's device. ``pair_scorer``: score pairs with
        its ``score(u, v)`` (see :meth:`score_pairs`). Returns the head."""
        head_entry(head)  # TypeError for a class that is not registered
        if not isinstance(name, str) or not name.isidentifier() or name == "backbone":
            raise ValueError(f"head name {name!r}: a Python identifier other than 'backbone'")
        if hasattr(self, name) and name not in self._modules:
            raise ValueError(f"head name {name!r} is an attribute of the encoder already")
        self.add_module(name, head.to(self.device))
        if name not in self._head_names:
            self._head_names.append(name)
        if pair_scorer:
            self.pair_scorer = name
        return head

    def remove_head(self, name: str) -> nn.Module:
        """Remove the head ``name`` (and stop scoring pairs with it); return it."""
        if name not in self._head_names:
            raise KeyError(f"no head {name!r}; heads: {', '.join(self._head_names) or 'none'}")
        head = self._modules.pop(name)
        self._head_names.remove(name)
        if self._pair_scorer == name:
            self._pair_scorer = None
        return head

    @property
    def heads(self) -> Mapping[str, nn.Module]:
        """The heads added by :meth:`add_head`, by name (read-only)."""
        return MappingProxyType({name: self._modules[name] for name in self._head_names})

    @property
    def pair_scorer(self) -> str | None:
        """The head whose ``score(u, v)`` scores pairs, or ``None``: cosine similarity."""
        return self._pair_scorer

    @pair_scorer.setter
    def pair_scorer(self, name: str | None) -> None:
        if name is not None:
            if name not in self._head_names:
                raise ValueError(
                    f"pair_scorer {name!r} is not a head of this encoder (heads: "
                    f"{', '.join(self._head_names) or 'none'}; add it with add_head)"
                )
            if not can_score_pairs(self._modules[name]):
                raise ValueError(f"head {name!r} has no score(u, v) for sentence pairs")
        self._pair_scorer = name

    def score_pairs(self, u: Any, v: Any) -> torch.Tensor:
        """Similarity of each pair of embeddings ``u[i]``, ``v[i]`` (tensors or arrays of
        shape ``(n, dim)``): the cosine similarity, or the pair-scoring head's
        ``score(u, v)`` when :attr:`pair_scorer` names one. Returns ``(n,)``."""
        u = torch.as_tensor(u)
        v = torch.as_tensor(v)
        if self._pair_scorer is None:
            return nn.functional.cosine_similarity(u, v, dim=-1)
        head = self._modules[self._pair_scorer]
        parameter = next(head.parameters(), None)
        if parameter is not None:
            u = u.to(device=parameter.device, dtype=parameter.dtype)
            v = v.to(device=parameter.device, dtype=parameter.dtype)
        return head.score(u, v)

    def heads_config(self) -> dict[str, Any]:
        """What ``sts_heads.json`` records: each head's type, config and module; the pair
        scorer."""
        return {
            "format": HEADS_FORMAT,
            "heads": {name: head_entry(head) for name, head in self.heads.items()},
            "pair_scorer": self._pair_scorer,
        }

    def _load_heads(self, folder: Path) -> None:
        """Rebuild the heads of ``sts_heads.json`` with their weights from
        ``sts_extra_modules.safetensors`` (strict, per head); other extra weights are
        ignored with a warning (a folder saved before heads were recorded, or a module
        added with ``add_module``: add it again and use :meth:`load_weights`)."""
        listing = read_json(folder / HEADS_CONFIG_NAME)
        extra_file = folder / EXTRA_WEIGHTS_NAME
        weights: dict[str, torch.Tensor] = {}
        if extra_file.is_file():
            from safetensors.torch import load_file

            weights = load_file(extra_file)
        entries = (listing or {}).get("heads", {})
        used: set[str] = set()
        for name, entry in entries.items():
            try:
                head = build_head(entry)
            except (TypeError, ValueError) as error:
                raise OSError(f"model folder {folder}: head {name!r}: {error}") from error
            prefix = f"{name}."
            own = {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
            try:
                head.load_state_dict(own, strict=True)
            except RuntimeError as error:
                raise OSError(
                    f"model folder {folder}: the weights of head {name!r} in "
                    f"{EXTRA_WEIGHTS_NAME} do not fit it: {error}"
                ) from error
            used.update(prefix + key for key in own)
            self.add_head(name, head)
        if listing and listing.get("pair_scorer") is not None:
            self.pair_scorer = listing["pair_scorer"]
        ignored = sorted(key for key in weights if key not in used)
        if ignored:
            modules = sorted({key.split(".", 1)[0] for key in ignored})
            logger.warning(
                "%s: the extra weights of %s in %s are not heads this folder records (%s): "
                "they are ignored; add those modules to the encoder and call load_weights to "
                "use them",
                folder,
                ", ".join(modules),
                EXTRA_WEIGHTS_NAME,
                "no " + HEADS_CONFIG_NAME if listing is None else HEADS_CONFIG_NAME,
            )

    def gradient_checkpointing_enable(
        self, gradient_checkpointing_kwargs: dict | None = None
    ) -> None:
        """Delegate to the backbone (called by the Trainer when ``gradient_checkpointing``)."""
        self.backbone.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs=gradient_checkpointing_kwargs
        )

    # ----------------------------------------------------------------- forward
    def tokenize(self, sentences: Sequence[str], padding: bool | str = True) -> Any:
        """Apply the prompt, tokenize with truncation and pad (``return_tensors="pt"``).

        With a prompt, a sentence too long for ``max_length`` is shortened inside the
        template (:meth:`fit_to_prompt`), so the template's last token — the one
        last-token pooling reads — is never cut off.
        """
        if self.prompt is not None and self.max_length:
            sentences = self.fit_to_prompt(sentences)
        texts = [apply_prompt(self.prompt, s) for s in sentences]
        return self.tokenizer(
            texts,
            padding=padding,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt" if padding else None,
        )

    def fit_to_prompt(self, sentences: Sequence[str]) -> list[str]:
        """Each sentence shortened (to its first tokens, decoded) so that it fits in
        ``max_length`` tokens together with the prompt template and special tokens; others
        as they are. As the Pcc-tuning and PromptEOL code cut the sentence, not the prompt.
        """
        overhead = len(self.tokenizer(apply_prompt(self.prompt, ""))["input_ids"])
        budget = self.max_length - overhead
        if budget < 1:
            raise ValueError(
                f"max_length {self.max_length} leaves no room for the sentence: the prompt "
                f"{self.prompt!r} takes {overhead} tokens with the special tokens"
            )
        fitted = list(sentences)
        ids = self.tokenizer(fitted, add_special_tokens=False)["input_ids"]
        for index, tokens in enumerate(ids):
            keep = budget
            while len(tokens) > keep and keep > 0:  # a decoded cut may re-tokenize longer
                fitted[index] = self.tokenizer.decode(tokens[:keep]).strip()
                text = apply_prompt(self.prompt, fitted[index])
                if len(self.tokenizer(text)["input_ids"]) <= self.max_length:
                    break
                keep -= 1
        return fitted

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
        tokens are packed into rows first (see :meth:`uses_padding_free`): the work then
        scales with the tokens of the batch, not with batch × longest sentence.

        ``columns``: instead of one batch, the tokenized batch of each text column
        (``{"sentence1": {"input_ids": …, "attention_mask": …}, …}``); the result is then
        ``{column: (batch, dim)}`` (see :meth:`embed_columns`).

        ``then``: a function of the embeddings whose result is returned instead (the
        trainer's loss). It runs inside this forward, so under DDP the heads and loss
        parameters it uses belong to the forward DDP tracks (a parameter used after the
        forward breaks DDP's gradient reduction).
        """
        if columns is not None:
            embeddings = self.embed_columns(columns)
        elif input_ids is None or attention_mask is None:
            raise TypeError("forward takes input_ids and attention_mask, or columns")
        else:
            embeddings = self._embed_batch(input_ids, attention_mask, **features)
        return embeddings if then is None else then(embeddings)

    def embed_columns(
        self, columns: Mapping[str, dict[str, torch.Tensor]]
    ) -> dict[str, torch.Tensor]:
        """Embeddings of each text column: ``{"sentence1": (N, d), …}``.

        Packing (:meth:`uses_padding_free`): all columns in one packed forward, which costs
        the batch's real tokens. Otherwise one forward per column, each padded to its own
        longest sentence: the work, the dropout draws and the padding side (left-padded
        decoders) are those of sentence-transformers, which embeds each column apart.
        """
        if len(columns) > 1 and self.uses_padding_free():
            merged, sizes = concat_features(list(columns.values()))
            flat = self._embed_batch(**merged)
            return dict(zip(columns, flat.split(sizes), strict=True))
        return {name: self._embed_batch(**features) for name, features in columns.items()}

    def _embed_batch(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **features: Any
    ) -> torch.Tensor:
        """Pooled (and, with ``normalize``, unit-length) embeddings of one tokenized batch."""
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        inputs.update({k: v for k, v in features.items() if k in self._forward_keys})
        hidden = needs_hidden_states(self.pooling)
        last, states = run_backbone(self, inputs, hidden)
        embeddings = pool(self.pooling, last, attention_mask, states)
        if self.normalize:
            embeddings = nn.functional.normalize(embeddings, p=2, dim=-1)
        return embeddings

    def uses_padding_free(self) -> bool:
        """Whether :meth:`forward` runs without padding now (:meth:`packing_path`)."""
        return self.packing_path()[0] != "padded"

    def packing_path(self) -> tuple[str, str]:
        """How :meth:`forward` runs now, and why: ``varlen``, ``block_mask`` or ``padded``.

        ``padding_free: auto``: ``block_mask`` on a CPU; ``padded`` on a GPU (a dense block
        mask keeps SDPA off its fast kernels; the varlen path is not measured on a GPU yet,
        ``AUTO_TAKES_VARLEN``). ``true``: ``varlen`` where the backbone allows it and a fused
        kernel exists on the module's device, else ``block_mask``. Evaluation always pads.
        """
        return choose_path(self)

    # ----------------------------------------------------------------- encode
    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 64,
        show_progress_bar: bool = True,
        normalize: bool | None = None,
        token_budget: int | None = None,
    ) -> np.ndarray:
        """Embed sentences for evaluation: returns float32 ``(n, dim)`` in input order.

        Each distinct sentence is encoded once; sentences are tokenized once and sorted by
        token length (longest first) so each batch is padded only to its own longest
        member; runs under ``torch.inference_mode`` on the module's device. ``token_budget``:
        batches of up to that many padded tokens (sentences × longest) instead of
        ``batch_size`` sentences, so short sentences go in large batches (a batch holds at
        least one sentence). Padding is done with numpy, host memory is pinned on a GPU and
        copied without blocking, and the vectors stay on the device until one copy at the
        end, so the host prepares the next batch while the device computes.
        """
        _check_positive("batch_size", batch_size)
        if token_budget is not None:
            _check_positive("token_budget", token_budget)
        single = isinstance(sentences, str)
        items = [sentences] if single else list(sentences)
        distinct = list(dict.fromkeys(items))
        vectors = self._encode_distinct(distinct, batch_size, show_progress_bar, token_budget)
        if normalize:
            vectors = nn.functional.normalize(vectors, p=2, dim=-1)
        position = {sentence: i for i, sentence in enumerate(distinct)}
        result = vectors[[position[s] for s in items]].numpy()
        return result[0] if single else result

    def _encode_distinct(
        self,
        sentences: list[str],
        batch_size: int,
        progress: bool,
        token_budget: int | None = None,
    ) -> torch.Tensor:
        if not sentences:
            return torch.empty(0, self.dimension, dtype=torch.float32)
        encoded = self.tokenize(sentences, padding=False)
        lengths = np.fromiter(map(len, encoded["input_ids"]), dtype=np.int64)
        order = np.argsort(-lengths, kind="stable")
        bounds = batch_bounds(lengths[order], batch_size, token_budget)
        device = self.device
        output = torch.empty(len(sentences), self.dimension, dtype=torch.float32, device=device)
        # restore each submodule's own mode afterwards: a freshly loaded encoder is in train
        # mode while its backbone is in eval mode, and self.train(True) would turn dropout on
        modes = {module: module.training for module in self.modules()}
        self.eval()
        try:
            with torch.inference_mode():
                for start, end in tqdm(
                    bounds, desc="Encoding", disable=not progress or len(bounds) < 2
                ):
                    index = order[start:end]
                    batch = self._padded_batch(encoded, index, device)
                    rows = torch.as_tensor(index, device=device)
                    output[rows] = self(**batch).float()
        finally:
            for module, training in modes.items():
                module.training = training
        return output.cpu()

    def _padded_batch(
        self, encoded: Mapping[str, list[list[int]]], index: np.ndarray, device: torch.device
    ) -> dict[str, torch.Tensor]:
        """The rows ``index`` of the unpadded tokenization as padded tensors on ``device``
        (the tokenizer's padding side and pad values), pinned and copied without blocking
        on a GPU."""
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        fills = {
            "input_ids": self.tokenizer.pad_token_id,
            "token_type_ids": getattr(self.tokenizer, "pad_token_type_id", 0),
        }
        batch = {}
        for key, rows in encoded.items():
            padded = torch.from_numpy(pad_rows([rows[i] for i in index], fills.get(key, 0), left))
            if device.type == "cuda":
                padded = padded.pin_memory()
            batch[key] = padded.to(device, non_blocking=True)
        return batch

    # ----------------------------------------------------------------- saving
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
        save_folder(
            self, output_dir, state_dict, model_card, safe_serialization, write_extra, merge_lora
        )

    def load_weights(self, folder: str | os.PathLike) -> None:
        """Load the weights of a folder written by :meth:`save_pretrained` (strict); the
        folder must be a complete save (see :mod:`sts_core.saving`). A LoRA encoder loads
        the folder's adapter (the folder itself, or ``lora_adapter/`` of a merged save) and
        its extra weights; its base weights stay as they are (frozen in training)."""
        load_weights(self, folder)


def batch_bounds(
    lengths: np.ndarray, batch_size: int, token_budget: int | None = None
) -> list[tuple[int, int]]:
    """``(start, end)`` of each batch over sentences sorted longest first: ``batch_size``
    sentences, or with ``token_budget`` as many as fit ``count × first length ≤ budget``
    (at least one)."""
    total = len(lengths)
    if token_budget is None:
        return [(start, min(start + batch_size, total)) for start in range(0, total, batch_size)]
    bounds, start = [], 0
    while start < total:
        size = max(1, token_budget // max(int(lengths[start]), 1))
        bounds.append((start, min(start + size, total)))
        start += size
    return bounds


def pad_rows(rows: Sequence[Sequence[int]], fill: int, left: bool = False) -> np.ndarray:
    """Token rows as one ``(len(rows), longest)`` int64 array, ``fill`` on the padding side."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    width = int(lengths.max()) if len(rows) else 0
    padded = np.full((len(rows), width), fill, dtype=np.int64)
    columns = np.arange(width)
    real = columns >= (width - lengths)[:, None] if left else columns < lengths[:, None]
    padded[real] = np.fromiter(itertools.chain.from_iterable(rows), np.int64, int(lengths.sum()))
    return padded


def _check_positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer ≥ 1, got {value!r}")


def _resolve_dtype(dtype: str | torch.dtype | None) -> str | torch.dtype:
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype) or dtype == "auto":
        return dtype
    names = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype not in names:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(names)} or auto")
    return names[dtype]
