"""Tables read the way the ecosystem reads them (issue 61, item 3), through the commands:
``sts-train`` (files and Datasets in memory by one path; the loss decides what a column of
numbers is), ``sts-eval``, ``sts-search`` and ``sts-mine``; every column error names the
command's own option, exit status 2 before any weights load."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd
import pytest
from datasets import Dataset

from sts_core.cli import eval_main
from sts_core.data import load_named
from sts_core.mining_cli import main as mine_main
from sts_core.search import main as search_main
from sts_core.testing import WORDS, one_line_error
from sts_core.training import ConfigParser, TrainingRun
from sts_core.training.config import DataArguments
from sts_core.training.data import build_train_dataset
from sts_core.training.run import main as sts_train

pytestmark = pytest.mark.usefixtures("torch_one_thread")
FIXTURES = Path(__file__).parent / "fixtures" / "data"


@pytest.fixture(autouse=True)
def users_machine(monkeypatch):
    """No benchmark folder, the hub switched off: only the user's files."""
    monkeypatch.delenv("STS_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def sentences(rows: int, offset: int = 0) -> list[str]:
    return [
        " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(4))
        for i in range(offset, offset + rows)
    ]


def csv_file(path: Path, columns: dict[str, list]) -> Path:
    pd.DataFrame(columns).to_csv(path, index=False)
    return path


def check_run(model: Path, tmp_path: Path, train: Path, *options: str) -> list[str]:
    """``sts-train --method cosent --check_only true`` on ``train``."""
    return [
        "--method", "cosent",
        "--model_name_or_path", str(model),
        "--train_datasets", str(train),
        "--eval_dataset", "none",
        "--output_dir", str(tmp_path / "out"),
        "--check_only", "true",
        *options,
    ]  # fmt: skip


# --------------------------------------------------------------------------- sts-train


def test_training_reads_graded_labels_as_scores_and_train_format_nli_as_classes(tmp_path):
    """Before: 0/1/2 under label trained as NLI classes, the scores inverted."""
    path = csv_file(
        tmp_path / "graded.csv",
        {"sentence1": sentences(3), "sentence2": sentences(3, 5), "label": [0, 1, 2]},
    )
    train, _ = build_train_dataset(DataArguments(train_datasets=[str(path)]))
    assert train["score"] == [0.0, 1.0, 2.0]
    nli = DataArguments(train_datasets=[str(path)], train_format="nli")
    assert build_train_dataset(nli)[0]["score"] == [2.0, 1.0, 0.0]


@pytest.mark.usefixtures("no_model_loading")
def test_a_column_of_numbers_is_the_score_of_a_loss_over_scores_and_refused_for_infonce(
    tiny_bert_dir, tmp_path, capsys
):
    """``question,candidate,similarity``: before, similarity was a hard-negative text
    (CoSENT then had no score, and InfoNCE trained on "0.6" as a negative)."""
    path = csv_file(
        tmp_path / "qa.csv",
        {
            "question": sentences(4),
            "candidate": sentences(4, 9),
            "similarity": [0.6, 0.1, 0.9, 0.3],
        },
    )
    assert sts_train(check_run(tiny_bert_dir, tmp_path, path)) == 0
    assert sts_train(check_run(tiny_bert_dir, tmp_path, path, "--loss", "infonce")) == 2
    line = one_line_error(capsys.readouterr().err)
    assert line == (
        f"error: {path}: column 'similarity' holds numbers, so it is no text, and a score is "
        "read here only from a column named score or label: map it with columns (e.g. "
        "columns: {score: similarity}), or leave the column out"
    )
    mapped = ["--loss", "infonce", "--columns", '{"score": "similarity"}']
    assert sts_train(check_run(tiny_bert_dir, tmp_path, path, *mapped)) == 0


@pytest.mark.usefixtures("no_model_loading")
def test_a_missing_label_column_names_columns_not_label_column(tiny_bert_dir, tmp_path, capsys):
    """Before: '… set label_column', which cannot give a table a score."""
    path = csv_file(
        tmp_path / "pairs.csv",
        {"sentence1": sentences(4), "sentence2": sentences(4, 3), "id_text": ["x"] * 4},
    )
    assert sts_train(check_run(tiny_bert_dir, tmp_path, path)) == 2
    line = one_line_error(capsys.readouterr().err)
    assert line.endswith(
        "the training set has no label column 'score' (it has sentence1, sentence2): name the "
        "table's score column with columns, e.g. columns: {score: similarity}"
    )
    assert sts_train(check_run(tiny_bert_dir, tmp_path, path, "--loss", "softmax")) == 2
    assert one_line_error(capsys.readouterr().err).endswith(
        "name the table's label column with columns, e.g. columns: {label: gold}"
    )
    named = json.dumps({"mine": {"path": str(path), "loss": "cosent"}})
    argv = check_run(tiny_bert_dir, tmp_path, path, "--train_datasets", named)
    assert sts_train(argv) == 2
    assert one_line_error(capsys.readouterr().err).startswith(
        "error: train_datasets: mine: the training set has no label column 'score'"
    )
    assert "name the table's score column with columns" in line


@pytest.mark.usefixtures("no_model_loading")
def test_the_dev_and_test_tables_errors_name_eval_columns(tiny_bert_dir, tmp_path, capsys):
    train = csv_file(
        tmp_path / "train.csv",
        {"sentence1": sentences(4), "sentence2": sentences(4, 3), "score": [1, 2, 3, 4]},
    )
    dev = csv_file(tmp_path / "dev.csv", {"q": sentences(3), "d": sentences(3, 2)})
    base = check_run(tiny_bert_dir, tmp_path, train)
    for option in ("--eval_dataset", "--final_eval_datasets"):
        assert sts_train([*base, option, str(dev)]) == 2
        assert one_line_error(capsys.readouterr().err) == (
            f"error: {dev}: no score or label column (its columns: q, d): the pairs are "
            "scored against one; name it with eval_columns, e.g. eval_columns: {score: similarity}"
        )
    mapping = '{"sentence1": "q", "sentence2": "doc", "score": "sim"}'
    assert sts_train([*base, "--eval_dataset", str(dev), "--eval_columns", mapping]) == 2
    assert one_line_error(capsys.readouterr().err).startswith(
        f"error: {dev}: eval_columns maps sentence2 to 'doc', which is not a column here"
    )


@pytest.mark.usefixtures("no_model_loading")
@pytest.mark.parametrize(("loss", "warned"), [("cosent", True), ("softmax", False)])
def test_integer_labels_like_nli_classes_are_named_for_a_loss_over_scores(
    tiny_bert_dir, tmp_path, caplog, loss, warned
):
    path = csv_file(
        tmp_path / "graded.csv",
        {"sentence1": sentences(6), "sentence2": sentences(6, 2), "label": [0, 1, 2, 2, 1, 0]},
    )
    with caplog.at_level(logging.WARNING, logger="sts_core.data"):
        assert sts_train(check_run(tiny_bert_dir, tmp_path, path, "--loss", loss)) == 0
    notes = [r.getMessage() for r in caplog.records if "NLI classes" in r.getMessage()]
    assert len(notes) == int(warned)
    if warned:
        assert notes[0].endswith("2 contradiction), set train_format: nli")


def dataset_run(model: Path, tmp_path: Path, dataset: Dataset, **values) -> TrainingRun:
    """``TrainingRun.from_arguments`` of cosent's method on ``dataset``, checked only."""
    from sts_cosent.method import METHOD

    values = {
        "model_name_or_path": str(model),
        "eval_dataset": "none",
        "output_dir": str(tmp_path / "out"),
        "check_only": True,
        "report_to": "none",
        **values,
    }
    model_args, data_args, config = ConfigParser.for_method(METHOD).parse_values(values, "python")
    run = TrainingRun.from_arguments(METHOD, model_args, data_args, config, dataset)
    run.run()
    return run


@pytest.mark.usefixtures("no_model_loading")
def test_a_dataset_in_memory_goes_the_way_of_a_file(tiny_bert_dir, tmp_path):
    """Before: a Dataset given to ``from_arguments`` skipped the columns mapping,
    ``filter_test_overlap``, the overlap count and ``score_range``'s check."""
    test_pair = load_named("stsb", "test", FIXTURES)[0]
    mine = Dataset.from_dict(
        {
            "q": [test_pair["sentence1"], *sentences(3)],
            "d": [test_pair["sentence2"], *sentences(3, 4)],
            "sim": [4.0, 1.0, 2.5, 3.0],
        }
    )
    common = {
        "data_dir": str(FIXTURES),
        "columns": '{"sentence1": "q", "sentence2": "d", "score": "sim"}',
    }
    counted = dataset_run(tiny_bert_dir, tmp_path, mine, **common).inputs.data_summary
    assert counted["sources"] == {"in-memory dataset": 4}
    assert counted["test_overlap"]["pairs"] == 1 and counted["test_overlap"]["of"] == 4
    filtered = dataset_run(tiny_bert_dir, tmp_path, mine, filter_test_overlap=True, **common)
    assert filtered.inputs.data_summary["filter"]["removed"] == 1
    assert len(filtered.inputs.train_dataset) == 3
    with pytest.raises(Exception, match="row 1, column 'sim': score 4 is outside score_range"):
        dataset_run(tiny_bert_dir, tmp_path, mine, score_range=[0, 3], **common)


def test_a_label_column_that_is_no_project_column_says_what_label_column_is():
    from types import SimpleNamespace

    from sts_core.losses import loss_class
    from sts_core.method import check_dataset_for_loss

    pairs = Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"], "score": [1.0]})
    with pytest.raises(ValueError) as caught:
        check_dataset_for_loss(pairs, loss_class("cosine_mse"), "similarity", SimpleNamespace())
    assert str(caught.value).endswith(
        "label_column 'similarity' is none of the project's label columns (score, label); a "
        "table's own column is named with columns, e.g. columns: {score: similarity}"
    )


# --------------------------------------------------------------------------- sts-eval


def test_sts_eval_scores_a_label_column_as_it_stands(tiny_bert_dir, tmp_path, capsys):
    """The same rows under ``score`` and under ``label`` score alike (before: 0/1/2 under
    label were NLI classes, the Spearman's sign flipped)."""
    gold = [0, 1, 2, 2, 0, 1, 2, 0]
    texts = {"sentence1": sentences(8), "sentence2": sentences(8, 1)}
    scored = csv_file(tmp_path / "scored.csv", {**texts, "score": gold})
    labelled = csv_file(tmp_path / "labelled.csv", {**texts, "label": gold})
    argv = ["--model", str(tiny_bert_dir), "--device", "cpu", "--quiet"]
    assert eval_main([*argv, "--pairs", str(scored), "--pairs", str(labelled)]) == 0
    lines = capsys.readouterr().out.splitlines()
    first = next(x for x in lines if x.startswith(f"{scored}:")).split(": ", 1)[1]
    second = next(x for x in lines if x.startswith(f"{labelled}:")).split(": ", 1)[1]
    assert first == second


@pytest.mark.usefixtures("no_model_loading")
def test_sts_eval_names_its_columns_option(tiny_bert_dir, tmp_path, capsys):
    path = csv_file(tmp_path / "pairs.csv", {"q": sentences(3), "d": sentences(3, 2)})
    assert eval_main(["--model", str(tiny_bert_dir), "--pairs", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"sts-eval: error: {path}: no score or label column (its columns: q, d): the pairs are "
        "scored against one; name it with --columns, e.g. --columns: {score: similarity}"
    )


# --------------------------------------------------------------------------- sts-search


def test_sts_search_names_its_columns_options(tiny_bert_dir, tmp_path, capsys):
    good = csv_file(
        tmp_path / "good.csv",
        {"sentence1": sentences(4), "sentence2": sentences(4, 3), "score": [1, 2, 3, 4]},
    )
    unscored = csv_file(tmp_path / "pairs.csv", {"q": sentences(4), "d": sentences(4, 2)})
    two = csv_file(
        tmp_path / "two.csv",
        {"id": [1, 2, 3, 4], "q": sentences(4), "d": sentences(4, 2), "sim": [1, 2, 3, 4]},
    )
    out = tmp_path / "search"
    base = ["--model", str(tiny_bert_dir), "--output-dir", str(out), "--methods", "core"]
    cases = [
        (["--train", str(two), "--dev", str(good)], f"--train {two}:", "with --columns"),
        (
            ["--train", str(good), "--dev", str(unscored)],
            f"--dev {unscored}:",
            "with --eval-columns",
        ),
    ]
    for argv, where, option in cases:
        assert search_main([*base, *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and where in err[0] and option in err[0], err
        assert not out.exists()


def test_the_search_reads_a_registry_training_set_without_its_columns(tmp_path):
    """``--columns`` maps the training tables; a registry set beside one is read as the
    registry's (a mapping there would be refused)."""
    from sts_core.search.command import check_training_tables
    from sts_core.search.spec import SearchSpec

    table = csv_file(
        tmp_path / "mine.csv",
        {"q": sentences(3), "d": sentences(3, 1), "sim": [1, 2, 3]},
    )
    spec = SearchSpec(
        train=["stsb", str(table)],
        dev=str(table),
        model="m",
        output_dir=tmp_path / "s",
        columns={"sentence1": "q", "sentence2": "d", "score": "sim"},
        data_dir=str(FIXTURES),
    )
    check_training_tables(spec)  # no error


# --------------------------------------------------------------------------- sts-mine


def mined_report(tiny_bert_dir: Path, tmp_path: Path, pairs: Path, *options: str) -> dict:
    output = tmp_path / f"mined{len(list(tmp_path.glob('mined*')))}.jsonl"
    argv = ["--model", str(tiny_bert_dir), "--pairs", str(pairs), "--output", str(output)]
    assert mine_main([*argv, "--num-negatives", "1", "--device", "cpu", *options]) == 0
    return json.loads(Path(f"{output}.report.json").read_text(encoding="utf-8"))


def test_sts_mine_takes_as_positives_the_pairs_at_or_above_the_threshold(
    tiny_bert_dir, tmp_path, capsys
):
    """Before: every pair was a positive, those scored 0 too, without a word."""
    labels = [1, 0, 1, 0, 0, 1]
    path = csv_file(
        tmp_path / "pairs.csv",
        {"sentence1": sentences(6), "sentence2": sentences(6, 3), "label": labels},
    )
    report = mined_report(tiny_bert_dir, tmp_path, path)
    assert report["pairs"] == 3
    assert report["positives"] == {"threshold": 1.0, "default": True, "rows": 6, "left_out": 3}
    printed = capsys.readouterr().out
    assert (
        "positives: the pairs scored at or above 1 (the highest score of the table, the "
        "default); 3 of 6 rows scored below it are left out"
    ) in printed
    report = mined_report(tiny_bert_dir, tmp_path, path, "--positive-threshold", "0")
    assert report["pairs"] == 6 and report["positives"]["left_out"] == 0


@pytest.mark.usefixtures("no_model_loading")
def test_sts_mine_refuses_a_threshold_without_scores_and_an_unnamed_numbers_column(
    tiny_bert_dir, tmp_path, capsys
):
    plain = csv_file(tmp_path / "plain.csv", {"anchor": sentences(3), "positive": sentences(3, 1)})
    argv = ["--model", str(tiny_bert_dir), "--output", str(tmp_path / "m.csv"), "--device", "cpu"]
    assert mine_main([*argv, "--pairs", str(plain), "--positive-threshold", "0.5"]) == 2
    assert "positive_threshold: the pairs have no score or label column" in capsys.readouterr().err
    qa = csv_file(
        tmp_path / "qa.csv",
        {"question": sentences(3), "answer": sentences(3, 1), "similarity": [0.2, 0.9, 0.5]},
    )
    assert mine_main([*argv, "--pairs", str(qa)]) == 2
    assert "map it with --columns (e.g. --columns: {score: similarity})" in (
        capsys.readouterr().err
    )
    assert mine_main([*argv, "--pairs", str(qa), "--positive-threshold", "2"]) == 2
    err = capsys.readouterr().err
    assert "similarity" in err and not (tmp_path / "m.csv").exists()
    mapped = ["--columns", '{"score": "similarity"}', "--positive-threshold", "2"]
    assert mine_main([*argv, "--pairs", str(qa), *mapped]) == 2
    assert "positive_threshold 2: no pair is scored at or above it (the highest score is 0.9)" in (
        capsys.readouterr().err
    )
    assert mine_main([*argv, "--pairs", str(plain), "--positive-threshold", "nan"]) == 2
    assert "positive_threshold must be a finite number" in capsys.readouterr().err


def test_mining_a_scored_table_without_rows_is_refused_in_words():
    from sts_core.mining import mine_hard_negatives

    empty = Dataset.from_dict({"sentence1": [], "sentence2": [], "score": []})
    with pytest.raises(ValueError, match="no pairs to mine hard negatives for"):
        mine_hard_negatives(empty, object(), use_faiss=False)
