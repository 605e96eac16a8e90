"""Train on your own pairs (issue 45, "done when"): a headed CSV, a JSONL with other column
names and a ``columns`` mapping, and a Parquet file each train for a few steps with
``sts-train --method cosent …`` as docs/data.md shows, then score with ``sts-eval --model
<out> --pairs <file>``; bad tables stop with one line and exit status 2 before any weights
load. No benchmark data folder and no hub: the user's files are all a run needs.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr, spearmanr

from sts_core.cli import eval_main
from sts_core.command_files import LEDGER_NAME
from sts_core.testing import one_line_error
from sts_core.training import ConfigParser
from sts_core.training.run import main as sts_train

pytestmark = pytest.mark.usefixtures("torch_one_thread")

WORDS = "a man woman dog cat child is plays runs sleeps eats on the mat guitar food".split()
#: a few steps, nothing but the final model saved (what docs/data.md adds to try it quickly)
QUICK = [
    "--max_steps", "2",
    "--per_device_train_batch_size", "8",
    "--save_strategy", "no",
    "--report_to", "none",
    "--disable_tqdm", "true",
    "--dataloader_pin_memory", "false",
    "--seed", "0",
]  # fmt: skip


@pytest.fixture(autouse=True)
def users_machine(monkeypatch):
    """No benchmark folder, the hub switched off: only the user's files."""
    monkeypatch.delenv("STS_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def pairs(rows: int = 24, seed: int = 0) -> dict[str, list]:
    """Sentence pairs of random words with scores 0–5."""
    rng = random.Random(seed)
    return {
        "sentence1": [" ".join(rng.choices(WORDS, k=5)) for _ in range(rows)],
        "sentence2": [" ".join(rng.choices(WORDS, k=5)) for _ in range(rows)],
        "score": [round(rng.uniform(0, 5), 1) for _ in range(rows)],
    }


def train(model: Path, train_file: Path, output: Path, *options: str) -> None:
    """``sts-train --method cosent --model_name_or_path … --train_datasets … --output_dir …``"""
    argv = [
        "--method", "cosent",
        "--model_name_or_path", str(model),
        "--train_datasets", str(train_file),
        "--output_dir", str(output),
        *options,
        *QUICK,
    ]  # fmt: skip
    assert sts_train(argv) == 0
    assert (output / "model.safetensors").is_file()


def evaluate(capsys, model: Path, pairs_file: Path, *options: str) -> tuple[str, dict]:
    """``sts-eval --model <out> --pairs <file>``: its one line for the file, and the JSON."""
    output = model.parent / "scores"
    capsys.readouterr()
    argv = ["--model", str(model), "--pairs", str(pairs_file), *options]
    assert eval_main([*argv, "--output", str(output), "--quiet", "--overwrite"]) == 0
    lines = [
        line for line in capsys.readouterr().out.splitlines() if line.startswith(f"{pairs_file}:")
    ]
    assert len(lines) == 1
    return lines[0], json.loads(output.with_suffix(".json").read_text(encoding="utf-8"))


def independent_scores(model: Path, s1: list[str], s2: list[str], gold: list[float]) -> dict:
    """Spearman and Pearson (× 100) of the cosine of the saved model's embeddings."""
    from sts_core.encoder import SentenceEncoder

    encoder = SentenceEncoder.from_pretrained(model).eval()
    u = encoder.encode(s1, show_progress_bar=False)
    v = encoder.encode(s2, show_progress_bar=False)
    cosine = (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))
    return {
        "spearman": 100 * spearmanr(cosine, gold).statistic,
        "pearson": 100 * pearsonr(cosine, gold).statistic,
    }


