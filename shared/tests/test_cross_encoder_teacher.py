"""A cross-encoder as ``teacher_model``: which folders are one and the activation their
scores take; the labels it gives equal sentence-transformers' ``CrossEncoder(folder).predict``
for every way a folder says its activation (saved by sentence-transformers, each older key,
and a plain sequence classifier with nothing saved: sigmoid, as the peer applies) and the
sigmoid of the logit computed here with transformers alone; the neighbour pairs are the
student's proposals, scored by the cross-encoder; the refusals; a run end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Dataset

from sts_core.cross_encoder import CrossEncoderScorer, cross_encoder_activation
from sts_core.encoder import SentenceEncoder
from sts_core.testing import make_tiny_bert, make_tiny_cross_encoder, write_fixture_recipe
from sts_core.training.distill import apply_teacher, check_cross_encoder_scores, load_teacher
from sts_core.training.run import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"
PAIRS = {
    "sentence1": ["a man plays", "the dog runs", "a cat eats", "a man plays", "a girl sits"],
    "sentence2": ["a man plays a guitar", "a dog runs", "a cat", "the girl sits", "a boy"],
    "score": [0.9, 0.8, 0.5, 0.2, 0.1],
}
SIGMOID = "torch.nn.modules.activation.Sigmoid"
IDENTITY = "torch.nn.modules.linear.Identity"
TANH = "torch.nn.modules.activation.Tanh"


@pytest.fixture(scope="module")
def cross_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_cross_encoder(tmp_path_factory.mktemp("cross"), seed=3)


# sentence-transformers' modules.json of a CrossEncoder it saved: beside a
# config_sentence_transformers.json of model_type CrossEncoder, the only folder whose
# activation_fn there it reads
MODULES = [
    {
        "idx": 0,
        "name": "0",
        "path": "",
        "type": "sentence_transformers.base.modules.transformer.Transformer",
    }
]


def copy_with(source: Path, target: Path, config: dict | None = None, **files: object) -> Path:
    """``source`` copied to ``target`` with config.json updated by ``config`` and extra
    JSON files (name without .json → content)."""
    import shutil

    shutil.copytree(source, target)
    settings = json.loads((target / "config.json").read_text())
    settings.update(config or {})
    (target / "config.json").write_text(json.dumps(settings))
    for name, content in files.items():
        (target / f"{name}.json").write_text(json.dumps(content))
    return target


def sigmoid(values: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-values))


def raw_logits(folder: Path, first: list[str], second: list[str]) -> np.ndarray:
    """The classifier's logit of each pair, one pair at a time, with transformers alone."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        return np.array(
            [
                model(**tokenizer(a, b, return_tensors="pt")).logits.item()
                for a, b in zip(first, second, strict=True)
            ]
        )


def test_which_folders_are_cross_encoders_and_their_activation(
    cross_dir: Path, tiny_bert_dir: Path, tmp_path: Path
) -> None:
    assert cross_encoder_activation(tiny_bert_dir) is None  # a bi-encoder
    # sts-cosent's, nothing saved: sigmoid, what CrossEncoder(folder).predict applies
    assert cross_encoder_activation(cross_dir) == "sigmoid"
    st6 = copy_with(
        cross_dir,
        tmp_path / "st6",
        config_sentence_transformers={"model_type": "CrossEncoder", "activation_fn": TANH},
        modules=MODULES,
    )
    assert cross_encoder_activation(st6) == "tanh"
    (st6 / "modules.json").unlink()  # CrossEncoder then loads it without reading the file
    assert cross_encoder_activation(st6) == "sigmoid"
    default = copy_with(
        cross_dir,
        tmp_path / "default",
        config_sentence_transformers={"model_type": "CrossEncoder"},
        modules=MODULES,
    )
    assert cross_encoder_activation(default) == "sigmoid"  # CrossEncoder's default for 1 label
    st4 = copy_with(
        cross_dir, tmp_path / "st4", {"sentence_transformers": {"activation_fn": IDENTITY}}
    )
    assert cross_encoder_activation(st4) == "identity"
    st4_default = copy_with(cross_dir, tmp_path / "st4d", {"sentence_transformers": {}})
    assert cross_encoder_activation(st4_default) == "sigmoid"
    old = copy_with(cross_dir, tmp_path / "old", {"sbert_ce_default_activation_function": TANH})
    assert cross_encoder_activation(old) == "tanh"


