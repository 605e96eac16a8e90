"""Method.run() / main() end to end on fixture files in the STS-B format and a tiny BERT."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from sts_core.encoder import SentenceEncoder
from sts_core.testing import write_fixture_recipe
from sts_core.training import TrainingRun
from sts_core.training.method_registry import CORE_METHOD
from sts_core.training.run import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"
TRAIN = FIXTURES / "sts-train.csv"  # genre, file, year, id, score, sentence1, sentence2
DEV = FIXTURES / "sts-dev.csv"


def write_recipe(path: Path, model: Path, output_dir: Path, **overrides: str) -> Path:
    """The fixture recipe for cosine MSE; ``overrides`` replace or add lines (YAML text)."""
    settings = {"score_range": "[0, 5]", **overrides}
    comment = "cosine MSE on fixture STS-B files"
    return write_fixture_recipe(path, comment, model, TRAIN, DEV, output_dir, **settings)


def saved_model_dev_scores(output_dir: Path) -> dict[str, float]:
    """Spearman and Pearson × 100 of the cosines of the model saved in ``output_dir`` on the
    dev file, computed here (numpy, scipy) from the file's own columns; gold divided by 5 as
    the recipe's ``score_range: [0, 5]`` does (neither correlation changes under that)."""
    rows = [line.split("\t") for line in DEV.read_text(encoding="utf-8").splitlines()]
    gold = np.array([float(row[4]) for row in rows]) / 5
    encoder = SentenceEncoder.from_pretrained(output_dir)
    u = encoder.encode([row[5] for row in rows], show_progress_bar=False).astype(np.float64)
    v = encoder.encode([row[6] for row in rows], show_progress_bar=False).astype(np.float64)
    cosine = (u * v).sum(axis=1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))
    return {
        "eval_dev_spearman": 100 * float(spearmanr(cosine, gold).statistic),
        "eval_dev_pearson": 100 * float(pearsonr(cosine, gold).statistic),
    }


def test_fixture_files_are_in_the_stsb_format() -> None:
    for path in (TRAIN, DEV):
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines and all(len(line.split("\t")) == 7 for line in lines)
        assert all(0 <= float(line.split("\t")[4]) <= 5 for line in lines)


