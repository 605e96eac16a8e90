"""Folders written by sentence-transformers (the peer) loaded with
``SentenceEncoder.from_pretrained``: the embeddings are the peer's own ``encode`` of the
same folder (pooling, normalisation and max length read from it), and a folder whose
vectors the encoder would not reproduce is refused, naming the file.

The references are the peer's: a ``SentenceTransformer`` built from its modules on the
tiny BERT or tiny Llama, saved, then its ``encode``. The last test runs one training
forward of a left-padded decoder in both libraries, dropout on, under one seed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from sts_core.encoder import SentenceEncoder

st = pytest.importorskip("sentence_transformers")
from sentence_transformers.sentence_transformer.modules import (  # noqa: E402
    Dense,
    Normalize,
    Pooling,
    Transformer,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

SENTENCES = [
    "a man is playing a guitar",
    "the dog",
    "two women are sitting on the beach with a big black dog and a small white cat",
    "a girl plays the piano",
    "the children are playing soccer in the park and the men are riding a horse",
    "a",
]
MAX_LENGTH = 12  # shorter than the long sentences: truncation is part of what is compared
ATOL = 1e-5
OURS = {"mean": "mean", "cls": "cls", "max": "max", "lasttoken": "last_token"}
OTHER = {"mean": "max", "cls": "mean", "max": "mean", "lasttoken": "mean"}


def peer_model(folder: Path, mode: str, normalize: bool, **pooling: Any) -> Any:
    """``SentenceTransformer(modules=[Transformer, Pooling(mode), Normalize?])`` on the tiny
    model in ``folder`` (max length :data:`MAX_LENGTH`); a decoder gets its EOS as the pad
    token and pads on the left, as decoders are run."""
    decoder = (folder / "config.json").read_text().count('"llama"') > 0
    sides = {"processor_kwargs": {"padding_side": "left"}} if decoder else {}
    transformer = Transformer(str(folder), max_seq_length=MAX_LENGTH, **sides)
    if decoder:
        transformer.tokenizer.pad_token = transformer.tokenizer.eos_token
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), mode, **pooling)]
    if normalize:
        modules.append(Normalize())
    return st.SentenceTransformer(modules=modules, device="cpu")


def saved_peer(model: Any, folder: Path) -> Path:
    model.save(str(folder))
    return folder


def peer_encode(model: Any, sentences: list[str], **kwargs: Any) -> np.ndarray:
    return np.asarray(model.encode(sentences, batch_size=4, **kwargs))


def ours_encode(encoder: SentenceEncoder, sentences: list[str], **kwargs: Any) -> np.ndarray:
    return encoder.encode(sentences, batch_size=3, show_progress_bar=False, **kwargs)


# ----------------------------------------------------------------- what is read
@pytest.mark.parametrize("normalize", [False, True], ids=["plain", "normalize"])
@pytest.mark.parametrize(
    ("model", "mode"),
    [("bert", "mean"), ("bert", "cls"), ("bert", "max"), ("llama", "lasttoken")],
)
def test_a_peer_folder_loads_with_its_pooling_normalisation_and_max_length(
    tiny_bert_dir: Path,
    tiny_llama_dir: Path,
    tmp_path: Path,
    model: str,
    mode: str,
    normalize: bool,
) -> None:
    peer = peer_model(tiny_bert_dir if model == "bert" else tiny_llama_dir, mode, normalize)
    folder = saved_peer(peer, tmp_path / "peer")
    theirs = peer_encode(peer, SENTENCES)
    assert theirs.shape == (len(SENTENCES), 32)
    assert max(len(peer.tokenizer(s)["input_ids"]) for s in SENTENCES) > MAX_LENGTH

    encoder = SentenceEncoder.from_pretrained(folder)
    assert (encoder.pooling, encoder.normalize, encoder.max_length) == (
        OURS[mode],
        normalize,
        MAX_LENGTH,
    )
    assert encoder.tokenizer.padding_side == ("left" if model == "llama" else "right")
    ours = ours_encode(encoder, SENTENCES)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=ATOL)
    # the peer folder loaded by the peer again: the same vectors
    np.testing.assert_allclose(
        peer_encode(st.SentenceTransformer(str(folder), device="cpu"), SENTENCES),
        theirs,
        rtol=0,
        atol=ATOL,
    )

    # what the comparison can see: another pooling, no normalisation, no truncation
    other = SentenceEncoder.from_pretrained(folder, pooling=OTHER[mode])
    assert np.abs(ours_encode(other, SENTENCES) - theirs).max() > 1e-2
    if normalize:
        bare = SentenceEncoder.from_pretrained(folder, normalize=False)
        assert np.abs(ours_encode(bare, SENTENCES) - theirs).max() > 1e-2
    longer = SentenceEncoder.from_pretrained(folder, max_length=64)
    assert np.abs(ours_encode(longer, SENTENCES) - theirs).max() > 10 * ATOL


def test_a_legacy_peer_folder_loads_with_its_settings(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """The files of sentence-transformers before 5 (all-MiniLM-L6-v2's): ``pooling_mode_*``
    flags and ``max_seq_length`` in ``sentence_bert_config.json``, module types under
    ``sentence_transformers.models``."""
    folder = saved_peer(peer_model(tiny_bert_dir, "cls", True), tmp_path / "peer")
    modules = json.loads((folder / "modules.json").read_text())
    for module, kind in zip(modules, ["Transformer", "Pooling", "Normalize"], strict=True):
        module["type"] = f"sentence_transformers.models.{kind}"
    (folder / "modules.json").write_text(json.dumps(modules))
    legacy_pooling = {
        "word_embedding_dimension": 32,
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": False,
        "pooling_mode_max_tokens": True,
        "pooling_mode_mean_sqrt_len_tokens": False,
    }
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(legacy_pooling))
    bert_config = {"max_seq_length": 9, "do_lower_case": False}
    (folder / "sentence_bert_config.json").write_text(json.dumps(bert_config))

    peer = st.SentenceTransformer(str(folder), device="cpu")
    assert peer.max_seq_length == 9
    encoder = SentenceEncoder.from_pretrained(folder)
    assert (encoder.pooling, encoder.normalize, encoder.max_length) == ("max", True, 9)
    np.testing.assert_allclose(
        ours_encode(encoder, SENTENCES), peer_encode(peer, SENTENCES), rtol=0, atol=ATOL
    )


def test_a_peer_max_length_over_512_is_taken(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """sentence-transformers 5+ keeps the max length in the tokenizer's ``model_max_length``
    (capped at the model's positions), not at 512 as the encoder's default."""
    from transformers import BertConfig, BertModel

    wide = tmp_path / "wide"
    shutil.copytree(tiny_bert_dir, wide)
    config = BertConfig.from_pretrained(wide, max_position_embeddings=1024)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(wide)
    transformer = Transformer(str(wide), max_seq_length=700)
    peer = st.SentenceTransformer(modules=[transformer, Pooling(32, "mean")], device="cpu")
    folder = saved_peer(peer, tmp_path / "peer")
    long_sentence = " ".join(["a man plays the guitar"] * 130)  # 650 words
    assert len(peer.tokenizer(long_sentence)["input_ids"]) > 600

    encoder = SentenceEncoder.from_pretrained(folder)
    assert encoder.max_length == 700
    texts = [long_sentence, SENTENCES[0]]
    theirs = peer_encode(peer, texts)
    np.testing.assert_allclose(ours_encode(encoder, texts), theirs, rtol=0, atol=ATOL)
    capped = SentenceEncoder.from_pretrained(folder, max_length=512)
    assert np.abs(ours_encode(capped, texts) - theirs).max() > 1e-3


# ----------------------------------------------------------------- what is refused
@pytest.fixture(scope="module")
def peer_folder(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved mean-pooled, normalised peer model on the tiny BERT (copy it to edit it)."""
    folder = tmp_path_factory.mktemp("peer") / "peer"
    return saved_peer(peer_model(tiny_bert_dir, "mean", True), folder)


def test_a_dense_module_is_refused_naming_modules_json(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """The audit's case: loaded without its Dense layer, the encoder gave 32-wide vectors
    where the peer gives 16-wide ones."""
    transformer = Transformer(str(tiny_bert_dir))
    dense = Dense(32, 16, activation_function=torch.nn.Tanh())
    peer = st.SentenceTransformer(
        modules=[transformer, Pooling(32, "mean"), dense, Normalize()], device="cpu"
    )
    folder = saved_peer(peer, tmp_path / "dense")
    assert peer_encode(peer, SENTENCES).shape == (len(SENTENCES), 16)
    with pytest.raises(ValueError, match="modules.json") as error:
        SentenceEncoder.from_pretrained(folder)
    message = str(error.value)
    assert str(folder / "modules.json") in message
    assert "dense.Dense is not supported" in message
    assert "load it with SentenceTransformer" in message


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (
            lambda m: [m[0], {**m[0], "type": "my_package.Transformer", "path": "1_X"}, *m[1:]],
            "my_package.Transformer is not supported",
        ),
        (lambda m: [{**m[0], "type": "custom_st.Transformer"}, *m[1:]], "custom_st.Transformer"),
        (lambda m: [m[0], m[2], m[1]], "are not Transformer, Pooling[, Normalize] in that order"),
        (lambda m: [m[0]], "are not Transformer, Pooling[, Normalize] in that order"),
        (lambda m: [{**m[0], "path": "0_Transformer"}, *m[1:]], "in '0_Transformer', not in"),
    ],
    ids=["extra-module", "custom-transformer", "normalize-first", "no-pooling", "subfolder"],
)
def test_other_module_lists_are_refused_naming_modules_json(
    peer_folder: Path, tmp_path: Path, edit: Any, words: str
) -> None:
    folder = tmp_path / "edited"
    shutil.copytree(peer_folder, folder)
    modules = json.loads((folder / "modules.json").read_text())
    (folder / "modules.json").write_text(json.dumps(edit(modules)))
    with pytest.raises(ValueError) as error:
        SentenceEncoder.from_pretrained(folder)
    assert str(error.value).startswith(f"{folder / 'modules.json'}: ")
    assert words in str(error.value)


@pytest.mark.parametrize(
    ("pooling", "words"),
    [
        ({"pooling_mode": "weightedmean"}, "pooling 'weightedmean' has no equivalent here"),
        ({"pooling_mode": ["mean", "max"]}, "pooling ['mean', 'max'] has no equivalent here"),
        (
            {"pooling_mode_mean_tokens": True, "pooling_mode_mean_sqrt_len_tokens": True},
            "pooling ['mean', 'mean_sqrt_len_tokens'] has no equivalent here",
        ),
    ],
)
def test_a_pooling_the_encoder_has_not_is_refused_naming_its_file(
    peer_folder: Path, tmp_path: Path, pooling: dict, words: str
) -> None:
    folder = tmp_path / "edited"
    shutil.copytree(peer_folder, folder)
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"embedding_dimension": 32, **pooling})
    )
    with pytest.raises(ValueError) as error:
        SentenceEncoder.from_pretrained(folder)
    assert str(error.value).startswith(f"{folder / '1_Pooling' / 'config.json'}: ")
    assert words in str(error.value)