def test_classifiers_the_teacher_cannot_use_are_refused(cross_dir: Path, tmp_path: Path) -> None:
    for outputs in (2, 3):  # two: the default, which transformers leaves out of config.json
        classifier = make_tiny_cross_encoder(tmp_path / f"c{outputs}", num_labels=outputs)
        with pytest.raises(
            ValueError, match=rf"c{outputs}/config.json: a sequence classifier with {outputs} "
        ):
            cross_encoder_activation(classifier)
    relu = copy_with(
        cross_dir,
        tmp_path / "relu",
        config_sentence_transformers={
            "model_type": "CrossEncoder",
            "activation_fn": "torch.nn.modules.activation.ReLU",
        },
        modules=MODULES,
    )
    with pytest.raises(ValueError, match=r"relu/config_sentence_transformers.json: activation_fn"):
        cross_encoder_activation(relu)
    with pytest.raises(ValueError, match="not a cross-encoder"):
        CrossEncoderScorer.load(make_tiny_bert(tmp_path / "bi"))


CONFIG_IDENTITY = {"sentence_transformers": {"activation_fn": IDENTITY}}
# How a folder says its activation → (saved by CrossEncoder: else a copy of the plain
# classifier; config.json updated by; config_sentence_transformers.json updated by (a key
# set to None removed; for a copy, nothing: no such file); the activation both sides apply)
FOLDERS: dict[str, tuple[bool, dict, dict, str]] = {
    "plain, nothing saved": (False, {}, {}, "sigmoid"),
    "saved by CrossEncoder": (True, {}, {}, "sigmoid"),
    "saved, tanh": (True, {}, {"activation_fn": TANH}, "tanh"),
    "saved, identity": (True, {}, {"activation_fn": IDENTITY}, "identity"),
    "saved, its settings first": (True, CONFIG_IDENTITY, {"activation_fn": TANH}, "tanh"),
    "saved, none in its settings: config.json's": (
        True, {"sentence_transformers": {"activation_fn": TANH}}, {"activation_fn": None}, "tanh"
    ),
    "saved as another model type: its settings unread": (
        True, {}, {"model_type": "SentenceTransformer", "activation_fn": TANH}, "sigmoid"
    ),
    "settings without modules.json: unread": (
        False, {}, {"model_type": "CrossEncoder", "activation_fn": TANH}, "sigmoid"
    ),
    "config.json tanh": (False, {"sentence_transformers": {"activation_fn": TANH}}, {}, "tanh"),
    "config.json identity": (False, CONFIG_IDENTITY, {}, "identity"),
    "config.json before the v3 key": (
        False,
        {
            "sentence_transformers": {"activation_fn": IDENTITY},
            "sbert_ce_default_activation_function": TANH,
        },
        {},
        "identity",
    ),
    "v3 key tanh": (False, {"sbert_ce_default_activation_function": TANH}, {}, "tanh"),
    "v3 key identity": (False, {"sbert_ce_default_activation_function": IDENTITY}, {}, "identity"),
    "v3 key sigmoid": (False, {"sbert_ce_default_activation_function": SIGMOID}, {}, "sigmoid"),
}  # fmt: skip


def teacher_folder(cross_dir: Path, target: Path, kind: str) -> tuple[Path, str]:
    """The folder ``FOLDERS[kind]`` describes, built from ``cross_dir``, and its activation."""
    saved, config, settings, activation = FOLDERS[kind]
    if not saved:
        files = {"config_sentence_transformers": settings} if settings else {}
        return copy_with(cross_dir, target, config, **files), activation
    from sentence_transformers import CrossEncoder

    CrossEncoder(str(cross_dir), device="cpu").save(str(target))
    for name, update in (("config.json", config), ("config_sentence_transformers.json", settings)):
        content = {**json.loads((target / name).read_text()), **update}
        content = {key: value for key, value in content.items() if value is not None}
        (target / name).write_text(json.dumps(content))
    return target, activation