def test_a_headed_csv_trains_and_scores(tiny_bert_dir, tmp_path, capsys):
    data = pairs()
    pd.DataFrame(data).to_csv(tmp_path / "my.csv", index=False)
    pd.DataFrame(pairs(8, seed=1)).to_csv(tmp_path / "my_dev.csv", index=False)
    before = sorted(p.name for p in tmp_path.iterdir())
    out = tmp_path / "out"
    train(tiny_bert_dir, tmp_path / "my.csv", out, "--eval_dataset", str(tmp_path / "my_dev.csv"))
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["data"]["sources"] == {str(tmp_path / "my.csv"): 24}
    assert set(metrics["dev"]) >= {"eval_dev_spearman", "eval_dev_pearson"}
    line, saved = evaluate(capsys, out, tmp_path / "my.csv")
    expected = independent_scores(out, data["sentence1"], data["sentence2"], data["score"])
    scores = saved["pairs"][str(tmp_path / "my.csv")]
    assert scores == pytest.approx(expected, abs=1e-4)
    assert line == (
        f"{tmp_path / 'my.csv'}: spearman {scores['spearman']:.2f}, pearson {scores['pearson']:.2f}"
    )
    assert "tasks" not in saved  # --pairs alone: no STS table (and no benchmark data needed)
    # nothing was written beside the data but the run's own output folder and results
    after = sorted(p.name for p in tmp_path.iterdir())
    assert after == sorted([*before, "out", "scores.json", "scores.md", LEDGER_NAME])


def test_a_jsonl_with_other_names_and_a_columns_mapping(tiny_bert_dir, tmp_path, capsys):
    data = pairs()
    renamed = {"question": data["sentence1"], "answer": data["sentence2"], "sim": data["score"]}
    # a distractor column the mapping leaves out, and the answer first: order does not matter
    renamed = {"id": list(range(24)), "answer": renamed["answer"], **renamed}
    path = tmp_path / "mine.jsonl"
    pd.DataFrame(renamed).to_json(path, orient="records", lines=True)
    mapping = '{"sentence1": "question", "sentence2": "answer", "score": "sim"}'
    out = tmp_path / "out"
    train(tiny_bert_dir, path, out, "--columns", mapping, "--eval_dataset", "none")
    line, saved = evaluate(capsys, out, path, "--columns", mapping)
    expected = independent_scores(out, data["sentence1"], data["sentence2"], data["score"])
    assert saved["pairs"][str(path)] == pytest.approx(expected, abs=1e-4)
    # the mapping decides which column is compared: swapped texts score otherwise
    swapped = '{"sentence1": "answer", "sentence2": "question", "score": "id"}'
    _, other = evaluate(capsys, out, path, "--columns", swapped)
    ids = independent_scores(out, data["sentence2"], data["sentence1"], list(range(24)))
    assert other["pairs"][str(path)] == pytest.approx(ids, abs=1e-4)


def test_a_parquet_file_trains_and_scores(tiny_bert_dir, tmp_path, capsys):
    data = pairs()
    path = tmp_path / "mine.parquet"
    pd.DataFrame(data).to_parquet(path, index=False)
    out = tmp_path / "out"
    train(tiny_bert_dir, path, out, "--eval_dataset", str(path), "--score_range", "0", "5")
    line, saved = evaluate(capsys, out, path)
    expected = independent_scores(out, data["sentence1"], data["sentence2"], data["score"])
    assert saved["pairs"][str(path)] == pytest.approx(expected, abs=1e-4)
    assert line.startswith(f"{path}: spearman ")