@pytest.fixture(scope="module")
def finished_run(tiny_bert_nodropout_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("run")
    output_dir = root / "out"
    recipe = write_recipe(root / "recipe.yaml", tiny_bert_nodropout_dir, output_dir)
    metrics = TrainingRun(["--config", str(recipe)], method=CORE_METHOD).run()
    return {"metrics": metrics, "output_dir": output_dir}


def test_a_run_writes_metrics_json(finished_run: dict) -> None:
    output_dir = finished_run["output_dir"]
    written = json.loads((output_dir / "metrics.json").read_text(encoding="utf-8"))
    assert math.isfinite(written["train"]["train_loss"])
    assert written["launch"] == {
        "world_size": 1,
        "distributed_type": "NO",
        "engine": "SentenceEncoder",
    }
    assert written["data"]["train_pairs"] == 16
    assert written["data"]["sources"] == {str(TRAIN): 16}
    spearman = written["dev"]["eval_dev_spearman"]
    # the recipe keeps the final model (no load_best_model_at_end): the one saved to
    # output_dir, evaluated after training; recomputed here from the saved weights
    expected = saved_model_dev_scores(output_dir)
    assert spearman == pytest.approx(expected["eval_dev_spearman"], abs=1e-4)
    assert written["dev"]["eval_dev_pearson"] == pytest.approx(
        expected["eval_dev_pearson"], abs=1e-4
    )
    state = json.loads((output_dir / "checkpoint-4" / "trainer_state.json").read_text())
    (last,) = [e for e in state["log_history"] if e.get("step") == 4 and "eval_dev_spearman" in e]
    assert spearman == pytest.approx(last["eval_dev_spearman"], abs=1e-4)  # same weights
    returned = finished_run["metrics"]
    assert returned["dev"]["eval_dev_spearman"] == pytest.approx(spearman)
    assert returned["train"]["train_loss"] == pytest.approx(written["train"]["train_loss"])


def test_a_run_selects_on_the_dev_set_and_saves_the_model(finished_run: dict) -> None:
    output_dir = finished_run["output_dir"]
    state = json.loads((output_dir / "checkpoint-4" / "trainer_state.json").read_text())
    evaluations = [e for e in state["log_history"] if "eval_dev_spearman" in e]
    assert [e["step"] for e in evaluations] == [0, 2, 4]  # 0: the untrained model
    # chosen among the checkpoints' evaluations (there is no checkpoint of step 0)
    assert state["best_metric"] == max(e["eval_dev_spearman"] for e in evaluations[1:])
    losses = [e["loss"] for e in state["log_history"] if "loss" in e]
    assert len(losses) == 4 and all(math.isfinite(v) for v in losses)

    encoder = SentenceEncoder.from_pretrained(output_dir)
    sentences = ["a man plays the piano", "a dog is swimming"]
    vectors = encoder.encode(sentences, show_progress_bar=False)
    assert vectors.shape == (2, 32) and np.isfinite(vectors).all()
    card = (output_dir / "README.md").read_text(encoding="utf-8")
    assert "BaseTrainer" in card and str(TRAIN) in card


def test_dev_scores_are_rescaled_like_training_scores(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """score_range rescales the dev set too; spearman does not change, the model's scores do."""
    from sts_core.data import load_pairs
    from sts_core.training.config import DataArguments
    from sts_core.training.data import build_dev_set, build_train_dataset

    args = DataArguments(train_datasets=[str(TRAIN)], eval_dataset=str(DEV), score_range=[0, 5])
    name, dev = build_dev_set(args)
    assert name == "dev"
    raw = load_pairs(DEV, "dev")
    np.testing.assert_allclose(dev["score"], np.asarray(raw["score"]) / 5)
    train, summary = build_train_dataset(args)
    assert max(train["score"]) <= 1 and summary["train_pairs"] == 16


def test_main_returns_2_on_an_unknown_key(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = write_recipe(
        tmp_path / "bad.yaml", tiny_bert_nodropout_dir, tmp_path / "out", learnig_rate="1"
    )
    assert main(["--config", str(recipe)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("error: ") and str(recipe) in err
    assert "learnig_rate" in err and "learning_rate" in err
    assert not (tmp_path / "out").exists()


def test_main_returns_2_on_a_missing_recipe(tmp_path: Path, capsys) -> None:
    assert main(["--config", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_main_closes_the_process_group_it_ran_under(tmp_path: Path, capsys) -> None:
    """A launched process leaves no gloo group to the interpreter's teardown (where its
    threads can abort a process that trained correctly)."""
    import torch.distributed as dist

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    assert main(["--config", str(tmp_path / "missing.yaml")]) == 2
    assert not dist.is_initialized()


def test_closing_after_success_waits_for_the_other_processes(tmp_path: Path, monkeypatch) -> None:
    """After a finished run every process meets at a barrier before its group goes (a rank
    done first must not tear down while another still saves); after an error, none."""
    import torch.distributed as dist

    from sts_core.distributed import close_process_group

    barriers = []
    real_barrier = dist.barrier
    for wait, expected in ((True, 1), (False, 0)):
        store = dist.FileStore(str(tmp_path / f"store-{wait}"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        monkeypatch.setattr(dist, "barrier", lambda: barriers.append(real_barrier()))
        close_process_group(wait_for_others=wait)
        monkeypatch.undo()
        assert not dist.is_initialized()
        assert len(barriers) == expected
        barriers.clear()


def test_main_trains_and_returns_0(tiny_bert_nodropout_dir: Path, tmp_path: Path) -> None:
    recipe = write_recipe(
        tmp_path / "r.yaml",
        tiny_bert_nodropout_dir,
        tmp_path / "out",
        train_datasets=str(TRAIN),  # a scalar for a list field
        max_steps="2",
        eval_strategy="no",  # YAML 1.1 reads no as false
        save_strategy="no",
    )
    assert main(["--config", str(recipe), "--max_steps", "1"]) == 0
    written = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert written["train"]["epoch"] == pytest.approx(0.5)  # 1 step of 8 pairs out of 16
    # the final evaluation still runs, on the model saved after the one step
    expected = saved_model_dev_scores(tmp_path / "out")
    assert written["dev"]["eval_dev_spearman"] == pytest.approx(
        expected["eval_dev_spearman"], abs=1e-4
    )
    assert not list((tmp_path / "out").glob("checkpoint-*"))


def test_without_dev_set_evaluation_is_off(tiny_bert_nodropout_dir: Path, tmp_path: Path) -> None:
    recipe = write_recipe(
        tmp_path / "r.yaml",
        tiny_bert_nodropout_dir,
        tmp_path / "out",
        eval_dataset="none",
        max_steps="2",
    )  # eval_strategy stays "steps" in the recipe
    metrics = TrainingRun(["--config", str(recipe)], method=CORE_METHOD).run()
    assert metrics["dev"] == {} and metrics["dev_before_training"] == {}
    assert "eval_dev_spearman" not in metrics["curves"]
    assert math.isfinite(metrics["train"]["train_loss"])
    assert (tmp_path / "out" / "checkpoint-2").is_dir()


def test_load_best_model_without_dev_set_is_a_config_error(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    recipe = write_recipe(
        tmp_path / "r.yaml",
        tiny_bert_nodropout_dir,
        tmp_path / "out",
        eval_dataset="none",
        load_best_model_at_end="true",
    )
    assert main(["--config", str(recipe)]) == 2
    assert "load_best_model_at_end" in capsys.readouterr().err


def test_metric_the_dev_set_does_not_give_fails_before_training(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    recipe = write_recipe(
        tmp_path / "r.yaml",
        tiny_bert_nodropout_dir,
        tmp_path / "out",
        metric_for_best_model="sickr_spearman",
    )
    assert main(["--config", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "sickr_spearman" in err and "dev_spearman" in err
    assert not (tmp_path / "out").exists()


def test_load_best_model_at_end_on_a_dev_file(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    recipe = write_recipe(
        tmp_path / "r.yaml",
        tiny_bert_nodropout_dir,
        tmp_path / "out",
        eval_steps="1",
        save_steps="1",
        max_steps="3",
        load_best_model_at_end="true",
        metric_for_best_model="dev_pearson",
    )
    metrics = TrainingRun(["--config", str(recipe)], method=CORE_METHOD).run()
    state = json.loads((tmp_path / "out" / "checkpoint-3" / "trainer_state.json").read_text())
    history = state["log_history"]
    scores = {e["step"]: e["eval_dev_pearson"] for e in history if "eval_dev_pearson" in e}
    assert sorted(scores) == [0, 1, 2, 3]  # 0: the untrained model, never a checkpoint
    del scores[0]
    best_step = max(scores, key=scores.get)
    assert state["best_metric"] == scores[best_step]
    assert state["best_model_checkpoint"].endswith(f"checkpoint-{best_step}")
    # the final model is the best checkpoint: its dev score is the best one
    assert metrics["dev"]["eval_dev_pearson"] == pytest.approx(scores[best_step], abs=1e-4)
    # … and it is the model saved to output_dir
    expected = saved_model_dev_scores(tmp_path / "out")
    assert metrics["dev"]["eval_dev_pearson"] == pytest.approx(
        expected["eval_dev_pearson"], abs=1e-4
    )


def test_main_returns_2_on_a_bad_data_file(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    broken = tmp_path / "sts-train.csv"
    lines = TRAIN.read_text(encoding="utf-8").splitlines()
    lines[2] = "\t".join(lines[2].split("\t")[:5])  # score but no sentences
    broken.write_text("\n".join(lines) + "\n", encoding="utf-8")
    recipe = write_recipe(
        tmp_path / "r.yaml", tiny_bert_nodropout_dir, tmp_path / "out", train_datasets=str(broken)
    )
    assert main(["--config", str(recipe)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{broken}:3" in err

    missing = tmp_path / "nowhere" / "sts-train.csv"
    recipe = write_recipe(
        tmp_path / "m.yaml", tiny_bert_nodropout_dir, tmp_path / "out", train_datasets=str(missing)
    )
    assert main(["--config", str(recipe)]) == 2
    assert str(missing) in capsys.readouterr().err


def test_main_returns_2_on_a_missing_model_folder(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "no-such-model"
    recipe = write_recipe(tmp_path / "r.yaml", missing, tmp_path / "out")
    assert main(["--config", str(recipe)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(missing) in err


def test_a_run_draws_its_learning_curves_from_the_series_it_records(finished_run: dict) -> None:
    """``metrics.json`` keeps the series of the log history (the loss per logged step, the
    learning rate, the dev Spearman per evaluation); the chart is drawn from them beside it
    and the model card shows it."""
    output_dir = finished_run["output_dir"]
    written = json.loads((output_dir / "metrics.json").read_text(encoding="utf-8"))
    state = json.loads((output_dir / "checkpoint-4" / "trainer_state.json").read_text())
    history = state["log_history"]
    curves = written["curves"]
    assert curves["loss"] == [[e["step"], e["loss"]] for e in history if "loss" in e]
    assert curves["eval_dev_spearman"] == [
        [e["step"], e["eval_dev_spearman"]] for e in history if "eval_dev_spearman" in e
    ]
    assert len(curves["learning_rate"]) == 4
    assert "eval_runtime" not in curves and "epoch" not in curves
    image = (output_dir / "learning_curves.png").read_bytes()
    assert image.startswith(b"\x89PNG") and len(image) > 5000
    card = (output_dir / "README.md").read_text(encoding="utf-8")
    assert "![learning curves](learning_curves.png)" in card
    checkpoint_card = (output_dir / "checkpoint-4" / "README.md").read_text(encoding="utf-8")
    assert "learning_curves.png" not in checkpoint_card  # drawn after training


def test_a_run_scores_the_untrained_model_at_step_0(
    finished_run: dict, tiny_bert_nodropout_dir: Path
) -> None:
    """A run with a dev set evaluates once before its first step: the log history's step-0
    scores are the untrained model's, computed here from the model folder it started from
    (numpy, scipy); ``metrics.json`` keeps them (``dev_before_training``), the dev curve
    starts with them and the model card lists them."""
    output_dir = finished_run["output_dir"]
    state = json.loads((output_dir / "checkpoint-4" / "trainer_state.json").read_text())
    (start,) = [e for e in state["log_history"] if e["step"] == 0]
    expected = saved_model_dev_scores(tiny_bert_nodropout_dir)  # the model before training
    for key, value in expected.items():
        assert start[key] == pytest.approx(value, abs=1e-4)
    written = json.loads((output_dir / "metrics.json").read_text(encoding="utf-8"))
    before = written["dev_before_training"]
    assert before == {k: v for k, v in start.items() if k.startswith("eval_")}
    assert before["eval_runtime"] > 0  # what the extra evaluation cost
    assert written["curves"]["eval_dev_spearman"][0] == [0, start["eval_dev_spearman"]]
    assert finished_run["metrics"]["dev_before_training"] == before
    card = (output_dir / "README.md").read_text(encoding="utf-8")
    assert "- step 0 (the untrained model): eval_dev_spearman" in card


def test_the_untrained_model_is_scored_once_and_not_again_on_a_resume(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """The step-0 evaluation needs a dev evaluator, is skipped when the run resumes (its
    log history has it from the first start, and global_step is past 0) and under
    ``eval_on_start`` (the Trainer's own evaluation at the start)."""
    from sts_core.testing import ScriptedEvaluator, quick_training_args
    from sts_core.training import BaseConfig, BaseTrainer

    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    evaluator = ScriptedEvaluator([42.0, 43.0])
    args = quick_training_args(BaseConfig, tmp_path)
    trainer = BaseTrainer(model=encoder, args=args, evaluator=evaluator)
    assert trainer.evaluate_before_training()["eval_fake_spearman"] == 42.0
    assert trainer.state.log_history[-1]["step"] == 0
    trainer.state.global_step = 3  # a resumed run's state
    assert trainer.evaluate_before_training() == {} and evaluator.calls == 1
    trainer.state.global_step = 0
    trainer.args.eval_on_start = True
    assert trainer.evaluate_before_training() == {} and evaluator.calls == 1
    trainer.evaluator = None
    trainer.args.eval_on_start = False
    assert trainer.evaluate_before_training() == {}


def test_a_series_of_one_evaluation_is_drawn_as_a_point() -> None:
    """A line needs two points: a series of one (a single dev evaluation) gets a marker, in
    the plotted data of its panel; the longer series stay lines."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from sts_core.training.curves import curves_figure

    series = {"loss": [[1, 0.5], [2, 0.4]], "eval_dev_spearman": [[2, 71.5]]}
    figure = curves_figure(series)
    panels = {axis.get_title(): axis.get_lines() for axis in figure.axes}
    (dev,) = panels["dev"]
    assert dev.get_xydata().tolist() == [[2.0, 71.5]]
    assert dev.get_marker() == "o"
    (loss,) = panels["training loss"]
    assert loss.get_xydata().tolist() == [[1.0, 0.5], [2.0, 0.4]]
    assert loss.get_marker() in ("None", None, "")
    plt.close(figure)


def test_the_curves_keep_finite_scores_and_losses_and_leave_the_bookkeeping(caplog) -> None:
    from sts_core.training.curves import draw_learning_curves, learning_curve_series

    history = [
        {"step": 1, "loss": 0.5, "loss_cosine_mse": 0.4, "matryoshka_8": 0.7, "grad_norm": 2.0},
        {"step": 1, "learning_rate": 1e-5, "epoch": 0.5},
        {"step": 2, "eval_spearman": 80.0, "eval_runtime": 3.0, "eval_loss": 0.1},
        {"step": 3, "loss": float("nan"), "eval_spearman": 81.0},
    ]
    assert learning_curve_series(history) == {
        "loss": [[1, 0.5]],
        "loss_cosine_mse": [[1, 0.4]],
        "matryoshka_8": [[1, 0.7]],
        "learning_rate": [[1, 1e-5]],
        "eval_spearman": [[2, 80.0], [3, 81.0]],
    }
    with caplog.at_level("INFO", logger="sts_core.training.curves"):
        assert draw_learning_curves({}, Path("/nonexistent/never.png")) is False
    assert "not drawn: the run logged no loss" in caplog.text  # said, not silently left out


def test_report_to_tensorboard_writes_the_loss_and_dev_spearman_by_step(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """``report_to: tensorboard`` (``sts-core[tensorboard]``), offline: the event file in
    ``output_dir/runs/`` holds each logged step's training loss and each evaluation's dev
    Spearman, the values of the run's own log history."""
    pytest.importorskip("tensorboard", reason="report_to: tensorboard needs sts-core[tensorboard]")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    output_dir = tmp_path / "out"
    recipe = write_recipe(
        tmp_path / "recipe.yaml", tiny_bert_nodropout_dir, output_dir, report_to="tensorboard"
    )
    metrics = TrainingRun(["--config", str(recipe)], method=CORE_METHOD).run()
    (run_folder,) = (output_dir / "runs").iterdir()  # its event files (the final evaluation's too)
    accumulator = EventAccumulator(str(run_folder))
    accumulator.Reload()
    history = json.loads((output_dir / "checkpoint-4" / "trainer_state.json").read_text())[
        "log_history"
    ]

    def same(key: str, expected: list[tuple[int, float]]) -> None:
        events = accumulator.Scalars(key)  # float32 values
        assert [e.step for e in events] == [step for step, _ in expected]
        assert [e.value for e in events] == pytest.approx([v for _, v in expected], rel=1e-6)

    losses = [(e["step"], e["loss"]) for e in history if "loss" in e]
    spearman = [(e["step"], e["eval_dev_spearman"]) for e in history if "eval_dev_spearman" in e]
    assert len(losses) == 4 and len(spearman) == 3  # steps 0 (the untrained model), 2, 4
    same("train/loss", losses)
    final = (4, metrics["dev"]["eval_dev_spearman"])  # the final model's, after training
    same("eval/dev_spearman", [*spearman, final])


def test_report_to_tensorboard_without_the_package_is_one_line_before_weights_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from sts_core.training import BaseConfig

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("tensorboard", "tensorboardX") else found(name, *a),
    )
    with pytest.raises(ValueError, match=r"pip install 'sts-core\[tensorboard\]'"):
        BaseConfig(output_dir=str(tmp_path), report_to="tensorboard")
    BaseConfig(output_dir=str(tmp_path), report_to="none")  # nothing asked, nothing needed
