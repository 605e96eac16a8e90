"""SentenceEncoder on tiny models built from configs (no downloads), and marked real-model tests.

References are computed independently in the tests: each sentence run alone (no padding)
through the backbone and pooled by hand, or sentence-transformers on the saved folder.
"""

from __future__ import annotations

import json
import logging
import platform
import shutil
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from sts_core.encoder import EXTRA_WEIGHTS_NAME, SentenceEncoder
from sts_core.saving import ENCODER_CONFIG_NAME

SENTENCES = [
    "a man is playing a guitar",
    "the dog",
    "two women are sitting on the beach with a big black dog and a small white cat",
    "a girl plays the piano",
    "someone is slicing an onion",
    "a",
    "the children are playing soccer in the park and the men are riding a horse in the street",
    "a cat is eating food",
    "two men",
    "a woman is cutting a tomato with something",
]
# duplicates in different places, and a sentence whose first copy comes late
WITH_DUPLICATES = [
    SENTENCES[3],
    SENTENCES[0],
    SENTENCES[3],
    SENTENCES[5],
    SENTENCES[2],
    SENTENCES[0],
    SENTENCES[1],
    SENTENCES[3],
]
PROMPTEOL = 'This sentence : "{}" means in one word:"'


@pytest.fixture(autouse=True)
def _one_thread(request: pytest.FixtureRequest):
    """Tiny models run fastest on one thread (and do not fight parallel test runs for CPUs)."""
    if request.node.get_closest_marker("real_model"):
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _load(folder: Path, **kwargs) -> SentenceEncoder:
    return SentenceEncoder.from_pretrained(folder, **kwargs)


def _reference(encoder: SentenceEncoder, sentence: str, mode: str, text: str | None = None):
    """Embed one sentence alone (no padding, no pool()) and pool by hand."""
    tokenizer, backbone = encoder.tokenizer, encoder.backbone
    inputs = tokenizer(text if text is not None else sentence, return_tensors="pt")
    with torch.no_grad():
        out = backbone(**inputs, output_hidden_states=True, return_dict=True)
    last = out.last_hidden_state[0].float()
    if mode == "mean":
        vector = last.sum(dim=0) / last.shape[0]
    elif mode == "cls":
        vector = last[0]
    elif mode == "max":
        vector = last.max(dim=0).values
    elif mode == "last_token":
        vector = last[-1]
    else:
        vector = ((out.hidden_states[1][0] + out.hidden_states[-1][0]) / 2).mean(dim=0)
    return vector.numpy()


class _RowCounter:
    """Forward pre-hook on the backbone: counts batch rows and records the grad state."""

    def __init__(self, module: nn.Module) -> None:
        self.rows = 0
        self.calls = 0
        self.grad_enabled: list[bool] = []
        self.inference_mode: list[bool] = []
        self.training: list[bool] = []
        self.handle = module.register_forward_pre_hook(self, with_kwargs=True)

    def __call__(self, module, args, kwargs):
        ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
        self.rows += ids.shape[0]
        self.calls += 1
        self.grad_enabled.append(torch.is_grad_enabled())
        self.inference_mode.append(torch.is_inference_mode_enabled())
        self.training.append(module.training)

    def remove(self) -> None:
        self.handle.remove()


# ---------------------------------------------------------------- encode on tiny models
@pytest.mark.parametrize("mode", ["mean", "cls", "max", "first_last_avg"])
def test_encode_matches_each_sentence_alone_bert(tiny_bert_dir: Path, mode: str) -> None:
    encoder = _load(tiny_bert_dir, pooling=mode)
    embeddings = encoder.encode(SENTENCES, batch_size=4, show_progress_bar=False)
    assert isinstance(embeddings, np.ndarray)
    assert embeddings.dtype == np.float32
    assert embeddings.shape == (len(SENTENCES), 32)
    for row, sentence in enumerate(SENTENCES):
        np.testing.assert_allclose(
            embeddings[row], _reference(encoder, sentence, mode), rtol=0, atol=1e-5
        )
        single = encoder.encode(sentence, show_progress_bar=False)
        assert single.shape == (32,)
        assert single.dtype == np.float32
        np.testing.assert_allclose(single, embeddings[row], rtol=0, atol=1e-5)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize(("mode", "prompt"), [("last_token", "prompteol"), ("mean", None)])
