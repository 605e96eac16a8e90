"""``sts-search``'s peer rows in-process (``sts_core.search.peers``): each row's settings and
its refusals, word for word; the checks of a peer cell's recipe and of the teacher's keys;
the table a peer cell trains on, with a teacher's relabelled pairs or its embeddings; the
student with its length and pooling; the loss and its arguments; and a cell's training,
against sentence-transformers run here on the same data and arguments. The same paths through
``sts-search`` itself: ``tests/test_search_command.py`` and ``tests/test_search_peer_teacher.py``.
"""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sts_core.search import peer_teacher, peers
from sts_core.search.cells import FIXED_RECIPE
from sts_core.search.spec import SearchError
from sts_core.testing import make_tiny_bert, make_tiny_cross_encoder, write_scored_pairs

pytest.importorskip("sentence_transformers")

ROWS = 8  # the training table's pairs
#: every peer row, in the order the refusal of an unknown one names them
ALL_ROWS = "cosent, angle, cosine, mnsrl, simcse, embed-distill, mse-distill"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("peer-rows")


@pytest.fixture(scope="module")
def train_csv(folder: Path) -> Path:
    return write_scored_pairs(folder / "train.csv", ROWS, 0)


@pytest.fixture(scope="module")
def wide_teacher(tiny_bert_dir: Path, folder: Path) -> Path:
    """A tiny BERT of width 48 (the student's is 32), with the student's tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    config = BertConfig.from_pretrained(str(tiny_bert_dir))
    config.hidden_size, config.intermediate_size = 48, 96
    torch.manual_seed(5)
    BertModel(config).save_pretrained(folder / "wide")
    AutoTokenizer.from_pretrained(str(tiny_bert_dir)).save_pretrained(folder / "wide")
    return folder / "wide"


@pytest.fixture(scope="module")
def teacher_dir(folder: Path) -> Path:
    """A bi-encoder teacher: a tiny BERT of other weights than the student's."""
    return make_tiny_bert(folder / "teacher", seed=7)


@pytest.fixture(scope="module")
def cross_encoder_dir(folder: Path) -> Path:
    """A sentence-transformers ``CrossEncoder`` folder (one output, sigmoid scores)."""
    from sentence_transformers import CrossEncoder

    plain = make_tiny_cross_encoder(folder / "plain-ce", seed=4)
    CrossEncoder(str(plain)).save(str(folder / "ce"))
    return folder / "ce"


