"""sts-search end to end on tables the test writes: two methods (the core's cosine MSE and
sts-cosent's CoSENT) × two learning rates on a tiny BERT, two cells at a time; the pick by
dev, its second seed, its test score, the folder's files; resumed without training again;
a killed cell trained again alone; another search's folder refused."""

from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.stats import spearmanr

from sts_core.search import main
from sts_core.testing import table_cosine_spearman, write_scored_pairs

TRAIN_PAIRS, BATCH = 48, 8


def trained_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.strip().startswith("training ")]


def test_a_search_picks_by_dev_retrains_the_pick_and_resumes_cell_by_cell(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    train = write_scored_pairs(tmp_path / "train.csv", TRAIN_PAIRS, 0)
    dev = write_scored_pairs(tmp_path / "dev.csv", 24, 1)
    test = write_scored_pairs(tmp_path / "test.csv", 24, 2)
    out = tmp_path / "search"
    argv = [
        "--train", str(train), "--dev", str(dev), "--test", str(test),
        "--model", str(tiny_bert_dir), "--output-dir", str(out),
        "--methods", "core", "cosent", "--learning-rate", "1e-4", "1e-3",
        "--seeds", "0", "1", "--batch-size", str(BATCH), "--jobs", "2", "--retrain", "best",
    ]  # fmt: skip
    assert main(argv) == 0
    assert len(trained_lines(capsys.readouterr().out)) == 5  # 4 grid cells, the pick's seed 1
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    cells = results["cells"]
    grid = [c for c in cells if c["seed"] == 0]
    assert {(c["method"], c["learning_rate"]) for c in grid} == {
        (m, r) for m in ("core", "cosent") for r in (1e-4, 1e-3)
    }
    for cell in cells:  # every item of a cell, checked afresh
        assert cell["steps"] == math.ceil(TRAIN_PAIRS / BATCH)
        assert cell["seconds"] > 0 and cell["peak_rss_mib"] > 100
        model = Path(cell["folder"]) / "model"
        assert abs(cell["dev"] - table_cosine_spearman(model, dev)) < 1e-6

    # the picks: each method's dev argmax at seed 0, and the argmax of those
    picks = {}
    for method in ("core", "cosent"):
        mine = [c for c in grid if c["method"] == method]
        picks[method] = max(mine, key=lambda c: c["dev"])["recipe"]
    best = max(picks.values(), key=lambda key: next(c["dev"] for c in grid if c["recipe"] == key))
    assert results["picks"] == picks and results["best"] == best

    # the pick alone is trained on seed 1 and scored on the test table
    runs = [c for c in cells if c["recipe"] == best]
    assert sorted(c["seed"] for c in runs) == [0, 1]
    assert [c for c in cells if "test" in c] == runs
    for run in runs:
        assert abs(run["test"] - table_cosine_spearman(Path(run["folder"]) / "model", test)) < 1e-6
    dev_mean = statistics.fmean(c["dev"] for c in runs)
    dev_sd = statistics.stdev(c["dev"] for c in runs)
    assert f"dev {dev_mean:.2f} ± {dev_sd:.2f}" in results["headline"]

    report = (out / "search.md").read_text(encoding="utf-8")
    assert results["headline"] in report and "sts-train --method" in report
    assert (out / "search.png").stat().st_size > 0
    pick = yaml.safe_load((out / "pick.yaml").read_text(encoding="utf-8"))
    best_cell = next(c for c in grid if c["recipe"] == best)
    assert pick["learning_rate"] == best_cell["learning_rate"] and "output_dir" not in pick

    # started again: nothing is trained, nothing rewritten
    stamps = {c["key"]: (Path(c["folder"]) / "result.json").stat().st_mtime_ns for c in cells}
    assert main(argv) == 0
    assert trained_lines(capsys.readouterr().out) == []
    # a cell killed before its result: trained again, alone
    killed = grid[1]
    (Path(killed["folder"]) / "result.json").unlink()
    assert main(argv) == 0
    assert trained_lines(capsys.readouterr().out) == [f"  training {killed['key']}"]
    for cell in cells:
        if cell["key"] != killed["key"]:
            assert (Path(cell["folder"]) / "result.json").stat().st_mtime_ns == stamps[cell["key"]]

    # another dev table in this folder: another search, refused in one line
    assert main([*argv[:3], str(test), *argv[4:]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds another search's cells" in err[0] and "dev" in err[0]


def test_a_step_budget_every_picks_seeds_and_a_time_limit(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    """``--max-steps`` bounds every cell; ``--retrain picks`` (the default) trains every
    method's pick on the other seeds; a search extended under ``--time-limit 0`` starts no
    cell and its report lists the ones it did not run. ``--in-process``: each cell trained
    in the test's process (its log says so), scored as a worker scores it, no peak memory
    of its own."""
    train = write_scored_pairs(tmp_path / "train.csv", TRAIN_PAIRS, 0)
    dev = write_scored_pairs(tmp_path / "dev.csv", 24, 1)
    out = tmp_path / "search"
    argv = [
        "--train", str(train), "--dev", str(dev), "--model", str(tiny_bert_dir),
        "--output-dir", str(out), "--methods", "core", "cosent", "--learning-rate", "1e-4",
        "--seeds", "0", "1", "--batch-size", str(BATCH), "--max-steps", "2", "--in-process",
    ]  # fmt: skip
    assert main(argv) == 0
    assert len(trained_lines(capsys.readouterr().out)) == 4  # 2 grid cells, each pick's seed 1
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert {c["steps"] for c in results["cells"]} == {2}  # not ⌈48/8⌉ = 6
    for cell in results["cells"]:
        folder = Path(cell["folder"])
        assert abs(cell["dev"] - table_cosine_spearman(folder / "model", dev)) < 1e-6
        assert cell["peak_rss_mib"] is None  # the search's process, not the cell's
        assert "(in-process)" in (folder / "log.txt").read_text(encoding="utf-8")
    assert all(0 < c["train_seconds"] <= c["seconds"] for c in results["cells"])
    assert sorted((c["method"], c["seed"]) for c in results["cells"]) == [
        ("core", 0), ("core", 1), ("cosent", 0), ("cosent", 1),
    ]  # fmt: skip
    assert results["not_run"] == []
    extended = [*argv, "--time-limit", "0"]
    extended[extended.index("1e-4") + 1 : extended.index("1e-4") + 1] = ["1e-3"]
    assert main(extended) == 0
    assert trained_lines(capsys.readouterr().out) == []
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert sorted(results["not_run"]) == [
        f"{m} | steps 2 | lr 0.001 | seed 0 (time limit)" for m in ("core", "cosent")
    ]  # labelled by what bounds them: the step budget
    report = (out / "search.md").read_text(encoding="utf-8")
    assert "## Not run (started again, the search trains them)" in report
    assert "- core | steps 2 | lr 0.001 | seed 0 (time limit)" in report


def test_a_peer_row_trains_as_sentence_transformers_does_on_the_same_settings(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    """st:cosine's cell against SentenceTransformerTrainer run here on the same table (scores
    scaled to 0–1 by --score-range), batch, rate, epochs and seed: the same weights."""
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer import losses
    from transformers import set_seed

    train = write_scored_pairs(tmp_path / "train.csv", 16, 0)
    dev = write_scored_pairs(tmp_path / "dev.csv", 12, 1)
    out = tmp_path / "search"
    argv = [
        "--train", str(train), "--dev", str(dev), "--model", str(tiny_bert_dir),
        "--output-dir", str(out), "--methods", "st:cosine", "--learning-rate", "1e-3",
        "--batch-size", "4", "--seeds", "3",
    ]  # fmt: skip
    assert main(argv) == 2  # a 0–1 loss without the scores' scale
    assert "give --score-range LOW HIGH" in capsys.readouterr().err
    # a recipe key the method does not have: found by sts-train's check, before any folder
    assert main([*argv[:8], "--methods", "core", "--set", "lerning_rate=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--methods core" in err[0] and "lerning_rate" in err[0], err
    assert not out.exists()
    assert main([*argv, "--score-range", "0", "5"]) == 0
    cell = json.loads((out / "results.json").read_text(encoding="utf-8"))["cells"][0]
    assert cell["steps"] == 4

    with open(train, encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    data = Dataset.from_dict(
        {
            "sentence1": [r["sentence1"] for r in rows],
            "sentence2": [r["sentence2"] for r in rows],
            "score": [float(r["score"]) / 5 for r in rows],
        }
    )
    set_seed(3)
    model = SentenceTransformer(str(tiny_bert_dir))
    arguments = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "scratch"), per_device_train_batch_size=4, learning_rate=1e-3,
        num_train_epochs=1, seed=3, report_to="none", save_strategy="no", logging_steps=10,
        disable_tqdm=True,
    )  # fmt: skip
    loss = losses.CosineSimilarityLoss(model)
    SentenceTransformerTrainer(model=model, args=arguments, train_dataset=data, loss=loss).train()
    expected = model.encode([r["sentence1"] for r in rows])
    saved = SentenceTransformer(str(Path(cell["folder"]) / "model"))
    assert np.abs(saved.encode([r["sentence1"] for r in rows]) - expected).max() < 1e-6
    assert abs(cell["dev"] - table_cosine_spearman(Path(cell["folder"]) / "model", dev)) < 1e-6

    # sts-train's data options make the peer's pairs too: 8 of the 16 rows, 2 steps of 4
    fewer = [*argv, "--score-range", "0", "5", "--set", "max_train_samples=8"]
    fewer[fewer.index(str(out))] = str(tmp_path / "fewer")
    assert main(fewer) == 0
    capsys.readouterr()
    results = json.loads((tmp_path / "fewer" / "results.json").read_text(encoding="utf-8"))
    assert results["cells"][0]["steps"] == 2
    fewer[fewer.index("max_train_samples=8")] = "max_train_samples=0"
    fewer[fewer.index(str(tmp_path / "fewer"))] = str(tmp_path / "none")
    assert main(fewer) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--methods st:cosine" in err[0] and "max_train_samples" in err[0], err
    assert not (tmp_path / "none").exists()


def test_bad_inputs_stop_in_one_line_before_any_folder_is_written(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    train = write_scored_pairs(tmp_path / "train.csv", 8, 0)
    out = tmp_path / "search"
    base = ["--train", str(train), "--model", str(tiny_bert_dir), "--output-dir", str(out)]
    cases = [
        (["--dev", str(tmp_path / "nope.csv"), "--methods", "core"], "--dev", "nope.csv"),
        (["--dev", str(train), "--methods", "cosent:cosine_mse"], "cosent:cosine_mse", "0–1"),
        (["--dev", str(train), "--methods", "cosent:nope"], "no row 'nope'", "cosine_mse"),
        (["--dev", str(train), "--methods", "nope"], "no installed method 'nope'", "cosent"),
        (
            ["--dev", str(train), "--methods", "st:cosent", "--set", "lerning_rate=1"],
            "st:cosent",
            "lerning_rate is not a sentence-transformers training argument",
        ),
    ]
    for extra, *expected in cases:
        assert main([*base, *extra]) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and all(text in err[0] for text in expected), err
        assert not out.exists()


def test_the_seven_sts_tasks_score_the_pick_as_the_papers_do(
    tiny_bert_dir: Path, sts_data_dir: Path, tmp_path: Path
) -> None:
    """``--test sts-tasks``: the pick scored on STS12–16, STS-B test and SICK-R test of the
    data folder, each task's Spearman over all its pairs ('all'), the test score their
    mean; recomputed here for two tasks with scipy from the saved model."""
    from sts_core.encoder import SentenceEncoder
    from sts_core.evaluation.sts import load_task_pairs
    from sts_core.names import STS_TASKS

    train = write_scored_pairs(tmp_path / "train.csv", 16, 0)
    dev = write_scored_pairs(tmp_path / "dev.csv", 16, 1)
    out = tmp_path / "search"
    argv = [
        "--train", str(train), "--dev", str(dev), "--test", "sts-tasks",
        "--data-dir", str(sts_data_dir), "--model", str(tiny_bert_dir),
        "--output-dir", str(out), "--methods", "core", "--batch-size", str(BATCH),
        "--in-process",
    ]  # fmt: skip
    assert main(argv) == 0
    (cell,) = json.loads((out / "results.json").read_text(encoding="utf-8"))["cells"]
    metrics = json.loads((Path(cell["folder"]) / "test.json").read_text())["metrics"]
    tasks = [metrics[f"test_{task}_spearman"] for task in STS_TASKS]
    assert len(tasks) == 7
    assert cell["test"] == metrics["test_spearman"]
    assert abs(cell["test"] - statistics.fmean(tasks)) < 1e-9
    encoder = SentenceEncoder.from_pretrained(str(Path(cell["folder"]) / "model"))
    for task in ("sts16", "stsb"):
        pairs = load_task_pairs(task, "senteval", "senteval", sts_data_dir)
        u, v = (
            encoder.encode(list(pairs[side]), batch_size=64, show_progress_bar=False)
            for side in ("sentence1", "sentence2")
        )
        cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
        expected = 100 * spearmanr(cosine, pairs["score"]).statistic
        # float32 embeddings batched otherwise: a near-tie of the tiny model may swap ranks
        assert abs(metrics[f"test_{task}_spearman"] - expected) < 5e-3
        has_subsets = "subset" in pairs.column_names  # STS-B's test set has none: one
        subsets = np.asarray(pairs["subset"] if has_subsets else ["all"] * len(pairs))
        sizes, rhos = zip(
            *(
                (mask.sum(), spearmanr(cosine[mask], np.asarray(pairs["score"])[mask]).statistic)
                for mask in (subsets == name for name in dict.fromkeys(subsets.tolist()))
            ),
            strict=True,
        )
        wmean = 100 * np.dot(sizes, rhos) / sum(sizes)
        assert abs(metrics[f"test_{task}_spearman_wmean"] - wmean) < 5e-3
    wmeans = [metrics[f"test_{task}_spearman_wmean"] for task in STS_TASKS]
    assert abs(metrics["test_spearman_wmean"] - statistics.fmean(wmeans)) < 1e-9
    # without the benchmark files: refused before any cell trains
    empty = tmp_path / "no-data"
    empty.mkdir()
    argv[argv.index(str(sts_data_dir))] = str(empty)
    argv[argv.index(str(out))] = str(tmp_path / "other")
    assert main(argv) == 2
    assert not (tmp_path / "other").exists()


def test_a_two_stage_cell_is_two_sts_train_runs(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    """``--set stage1_loss=cosine_mse --set stage1_epochs=2`` on Pcc-tuning's Pearson row:
    the cell's weights, dev score and steps against two ``sts-train`` runs made here on the
    same recipe (the first stage's loss and epochs, then the row's from its model); an
    interrupted first stage's folder is removed when the cell is trained again; a first
    stage's loss the method does not have is refused before anything trains."""
    from sts_core.training.run import main as sts_train

    train = write_scored_pairs(tmp_path / "train.csv", 24, 0)
    dev = write_scored_pairs(tmp_path / "dev.csv", 12, 1)
    out = tmp_path / "search"
    argv = [
        "--train", str(train), "--dev", str(dev), "--model", str(tiny_bert_dir),
        "--output-dir", str(out), "--methods", "pcctuning:pcc_pearson",
        "--learning-rate", "1e-3", "--batch-size", str(BATCH), "--seeds", "3",
        "--set", "stage1_epochs=2",
    ]  # fmt: skip
    assert main([*argv, "--set", "stage1_loss=cosent"]) == 2  # not one of Pcc-tuning's
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: --methods pcctuning:pcc_pearson: --set stage1_loss=cosent (the first stage): "
        "loss 'cosent' is not one of infonce, pearson, cosine_mse"
    ]
    assert not out.exists()

    argv += ["--set", "stage1_loss=cosine_mse"]
    assert main(argv) == 0
    capsys.readouterr()
    (cell,) = json.loads((out / "results.json").read_text(encoding="utf-8"))["cells"]
    folder = Path(cell["folder"])
    assert cell["steps"] == 3 * math.ceil(24 / BATCH)  # 2 epochs, then 1
    assert not (folder / "stage1").exists()
    report = (out / "search.md").read_text(encoding="utf-8")
    assert "--loss cosine_mse --num_train_epochs 2.0 --output_dir <stage 1 folder>" in report

    recipe = {
        "model_name_or_path": str(tiny_bert_dir), "train_datasets": [str(train)],
        "per_device_train_batch_size": BATCH, "learning_rate": 1e-3, "seed": 3,
        "eval_dataset": "none", "eval_strategy": "no", "save_strategy": "no",
        "load_best_model_at_end": False, "report_to": "none", "disable_tqdm": True,
    }  # fmt: skip
    stage1, stage2 = tmp_path / "by-hand-1", tmp_path / "by-hand-2"
    runs = [
        {**recipe, "loss": "cosine_mse", "num_train_epochs": 2, "output_dir": str(stage1)},
        {**recipe, "loss": "pearson", "num_train_epochs": 1, "output_dir": str(stage2),
         "model_name_or_path": str(stage1)},
    ]  # fmt: skip
    for number, content in enumerate(runs):
        path = tmp_path / f"stage{number + 1}.yaml"
        path.write_text(yaml.safe_dump(content), encoding="utf-8")
        assert sts_train(["--method", "pcctuning", "--config", str(path)]) == 0
    capsys.readouterr()
    assert_same_weights(folder / "model", stage2)
    assert abs(cell["dev"] - table_cosine_spearman(stage2, dev)) < 1e-4
    single = tmp_path / "one-stage"  # the row's loss alone: other weights
    content = {**runs[1], "model_name_or_path": str(tiny_bert_dir), "output_dir": str(single)}
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(content), encoding="utf-8")
    assert sts_train(["--method", "pcctuning", "--config", str(tmp_path / "one.yaml")]) == 0
    with pytest.raises(AssertionError):
        assert_same_weights(folder / "model", single)

    (folder / "result.json").unlink()  # a cell killed in its first stage
    (folder / "stage1").mkdir()
    (folder / "stage1" / "config.json").write_text("{}")
    assert main(argv) == 0
    capsys.readouterr()
    (again,) = json.loads((out / "results.json").read_text(encoding="utf-8"))["cells"]
    assert again["steps"] == cell["steps"] and not (folder / "stage1").exists()
    assert abs(again["dev"] - cell["dev"]) < 1e-4


def assert_same_weights(saved: Path, expected: Path) -> None:
    """Every weight of the two saved models alike (to float noise)."""
    from safetensors.torch import load_file

    (mine,) = saved.glob("**/model.safetensors")
    (theirs,) = expected.glob("**/model.safetensors")
    a, b = load_file(mine), load_file(theirs)
    assert a.keys() == b.keys()
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5