@pytest.mark.parametrize(
    ("kind", "weight"),
    [
        *((kind, 1.0) for kind in FOLDERS),
        ("saved by CrossEncoder", 0.25),
        ("saved, tanh", 0.25),
    ],
)
def test_labels_equal_the_peers_cross_encoder_predict(
    cross_dir: Path, tmp_path: Path, kind: str, weight: float
) -> None:
    """Each way a folder says its activation (or says none, or says it where
    sentence-transformers does not read it): the activation we read is the one
    ``CrossEncoder(folder)`` chose, and our labels equal its ``predict`` (mixed with the
    gold labels for ``weight`` < 1)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    folder, activation = teacher_folder(cross_dir, tmp_path / "teacher", kind)
    peer = sentence_transformers.CrossEncoder(str(folder), device="cpu")
    peers_activation = type(peer.activation_fn).__name__.lower()
    assert cross_encoder_activation(folder) == activation == peers_activation
    pairs = list(zip(PAIRS["sentence1"], PAIRS["sentence2"], strict=True))
    predicted = peer.predict(pairs, batch_size=2)
    assert np.ptp(predicted) > 1e-3  # the pairs are told apart, so an order error shows
    expected = weight * predicted + (1 - weight) * np.array(PAIRS["score"])
    teacher = load_teacher(str(folder), "cpu")
    data, summary = apply_teacher(Dataset.from_dict(PAIRS), teacher, "score", weight, 2)
    np.testing.assert_allclose(data["score"], expected, rtol=1e-6, atol=1e-6)
    assert summary["teacher_kind"] == "cross-encoder" and summary["pairs"] == 5


def test_a_plain_sequence_classifier_teaches_the_sigmoid_of_its_logit(cross_dir: Path) -> None:
    teacher = load_teacher(str(cross_dir), "cpu")
    data, summary = apply_teacher(Dataset.from_dict(PAIRS), teacher, "score", 1.0, 3)
    scores = sigmoid(raw_logits(cross_dir, PAIRS["sentence1"], PAIRS["sentence2"]))
    assert np.ptp(scores) > 1e-3  # the pairs are told apart, so an order error shows
    np.testing.assert_allclose(data["score"], scores, rtol=1e-5, atol=1e-6)
    assert summary["teacher_mean"] == pytest.approx(scores.mean(), abs=1e-4)


def test_mixing_refuses_scores_off_the_cosine_scale_and_takes_its_bounds() -> None:
    with pytest.raises(ValueError, match=r"1 of 3 scores lie outside it \(range -1 … 1.2\)"):
        check_cross_encoder_scores(np.array([-1.0, 0.3, 1.2]), 0.5)
    check_cross_encoder_scores(np.array([-1.0, 0.3, 1.0]), 0.5)  # the bounds are in
    check_cross_encoder_scores(np.array([-3.0, 4.0]), 1.0)  # the teacher alone: any scale


def proposals(proposer: SentenceEncoder, k: int) -> list[tuple[str, str]]:
    """Each distinct sentence's k nearest other sentences by the proposer's cosine, best
    first, skipping training pairs and pairs already chosen (brute force)."""
    sentences = list(dict.fromkeys(PAIRS["sentence1"] + PAIRS["sentence2"]))
    vectors = proposer.encode(sentences, show_progress_bar=False).astype(np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    taken = {frozenset(p) for p in zip(PAIRS["sentence1"], PAIRS["sentence2"], strict=True)}
    chosen = []
    for i, sentence in enumerate(sentences):
        others = sorted(
            (j for j in range(len(sentences)) if j != i), key=lambda j: -vectors[i] @ vectors[j]
        )
        found = 0
        for j in others:
            pair = frozenset((sentence, sentences[j]))
            if found == k or pair in taken:
                continue
            taken.add(pair)
            chosen.append((sentence, sentences[j]))
            found += 1
    return chosen


def test_neighbours_are_the_students_proposals_scored_by_the_cross_encoder(
    cross_dir: Path, tiny_bert_dir: Path
) -> None:
    proposer = SentenceEncoder.from_pretrained(tiny_bert_dir).eval()
    teacher = load_teacher(str(cross_dir), "cpu")
    data, summary = apply_teacher(Dataset.from_dict(PAIRS), teacher, "score", 1.0, 4, 1, proposer)
    new = list(zip(data["sentence1"][5:], data["sentence2"][5:], strict=True))
    assert new == proposals(proposer, 1) and summary["neighbour_pairs"] == len(new) > 0
    first, second = (list(column) for column in zip(*new, strict=True))
    np.testing.assert_allclose(
        data["score"][5:], sigmoid(raw_logits(cross_dir, first, second)), rtol=1e-5, atol=1e-6
    )
    with pytest.raises(ValueError, match="needs a proposer"):
        apply_teacher(Dataset.from_dict(PAIRS), teacher, "score", 1.0, 4, 1)


def recipe(tmp_path: Path, student: Path, **settings: str) -> Path:
    settings = {"score_range": "[0, 5]", "max_steps": "2", "save_strategy": "no", **settings}
    tmp_path.mkdir(exist_ok=True)
    return write_fixture_recipe(
        tmp_path / "r.yaml",
        "distillation",
        student,
        FIXTURES / "sts-train.csv",
        FIXTURES / "sts-dev.csv",
        tmp_path / "out",
        **settings,
    )


def test_a_run_learns_from_a_cross_encoder_and_its_neighbours(
    tiny_bert_nodropout_dir: Path, cross_dir: Path, tmp_path: Path
) -> None:
    path = recipe(tmp_path, tiny_bert_nodropout_dir, teacher_model=str(cross_dir))
    assert main(["--config", str(path), "--teacher_neighbours", "1"]) == 0
    teacher = json.loads((tmp_path / "out" / "metrics.json").read_text())["data"]["teacher"]
    assert teacher["teacher_kind"] == "cross-encoder" and teacher["pairs"] == 16
    assert teacher["neighbour_pairs"] > 0


def test_a_run_refuses_what_the_cross_encoder_cannot_teach(
    tiny_bert_nodropout_dir: Path,
    cross_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    three = make_tiny_cross_encoder(tmp_path / "three", num_labels=3)
    path = recipe(tmp_path / "a", tiny_bert_nodropout_dir, teacher_model=str(three))
    capsys.readouterr()  # the saves' progress bars
    assert main(["--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "teacher_model:" in err and "3 outputs" in err
    assert not (tmp_path / "a" / "out").exists()  # before any weights load

    from transformers import AutoModelForSequenceClassification

    loud = AutoModelForSequenceClassification.from_pretrained(cross_dir)
    with torch.no_grad():
        loud.classifier.bias.fill_(5.0)  # every logit near 5: off the cosine's scale
    loud.save_pretrained(tmp_path / "loud")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (cross_dir / name).exists():
            (tmp_path / "loud" / name).write_bytes((cross_dir / name).read_bytes())
    # identity saved: the raw logit, unbounded (sigmoid, the default, would bound it)
    config = json.loads((tmp_path / "loud" / "config.json").read_text())
    config["sentence_transformers"] = {"activation_fn": IDENTITY}
    (tmp_path / "loud" / "config.json").write_text(json.dumps(config))
    path = recipe(tmp_path / "b", tiny_bert_nodropout_dir, teacher_model=str(tmp_path / "loud"))
    capsys.readouterr()
    assert main(["--config", str(path), "--teacher_weight", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "16 of 16 scores lie outside it" in err.splitlines()[-1]  # after the teacher loads


def test_a_hub_id_is_read_from_its_cached_files_and_bad_json_is_named(
    cross_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import transformers.utils

    st = copy_with(
        cross_dir,
        tmp_path / "cached",
        config_sentence_transformers={"model_type": "CrossEncoder", "activation_fn": TANH},
        modules=MODULES,
    )
    asked = []

    def cached_file(repo: str, name: str, **_: object) -> str | None:
        asked.append((repo, name))
        return str(st / name) if (st / name).is_file() else None

    monkeypatch.setattr(transformers.utils, "cached_file", cached_file)
    assert cross_encoder_activation("someone/cross-encoder") == "tanh"
    assert ("someone/cross-encoder", "config_sentence_transformers.json") in asked
    assert ("someone/cross-encoder", "modules.json") in asked
    (st / "config_sentence_transformers.json").write_text("{not json")
    with pytest.raises(
        ValueError, match=r"cached/config_sentence_transformers.json: not valid JSON"
    ):
        cross_encoder_activation(st)


class RecordingScorer(CrossEncoderScorer):
    """A cross-encoder teacher that scores every pair 0.5 and records each call's pair
    count and batch size."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def score_pairs(self, firsts, seconds, batch_size=64):  # type: ignore[override]
        self.calls.append((len(firsts), batch_size))
        return np.full(len(firsts), 0.5)