def unit_table(train: Path) -> Any:
    """``train`` read here, its scores divided by 5 (``--score-range 0 5``)."""
    from datasets import Dataset

    with open(train, encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    return Dataset.from_dict(
        {
            "sentence1": [r["sentence1"] for r in rows],
            "sentence2": [r["sentence2"] for r in rows],
            "score": [float(r["score"]) / 5 for r in rows],
        }
    )


def cell_recipe(model: Path, train: Path, out: Path, **settings: Any) -> dict[str, Any]:
    """A peer cell's recipe as ``sts-search`` writes it (base, fixed settings, the row's
    settings, epochs, rate, seed, output folder): 2 steps of 4 pairs."""
    return {
        "model_name_or_path": str(model),
        "train_datasets": [str(train)],
        "per_device_train_batch_size": 4,
        "max_steps": -1,
        **FIXED_RECIPE,
        "score_range": [0.0, 5.0],
        **settings,
        "num_train_epochs": 1,
        "learning_rate": 1e-3,
        "seed": 3,
        "output_dir": str(out),
    }


def refusal(check: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(SearchError) as caught:
        check(*args, **kwargs)
    return str(caught.value)


def same_rows(data: Any, expected: Any) -> None:
    """The same columns, pairs in the same order, and scores."""
    assert data.column_names == expected.column_names
    assert data["sentence1"] == expected["sentence1"]
    assert data["sentence2"] == expected["sentence2"]
    np.testing.assert_allclose(data["score"], expected["score"], rtol=0, atol=1e-6)


# --- the rows and their settings ---------------------------------------------------------


def test_the_default_rows_are_the_three_losses_when_installed(monkeypatch) -> None:
    assert peers.default_peer_rows() == ["st:cosent", "st:angle", "st:cosine"]
    monkeypatch.setattr(peers, "peers_installed", lambda: False)
    assert peers.default_peer_rows() == []
    message = refusal(peers.peer_settings, "st:cosent", "cosent", [0.0, 5.0])
    assert message == "--methods 'st:cosent': sentence-transformers is not installed"


def test_each_rows_settings() -> None:
    scale = [0.0, 5.0]
    assert peers.peer_settings("st:cosent", "cosent", scale) == {"loss": "CoSENTLoss"}
    assert peers.peer_settings("st:angle", "angle", None) == {"loss": "AnglELoss"}
    cosine = peers.peer_settings("st:cosine", "cosine", (0, 5))
    assert cosine == {"loss": "CosineSimilarityLoss", "score_range": [0, 5]}
    assert peers.peer_settings("st:cosent", "cosent", scale, teacher=True) == {
        "loss": "CoSENTLoss",
        "score_range": scale,
    }  # a teacher's labels are on the cosine's scale: every loss takes the scale
    assert peers.peer_settings("st:simcse", "simcse", scale, teacher=True) == {
        "loss": "MultipleNegativesRankingLoss",
        "loss_args": {"scale": 20.0},
        "sentences_with_themselves": True,
        "score_range": scale,
    }
    assert peers.peer_settings("st:mnsrl", "mnsrl", scale) == {
        "loss": "MultipleNegativesSymmetricRankingLoss",
        "loss_args": {"scale": 10.0},
        "positives_above": 0.6,
        "score_range": scale,
    }
    for row, metric in (("embed-distill", "cosine"), ("mse-distill", "mse")):
        assert peers.peer_settings(f"st:{row}", row, None, teacher=True) == {"distill": metric}


def test_the_rows_refusals_name_the_entry_and_what_is_missing() -> None:
    message = refusal(peers.peer_settings, "st:nope", "nope", [0.0, 5.0])
    assert message == f"--methods 'st:nope': no peer row 'nope' ({ALL_ROWS})"
    scale = "trains on scores scaled to 0–1: give --score-range LOW HIGH, the scale of your scores"
    expected = {
        ("cosine", False): f"--methods 'st:cosine' {scale} (e.g. 0 5)",
        ("cosine", True): f"--methods 'st:cosine' {scale} (e.g. 0 5)",  # a 0–1 loss anyway
        ("cosent", True): f"--methods 'st:cosent' with teacher_model {scale} (e.g. 0 5)",
        ("simcse", True): f"--methods 'st:simcse' with teacher_model {scale} (e.g. 0 5)",
        ("mnsrl", False): f"--methods 'st:mnsrl' {scale} (e.g. 0 5)",
    }
    for (row, teacher), text in expected.items():
        assert refusal(peers.peer_settings, f"st:{row}", row, None, teacher) == text


def test_the_loss_in_words() -> None:
    assert peers.loss_label({"loss": "CoSENTLoss"}) == "CoSENTLoss"
    relabelled = {"loss": "AnglELoss", "teacher_model": "/t"}
    assert peers.loss_label(relabelled) == "AnglELoss on the pairs /t relabels"
    distilled = {"distill": "mse", "teacher_model": "/t"}
    assert peers.loss_label(distilled) == "EmbedDistillLoss (mse) on /t's embeddings"


# --- a cell's recipe, checked before any training ----------------------------------------


def test_a_full_recipe_passes_the_check(tiny_bert_dir: Path, train_csv: Path, folder: Path) -> None:
    """Every kind of key: the peer's own, the teacher's, data options, training arguments."""
    recipe = cell_recipe(
        tiny_bert_dir,
        train_csv,
        folder / "out",
        **peers.peer_settings("st:mnsrl", "mnsrl", [0.0, 5.0], teacher=True),
        pooling="cls",
        max_seq_length=32,
        max_train_samples=4,
        teacher_model=str(tiny_bert_dir),
        teacher_weight=0.5,
        teacher_neighbours=1,
        weight_decay=0.01,
        warmup_steps=0.1,
    )
    assert peers.check_peer_recipe(recipe, "st:mnsrl") is None


def test_unknown_keys_are_refused_by_name(
    tiny_bert_dir: Path, train_csv: Path, folder: Path
) -> None:
    recipe = cell_recipe(tiny_bert_dir, train_csv, folder / "out", loss="CoSENTLoss")
    message = refusal(peers.check_peer_recipe, {**recipe, "lerning_rate": 1, "zzz": 2}, "st:cosent")
    assert message == (
        "--methods st:cosent: lerning_rate, zzz is not a sentence-transformers training "
        "argument (leave the peer out, or the key)"
    )
    wrong = {**recipe, "teacher_neighbours": 1}  # the teacher's keys: checked here too
    message = refusal(peers.check_peer_recipe, wrong, "st:cosent")
    assert message == "--methods st:cosent: teacher_neighbours needs teacher_model"


def test_a_table_the_data_options_refuse_is_refused_in_one_line(
    tiny_bert_dir: Path, folder: Path
) -> None:
    from sts_core.training.config import DataArguments
    from sts_core.training.data import build_train_dataset

    bad = folder / "bad.csv"
    bad.write_text("sentence1,sentence2,score\na b,c d,7\ne f,g h,1\n", encoding="utf-8")
    with pytest.raises(ValueError) as caught:  # sts-train's own refusal of the table
        build_train_dataset(DataArguments(train_datasets=[str(bad)], score_range=[0, 5]), 3)
    recipe = cell_recipe(tiny_bert_dir, bad, folder / "out", loss="CosineSimilarityLoss")
    expected = " ".join(str(caught.value).split())
    assert (
        refusal(peers.check_peer_recipe, recipe, "st:cosine") == f"--methods st:cosine: {expected}"
    )


# --- the teacher's keys ---------------------------------------------------------------------


def test_the_teachers_keys_where_they_apply(tiny_bert_dir: Path, cross_encoder_dir: Path) -> None:
    teacher = str(tiny_bert_dir)
    keys = {"teacher_weight": 0.5, "teacher_neighbours": 1}
    for recipe in (
        {"loss": "CoSENTLoss"},
        {"loss": "CoSENTLoss", "teacher_model": teacher, **keys},
        {"loss": "CoSENTLoss", "teacher_model": str(cross_encoder_dir), **keys},
        {"distill": "cosine", "teacher_model": teacher},
    ):
        assert peers.check_teacher_keys(recipe, "st:x") is None, recipe

    message = refusal(peers.check_teacher_keys, {"distill": "mse"}, "st:mse-distill")
    assert message == (
        "--methods st:mse-distill distils a teacher's embeddings: give --set "
        "teacher_model=FOLDER (a sentence-transformers bi-encoder)"
    )
    distilled = {"distill": "cosine", "teacher_model": teacher, **keys}
    assert refusal(peers.check_teacher_keys, distilled, "st:embed-distill") == (
        "--methods st:embed-distill: teacher_weight, teacher_neighbours applies to the "
        "relabelled pairs of st:cosent, st:angle, st:cosine, not to a distillation row"
    )
    assert refusal(peers.check_teacher_keys, {"loss": "AnglELoss", **keys}, "st:angle") == (
        "--methods st:angle: teacher_weight, teacher_neighbours needs teacher_model"
    )


def test_the_teachers_values_and_folder_are_checked(
    tiny_bert_dir: Path, cross_encoder_dir: Path, folder: Path
) -> None:
    teacher = {"loss": "CoSENTLoss", "teacher_model": str(tiny_bert_dir)}
    weight = refusal(peers.check_teacher_keys, {**teacher, "teacher_weight": 2}, "st:cosent")
    assert weight == "--methods st:cosent: teacher_weight must be in (0, 1], got 2.0"
    missing = folder / "nope"
    message = refusal(peers.check_teacher_keys, {**teacher, "teacher_model": missing}, "st:cosent")
    assert message == f"--methods st:cosent: teacher_model: model folder {missing} does not exist"
    cross = {"distill": "mse", "teacher_model": str(cross_encoder_dir)}
    assert refusal(peers.check_teacher_keys, cross, "st:mse-distill") == (
        f"--methods st:mse-distill: teacher_model {cross_encoder_dir} is a cross-encoder, "
        "which has no embeddings to distil: give a bi-encoder, or train st:cosine / "
        "st:cosent / st:angle on the pairs it labels"
    )


def test_the_teachers_values_as_sts_train_takes_them() -> None:
    teacher = {"teacher_model": "/t"}
    for values in ({}, {"teacher_weight": 1, "teacher_neighbours": 3}, {"teacher_weight": "0.5"}):
        assert peers.check_teacher_values({**teacher, **values}, "st:cosine") is None
    assert peers.check_teacher_values({"teacher_model": None}, "st:cosine") is None  # as sts-train
    cases = [
        ({"teacher_weight": 2}, "teacher_weight must be in (0, 1], got 2.0"),
        ({"teacher_weight": 0}, "teacher_weight must be in (0, 1], got 0.0"),
        ({"teacher_weight": "abc"}, "could not convert string to float: 'abc'"),
        ({"teacher_neighbours": -1}, "teacher_neighbours must be 0 or more, got -1"),
        ({"teacher_neighbours": True}, "teacher_neighbours must be a whole number, got True"),
        ({"teacher_neighbours": "1"}, "teacher_neighbours must be a whole number, got '1'"),
        ({"teacher_neighbours": 1.5}, "teacher_neighbours must be a whole number, got 1.5"),
    ]
    for values, text in cases:
        message = refusal(peers.check_teacher_values, {**teacher, **values}, "st:cosine")
        assert message == f"--methods st:cosine: {text}", values
    alone = {"teacher_model": None, "teacher_neighbours": 1}  # sts-train's rule too
    assert refusal(peers.check_teacher_values, alone, "st:cosine") == (
        "--methods st:cosine: teacher_neighbours needs teacher_model (the teacher makes the pairs)"
    )


def test_the_teacher_folder_check(
    tiny_bert_dir: Path, cross_encoder_dir: Path, folder: Path
) -> None:
    from sts_core.encoder import check_model_location

    for distill in (False, True):
        assert peers.check_teacher_model(str(tiny_bert_dir), "st:x", distill) is None
    assert peers.check_teacher_model(str(cross_encoder_dir), "st:cosine", False) is None
    message = refusal(peers.check_teacher_model, str(cross_encoder_dir), "st:x", True)
    assert message.startswith(f"--methods st:x: teacher_model {cross_encoder_dir} is a cross")
    missing = str(folder / "nope")
    with pytest.raises(OSError) as caught:
        check_model_location(missing)
    message = refusal(peers.check_teacher_model, missing, "st:angle", False)
    assert message == f"--methods st:angle: teacher_model: {caught.value}"
    three = make_tiny_cross_encoder(folder / "three-outputs", num_labels=3)
    message = refusal(peers.check_teacher_model, str(three), "st:angle", False)
    assert message.startswith(f"--methods st:angle: teacher_model: {three}/config.json: a seq")


# --- what a cell trains on ------------------------------------------------------------------


def test_the_training_table_is_the_data_options_pairs(
    tiny_bert_dir: Path, train_csv: Path, folder: Path
) -> None:
    """Scaled to 0–1; ``max_train_samples`` shuffled with the cell's seed (42 without one)."""
    recipe = cell_recipe(tiny_bert_dir, train_csv, folder / "out", loss="CoSENTLoss")
    unit = unit_table(train_csv)
    same_rows(peers.training_table(recipe), unit)
    fewer = {**recipe, "max_train_samples": 4}
    same_rows(peers.training_table(fewer), unit.shuffle(seed=3).select(range(4)))
    del fewer["seed"]
    same_rows(peers.training_table(fewer), unit.shuffle(seed=42).select(range(4)))


def test_the_training_table_is_what_sts_train_prepares(
    tiny_bert_dir: Path, train_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The peer's table equals the training set ``sts-train``'s data preparation
    (``prepare_train_list``, no model loaded) builds from the same recipe's options, with
    ``filter_test_overlap`` on and a test pair planted in the training file (reversed: the
    filter matches either order), then ``max_train_samples`` drawn with the cell's seed."""
    from datasets import Dataset

    from sts_core.training import ConfigParser
    from sts_core.training.method_registry import CORE_METHOD
    from sts_core.training.run import prepare_train_list

    with open(train_csv, encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    test_pair = {"sentence1": "a test pair planted", "sentence2": "in the training file"}
    planted = [*rows[:3], {**test_pair, "score": "2.5"}, *rows[3:]]
    train = tmp_path / "planted.csv"
    with open(train, "w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=["sentence1", "sentence2", "score"])
        writer.writeheader()
        writer.writerows(planted)
    test_sets = {
        "sts12": Dataset.from_dict(
            {"sentence1": [test_pair["sentence2"]], "sentence2": [test_pair["sentence1"]],
             "score": [3.0]}
        )
    }  # fmt: skip
    asked = []
    monkeypatch.setattr(
        "sts_core.training.data.load_test_sets", lambda *a: asked.append(a) or test_sets
    )
    settings = {"filter_test_overlap": True, "max_train_samples": 6}
    recipe = cell_recipe(tiny_bert_dir, train, tmp_path / "out", loss="CoSENTLoss", **settings)
    table = peers.training_table(recipe)

    sts_train = {key: value for key, value in recipe.items() if key != "loss"}
    _, data_args, config = ConfigParser.for_method(CORE_METHOD).parse_values(sts_train, "python")
    prepared, summary = prepare_train_list(CORE_METHOD, data_args, config)
    same_rows(table, prepared.select_columns(["sentence1", "sentence2", "score"]))
    assert len(table) == 6 and test_pair["sentence1"] not in table["sentence1"]
    assert summary["filter"]["removed"] == 1 and len(asked) == 2  # each side filtered
    without = {**sts_train, "filter_test_overlap": False, "max_train_samples": None}
    _, data_args, config = ConfigParser.for_method(CORE_METHOD).parse_values(without, "python")
    assert test_pair["sentence1"] in prepared_pairs(data_args, config)


def prepared_pairs(data_args: Any, config: Any) -> list[str]:
    from sts_core.training.method_registry import CORE_METHOD
    from sts_core.training.run import prepare_train_list

    return list(prepare_train_list(CORE_METHOD, data_args, config)[0]["sentence1"])


def test_without_a_teacher_a_cell_trains_on_the_table(
    tiny_bert_dir: Path, train_csv: Path, folder: Path
) -> None:
    recipe = cell_recipe(tiny_bert_dir, train_csv, folder / "out", loss="CoSENTLoss")
    data, recorded, width = peers.peer_training_data(recipe)
    same_rows(data, unit_table(train_csv))
    assert recorded == {} and width is None


@pytest.mark.parametrize("settings", [{}, {"teacher_weight": 0.5, "teacher_neighbours": 1}])
def test_a_teacher_relabels_and_adds_pairs(
    tiny_bert_dir: Path, train_csv: Path, folder: Path, teacher_dir: Path, settings: dict[str, Any]
) -> None:
    """A bi-encoder teacher's relabelled pairs (weight 1 and no neighbours by default)."""
    teacher = teacher_dir
    recipe = cell_recipe(
        tiny_bert_dir, train_csv, folder / "out", loss="CoSENTLoss", teacher_model=str(teacher)
    )
    data, recorded, width = peers.peer_training_data({**recipe, **settings})
    unit = unit_table(train_csv)
    expected = peer_teacher.relabelled_pairs(
        peer_teacher.load_peer_teacher(str(teacher)),
        unit,
        "score",
        settings.get("teacher_weight", 1.0),
        settings.get("teacher_neighbours", 0),
    )
    same_rows(data, expected)
    added = len(expected) - ROWS
    assert recorded == {"teacher": {"pairs": ROWS, "neighbour_pairs": added}} and width is None
    assert (added > 0) == bool(settings)


def test_a_cross_encoder_teacher_scores_the_pairs_the_student_proposes(
    tiny_bert_dir: Path, train_csv: Path, folder: Path, cross_encoder_dir: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    keys = {"teacher_model": str(cross_encoder_dir), "teacher_neighbours": 1}
    recipe = cell_recipe(tiny_bert_dir, train_csv, folder / "out", loss="CoSENTLoss", **keys)
    data, recorded, width = peers.peer_training_data(recipe)
    expected = peer_teacher.relabelled_pairs(
        SentenceTransformer(str(tiny_bert_dir)),  # the student as it starts
        unit_table(train_csv),
        "score",
        1.0,
        1,
        cross_encoder=peer_teacher.load_peer_cross_encoder(str(cross_encoder_dir)),
    )
    same_rows(data, expected)
    assert recorded == {"teacher": {"pairs": ROWS, "neighbour_pairs": len(expected) - ROWS}}
    assert width is None and len(expected) > ROWS


def test_a_distillation_row_trains_on_the_teachers_embeddings(
    tiny_bert_dir: Path, train_csv: Path, folder: Path, wide_teacher: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    keys = {"distill": "cosine", "teacher_model": str(wide_teacher)}
    recipe = cell_recipe(tiny_bert_dir, train_csv, folder / "out", **keys)
    data, recorded, width = peers.peer_training_data(recipe)
    unit = unit_table(train_csv)
    sentences = list(dict.fromkeys([*unit["sentence1"], *unit["sentence2"]]))
    assert data.column_names == ["sentence", "label"] and data["sentence"] == sentences
    expected = SentenceTransformer(str(wide_teacher)).encode(sentences, convert_to_numpy=True)
    np.testing.assert_allclose(np.array(data["label"]), expected, rtol=0, atol=1e-6)
    assert recorded == {} and width == 48


# --- the student and its loss ---------------------------------------------------------------


def hidden_states(model_dir: Path, sentence: str) -> Any:
    """The tiny BERT's token states for ``sentence`` (one sentence: no padding)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    with torch.no_grad():
        return AutoModel.from_pretrained(str(model_dir))(
            **tokenizer(sentence, return_tensors="pt")
        )[0][0]


def test_the_student_takes_the_recipes_length_and_pooling(tiny_bert_dir: Path) -> None:
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling

    plain = peers.load_student({"model_name_or_path": str(tiny_bert_dir)})
    assert plain.max_seq_length == 128 and plain[1].pooling_mode == "mean"
    sentence = "a cat sat on the mat"
    states = hidden_states(tiny_bert_dir, sentence)
    pooled = {"mean": states.mean(0), "cls": states[0], "max": states.max(0).values}
    for mode, expected in pooled.items():
        recipe = {"model_name_or_path": str(tiny_bert_dir), "pooling": mode, "max_seq_length": 16}
        model = peers.load_student(recipe)
        assert model.max_seq_length == 16 and len(model) == 2
        assert isinstance(model[1], Pooling) and model[1].pooling_mode == mode
        assert model[1].embedding_dimension == 32
        encoded = model.encode([sentence], convert_to_numpy=True)[0]
        np.testing.assert_allclose(encoded, expected.numpy(), rtol=0, atol=1e-5)
    model = peers.load_student({"model_name_or_path": str(tiny_bert_dir)})
    message = refusal(peers._set_pooling, model, "weightedmean")
    assert message == "pooling 'weightedmean': the peer has mean, cls, max"


def test_the_rows_loss_and_its_arguments(tiny_bert_dir: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import losses

    model = SentenceTransformer(str(tiny_bert_dir))
    for name in ("CoSENTLoss", "AnglELoss", "CosineSimilarityLoss"):
        loss = peers.peer_loss({"loss": name}, model, None)
        assert type(loss) is getattr(losses, name) and loss.model is model
    scaled = peers.peer_loss({"loss": "CoSENTLoss", "loss_args": {"scale": 7.0}}, model, 48)
    assert scaled.scale == 7.0 and scaled.model is model
    for metric, width, projection in (("mse", 48, 48), ("cosine", 32, None)):
        loss = peers.peer_loss({"distill": metric}, model, width)
        assert type(loss) is losses.EmbedDistillLoss and loss.model is model
        assert loss.distance_metric == metric and loss.projection_dim == projection
    assert loss.projection is None
    wide = peers.peer_loss({"distill": "cosine"}, model, 48).projection
    assert (wide.in_features, wide.out_features) == (32, 48)


# --- a cell's training ----------------------------------------------------------------------


def reference_training(model: Any, data: Any, loss: Any, scratch: Path, **arguments: Any) -> Any:
    """``SentenceTransformerTrainer`` run here with the cell's arguments."""
    from sentence_transformers import (
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )

    args = SentenceTransformerTrainingArguments(
        output_dir=str(scratch),
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        num_train_epochs=1,
        seed=3,
        report_to="none",
        save_strategy="no",
        logging_steps=10,
        disable_tqdm=True,
        **arguments,
    )
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=loss)
    trainer.train()
    return trainer.state.global_step


def spy_on_scratch_folders(monkeypatch) -> list[str]:
    """The prefixes of the temporary folders made from now on."""
    made: list[str] = []
    original = tempfile.TemporaryDirectory

    def recording(*args: Any, **kwargs: Any) -> Any:
        made.append(str(kwargs.get("prefix")))
        return original(*args, **kwargs)

    monkeypatch.setattr(tempfile, "TemporaryDirectory", recording)
    return made


def test_a_cell_trains_as_sentence_transformers_does(
    tiny_bert_dir: Path, train_csv: Path, tmp_path: Path, monkeypatch
) -> None:
    """st:cosine: the same steps and weights as the trainer run here on the table scaled to
    0–1, with the recipe's training arguments; the model saved, the trainer's own folder (its
    checkpoints) a scratch folder it removes, nothing written where the cell runs."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import losses
    from transformers import set_seed

    settings = peers.peer_settings("st:cosine", "cosine", [0.0, 5.0])
    saving = {"save_strategy": "steps", "save_steps": 1}  # checkpoints: in the scratch folder
    recipe = cell_recipe(tiny_bert_dir, train_csv, tmp_path / "out", **settings, **saving)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    made = spy_on_scratch_folders(monkeypatch)
    steps, recorded = peers.train_peer(recipe, tmp_path / "model")
    assert (steps, recorded) == (2, {})
    assert "sts-search-peer-" in made and list(work.iterdir()) == []
    assert not (tmp_path / "out").exists()  # the recipe's output folder: not the trainer's

    set_seed(3)
    model = SentenceTransformer(str(tiny_bert_dir))
    data = unit_table(train_csv)
    assert reference_training(model, data, losses.CosineSimilarityLoss(model), tmp_path / "s") == 2
    sentences = data["sentence1"]
    saved = SentenceTransformer(str(tmp_path / "model"))
    difference = saved.encode(sentences) - model.encode(sentences)
    assert np.abs(difference).max() < 1e-6


def test_a_distillation_cell_learns_through_the_projection(
    tiny_bert_dir: Path, train_csv: Path, tmp_path: Path, wide_teacher: Path
) -> None:
    """st:mse-distill from a wider teacher, 2 steps: the weights of EmbedDistillLoss with a
    projection to the teacher's width, trained here on the teacher's embeddings."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import losses
    from transformers import set_seed

    keys = {"distill": "mse", "teacher_model": str(wide_teacher), "max_steps": 2}
    recipe = cell_recipe(tiny_bert_dir, train_csv, tmp_path / "out", **keys)
    assert peers.train_peer(recipe, tmp_path / "model") == (2, {})

    targets = peer_teacher.embedding_targets(
        SentenceTransformer(str(wide_teacher)), unit_table(train_csv)
    )
    set_seed(3)
    model = SentenceTransformer(str(tiny_bert_dir))
    loss = losses.EmbedDistillLoss(model, "mse", projection_dim=48)
    assert reference_training(model, targets, loss, tmp_path / "s", max_steps=2) == 2
    sentences = targets["sentence"]
    saved = SentenceTransformer(str(tmp_path / "model"))
    assert np.abs(saved.encode(sentences) - model.encode(sentences)).max() < 1e-6
