"""Nothing silently wrong (training side): bad input stops before the work with one line,
saves are atomic, output folders are guarded, degenerate batches are counted.

Each test names the case of the issue it covers (#N)."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from sts_core.command_files import INTERRUPTED, LEDGER_NAME, write_bytes
from sts_core.encoder import SentenceEncoder, check_model_location
from sts_core.saving import (
    SAVE_MARKER,
    STAGING_DIR,
    IncompleteSaveError,
    check_complete_save,
    write_save_marker,
)
from sts_core.testing import write_fixture_recipe
from sts_core.training.output import LOCK_NAME
from sts_core.training.parser import ConfigError, read_recipe
from sts_core.training.run import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"
TRAIN = FIXTURES / "sts-train.csv"
DEV = FIXTURES / "sts-dev.csv"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
)


def recipe(tmp_path: Path, model: Path, output_dir: Path | None = None, **overrides: str) -> Path:
    settings = {"score_range": "[0, 5]", **overrides}
    output_dir = output_dir or tmp_path / "out"
    return write_fixture_recipe(
        tmp_path / "recipe.yaml", "reliability", model, TRAIN, DEV, output_dir, **settings
    )


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_one_line_error(err: str, *fragments: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def copy_without_tokenizer(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    for name in TOKENIZER_FILES:
        (target / name).unlink(missing_ok=True)
    return target


# ----------------------------------------------------------------- checked before the work
@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--per_device_train_batch_size", "0", "per_device_train_batch_size must be at least 1"),
        ("--per_device_train_batch_size", "-4", "per_device_train_batch_size"),
        ("--per_device_eval_batch_size", "0", "per_device_eval_batch_size"),
        ("--max_seq_length", "0", "max_seq_length must be at least 1"),  # #8: was the default
        ("--pooling", "maen", "unknown pooling mode 'maen'"),  # #7
        ("--prompt", "no slot here", "[X]"),  # #7
        ("--final_sts_tasks", "sts17", "unknown task(s) sts17"),  # #6
        ("--model_dtype", "float16", "float16 weights cannot be trained"),  # #4
        ("--model_dtype", "float64", "model_dtype 'float64'"),
        ("--fp16", "true", "fp16: true needs a GPU"),  # #4 (no GPU here)
    ],
)
def test_bad_settings_stop_before_anything_is_written(
    tiny_bert_dir: Path, tmp_path: Path, capsys, flag: str, value: str, fragment: str
) -> None:
    status, _, err = run(capsys, "--config", str(recipe(tmp_path, tiny_bert_dir)), flag, value)
    assert status == 2
    assert_one_line_error(err, fragment)
    assert not (tmp_path / "out").exists()


def test_final_eval_dataset_that_does_not_exist_fails_before_training(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:  # #6
    config = recipe(tmp_path, tiny_bert_dir, final_eval_datasets="[/nope/pairs.csv]")
    status, _, err = run(capsys, "--config", str(config))
    assert status == 2
    assert_one_line_error(err, "/nope/pairs.csv")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("rows", "fragment"),
    [
        (["a man plays\ta man plays a guitar\t3.0", "the dog runs\ta cat runs\t3.0"], "dev"),
        (["a man plays\ta man plays a guitar\t3.0"], "dev"),
    ],
)
def test_constant_or_one_row_dev_set_fails_before_training(
    tiny_bert_dir: Path, tmp_path: Path, capsys, rows: list[str], fragment: str
) -> None:  # #6
    dev = tmp_path / "dev.csv"
    dev.write_text(
        "".join(
            f"main-captions\tMSRvid\t2012test\t{i}\t{row.split(chr(9))[2]}\t"
            f"{row.split(chr(9))[0]}\t{row.split(chr(9))[1]}\n"
            for i, row in enumerate(rows)
        ),
        encoding="utf-8",
    )
    config = recipe(tmp_path, tiny_bert_dir, eval_dataset=str(dev))
    status, _, err = run(capsys, "--config", str(config))
    assert status == 2
    assert_one_line_error(err, fragment)
    assert not (tmp_path / "out").exists()


def test_model_folder_without_tokenizer_is_refused(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:  # #2
    broken = copy_without_tokenizer(tiny_bert_dir, tmp_path / "no-tokenizer")
    with pytest.raises(FileNotFoundError, match="no tokenizer files"):
        check_model_location(broken)
    with pytest.raises(FileNotFoundError, match="no tokenizer files"):
        SentenceEncoder.from_pretrained(broken)
    status, _, err = run(capsys, "--config", str(recipe(tmp_path, broken)))
    assert status == 2
    assert_one_line_error(err, "no tokenizer files", str(broken))


def test_tokenizer_far_smaller_than_the_model_vocabulary_is_refused(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:  # #2: transformers builds a few-token tokenizer when vocab files are missing
    folder = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, folder)
    (folder / "tokenizer.json").unlink(missing_ok=True)
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
    with pytest.raises(OSError, match="tokenizer has 5 tokens"):
        SentenceEncoder.from_pretrained(folder)


def test_encode_refuses_batch_size_below_one(tiny_bert_dir: Path) -> None:  # #1
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    for bad in (0, -4):
        with pytest.raises(ValueError, match="batch_size must be an integer ≥ 1"):
            encoder.encode(["a man plays"], batch_size=bad)


def test_max_length_zero_is_refused_not_replaced(tiny_bert_dir: Path) -> None:  # #8
    with pytest.raises(ValueError, match="max_length must be at least 1"):
        SentenceEncoder.from_pretrained(tiny_bert_dir, max_length=0)


def test_check_only_reads_everything_and_writes_nothing(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    config = recipe(tmp_path, tiny_bert_dir, final_eval_datasets=f"[{DEV}]")
    status, out, err = run(capsys, "--config", str(config), "--check_only", "true")
    assert status == 0, err
    assert "nothing was loaded or trained" in out
    assert "training data: 16 pairs" in out and "output_dir:" in out
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------- recipes without the variables
def test_models_dir_unset_and_hub_unreachable_names_the_variable(
    tmp_path: Path, monkeypatch
) -> None:  # #10
    monkeypatch.delenv("STS_MODELS_DIR", raising=False)
    monkeypatch.setattr("sts_core.data.hub.hub_reachable", lambda timeout=3.0: False)
    path = tmp_path / "r.yaml"
    path.write_text("model_name_or_path: ${STS_MODELS_DIR}/all-MiniLM-L6-v2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="set STS_MODELS_DIR") as error:
        read_recipe(path)
    assert "\n" not in str(error.value)


def test_models_dir_unset_falls_back_to_the_hub_id_when_reachable(
    tmp_path: Path, monkeypatch
) -> None:  # #10
    monkeypatch.delenv("STS_MODELS_DIR", raising=False)
    monkeypatch.setattr("sts_core.data.hub.hub_reachable", lambda timeout=3.0: True)
    path = tmp_path / "r.yaml"
    path.write_text("model_name_or_path: ${STS_MODELS_DIR}/all-MiniLM-L6-v2\n", encoding="utf-8")
    assert read_recipe(path) == {"model_name_or_path": "sentence-transformers/all-MiniLM-L6-v2"}


def test_hub_id_without_the_hub_fails_at_once(monkeypatch) -> None:  # #9
    monkeypatch.setattr("sts_core.data.hub.hub_reachable", lambda timeout=3.0: False)
    monkeypatch.setattr("sts_core.encoder.location._in_hub_cache", lambda model_id: False)
    with pytest.raises(FileNotFoundError, match="STS_MODELS_DIR"):
        check_model_location("sentence-transformers/all-MiniLM-L6-v2")


def test_hub_id_in_the_local_cache_is_accepted_offline(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("sts_core.encoder.location._in_hub_cache", lambda model_id: True)
    assert check_model_location("org/cached-model") == "org/cached-model"


@pytest.mark.parametrize(
    ("variables", "main_process"),
    [
        ({}, True),
        ({"RANK": "1"}, False),
        ({"OMPI_COMM_WORLD_RANK": "2"}, False),
        ({"SLURM_PROCID": "0"}, True),
        ({"PMI_RANK": "3"}, False),
    ],
)
def test_main_process_from_the_launchers_variables(
    monkeypatch, variables: dict[str, str], main_process: bool
) -> None:
    from sts_core.distributed import RANK_VARIABLES, is_main_process

    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert is_main_process() is main_process


# ----------------------------------------------------------------- atomic saves (#3)
@pytest.fixture
def saved_encoder(tiny_bert_dir: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "saved"
    SentenceEncoder.from_pretrained(tiny_bert_dir).save_pretrained(folder)
    return folder


def test_save_writes_the_marker_last_with_every_file(saved_encoder: Path) -> None:
    marker = json.loads((saved_encoder / SAVE_MARKER).read_text(encoding="utf-8"))
    assert "model.safetensors" in marker["files"] and "sts_encoder_config.json" in marker["files"]
    assert not any(p.name.startswith(".sts-partial") for p in saved_encoder.iterdir())
    check_complete_save(saved_encoder, required=True)


def test_save_interrupted_midway_is_refused(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    """A kill while the files are moved into place: the folder is never loaded."""
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    real_replace, calls = os.replace, []

    def dies_on_the_third_file(source, target):
        calls.append(target)
        if len(calls) == 3:
            raise KeyboardInterrupt  # as a kill would stop it
        return real_replace(source, target)

    monkeypatch.setattr("sts_core.command_files.OPS.replace", dies_on_the_third_file)
    with pytest.raises(KeyboardInterrupt):
        encoder.save_pretrained(tmp_path / "half")
    monkeypatch.undo()
    assert (tmp_path / "half" / "sts_encoder_config.json").is_file()
    with pytest.raises(IncompleteSaveError, match="incomplete save"):
        SentenceEncoder.from_pretrained(tmp_path / "half")


def test_the_model_card_may_be_edited(saved_encoder: Path) -> None:
    (saved_encoder / "README.md").write_text("my notes", encoding="utf-8")
    SentenceEncoder.from_pretrained(saved_encoder)


def test_folder_altered_after_the_save_is_refused_naming_the_file(saved_encoder: Path) -> None:
    weights = saved_encoder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # truncated
    with pytest.raises(IncompleteSaveError, match="model.safetensors has 100 bytes"):
        SentenceEncoder.from_pretrained(saved_encoder)


def test_truncated_weights_in_a_plain_folder_name_the_folder(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:  # #7: a plain transformers folder (no marker)
    folder = tmp_path / "plain"
    shutil.copytree(tiny_bert_dir, folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(OSError, match=f"could not load model folder {folder}"):
        SentenceEncoder.from_pretrained(folder)


def test_saved_files_have_ordinary_permissions(saved_encoder: Path) -> None:  # #9
    mask = os.umask(0)
    os.umask(mask)
    for path in saved_encoder.rglob("*"):
        if path.is_file():
            assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path


def test_a_second_save_removes_files_the_first_wrote(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from torch import nn

    folder = tmp_path / "saved"
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    encoder.add_module("head", nn.Linear(encoder.dimension, 2))
    encoder.save_pretrained(folder)
    assert (folder / "sts_extra_modules.safetensors").is_file()
    SentenceEncoder.from_pretrained(tiny_bert_dir).save_pretrained(folder)
    assert not (folder / "sts_extra_modules.safetensors").exists()
    check_complete_save(folder, required=True)


# ----------------------------------------------------------------- output folders (#5)
def test_output_dir_with_an_earlier_run_is_refused(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    config = recipe(tmp_path, tiny_bert_nodropout_dir)
    assert run(capsys, "--config", str(config))[0] == 0
    before = sorted(p.name for p in (tmp_path / "out").iterdir())
    status, _, err = run(capsys, "--config", str(config))
    assert status == 2
    assert_one_line_error(err, "holds an earlier run", "--overwrite_output_dir")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == before


def test_overwrite_output_dir_replaces_the_earlier_run(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    # an earlier run's files: a head file its ledger records, a checkpoint with its marker
    write_bytes(out / "sts_extra_modules.safetensors", b"a softmax head of an earlier run")
    (out / "checkpoint-99").mkdir()
    write_save_marker(out / "checkpoint-99")
    config = recipe(tmp_path, tiny_bert_nodropout_dir)
    status, _, err = run(capsys, "--config", str(config), "--overwrite_output_dir", "true")
    assert status == 0, err
    assert not (out / "sts_extra_modules.safetensors").exists()
    assert not (out / "checkpoint-99").exists()
    SentenceEncoder.from_pretrained(out)


@pytest.mark.parametrize("check_only", ["false", "true"])
def test_overwrite_output_dir_keeps_what_sts_core_did_not_write(
    tiny_bert_dir: Path, tmp_path: Path, capsys, check_only: str
) -> None:
    """Issue 61: --overwrite_output_dir removed everything in the folder (a user's notes
    beside an earlier run went too); now it removes only what sts-core wrote."""
    out = tmp_path / "out"
    out.mkdir()
    write_bytes(out / "metrics.json", b"{}")  # the earlier run's
    (out / "notes.txt").write_text("my notes", encoding="utf-8")  # the user's
    config = recipe(tmp_path, tiny_bert_dir)
    status, _, err = run(
        capsys,
        "--config",
        str(config),
        "--overwrite_output_dir",
        "true",
        "--check_only",
        check_only,
    )
    assert status == 2
    assert_one_line_error(err, "holds files sts-core did not write (notes.txt)")
    # left as it was (the lock the check took is gone with it)
    assert sorted(p.name for p in out.iterdir()) == [LEDGER_NAME, "metrics.json", "notes.txt"]


def test_a_second_concurrent_run_is_refused(tiny_bert_dir: Path, tmp_path: Path, capsys) -> None:
    from filelock import FileLock

    out = tmp_path / "out"
    out.mkdir()
    with FileLock(str(out / LOCK_NAME)):  # what the first run holds while it trains
        status, _, err = run(capsys, "--config", str(recipe(tmp_path, tiny_bert_dir)))
    assert status == 2
    assert_one_line_error(err, "is in use by another run")


def test_checkpoints_are_complete_and_rotated(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    config = recipe(tmp_path, tiny_bert_nodropout_dir, save_steps="1", save_total_limit="2")
    assert run(capsys, "--config", str(config))[0] == 0
    out = tmp_path / "out"
    kept = sorted(p.name for p in out.glob("checkpoint-*"))
    assert len(kept) == 2 and "checkpoint-4" in kept
    assert not (out / STAGING_DIR).exists()
    check_complete_save(out / "checkpoint-4", required=True)
    marker = json.loads((out / "checkpoint-4" / SAVE_MARKER).read_text(encoding="utf-8"))
    assert "model.safetensors" in marker["files"]
    assert {"optimizer.pt", "trainer_state.json"} <= set(marker["training_files"])
    state = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text(encoding="utf-8"))
    assert STAGING_DIR not in json.dumps(state)
    check_complete_save(out)  # the final model


def test_resume_from_an_incomplete_checkpoint_names_the_problem(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    config = recipe(tmp_path, tiny_bert_nodropout_dir, save_total_limit="2")
    assert run(capsys, "--config", str(config))[0] == 0
    checkpoint = tmp_path / "out" / "checkpoint-2"
    (checkpoint / "optimizer.pt").write_bytes(b"rewritten in place by another run")
    SentenceEncoder.from_pretrained(checkpoint)  # the model files are intact: it loads
    capsys.readouterr()
    status, _, err = run(
        capsys, "--config", str(config), "--resume_from_checkpoint", str(checkpoint)
    )
    assert status == 2
    assert_one_line_error(err, "optimizer.pt has", str(checkpoint))
    (checkpoint / SAVE_MARKER).unlink()
    status, _, err = run(
        capsys, "--config", str(config), "--resume_from_checkpoint", str(checkpoint)
    )
    assert status == 2
    assert_one_line_error(err, "incomplete save", "the last complete checkpoint is")


def test_run_killed_while_saving_a_checkpoint_resumes_from_the_last_complete_one(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    from sts_core.training import checkpoints as trainer_module

    config = recipe(tmp_path, tiny_bert_nodropout_dir)
    real_publish = trainer_module.publish_folder

    def killed_at_step_four(staged: Path, final: Path) -> None:
        if final.name == "checkpoint-4":
            raise KeyboardInterrupt
        real_publish(staged, final)

    monkeypatch.setattr(trainer_module, "publish_folder", killed_at_step_four)
    assert main(["--config", str(config)]) == INTERRUPTED  # one line, exit 130
    monkeypatch.undo()
    out = tmp_path / "out"
    assert (out / STAGING_DIR / "checkpoint-4").is_dir()
    assert not (out / "checkpoint-4").exists()
    with pytest.raises(OSError, match="no config.json|incomplete"):
        SentenceEncoder.from_pretrained(out)  # no final model there
    status, _, err = run(
        capsys, "--config", str(config), "--resume_from_checkpoint", str(out / "checkpoint-2")
    )
    assert status == 0, err
    assert not (out / STAGING_DIR).exists()
    check_complete_save(out / "checkpoint-4", required=True)
    SentenceEncoder.from_pretrained(out)