def test_found_by_mutation_the_batch_size_reaches_every_scoring_call(tiny_bert_dir: Path) -> None:
    from sts_core.training.distill import SentenceVectors, add_neighbour_pairs

    proposer = SentenceEncoder.from_pretrained(tiny_bert_dir).eval()
    scorer = RecordingScorer()
    data, summary = apply_teacher(Dataset.from_dict(PAIRS), scorer, "score", 1.0, 7, 1, proposer)
    added = summary["neighbour_pairs"]
    assert scorer.calls == [(5, 7), (added, 7)]  # the gold pairs, then the neighbours
    scorer.calls.clear()
    vectors = SentenceVectors(proposer, Dataset.from_dict(PAIRS), 4)
    add_neighbour_pairs(Dataset.from_dict(PAIRS), vectors, "score", 1, scorer)
    assert [size for _, size in scorer.calls] == [64]  # the default batch
    with pytest.raises(ValueError) as refused:
        apply_teacher(Dataset.from_dict(PAIRS), scorer, "score", 1.0, 4, 1)
    assert str(refused.value) == "teacher_neighbours with a cross-encoder teacher needs a proposer"


def test_found_by_mutation_one_score_off_the_scale_and_the_whole_message() -> None:
    with pytest.raises(ValueError) as refused:
        check_cross_encoder_scores(np.array([3.0]), 0.5)
    assert str(refused.value) == (
        "teacher_weight 0.5 < 1 mixes the cross-encoder's scores with the labels (−1 … 1), but "
        "1 of 1 scores lie outside it (range 3 … 3): use teacher_weight 1, or a cross-encoder "
        "whose activation bounds its scores (a sentence-transformers CrossEncoder's sigmoid)"
    )
    check_cross_encoder_scores(np.array([3.0]), 1.0)  # α 1: the scores are the labels
    check_cross_encoder_scores(np.array([]), 0.5)  # nothing to mix