def test_encode_matches_each_sentence_alone_llama(
    tiny_llama_dir: Path, mode: str, prompt: str | None, side: str
) -> None:
    encoder = _load(tiny_llama_dir, pooling=mode, prompt=prompt, padding_side=side)
    assert encoder.tokenizer.padding_side == side
    embeddings = encoder.encode(SENTENCES, batch_size=4, show_progress_bar=False)
    assert embeddings.dtype == np.float32
    assert embeddings.shape == (len(SENTENCES), 32)
    for row, sentence in enumerate(SENTENCES):
        text = PROMPTEOL.format(sentence) if prompt else sentence
        expected = _reference(encoder, sentence, mode, text=text)
        np.testing.assert_allclose(embeddings[row], expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize(("mode", "prompt"), [("last_token", "prompteol"), ("mean", None)])
def test_left_and_right_padding_agree_llama(
    tiny_llama_dir: Path, mode: str, prompt: str | None
) -> None:
    results = {}
    for side in ("left", "right"):
        encoder = _load(tiny_llama_dir, pooling=mode, prompt=prompt, padding_side=side)
        results[side] = encoder.encode(
            SENTENCES, batch_size=len(SENTENCES), show_progress_bar=False
        )
    np.testing.assert_allclose(results["left"], results["right"], rtol=0, atol=1e-5)


def test_llama_without_pad_token_gets_eos(tiny_llama_dir: Path) -> None:
    encoder = _load(tiny_llama_dir)
    assert encoder.tokenizer.pad_token == "</s>"


@pytest.mark.parametrize(
    ("model", "mode", "prompt", "side"),
    [
        ("bert", "mean", None, "right"),
        ("bert", "cls", None, "right"),
        ("bert", "max", None, "right"),
        ("bert", "first_last_avg", None, "right"),
        ("llama", "last_token", "prompteol", "left"),
        ("llama", "mean", None, "right"),
    ],
)
def test_batch_size_does_not_change_result(
    tiny_bert_dir: Path, tiny_llama_dir: Path, model: str, mode: str, prompt, side: str
) -> None:
    folder = tiny_bert_dir if model == "bert" else tiny_llama_dir
    encoder = _load(folder, pooling=mode, prompt=prompt, padding_side=side)
    reference = encoder.encode(SENTENCES, batch_size=1, show_progress_bar=False)
    for batch_size in (2, 3, 7, 64):
        result = encoder.encode(SENTENCES, batch_size=batch_size, show_progress_bar=False)
        np.testing.assert_allclose(result, reference, rtol=0, atol=1e-5)


def test_duplicates_encoded_once(tiny_bert_dir: Path) -> None:
    encoder = _load(tiny_bert_dir)
    counter = _RowCounter(encoder.backbone)
    try:
        embeddings = encoder.encode(WITH_DUPLICATES, batch_size=2, show_progress_bar=False)
    finally:
        counter.remove()
    distinct = set(WITH_DUPLICATES)
    assert counter.rows == len(distinct)
    assert counter.calls == -(-len(distinct) // 2)
    assert embeddings.shape == (len(WITH_DUPLICATES), 32)
    for i, a in enumerate(WITH_DUPLICATES):
        for j, b in enumerate(WITH_DUPLICATES):
            if a == b:
                assert np.array_equal(embeddings[i], embeddings[j])
            else:
                assert not np.allclose(embeddings[i], embeddings[j])
    for row, sentence in enumerate(WITH_DUPLICATES):
        np.testing.assert_allclose(
            embeddings[row], _reference(encoder, sentence, "mean"), rtol=0, atol=1e-5
        )


@pytest.mark.parametrize("side", ["left", "right"])
def test_batches_sorted_by_length_and_padded_to_their_longest(
    tiny_llama_dir: Path, side: str
) -> None:
    encoder = _load(tiny_llama_dir, padding_side=side)
    lengths = sorted((len(encoder.tokenizer(s)["input_ids"]) for s in SENTENCES), reverse=True)
    masks: list[torch.Tensor] = []
    handle = encoder.backbone.register_forward_pre_hook(
        lambda module, args, kwargs: masks.append(kwargs["attention_mask"].clone()),
        with_kwargs=True,
    )
    try:
        encoder.encode(SENTENCES, batch_size=3, show_progress_bar=False)
    finally:
        handle.remove()
    # longest first, each batch as wide as its longest member, padding on the chosen side
    assert [m.sum(dim=1).tolist() for m in masks] == [
        lengths[i : i + 3] for i in range(0, len(lengths), 3)
    ]
    for mask in masks:
        assert mask.shape[1] == int(mask.sum(dim=1).max())
        # every row's real tokens touch the side opposite the padding
        touching = mask[:, -1] if side == "left" else mask[:, 0]
        assert touching.tolist() == [1] * mask.shape[0]


def test_encode_empty_list(tiny_bert_dir: Path) -> None:
    embeddings = _load(tiny_bert_dir).encode([], show_progress_bar=False)
    assert embeddings.shape == (0, 32)
    assert embeddings.dtype == np.float32


def test_normalize(tiny_bert_dir: Path) -> None:
    plain = _load(tiny_bert_dir)
    raw = plain.encode(SENTENCES, show_progress_bar=False)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    expected = raw / np.linalg.norm(raw, axis=1, keepdims=True)

    normalized = _load(tiny_bert_dir, normalize=True).encode(SENTENCES, show_progress_bar=False)
    np.testing.assert_allclose(np.linalg.norm(normalized, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(normalized, expected, rtol=0, atol=1e-6)

    on_call = plain.encode(SENTENCES, normalize=True, show_progress_bar=False)
    np.testing.assert_allclose(on_call, expected, rtol=0, atol=1e-6)


def test_encode_runs_without_grad_and_restores_training(tiny_bert_dir: Path) -> None:
    """``no_grad``, not ``inference_mode``: under DeepSpeed ZeRO-3 the parameters an
    evaluation gathers (the small ones stay gathered) would be inference tensors, and the
    training step after the step-0 evaluation failed ("Inference tensors cannot be saved
    for backward")."""
    encoder = _load(tiny_bert_dir)
    encoder.train()
    counter = _RowCounter(encoder.backbone)
    try:
        embeddings = encoder.encode(SENTENCES, batch_size=3, show_progress_bar=False)
    finally:
        counter.remove()
    assert counter.calls == 4
    assert counter.inference_mode == [False] * 4
    assert counter.grad_enabled == [False] * 4
    assert counter.training == [False] * 4  # dropout off while encoding
    assert encoder.training and encoder.backbone.training  # restored afterwards
    assert torch.is_grad_enabled()
    # dropout off: encoding again in train mode gives the same vectors
    again = encoder.encode(SENTENCES, batch_size=5, show_progress_bar=False)
    np.testing.assert_allclose(again, embeddings, rtol=0, atol=1e-5)


def test_encode_leaves_each_module_mode_alone(tiny_bert_dir: Path) -> None:
    # A loaded encoder is in train mode (nn.Module default) with its backbone in eval mode;
    # encoding must not switch the backbone's dropout on.
    encoder = _load(tiny_bert_dir)
    modes = {name: module.training for name, module in encoder.named_modules()}
    assert encoder.backbone.training is False
    encoder.encode(SENTENCES, show_progress_bar=False)
    assert {name: module.training for name, module in encoder.named_modules()} == modes
    batch = encoder.tokenize(SENTENCES[:2])
    with torch.no_grad():
        first, second = encoder(**batch), encoder(**batch)
    torch.testing.assert_close(first, second, rtol=0, atol=0)


def test_forward_keeps_gradients(tiny_bert_dir: Path) -> None:
    encoder = _load(tiny_bert_dir, pooling="cls")
    batch = encoder.tokenize(SENTENCES[:3])
    out = encoder(**batch)
    assert out.shape == (3, 32)
    assert out.dtype == torch.float32
    assert out.requires_grad


# ---------------------------------------------------------------- saving and loading
@pytest.mark.parametrize(
    ("model", "settings"),
    [
        ("bert", {"pooling": "max", "normalize": True, "max_length": 20}),
        ("bert", {"pooling": "first_last_avg"}),
        # BERT's absolute positions make its embeddings depend on the padding side
        ("bert", {"pooling": "mean", "padding_side": "left"}),
        ("llama", {"pooling": "last_token", "prompt": "promptsum", "padding_side": "left"}),
    ],
)
def test_save_and_reload_same_embeddings_and_settings(
    tiny_bert_dir: Path, tiny_llama_dir: Path, tmp_path: Path, model: str, settings: dict
) -> None:
    folder = tiny_bert_dir if model == "bert" else tiny_llama_dir
    encoder = _load(folder, **settings)
    before = encoder.encode(SENTENCES, show_progress_bar=False)
    encoder.save_pretrained(tmp_path / "saved")

    reloaded = SentenceEncoder.from_pretrained(tmp_path / "saved")
    expected_settings = {
        "pooling": settings["pooling"],
        "prompt": encoder.prompt,
        "max_length": settings.get("max_length", 128),
        "normalize": settings.get("normalize", False),
    }
    assert reloaded.settings() == expected_settings
    if "prompt" in settings:
        assert reloaded.prompt == 'This sentence : "[X]" can be summarized as'
    assert reloaded.tokenizer.padding_side == settings.get("padding_side", "right")
    after = reloaded.encode(SENTENCES, show_progress_bar=False)
    np.testing.assert_allclose(after, before, rtol=0, atol=1e-6)

    stored = json.loads((tmp_path / "saved" / ENCODER_CONFIG_NAME).read_text())
    assert {k: stored[k] for k in expected_settings} == expected_settings


def test_explicit_arguments_override_saved_settings(tiny_bert_dir: Path, tmp_path: Path) -> None:
    _load(tiny_bert_dir, pooling="max", normalize=True).save_pretrained(tmp_path)
    reloaded = SentenceEncoder.from_pretrained(tmp_path, pooling="cls", normalize=False)
    assert reloaded.pooling == "cls"
    assert reloaded.normalize is False


def test_saved_folder_loads_with_automodel(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoModel

    encoder = _load(tiny_bert_dir)
    with torch.no_grad():
        for parameter in encoder.backbone.parameters():
            parameter.add_(0.01)  # differ from the fixture's weights
    encoder.save_pretrained(tmp_path)
    model = AutoModel.from_pretrained(tmp_path)
    assert type(model) is type(encoder.backbone)
    expected = encoder.backbone.state_dict()
    loaded = model.state_dict()
    assert loaded.keys() == expected.keys()
    for key, value in expected.items():
        assert torch.equal(loaded[key], value), key


def test_versions_recorded(tiny_bert_dir: Path, tmp_path: Path) -> None:
    _load(tiny_bert_dir).save_pretrained(tmp_path)
    versions = json.loads((tmp_path / ENCODER_CONFIG_NAME).read_text())["versions"]
    assert versions["python"] == platform.python_version()
    assert versions["torch"] == metadata.version("torch")
    assert versions["torch"] == torch.__version__.split("+")[0]
    import transformers

    assert versions["transformers"] == transformers.__version__
    assert versions["sts-core"] == metadata.version("sts-core")
    assert versions["sentence-transformers"] == metadata.version("sentence-transformers")


def _sentence_transformer(folder: Path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu")


@pytest.mark.parametrize(
    ("mode", "normalize"), [("mean", False), ("cls", False), ("max", False), ("mean", True)]
)
def test_saved_folder_loads_with_sentence_transformers(
    tiny_bert_dir: Path, tmp_path: Path, mode: str, normalize: bool
) -> None:
    encoder = _load(tiny_bert_dir, pooling=mode, normalize=normalize)
    ours = encoder.encode(SENTENCES, batch_size=4, show_progress_bar=False)
    encoder.save_pretrained(tmp_path)
    model = _sentence_transformer(tmp_path)
    assert model.max_seq_length == encoder.max_length
    theirs = model.encode(SENTENCES, batch_size=3, convert_to_numpy=True)
    assert theirs.shape == ours.shape
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=1e-5)
    if normalize:
        np.testing.assert_allclose(np.linalg.norm(theirs, axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize(
    ("model", "settings"),
    [
        ("bert", {"pooling": "first_last_avg"}),
        ("llama", {"pooling": "last_token", "prompt": "prompteol"}),
        ("bert", {"pooling": "mean", "prompt": "Query: [X]"}),
    ],
)
def test_no_sentence_transformers_files_without_equivalent(
    tiny_bert_dir: Path,
    tiny_llama_dir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    model: str,
    settings: dict,
) -> None:
    folder = tiny_bert_dir if model == "bert" else tiny_llama_dir
    # first write a sentence-transformers folder there: its files must not survive
    _load(folder).save_pretrained(tmp_path)
    assert (tmp_path / "modules.json").is_file()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sts_core.encoder"):
        _load(folder, **settings).save_pretrained(tmp_path)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("sentence-transformers" in r.getMessage() for r in warnings)
    assert any(settings["pooling"] in r.getMessage() for r in warnings)
    assert not (tmp_path / "modules.json").exists()
    assert not (tmp_path / "sentence_bert_config.json").exists()
    assert (tmp_path / ENCODER_CONFIG_NAME).is_file()
    assert SentenceEncoder.from_pretrained(tmp_path).pooling == settings["pooling"]


def test_sentence_transformers_files_written_without_warning(
    tiny_bert_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="sts_core.encoder"):
        _load(tiny_bert_dir, pooling="cls").save_pretrained(tmp_path)
    assert not [r for r in caplog.records if r.name == "sts_core.encoder"]
    modules = json.loads((tmp_path / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling"]
    pooling = json.loads((tmp_path / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_cls_token"] is True
    assert pooling["pooling_mode_mean_tokens"] is False
    assert pooling["word_embedding_dimension"] == 32


# ---------------------------------------------------------------- errors
def test_missing_local_folder(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(FileNotFoundError, match="no-such-model") as info:
        SentenceEncoder.from_pretrained(missing)
    assert str(missing) in str(info.value)
    with pytest.raises(FileNotFoundError, match=r"\./not/here/either"):
        SentenceEncoder.from_pretrained("./not/here/either")


def test_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="config.json") as info:
        SentenceEncoder.from_pretrained(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_unknown_hub_id_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import huggingface_hub.constants

    # the hub library reads HF_HUB_OFFLINE when imported: patch the constant as well
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.chdir(tmp_path)  # so the id cannot resolve to a local folder
    name = "sts-core-tests/no-such-model-xyz"
    with pytest.raises(OSError) as info:
        SentenceEncoder.from_pretrained(name)
    assert name in str(info.value)
    assert "HF_HUB_OFFLINE" in str(info.value)


def test_unknown_pooling_and_prompt(tiny_bert_dir: Path) -> None:
    with pytest.raises(ValueError, match="unknown pooling mode"):
        _load(tiny_bert_dir, pooling="sum")
    with pytest.raises(ValueError, match="exactly one"):
        _load(tiny_bert_dir, prompt="no slot")


# ---------------------------------------------------------------- extra parameters
class _WithHead(SentenceEncoder):
    """A method's encoder with a parameter and a buffer outside the backbone."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.head = nn.Linear(self.dimension, 4)
        self.register_buffer("scale", torch.rand(4))


def test_extra_parameters_saved_and_reloaded(tiny_bert_dir: Path, tmp_path: Path) -> None:
    torch.manual_seed(1)
    encoder = _WithHead.from_pretrained(tiny_bert_dir)
    with torch.no_grad():
        encoder.backbone.embeddings.word_embeddings.weight.mul_(1.5)
    expected = {k: v.clone() for k, v in encoder.state_dict().items()}
    encoder.save_pretrained(tmp_path)
    assert (tmp_path / EXTRA_WEIGHTS_NAME).is_file()

    torch.manual_seed(2)
    other = _WithHead.from_pretrained(tiny_bert_dir)
    assert not torch.equal(other.head.weight, expected["head.weight"])
    assert not torch.equal(
        other.backbone.embeddings.word_embeddings.weight,
        expected["backbone.embeddings.word_embeddings.weight"],
    )
    other.load_weights(tmp_path)
    state = other.state_dict()
    assert state.keys() == expected.keys()
    for key, value in expected.items():
        assert torch.equal(state[key], value), key

    # the extra weights do not stop the folder from loading as a plain encoder
    plain = SentenceEncoder.from_pretrained(tmp_path)
    np.testing.assert_allclose(
        plain.encode(SENTENCES, show_progress_bar=False),
        encoder.encode(SENTENCES, show_progress_bar=False),
        rtol=0,
        atol=1e-6,
    )


def test_save_with_given_state_dict(tiny_bert_dir: Path, tmp_path: Path) -> None:
    encoder = _WithHead.from_pretrained(tiny_bert_dir)
    state = {
        k: torch.zeros_like(v) if k == "head.bias" else v for k, v in encoder.state_dict().items()
    }
    state["backbone.pooler.dense.bias"] = torch.full_like(state["backbone.pooler.dense.bias"], 3.0)
    encoder.save_pretrained(tmp_path, state_dict=state)
    other = _WithHead.from_pretrained(tiny_bert_dir)
    other.load_weights(tmp_path)
    assert torch.equal(other.head.bias, torch.zeros(4))
    assert torch.equal(other.backbone.pooler.dense.bias, torch.full((32,), 3.0))


# ---------------------------------------------------------------- real models (marked)
REAL_SENTENCES = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Hi",
    "A man is playing a guitar.",
    "The quick brown fox jumps over the lazy dog near the riverbank at dawn.",
    "Two dogs run through a snowy field.",
    "?",
    "Stocks fell sharply on Monday after the central bank raised interest rates again.",
    "A woman is slicing an onion.",
    "Un homme joue de la guitare.",
    "The cat sat.",
    "Nobody is playing anything.",
    "Quantum entanglement does not allow faster-than-light communication.",
    "A child rides a bicycle down the street while his father watches from the porch, "
    "holding a cup of coffee and waving to the neighbours who walk past with their dogs.",
    "Hi",
    "3.14159 is approximately pi",
    "I love this!",
    "I do not love this.",
    # about 330 tokens: truncated at MiniLM's 256, not at mpnet's 384
    " ".join(["a very long sentence that repeats itself"] * 46),
    "Emojis 🙂 and accents: café, naïve, Zürich.",
]


@pytest.mark.real_model
@pytest.mark.parametrize("which", ["minilm", "mpnet"])
def test_real_encoder_matches_sentence_transformers(
    request: pytest.FixtureRequest, which: str
) -> None:
    folder = request.getfixturevalue(f"{which}_dir")
    encoder = SentenceEncoder.from_pretrained(folder)
    assert encoder.normalize is True
    assert encoder.pooling == "mean"
    # small batches: sorting by length keeps the long sentence's padding to one small batch
    ours = encoder.encode(REAL_SENTENCES, batch_size=5, show_progress_bar=False)
    model = _sentence_transformer(folder)
    assert encoder.max_length == model.max_seq_length
    theirs = model.encode(REAL_SENTENCES, batch_size=4, convert_to_numpy=True)
    assert ours.dtype == np.float32
    assert ours.shape == theirs.shape == (len(REAL_SENTENCES), encoder.dimension)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)
    assert np.array_equal(ours[0], ours[3])


@pytest.mark.real_model
def test_real_smollm_prompteol_left_right_padding(smollm_dir: Path) -> None:
    sentences = REAL_SENTENCES[:14]
    encoder = SentenceEncoder.from_pretrained(smollm_dir, pooling="last_token", prompt="prompteol")
    assert encoder.prompt == 'This sentence : "[X]" means in one word:"'
    results = {}
    for side in ("left", "right"):
        encoder.tokenizer.padding_side = side
        masks: list[torch.Tensor] = []
        handle = encoder.backbone.register_forward_pre_hook(
            lambda module, args, kwargs: masks.append(kwargs["attention_mask"]),  # noqa: B023
            with_kwargs=True,
        )
        try:
            results[side] = encoder.encode(sentences, batch_size=7, show_progress_bar=False)
        finally:
            handle.remove()
        pad_column = 0 if side == "left" else -1
        assert any(m[:, pad_column].min() == 0 for m in masks)  # padding really was on `side`
        assert results[side].dtype == np.float32
        assert results[side].shape == (len(sentences), encoder.dimension)
        assert np.isfinite(results[side]).all()
    np.testing.assert_allclose(results["left"], results["right"], rtol=0, atol=1e-4)
    # and each equals the prompted sentence run alone, last token taken by hand
    for row in (2, 13):
        text = PROMPTEOL.format(sentences[row])
        expected = _reference(encoder, sentences[row], "last_token", text=text)
        np.testing.assert_allclose(results["left"][row], expected, rtol=0, atol=1e-4)


def test_no_split_modules_are_the_backbones_for_fsdp_wrapping(
    tiny_bert_dir: Path, tiny_llama_dir: Path
) -> None:
    """FSDP's TRANSFORMER_BASED_WRAP without a class named reads ``_no_split_modules``: the
    encoder passes its backbone's on (an encoder without them would be one FSDP unit)."""
    for folder, layer in ((tiny_bert_dir, "BertLayer"), (tiny_llama_dir, "LlamaDecoderLayer")):
        encoder = _load(folder)
        assert encoder._no_split_modules == sorted(encoder.backbone._no_split_modules)
        assert layer in encoder._no_split_modules


def test_a_first_layers_copy_runs_the_first_layers_of_the_model(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """``first_layers_copy`` (the benchmark smoke tests' cut MiniLM): the copy's hidden
    states are the source's after its first layers, its other files copied as they are;
    a number of layers the model does not have is refused."""
    from transformers import AutoModel, AutoTokenizer

    from sts_core.testing import first_layers_copy

    source_dir = shutil.copytree(tiny_bert_nodropout_dir, tmp_path / "source")
    (source_dir / "1_Pooling").mkdir()  # a module's own config.json is copied too
    (source_dir / "1_Pooling" / "config.json").write_text('{"mode": "mean"}')
    copy = first_layers_copy(source_dir, tmp_path / "cut", layers=1)
    assert (copy / "1_Pooling" / "config.json").read_text() == '{"mode": "mean"}'
    assert json.loads((copy / "config.json").read_text("utf-8"))["num_hidden_layers"] == 1
    assert (copy / "tokenizer.json").read_bytes() == (
        tiny_bert_nodropout_dir / "tokenizer.json"
    ).read_bytes()
    tokenizer = AutoTokenizer.from_pretrained(copy)
    batch = tokenizer(SENTENCES[:3], padding=True, return_tensors="pt")
    source = AutoModel.from_pretrained(tiny_bert_nodropout_dir).eval()
    with torch.no_grad():
        expected = source(**batch, output_hidden_states=True).hidden_states[1]
        cut = AutoModel.from_pretrained(copy).eval()(**batch).last_hidden_state
    torch.testing.assert_close(cut, expected)
    for layers in (0, 3):
        with pytest.raises(ValueError, match=f"{layers} layers asked of 2"):
            first_layers_copy(tiny_bert_nodropout_dir, tmp_path / f"cut{layers}", layers)
