"""Output folders never hold the run's inputs, and what a killed save left is cleaned (issue
44, items 1 and 5).

Before anything in ``output_dir`` is removed, every local input of the run (the model, the
teacher, the resume checkpoint, each data file, the data folder) is resolved and checked
against it: ``--overwrite_output_dir true`` with ``output_dir`` the model folder deleted
the model before loading it, and a training file inside ``output_dir`` was deleted and
the run trained (exit 0). Now each is one line naming both, exit 2, nothing removed (also
under ``check_only``). A folder holding only the staging files of a run killed while
saving is cleaned and used as new, not refused with a hint to resume from a checkpoint
that does not exist.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from sts_core.encoder import SentenceEncoder
from sts_core.saving import PARTIAL_PREFIX, SAVE_MARKER, STAGING_DIR, check_complete_save
from sts_core.testing import one_line_error, write_fixture_recipe
from sts_core.training.config import DataArguments, ModelArguments
from sts_core.training.parser import ConfigError
from sts_core.training.run import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"
TRAIN = FIXTURES / "sts-train.csv"
DEV = FIXTURES / "sts-dev.csv"
STS_DATA = Path(__file__).parent / "fixtures" / "data"


def recipe(
    tmp_path: Path, model: Path, output_dir: Path, train: Path = TRAIN, **lines: str
) -> Path:
    settings = {"score_range": "[0, 5]", **lines}
    return write_fixture_recipe(
        tmp_path / "recipe.yaml", "output folder", model, train, DEV, output_dir, **settings
    )


def contents(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def refusal(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    return one_line_error(capsys.readouterr().err)


# ---------------------------------------------------------------------------- item 1
@pytest.mark.usefixtures("no_model_loading")
@pytest.mark.parametrize("check_only", ["false", "true"])
def test_overwriting_the_model_folder_is_refused_and_the_model_kept(
    tiny_bert_dir: Path, tmp_path: Path, capsys, check_only: str
) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, model)
    before = contents(model)
    config = recipe(tmp_path, model, model)
    line = refusal(
        capsys,
        "--config",
        str(config),
        "--overwrite_output_dir",
        "true",
        "--check_only",
        check_only,
    )
    assert line == (
        f"error: output_dir {model} is the run's input model_name_or_path: "
        "--overwrite_output_dir true would delete it; nothing was removed: choose another "
        "output_dir or move the input out of it"
    )
    assert contents(model) == before


@pytest.mark.usefixtures("no_model_loading")
@pytest.mark.parametrize("overwrite", ["false", "true"])
def test_the_model_folder_as_output_dir_is_refused_in_any_mode(
    tiny_bert_dir: Path, tmp_path: Path, capsys, overwrite: str
) -> None:  # the final save would write over the model it read
    model = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, model)
    before = contents(model)
    config = recipe(tmp_path, model, model)
    line = refusal(capsys, "--config", str(config), "--overwrite_output_dir", overwrite)
    assert f"output_dir {model} is the run's input model_name_or_path" in line
    assert contents(model) == before


@pytest.mark.usefixtures("no_model_loading")
@pytest.mark.parametrize("check_only", ["false", "true"])
def test_a_training_file_inside_the_output_dir_to_replace_is_refused_and_kept(
    tiny_bert_dir: Path, tmp_path: Path, capsys, check_only: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.json").write_text("{}", encoding="utf-8")  # an earlier run's
    train = out / "sts-train.csv"  # the user's only copy
    shutil.copy(TRAIN, train)
    config = recipe(tmp_path, tiny_bert_dir, out, train=train)
    line = refusal(
        capsys,
        "--config",
        str(config),
        "--overwrite_output_dir",
        "true",
        "--check_only",
        check_only,
    )
    assert line.startswith(
        f"error: output_dir {out} holds the run's input train_datasets {train}: "
        "--overwrite_output_dir true would delete it"
    )
    assert "nothing was removed" in line
    assert train.read_bytes() == TRAIN.read_bytes() and (out / "metrics.json").is_file()


@pytest.mark.usefixtures("no_model_loading")
def test_a_registry_dataset_under_a_data_folder_inside_the_output_dir_is_refused(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "out"
    shutil.copytree(STS_DATA, out / "data")
    before = contents(out)
    config = recipe(tmp_path, tiny_bert_dir, out, data_dir=str(out / "data"))
    line = refusal(
        capsys,
        "--config",
        str(config),
        "--overwrite_output_dir",
        "true",
        "--train_datasets",
        "stsb",
    )
    assert f"output_dir {out} holds the run's input data_dir {out / 'data'}" in line
    assert contents(out) == before


def test_every_local_input_is_found_with_its_option(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from sts_core.training.output import run_inputs

    model_args = ModelArguments(model_name_or_path=str(tiny_bert_dir))
    data_args = DataArguments(
        data_dir=str(STS_DATA),
        train_datasets=["stsb", str(TRAIN), "hub/not-a-path"],
        eval_dataset=str(DEV),
        final_eval_datasets=[str(DEV)],
    )
    teacher = tmp_path / "teacher"
    teacher.mkdir()

    class Config:
        teacher_model = str(teacher)
        resume_from_checkpoint = None

    found = run_inputs(model_args, data_args, Config())
    stsb_train = STS_DATA / "senteval" / "STS" / "STSBenchmark" / "sts-train.csv"
    assert found == [
        ("model_name_or_path", tiny_bert_dir),
        ("teacher_model", teacher),
        ("data_dir", STS_DATA),
        ("train_datasets", stsb_train),
        ("train_datasets", TRAIN),
        ("eval_dataset", DEV),
        ("final_eval_datasets", DEV),
    ]


def test_resume_checks_inputs_against_what_the_resume_cleans_and_writes(tmp_path: Path) -> None:
    from sts_core.training.output import check_inputs_outside

    out = tmp_path / "out"
    for folder in (out / "checkpoint-2", out / STAGING_DIR / "checkpoint-4", out / "model"):
        folder.mkdir(parents=True)
    check_inputs_outside(out, [("resume_from_checkpoint", out / "checkpoint-2")], "resume")
    with pytest.raises(ConfigError, match="removes staging folders"):
        staged = out / STAGING_DIR / "checkpoint-4"
        check_inputs_outside(out, [("resume_from_checkpoint", staged)], "resume")
    with pytest.raises(ConfigError, match="holds the run's input model_name_or_path"):
        check_inputs_outside(out, [("model_name_or_path", out / "model")], "resume")
    with pytest.raises(ConfigError, match="holds the run's input resume_from_checkpoint"):
        check_inputs_outside(out, [("resume_from_checkpoint", out / "checkpoint-2")], "replace")


@pytest.mark.parametrize("action", ["new", "replace", "resume"])
def test_output_dir_inside_an_input_folder_is_refused_in_every_mode(
    tmp_path: Path, action: str
) -> None:
    """Issue 61: an output inside an input is refused in every mode (a new run saved its
    model and checkpoints inside the model folder it read, or inside the data folder)."""
    from sts_core.training.output import check_inputs_outside

    model, data = tmp_path / "model", tmp_path / "data"
    (model / "1_Pooling").mkdir(parents=True)
    data.mkdir()
    for name, folder in (("model_name_or_path", model), ("data_dir", data)):
        with pytest.raises(ConfigError, match=f"is inside the run's input {name}"):
            check_inputs_outside(folder / "run", [(name, folder)], action)


def test_paths_are_compared_with_and_without_their_symbolic_links(tmp_path: Path) -> None:
    from sts_core.training.output import check_inputs_outside

    model, elsewhere = tmp_path / "model", tmp_path / "elsewhere"
    model.mkdir()
    elsewhere.mkdir()
    (elsewhere / "train.csv").write_text("pairs", encoding="utf-8")
    link_to_model = tmp_path / "out-link"
    os.symlink(model, link_to_model)
    with pytest.raises(ConfigError, match="is the run's input model_name_or_path"):
        check_inputs_outside(link_to_model, [("model_name_or_path", model)], "new")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(elsewhere / "train.csv", out / "train.csv")  # the user's link would go
    with pytest.raises(ConfigError, match="holds the run's input train_datasets"):
        check_inputs_outside(out, [("train_datasets", out / "train.csv")], "replace")


# ---------------------------------------------------------------------------- item 5
def leave_a_killed_save(out: Path) -> list[str]:
    """What a run killed during its final save (and a checkpoint's) leaves behind."""
    partial = out / f"{PARTIAL_PREFIX}-4242"
    partial.mkdir(parents=True)
    (partial / "model.safetensors").write_bytes(b"half of the weights")
    staged = out / STAGING_DIR / "checkpoint-4"
    staged.mkdir(parents=True)
    (staged / "optimizer.pt").write_bytes(b"half")
    (out / f"{PARTIAL_PREFIX}-4242-metrics.json").write_text("{", encoding="utf-8")
    return sorted(p.name for p in out.iterdir())


def test_a_folder_holding_only_a_killed_save_is_cleaned_and_used_as_new(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "out"
    left = leave_a_killed_save(out)
    config = recipe(tmp_path, tiny_bert_nodropout_dir, out, save_strategy="no")
    assert main(["--config", str(config), "--check_only", "true"]) == 0
    assert "new (removes what a killed run left" in capsys.readouterr().out
    assert set(left) <= {p.name for p in out.iterdir()}  # check_only removes nothing
    status = main(["--config", str(config)])
    assert status == 0, capsys.readouterr().err
    assert not [p for p in out.iterdir() if p.name.startswith((PARTIAL_PREFIX, STAGING_DIR))]
    check_complete_save(out, required=True)
    SentenceEncoder.from_pretrained(out)


@pytest.mark.usefixtures("no_model_loading")
def test_an_earlier_run_without_checkpoints_is_not_told_to_resume_from_one(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "out"
    leave_a_killed_save(out)
    (out / "metrics.json").write_text("{}", encoding="utf-8")
    config = recipe(tmp_path, tiny_bert_dir, out)
    line = refusal(capsys, "--config", str(config))
    assert "holds an earlier run" in line and "--overwrite_output_dir true" in line
    assert "checkpoint" not in line
    (out / "checkpoint-2").mkdir()
    (out / "checkpoint-2" / SAVE_MARKER).write_text("{}", encoding="utf-8")
    (out / "checkpoint-3").mkdir()  # incomplete: no marker
    line = refusal(capsys, "--config", str(config))
    assert f"--resume_from_checkpoint {out / 'checkpoint-2'} to continue it" in line