def test_a_dataset_in_python_trains_through_the_run_api(tiny_bert_dir, tmp_path):
    """The Python route docs/data.md gives: from_dataset + TrainingRun.from_arguments."""
    from datasets import Dataset

    from sts_core.data import from_dataset
    from sts_core.training import TrainingRun
    from sts_cosent.method import METHOD

    data = pairs()
    mine = Dataset.from_dict({"q": data["sentence1"], "d": data["sentence2"], "sim": data["score"]})
    train_set = from_dataset(mine, columns={"sentence1": "q", "sentence2": "d", "score": "sim"})
    values = {
        "model_name_or_path": str(tiny_bert_dir),
        "eval_dataset": "none",
        "output_dir": str(tmp_path / "out"),
        "max_steps": 2,
        "per_device_train_batch_size": 8,
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
        "dataloader_pin_memory": False,
    }
    model_args, data_args, config = ConfigParser.for_method(METHOD).parse_values(values, "python")
    run = TrainingRun.from_arguments(METHOD, model_args, data_args, config, train_set)
    metrics = run.run()
    assert metrics["data"]["train_pairs"] == 24
    assert (tmp_path / "out" / "model.safetensors").is_file()


def test_a_dev_set_in_python_selects_through_the_run_api(tiny_bert_dir, tmp_path):
    """``TrainingRun.from_arguments(..., eval_dataset=...)``: a ``DatasetDict`` in memory
    (its ``validation`` split, other column names given by ``eval_columns``) is the dev set;
    the final evaluation's Spearman is that of the saved model's cosines on those pairs."""
    from datasets import Dataset, DatasetDict

    from sts_core.data import from_dataset
    from sts_core.training import TrainingRun
    from sts_cosent.method import METHOD

    data, dev = pairs(), pairs(rows=16, seed=1)
    train_set = from_dataset(Dataset.from_dict(data))
    held_out = {"a": dev["sentence1"], "b": dev["sentence2"], "gold": dev["score"]}
    splits = DatasetDict(
        {"train": Dataset.from_dict(data), "validation": Dataset.from_dict(held_out)}
    )
    values = {
        "model_name_or_path": str(tiny_bert_dir),
        "eval_columns": '{"sentence1": "a", "sentence2": "b", "score": "gold"}',
        "output_dir": str(tmp_path / "out"),
        "max_steps": 2,
        "per_device_train_batch_size": 8,
        "eval_strategy": "no",
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
        "dataloader_pin_memory": False,
    }
    model_args, data_args, config = ConfigParser.for_method(METHOD).parse_values(values, "python")
    run = TrainingRun.from_arguments(METHOD, model_args, data_args, config, train_set, splits)
    run.run()
    final = run.trainer.evaluate()
    expected = independent_scores(
        tmp_path / "out", dev["sentence1"], dev["sentence2"], dev["score"]
    )
    assert final["eval_dev_spearman"] == pytest.approx(expected["spearman"], abs=1e-3)


# --------------------------------------------------------------------------- bad tables