def test_found_by_mutation_the_teacher_kind_and_what_loading_passes_on(
    cross_dir: Path, tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sts_core.training.distill import teacher_kind

    assert teacher_kind(str(tiny_bert_dir)) == "bi-encoder"
    assert teacher_kind(str(cross_dir)) == "cross-encoder"
    seen = []
    monkeypatch.setattr(
        CrossEncoderScorer, "load", classmethod(lambda cls, *args: seen.append(args) or "ok")
    )
    assert load_teacher(str(cross_dir), "meta", 17, True) == "ok"
    assert load_teacher(str(cross_dir), "cpu") == "ok"
    assert seen == [(str(cross_dir), "meta", 17, True), (str(cross_dir), "cpu", None, False)]


def test_found_by_mutation_a_length_limit_reaches_the_scores(cross_dir: Path) -> None:
    """``max_length`` 4 truncates every pair (each is longer): the scores equal the sigmoid
    of the logits transformers gives for the pairs truncated to 4 tokens, not the
    untruncated ones."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(cross_dir)
    model = AutoModelForSequenceClassification.from_pretrained(cross_dir).eval()

    def logits(limit: int) -> np.ndarray:
        tokens = tokenizer(
            PAIRS["sentence1"], PAIRS["sentence2"], padding=True, truncation=True,
            max_length=limit, return_tensors="pt",
        )  # fmt: skip
        with torch.no_grad():
            return model(**tokens).logits.reshape(-1).double().numpy()

    scorer = CrossEncoderScorer.load(cross_dir, max_length=4)
    assert scorer.max_length == 4
    scores = scorer.score_pairs(PAIRS["sentence1"], PAIRS["sentence2"])
    np.testing.assert_allclose(scores, sigmoid(logits(4)), atol=1e-5)  # nothing saved: sigmoid
    assert np.abs(scores - sigmoid(logits(512))).max() > 1e-3


def test_found_by_mutation_outputs_counted_without_id2label_and_whole_messages(
    tmp_path: Path,
) -> None:
    def folder(name: str, **config) -> str:
        path = tmp_path / name
        path.mkdir()
        content = {"architectures": ["BertForSequenceClassification"], **config}
        (path / "config.json").write_text(json.dumps(content), encoding="utf-8")
        return str(path)

    assert cross_encoder_activation(folder("one", id2label={"0": "LABEL_0"})) == "sigmoid"
    assert cross_encoder_activation(folder("one_by_count", num_labels=1)) == "sigmoid"
    for name, config, outputs in (
        ("three", {"num_labels": 3}, 3),
        ("two", {}, 2),  # neither key: transformers' default, 2 outputs (it writes neither)
    ):
        location = folder(name, **config)
        with pytest.raises(ValueError) as refused:
            cross_encoder_activation(location)
        assert str(refused.value) == (
            f"{location}/config.json: a sequence classifier with {outputs} outputs; a "
            "cross-encoder teacher gives one score per pair (num_labels 1)"
        )
    for name, config in (
        ("v45", {"sentence_transformers": {"activation_fn": "relu"}}),
        ("v3", {"sbert_ce_default_activation_function": "relu"}),
    ):
        location = folder(name, num_labels=1, **config)
        with pytest.raises(ValueError) as refused:
            cross_encoder_activation(location)
        assert str(refused.value) == (
            f"{location}/config.json: activation_fn 'relu' is not one the teacher applies "
            "(torch.nn.modules.activation.Sigmoid, torch.nn.modules.activation.Tanh, "
            "torch.nn.modules.linear.Identity)"
        )


def test_found_by_mutation_a_hub_file_that_is_missing_or_not_a_mapping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import transformers.utils

    from sts_core.cross_encoder import _read_json

    calls = []
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]", encoding="utf-8")

    def cached_file(location, name, **flags):
        calls.append(flags)
        return str(listed) if name == "list.json" else None

    monkeypatch.setattr(transformers.utils, "cached_file", cached_file)
    assert _read_json("owner/model", "config.json") is None  # not in the hub's cache
    assert _read_json("owner/model", "list.json") is None  # JSON, but not a mapping
    assert calls[0] == {
        "_raise_exceptions_for_missing_entries": False,
        "_raise_exceptions_for_connection_errors": False,
    }


def test_found_by_mutation_what_loading_a_scorer_passes_on(
    cross_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sts_core.cross_encoder as module

    seen = {}

    class Model:
        def to(self, device):
            seen["device"] = device
            return self

        def eval(self):
            return self

    def load(location, max_length, trust_remote_code):
        seen["load"] = (location, max_length, trust_remote_code)
        return Model(), "tokenizer", 99

    monkeypatch.setattr(module, "load_cross_encoder", load)
    scorer = CrossEncoderScorer.load(cross_dir)
    assert seen == {"load": (cross_dir, None, False), "device": "cpu"}
    assert (scorer.tokenizer, scorer.max_length, scorer.activation) == ("tokenizer", 99, "sigmoid")