def test_include_prompt_false_is_refused_naming_the_pooling_config(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """The peer leaves the prompt's tokens out of the pooling; the encoder pools the whole
    prompted text (the audit measured differences up to 0.68), so the folder is refused —
    one of ours edited so too."""
    prompts = {"query": "query: "}
    excluding = peer_model(tiny_bert_dir, "mean", True, include_prompt=False)
    including = peer_model(tiny_bert_dir, "mean", True)
    with_prompt = {"prompt_name": "query"}
    for model in (excluding, including):
        model.prompts = prompts
    gap = np.abs(
        peer_encode(excluding, SENTENCES, **with_prompt)
        - peer_encode(including, SENTENCES, **with_prompt)
    ).max()
    assert gap > 1e-2  # what loading it would have got wrong
    folder = saved_peer(excluding, tmp_path / "excluding")
    pooling_config = folder / "1_Pooling" / "config.json"
    assert json.loads(pooling_config.read_text())["include_prompt"] is False
    with pytest.raises(ValueError) as error:
        SentenceEncoder.from_pretrained(folder)
    assert str(error.value).startswith(f"{pooling_config}: include_prompt is false")
    assert "cannot honour" in str(error.value)

    # one of our folders edited so: its settings are read through the same check (loading
    # it stops earlier: the edited file is not the one the save wrote)
    from sts_core.encoder.files import saved_settings

    ours = tmp_path / "ours"
    SentenceEncoder.from_pretrained(tiny_bert_dir).save_pretrained(ours)
    config = json.loads((ours / "1_Pooling" / "config.json").read_text())
    (ours / "1_Pooling" / "config.json").write_text(json.dumps({**config, "include_prompt": False}))
    with pytest.raises(ValueError, match="include_prompt is false"):
        saved_settings(ours)


def test_a_lora_base_that_is_a_refused_peer_folder_is_refused(
    peer_folder: Path, tmp_path: Path
) -> None:
    """An adapter's base is read through the same check."""
    from sts_core.encoder.files import saved_settings

    base = tmp_path / "base"
    shutil.copytree(peer_folder, base)
    modules = json.loads((base / "modules.json").read_text())
    modules.insert(
        2, {"idx": 2, "name": "2", "path": "2_Dense", "type": Dense.__module__ + ".Dense"}
    )
    (base / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValueError, match="Dense is not supported"):
        saved_settings(base)


# ----------------------------------------------------------------- a decoder's training forward
def test_a_left_padded_decoder_trains_on_the_peer_forward_and_dropout_draws(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    """What ``embed_columns`` claims for the padded path: the collator's tokens
    (``encoder.tokenize``) are the peer's, left-padded, and one training forward of each
    column (attention dropout 0.3, the same seed) gives the peer's last-token embeddings —
    the same work and the same dropout draws; another seed gives others."""
    encoder = SentenceEncoder.from_pretrained(
        tiny_llama_dir,
        pooling="last_token",
        padding_side="left",
        padding_free=False,
        attention_dropout=0.3,
    )
    encoder.save_pretrained(tmp_path / "decoder")
    peer = st.SentenceTransformer(str(tmp_path / "decoder"), device="cpu")
    assert peer.tokenizer.padding_side == "left"
    columns = {"sentence1": SENTENCES[:3], "sentence2": SENTENCES[3:]}
    tokens = {name: encoder.tokenize(texts) for name, texts in columns.items()}
    features = {name: peer.preprocess(texts) for name, texts in columns.items()}
    for name, batch in tokens.items():
        for key in ("input_ids", "attention_mask"):
            assert torch.equal(batch[key], features[name][key]), (name, key)
        assert (batch["attention_mask"][:, 0] == 0).any()  # left padding in every column

    encoder.train()
    peer.train()
    assert encoder.packing_path()[0] == "padded"
    torch.manual_seed(7)
    ours = encoder(columns={name: dict(batch) for name, batch in tokens.items()})
    torch.manual_seed(7)
    theirs = {name: peer(dict(f))["sentence_embedding"] for name, f in features.items()}
    for name in columns:
        torch.testing.assert_close(ours[name], theirs[name], rtol=0, atol=ATOL)
    torch.manual_seed(8)
    redrawn = encoder(columns={name: dict(batch) for name, batch in tokens.items()})
    assert max((redrawn[n] - theirs[n]).abs().max().item() for n in columns) > 1e-2
