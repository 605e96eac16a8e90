"""``sts-search``'s peer rows with a teacher and its distillation rows train what the quality
benchmark trained with them before ``sts-search`` did (its former trainer, written out here
from ``benchmarks/quality.py``'s peer functions and the teacher step): the same relabelled
pairs, the same weights; a teacher folder retrained under the same name trains its cells
again; the teacher's keys are checked, before any training, where they apply."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from benchmark_support import load_benchmark_module
from test_search_command import trained_lines

from sts_core.search import main
from sts_core.testing import write_scored_pairs

pytest.importorskip("sentence_transformers")
quality = load_benchmark_module("quality")

RATE, BATCH, SEED = 1e-3, 4, 3


def search_argv(train: Path, dev: Path, model: Path, out: Path, *extra: str) -> list[str]:
    """An ``sts-search`` on the benchmark's training arguments (weight decay, warm-up)."""
    return [
        "--train", str(train), "--dev", str(dev), "--model", str(model),
        "--output-dir", str(out), "--learning-rate", str(RATE), "--batch-size", str(BATCH),
        "--seeds", str(SEED), "--score-range", "0", "5",
        "--set", "weight_decay=0.01", "--set", "warmup_steps=0.1", *extra,
    ]  # fmt: skip


def training_pairs(train: Path) -> tuple[object, object]:
    """The table ``train`` as the benchmark's training data: its scores, and the same scaled
    to 0–1."""
    from datasets import Dataset

    with open(train, encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    columns = {key: [r[key] for r in rows] for key in ("sentence1", "sentence2")}
    scores = [float(r["score"]) for r in rows]
    data = Dataset.from_dict({**columns, "score": scores})
    return data, Dataset.from_dict({**columns, "score": [s / 5 for s in scores]})


def benchmark_recipe(model: Path) -> object:
    """The benchmark's training settings of a cell on the search's budget (mean pooling)."""
    return quality.Recipe.mean_pooled(str(model), RATE, BATCH, 1.0, -1)


def benchmark_peer_with_teacher(model: Path, train: Path, method: str, settings: dict) -> object:
    """The benchmark's peer row ``method`` with the teacher's ``settings``: the 0–1 pairs the
    teacher relabels and adds (a cross-encoder teacher scores them and the student as it
    starts proposes the neighbours), then the row's sentence-transformers training."""
    from sts_core.search import peer_teacher

    _, unit = training_pairs(train)
    recipe = benchmark_recipe(model)
    location = settings["teacher_model"]
    cross_encoder = None
    if peer_teacher.is_cross_encoder(location):
        cross_encoder = peer_teacher.load_peer_cross_encoder(location)
        teacher = quality.load_peer(recipe)
    else:
        teacher = peer_teacher.load_peer_teacher(location)
    pairs = peer_teacher.relabelled_pairs(
        teacher,
        unit,
        "score",
        float(settings["teacher_weight"]),
        int(settings["teacher_neighbours"]),
        cross_encoder=cross_encoder,
    )
    encoder = quality.METHODS[method].train(recipe, SEED, pairs)
    encoder.teacher_summary = {"pairs": len(unit), "neighbour_pairs": len(pairs) - len(unit)}
    return encoder


def benchmark_distillation(model: Path, train: Path, metric: str, location: str) -> object:
    """The benchmark's distillation row: ``EmbedDistillLoss`` on the teacher's embeddings of
    the training sentences, through a projection to the teacher's width."""
    from sentence_transformers.sentence_transformer.losses import EmbedDistillLoss
    from transformers import set_seed

    from sts_core.search import peer_teacher

    data, _ = training_pairs(train)
    recipe = benchmark_recipe(model)
    teacher = peer_teacher.load_peer_teacher(location)
    targets = peer_teacher.embedding_targets(teacher, data)
    width = peer_teacher.teacher_width(teacher)
    set_seed(SEED)
    student = quality.load_peer(recipe)
    own = student.get_embedding_dimension()
    loss = EmbedDistillLoss(student, metric, projection_dim=width if width != own else None)
    return quality.run_peer_trainer(student, loss, targets, recipe, SEED)


def embeddings(encoder: object, sentences: list[str]) -> np.ndarray:
    return np.asarray(encoder.encode(sentences, show_progress_bar=False))  # type: ignore[attr-defined]


def the_cell(out: Path) -> dict:
    cells = json.loads((out / "results.json").read_text(encoding="utf-8"))["cells"]
    assert len(cells) == 1
    return cells[0]


def saved_encoder(cell: dict) -> object:
    from sts_core.encoder import SentenceEncoder

    return SentenceEncoder.from_pretrained(str(Path(cell["folder"]) / "model"))


def wider_teacher(tiny_bert_dir: Path, folder: Path) -> Path:
    """A tiny BERT of hidden width 48 (the student's is 32), with the student's tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    config = BertConfig.from_pretrained(str(tiny_bert_dir))
    config.hidden_size, config.intermediate_size = 48, 96
    torch.manual_seed(5)
    BertModel(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(str(tiny_bert_dir)).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("cross_encoder", [False, True])
def test_a_peer_row_with_a_teacher_trains_as_the_benchmarks_trainer(
    tiny_bert_dir: Path, tmp_path: Path, cross_encoder: bool
) -> None:
    """st:cosent with teacher_model, teacher_weight 0.5 and one neighbour each: the pairs
    scaled to 0–1, relabelled and added by the teacher (a bi-encoder, or a cross-encoder
    whose neighbours the student proposes), the same weights as the benchmark's
    ``Trainer.train`` of st-cosent with the same ``--set``, and the same teacher summary."""
    from sentence_transformers import CrossEncoder

    from sts_core.testing import make_tiny_bert, make_tiny_cross_encoder

    train = write_scored_pairs(tmp_path / "train.csv", 16, 0)
    dev = write_scored_pairs(tmp_path / "dev.csv", 12, 1)
    if cross_encoder:
        plain = make_tiny_cross_encoder(tmp_path / "plain", seed=4)
        CrossEncoder(str(plain)).save(str(tmp_path / "teacher"))
        teacher = tmp_path / "teacher"
    else:
        teacher = make_tiny_bert(tmp_path / "teacher", seed=7)
    settings = {"teacher_model": str(teacher), "teacher_weight": "0.5", "teacher_neighbours": "1"}
    extra = [item for key, value in settings.items() for item in ("--set", f"{key}={value}")]
    out = tmp_path / "search"
    assert main(search_argv(train, dev, tiny_bert_dir, out, "--methods", "st:cosent", *extra)) == 0
    cell = the_cell(out)

    encoder = benchmark_peer_with_teacher(tiny_bert_dir, train, "st-cosent", settings)
    assert cell["teacher"] == encoder.teacher_summary
    assert cell["teacher"]["pairs"] == 16 and cell["teacher"]["neighbour_pairs"] > 0
    assert (
        cell["steps"]
        == encoder.trained_steps
        == -(-(16 + cell["teacher"]["neighbour_pairs"]) // BATCH)
    )
    with open(train, encoding="utf-8") as file:
        sentences = [r["sentence1"] for r in csv.DictReader(file)]
    ours, theirs = embeddings(saved_encoder(cell), sentences), embeddings(encoder, sentences)
    assert np.abs(ours - theirs).max() < 1e-5


def test_the_benchmarks_distillation_rows_are_the_searchs() -> None:
    from sts_core.search.peers import DISTILL_ROWS

    methods = load_benchmark_module("grid_search.cells").DISTILL_METHODS
    assert {f"st-{row}" for row in DISTILL_ROWS} == set(methods)
    assert DISTILL_ROWS == {"embed-distill": "cosine", "mse-distill": "mse"}


def test_a_distillation_row_trains_as_the_benchmarks_trainer(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """st:embed-distill: EmbedDistillLoss on a wider teacher's embeddings (through the
    projection to its width), the same weights as the benchmark's st-embed-distill
    (st:mse-distill takes the same path, its metric the benchmark's: the test above)."""
    row = "embed-distill"
    train = write_scored_pairs(tmp_path / "train.csv", 16, 0)
    dev = write_scored_pairs(tmp_path / "dev.csv", 12, 1)
    teacher = wider_teacher(tiny_bert_dir, tmp_path / "teacher")
    out = tmp_path / "search"
    argv = search_argv(
        train,
        dev,
        tiny_bert_dir,
        out,
        "--methods",
        f"st:{row}",
        "--set",
        f"teacher_model={teacher}",
    )
    assert main(argv) == 0
    cell = the_cell(out)
    assert "teacher" not in cell  # no pairs relabelled
    report = (out / "search.md").read_text(encoding="utf-8")
    assert "EmbedDistillLoss (cosine)" in report

    encoder = benchmark_distillation(tiny_bert_dir, train, "cosine", str(teacher))
    assert cell["steps"] == encoder.trained_steps
    with open(train, encoding="utf-8") as file:
        sentences = [r["sentence1"] for r in csv.DictReader(file)]
    ours, theirs = embeddings(saved_encoder(cell), sentences), embeddings(encoder, sentences)
    assert np.abs(ours - theirs).max() < 1e-5


def test_a_teacher_retrained_under_the_same_name_trains_its_cells_again(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    """Each cell whose recipe names a teacher folder records its content among its inputs:
    the teacher retrained in the same folder trains that cell again, and leaves the cell
    without a teacher (ours, through sts-train's teacher step: the same record,
    ``shared/tests/test_search_spec.py``)."""
    from sts_core.testing import make_tiny_bert

    train = write_scored_pairs(tmp_path / "train.csv", 8, 0)
    dev = write_scored_pairs(tmp_path / "dev.csv", 8, 1)
    teacher = make_tiny_bert(tmp_path / "teacher", seed=7)
    out = tmp_path / "search"
    grid = f"teacher_model={teacher},"  # with the teacher, and without
    argv = search_argv(train, dev, tiny_bert_dir, out, "--methods", "st:cosine", "--grid", grid)
    assert main(argv) == 0
    assert len(trained_lines(capsys.readouterr().out)) == 2
    make_tiny_bert(teacher, seed=8)  # the teacher retrained under the same name
    assert main(argv) == 0
    trained = trained_lines(capsys.readouterr().out)
    assert len(trained) == 1 and f"teacher_model={teacher}" in trained[0], trained
    cells = json.loads((out / "results.json").read_text(encoding="utf-8"))["cells"]
    recorded = [
        json.loads((Path(c["folder"]) / "cell.json").read_text("utf-8"))["scoring"]["inputs"]
        for c in cells
    ]
    assert sorted(f"teacher_model {teacher}" in inputs for inputs in recorded) == [0, 1]


def test_the_teachers_keys_are_checked_where_they_apply_before_any_training(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    from sts_core.testing import make_tiny_cross_encoder

    train = write_scored_pairs(tmp_path / "train.csv", 8, 0)
    teacher = str(tiny_bert_dir)
    cross = str(make_tiny_cross_encoder(tmp_path / "cross", seed=4))
    capsys.readouterr()  # its save's progress bar
    out = tmp_path / "search"
    base = [
        "--train",
        str(train),
        "--dev",
        str(train),
        "--model",
        teacher,
        "--output-dir",
        str(out),
    ]
    scaled = ["--score-range", "0", "5"]
    cases = [
        (["--methods", "st:embed-distill"], "st:embed-distill distils", "teacher_model=FOLDER"),
        (
            ["--methods", "st:embed-distill", "--set", f"teacher_model={teacher}", "--set",
             "teacher_weight=0.5"],
            "teacher_weight applies to the relabelled pairs", "not to a distillation row",
        ),
        (
            [*scaled, "--methods", "st:cosine", "--set", "teacher_neighbours=1"],
            "st:cosine", "teacher_neighbours needs teacher_model",
        ),
        (
            ["--methods", "st:mse-distill", "--set", f"teacher_model={cross}"],
            "st:mse-distill", "is a cross-encoder",
        ),
        (
            ["--methods", "st:cosent", "--set", f"teacher_model={teacher}"],
            "st:cosent' with teacher_model trains on scores scaled to 0–1", "--score-range",
        ),
        (
            [*scaled, "--methods", "st:cosine", "--set", f"teacher_model={teacher}", "--set",
             "teacher_weight=2"],
            "st:cosine", "teacher_weight must be in (0, 1]",
        ),
        (
            [*scaled, "--methods", "st:angle", "--set", f"teacher_model={tmp_path / 'nope'}"],
            "st:angle: teacher_model:", "nope",
        ),
        (["--methods", "st:nope"], "no peer row 'nope'", "embed-distill"),
    ]  # fmt: skip
    for extra, *expected in cases:
        assert main([*base, *extra]) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and all(text in err[0] for text in expected), err
        assert not out.exists()