def write_csv(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


BAD_TABLES = [
    (
        "sentence1,score\na b,1\nc d,2\n",
        [],
        "no column 'sentence2' (its columns: sentence1, score); expected two text columns",
    ),
    (
        "sentence1,sentence2,score\na b,c d,1\ne f,g h,high\n",
        [],
        "row 2, column 'score': 'high' is not a number",
    ),
    ("sentence1,sentence2,score\na b,,1\ne f,g h,2\n", [], "row 1, column 'sentence2': empty text"),
    (
        "sentence1,sentence2,score\na b,c d,1\ne f,g h,5.5\n",
        ["--score_range", "0", "5"],
        "row 2, column 'score': score 5.5 is outside score_range [0, 5] (1 of 2 rows are)",
    ),
    (
        "q,d,sim\na b,c d,1\ne f,g h,2\n",
        ["--columns", '{"sentence1": "q", "sentence2": "doc", "score": "sim"}'],
        "columns maps sentence2 to 'doc', which is not a column here (its columns: q, d, sim)",
    ),
]
BAD_IDS = ["missing-column", "text-score", "empty-text", "out-of-range", "mapping-absent"]


@pytest.mark.usefixtures("no_model_loading")
@pytest.mark.parametrize("check_only", ["true", "false"])
@pytest.mark.parametrize(("text", "options", "problem"), BAD_TABLES, ids=BAD_IDS)
def test_a_bad_training_table_is_one_line_before_the_model_loads(
    tiny_bert_dir, tmp_path, capsys, text, options, problem, check_only
):
    path = write_csv(tmp_path / "bad.csv", text)
    argv = [
        "--method", "cosent",
        "--model_name_or_path", str(tiny_bert_dir),
        "--train_datasets", str(path),
        "--eval_dataset", "none",
        "--output_dir", str(tmp_path / "out"),
        "--check_only", check_only,
        *options,
    ]  # fmt: skip
    assert sts_train(argv) == 2
    line = one_line_error(capsys.readouterr().err)
    assert line.startswith(f"error: {path}: {problem}"), line
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("no_model_loading")
def test_columns_are_the_training_tables_and_eval_columns_the_dev_tables(
    tiny_bert_dir, tmp_path, capsys
):
    train_file = write_csv(tmp_path / "train.csv", "q,d,sim\na b,c d,1\ne f,g h,2\n")
    dev = write_csv(tmp_path / "dev.csv", "q,d,sim,id\na b,c d,1,1\ne f,g h,9,2\n")
    mapping = '{"sentence1": "q", "sentence2": "d", "score": "sim"}'
    argv = [
        "--method", "cosent",
        "--model_name_or_path", str(tiny_bert_dir),
        "--train_datasets", str(train_file),
        "--columns", mapping,
        "--eval_dataset", str(dev),
        "--score_range", "0", "5",
        "--output_dir", str(tmp_path / "out"),
        "--check_only", "true",
    ]  # fmt: skip
    # columns is the training tables' mapping: the dev table's two columns of numbers are
    # not named, and its error names the dev tables' option (issue 61)
    assert sts_train(argv) == 2
    line = one_line_error(capsys.readouterr().err)
    assert line.startswith(f"error: {dev}: the columns 'sim', 'id' hold numbers, so none is")
    assert line.endswith("name the score column with eval_columns, e.g. eval_columns: {score: sim}")
    # eval_columns maps them, and score_range is checked in the dev table too
    assert sts_train([*argv, "--eval_columns", mapping]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert line.startswith(f"error: {dev}: row 2, column 'sim': score 9 is outside score_range")
    write_csv(dev, "q,d,sim,id\na b,c d,1,1\ne f,g h,4,2\n")
    final = ["--final_eval_datasets", str(dev), "--eval_columns", mapping]
    assert sts_train([*argv, *final]) == 0  # the final pair sets take eval_columns too
    printed = capsys.readouterr().out
    assert "check_only: the inputs are usable" in printed
    assert f"final pair set: {dev} (2 pairs)" in printed


@pytest.mark.usefixtures("no_model_loading")
def test_a_bad_columns_option_is_one_line(tiny_bert_dir, tmp_path, capsys):
    argv = ["--method", "cosent", "--model_name_or_path", str(tiny_bert_dir)]
    assert sts_train([*argv, "--columns", '{"text": "a"}', "--check_only", "true"]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "columns: 'text' is not one of the project's columns" in line


#: each method's check of a table of scored pairs (SIFTER's SimCSE reads their sentences)
CHECKED_METHODS = [
    ("cosent", []),
    ("regression", []),
    ("bsc", []),
    ("pcctuning", []),
    ("sifter", ["--loss", "simcse"]),
]


def test_check_only_imports_neither_the_trainer_nor_sklearn(tiny_bert_dir, tmp_path):
    """``sts-train --check_only true`` of every method on a small table imports neither
    ``transformers.Trainer`` (the run, the training package and the methods name their
    Trainer lazily: it loads when a run builds one) nor scikit-learn (the metrics import
    it where they use it): the check starts as fast as the config class allows."""
    table = tmp_path / "pairs.csv"
    pd.DataFrame(pairs()).to_csv(table, index=False)
    common = ["--model_name_or_path", str(tiny_bert_dir), "--train_datasets", str(table)]
    common += ["--eval_dataset", "none", "--check_only", "true"]
    code = (
        "import sys\n"
        "from sts_core.training.run import main\n"
        f"for method, extra in {CHECKED_METHODS!r}:\n"
        f"    out = ['--output_dir', {str(tmp_path)!r} + '/' + method]\n"
        f"    assert main(['--method', method, *{common!r}, *out, *extra]) == 0, method\n"
        "print(sorted(m for m in ('transformers.trainer', 'sklearn') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("check_only: the inputs are usable") == len(CHECKED_METHODS)
    assert result.stdout.splitlines()[-1] == "[]"


@pytest.mark.usefixtures("no_model_loading")
def test_sts_eval_refuses_a_bad_pairs_table_before_the_model(tiny_bert_dir, tmp_path, capsys):
    bad = write_csv(tmp_path / "bad.csv", "sentence1,sentence2,score\na,b,1\nc,d,x\n")
    assert eval_main(["--model", str(tiny_bert_dir), "--pairs", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"sts-eval: error: {bad}: row 2, column 'score': 'x' is not a number"
    good = write_csv(tmp_path / "ok.csv", "sentence1,sentence2,score\na,b,1\nc,d,2\n")
    argv = ["--model", str(tiny_bert_dir), "--pairs", "stsb:dev", "--columns", '{"score": "s"}']
    assert eval_main(argv) == 2
    assert "--columns names the columns of --pairs files, and none is given" in (
        capsys.readouterr().err
    )
    argv = ["--model", str(tiny_bert_dir), "--pairs", str(good), "--columns", '{"score": "s"}']
    assert eval_main(argv) == 2
    assert "columns maps score to 's', which is not a column here" in capsys.readouterr().err


def test_a_resume_repeats_the_training_columns_and_the_dev_columns_when_they_select(tmp_path):
    """``columns`` decides the training data: recorded in every checkpoint. ``eval_columns``
    decides the dev set only: recorded when the dev set picks the final model."""
    from sts_core.training.config import BaseConfig, DataArguments
    from sts_core.training.resume_settings import recipe_settings

    data_args = DataArguments(
        columns='{"sentence1": "q", "sentence2": "d"}', eval_columns='{"score": "sim"}'
    )
    free = recipe_settings(BaseConfig(output_dir=str(tmp_path), report_to="none"), None, data_args)
    assert free["columns"] == {"sentence1": "q", "sentence2": "d"}
    assert "eval_columns" not in free
    picking = BaseConfig(
        output_dir=str(tmp_path),
        report_to="none",
        load_best_model_at_end=True,
        eval_strategy="steps",
        save_strategy="steps",
        eval_steps=3,
        save_steps=3,
    )
    assert recipe_settings(picking, None, data_args)["eval_columns"] == {"score": "sim"}


@pytest.mark.usefixtures("no_model_loading")
def test_a_dataset_dict_folder_named_with_its_split_inside_the_output_dir_is_kept(
    tiny_bert_dir, tmp_path, capsys
):
    """``folder:split`` is the folder to the guard that never deletes a run's inputs."""
    from datasets import Dataset, DatasetDict

    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.json").write_text("{}", encoding="utf-8")  # an earlier run's
    splits = DatasetDict({"train": Dataset.from_dict(pairs()), "test": Dataset.from_dict(pairs())})
    splits.save_to_disk(out / "mine")
    capsys.readouterr()  # datasets' progress bars
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    argv = [
        "--method", "cosent",
        "--model_name_or_path", str(tiny_bert_dir),
        "--train_datasets", f"{out / 'mine'}:test",
        "--eval_dataset", "none",
        "--output_dir", str(out),
        "--overwrite_output_dir", "true",
    ]  # fmt: skip
    assert sts_train(argv) == 2
    line = one_line_error(capsys.readouterr().err)
    assert line.startswith(f"error: output_dir {out} holds the run's input train_datasets {out}")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before
