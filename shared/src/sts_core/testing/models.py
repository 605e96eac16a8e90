"""Tiny models built from configs (no downloads), and the toy pairs they train on."""

from __future__ import annotations

import shutil
import string
from pathlib import Path
from typing import Any

WORDS = [
    "a",
    "an",
    "the",
    "is",
    "are",
    "was",
    "were",
    "man",
    "woman",
    "men",
    "women",
    "boy",
    "girl",
    "dog",
    "cat",
    "child",
    "children",
    "playing",
    "plays",
    "play",
    "guitar",
    "piano",
    "eating",
    "eats",
    "food",
    "ball",
    "soccer",
    "running",
    "runs",
    "riding",
    "horse",
    "bike",
    "car",
    "street",
    "in",
    "on",
    "at",
    "of",
    "with",
    "and",
    "to",
    "by",
    "for",
    "from",
    "into",
    "slicing",
    "cutting",
    "onion",
    "tomato",
    "sitting",
    "sits",
    "standing",
    "beach",
    "park",
    "water",
    "swimming",
    "someone",
    "somebody",
    "people",
    "person",
    "two",
    "three",
    "small",
    "big",
    "black",
    "white",
    "not",
    "no",
    "something",
    "different",
    "very",
    "similar",
    "same",
    "this",
    "that",
    "sentence",
    "means",
    "one",
    "word",
]


def _vocab() -> dict[str, int]:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    pieces = [f"##{c}" for c in string.ascii_lowercase + string.digits]
    tokens = dict.fromkeys(specials + chars + pieces + WORDS)
    return {token: index for index, token in enumerate(tokens)}


def make_tiny_bert(folder: str | Path, seed: int = 0) -> Path:
    """A 2-layer BERT (hidden 32) with a WordPiece tokenizer, saved to ``folder``."""
    folder = Path(folder)  # a str too
    import torch
    from transformers import BertModel

    tokenizer, config = _tiny_bert_parts(folder)
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _tiny_bert_parts(folder: Path, **settings: Any) -> tuple[Any, Any]:
    """The tiny BERT's tokenizer and config (``settings`` added to it); ``folder`` made."""
    from transformers import BertConfig, BertTokenizerFast  # type: ignore[attr-defined]

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = BertTokenizerFast(vocab=_vocab(), do_lower_case=True)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        **settings,
    )
    return tokenizer, config


def first_layers_copy(model_dir: str | Path, folder: str | Path, layers: int) -> Path:
    """A copy of the encoder folder ``model_dir`` (a BERT-like model saved with its
    tokenizer, and sentence-transformers' files if it has them) in ``folder``, keeping only
    its first ``layers`` transformer layers: the same tokenizer, embeddings, pooling and
    maximum length at a fraction of the cost (smoke runs whose checks do not depend on
    the model's depth)."""
    from transformers import AutoModel

    model_dir, folder = Path(model_dir), Path(folder)
    model = AutoModel.from_pretrained(model_dir)
    encoder_layers = model.encoder.layer
    if not 0 < layers <= len(encoder_layers):
        raise ValueError(f"{model_dir}: {layers} layers asked of {len(encoder_layers)}")
    weights = shutil.ignore_patterns("*.safetensors", "*.bin")

    def ignored(directory: str, names: list[str]) -> set[str]:  # the model's own config too
        own = {"config.json"} if Path(directory) == model_dir else set()
        return set(weights(directory, names)) | (own & set(names))

    shutil.copytree(model_dir, folder, ignore=ignored)
    model.encoder.layer = encoder_layers[:layers]
    model.config.num_hidden_layers = layers
    model.save_pretrained(folder)
    return folder


def make_tiny_cross_encoder(folder: str | Path, seed: int = 0, num_labels: int = 1) -> Path:
    """The tiny BERT as a sequence classifier (``BertForSequenceClassification``, one output
    by default: a cross-encoder as ``sts-cosent`` saves one), seeded, saved to ``folder``;
    weights drawn wide enough that pairs get clearly different scores."""
    folder = Path(folder)  # a str too
    import torch
    from transformers import BertForSequenceClassification

    # initializer_range 0.3: scores that differ between pairs (0.02 gives near-equal ones)
    tokenizer, config = _tiny_bert_parts(folder, num_labels=num_labels, initializer_range=0.3)
    torch.manual_seed(seed)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def make_tiny_llama(folder: str | Path, seed: int = 0) -> Path:
    """A 2-layer Llama decoder (hidden 32) with a word-level tokenizer and no pad token."""
    folder = Path(folder)  # a str too
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {tok: i for i, tok in enumerate(["<unk>", "<s>", "</s>", *WORDS, *string.punctuation])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(seed)
    LlamaModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


#: 16 sentence pairs with STS scores 0–5 (a paraphrase and an unrelated sentence for most
#: first sentences, ties and middle scores among them) for tiny training runs
TOY_STS_PAIRS: list[tuple[str, str, float]] = [
    ("a man is playing the guitar", "a man plays the guitar", 4.8),
    ("a man is playing the guitar", "a woman is slicing an onion", 0.2),
    ("a dog runs in the park", "a dog is running in the park", 4.5),
    ("a dog runs in the park", "a girl is eating food", 0.5),
    ("two boys play soccer", "two children are playing soccer", 4.0),
    ("two boys play soccer", "a cat sits on the car", 0.0),
    ("a woman is riding a horse", "someone rides a horse", 3.8),
    ("a woman is riding a horse", "the man is swimming in the water", 0.8),
    ("a small white cat", "a small black cat", 3.0),
    ("a small white cat", "people are standing on the beach", 0.2),
    ("the child plays piano", "a child is playing the piano", 4.6),
    ("the child plays piano", "a big car on the street", 0.0),
    ("three men are sitting", "three people sit", 3.4),
    ("three men are sitting", "a boy is cutting a tomato", 1.0),
    ("this sentence means one thing", "this sentence means something different", 2.0),
    ("a person rides a bike", "a man is riding a bike", 4.2),
]


#: sentences to embed before and after a save
TOY_PROBES = ["a man plays the guitar", "a dog is running in the park", "children playing soccer"]

#: sentences of uneven lengths (2 to 12 words): a padded batch of them is mostly padding,
#: what the packed forwards are tested on
UNEVEN_SENTENCES = [
    "a man is playing a guitar",
    "two dogs run",
    "a woman is slicing an onion on the board in the kitchen",
    "the cat",
    "a man plays the guitar loudly on the street",
    "dogs",
]


def mean_pooled(model: Any, tokenizer: Any, texts: list[str]) -> Any:
    """Mean pooling by hand: the average of the last hidden states under the attention
    mask (padded batch, truncation on)."""
    batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    states = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return (states * mask).sum(1) / mask.sum(1)
