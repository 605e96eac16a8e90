"""Saved folders are verified and saves fail cleanly (issue 44, items 3, 5 and 6): the save
marker records a content hash of each file, checked when a folder is loaded (to evaluate,
as a teacher, for a soup, to resume); a staging folder is named as one; a save that fails
while writing (a full disk, a file-size limit) names the folder and publishes nothing; a
save interrupted at any step of publishing over a complete one never loads as a mix."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from sts_core.cli import eval_main
from sts_core.encoder import SentenceEncoder
from sts_core.saving import (
    PARTIAL_PREFIX,
    SAVE_MARKER,
    STAGING_DIR,
    IncompleteSaveError,
    add_training_files,
    check_complete_save,
    publish_folder,
)
from sts_core.testing import make_tiny_bert, one_line_error, write_fixture_recipe
from sts_core.training.output import check_resume_checkpoint
from sts_core.training.parser import ConfigError
from sts_core.training.run import main as train_main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures"
STS_DATA = FIXTURES / "data"
TRAIN = FIXTURES / "training" / "sts-train.csv"
DEV = FIXTURES / "training" / "sts-dev.csv"
# what torch says when a write fails on a full disk or past a file-size limit
TORCH_WRITE_FAILURE = "[enforce fail at inline_container.cc:671] . unexpected pos 576 vs 534"


def saved(folder: Path, backbone: Path, **settings) -> Path:
    SentenceEncoder.from_pretrained(backbone, **settings).save_pretrained(folder)
    return folder


def zero_in_place(path: Path, start: int, length: int) -> None:
    """Overwrite ``length`` bytes of ``path`` from ``start`` with zeros: the size is kept."""
    with path.open("r+b") as handle:
        handle.seek(start)
        handle.write(bytes(length))


def damage_weights(folder: Path) -> None:
    """Zero the second half of the tensors of ``folder``'s model.safetensors, in place."""
    weights = folder / "model.safetensors"
    size = weights.stat().st_size
    zero_in_place(weights, size // 2, size - size // 2)


def errors_of(err: str, prefix: str) -> list[str]:
    assert "Traceback" not in err, err
    return [line for line in err.splitlines() if line.startswith(prefix)]


def state_of(folder: Path) -> tuple[dict[str, torch.Tensor], dict]:
    encoder = SentenceEncoder.from_pretrained(folder)
    return encoder.state_dict(), encoder.settings()


def same_state(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> bool:
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


# ----------------------------------------------------------------- content hashes (item 3)
def test_weights_zeroed_in_place_at_the_same_size_are_refused_naming_the_file(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """The content check alone catches it: the size is the save's and transformers loads
    the damaged file without a word (the probe's 82.85 instead of 83.70, exit 0)."""
    from transformers import AutoModel

    folder = saved(tmp_path / "model", tiny_bert_dir)
    marker = json.loads((folder / SAVE_MARKER).read_text(encoding="utf-8"))
    assert marker["content_hash"] == "xxh3_128"
    assert set(marker["hashes"]) == set(marker["files"]) - {"README.md"}
    size = (folder / "model.safetensors").stat().st_size
    zero_in_place(folder / "model.safetensors", size - 4096, 4096)
    assert (folder / "model.safetensors").stat().st_size == marker["files"]["model.safetensors"]
    AutoModel.from_pretrained(folder)  # no other check notices
    with pytest.raises(IncompleteSaveError) as error:
        SentenceEncoder.from_pretrained(folder)
    message = str(error.value)
    assert message.startswith(f"{folder}: model.safetensors does not match its save (content ")
    assert "the file was changed after the save" in message


def test_sts_eval_refuses_damaged_weights_with_one_line(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    """Heavily damaged weights ended in "x is constant: the correlation is undefined"."""
    folder = saved(tmp_path / "model", tiny_bert_dir)
    capsys.readouterr()
    damage_weights(folder)
    argv = ["--model", str(folder), "--data-dir", str(STS_DATA), "--tasks", "stsb", "--quiet"]
    assert eval_main(argv) == 2
    (line,) = errors_of(capsys.readouterr().err, "sts-eval: error: ")
    assert line.startswith(f"sts-eval: error: {folder}: model.safetensors does not match its save")


def test_a_file_changed_after_a_first_check_is_hashed_again(saved_model: Path) -> None:
    """A folder checked twice is hashed once, but a change in between is still seen."""
    check_complete_save(saved_model, required=True)
    zero_in_place(saved_model / "tokenizer.json", 0, 16)
    with pytest.raises(IncompleteSaveError, match="tokenizer.json does not match its save"):
        check_complete_save(saved_model, required=True)


def test_a_folder_checked_twice_is_hashed_once(saved_model: Path, monkeypatch) -> None:
    import xxhash

    calls = []
    real = xxhash.xxh3_128

    def counted(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(xxhash, "xxh3_128", counted)
    copy = saved_model.with_name("copy")
    shutil.copytree(saved_model, copy)  # new files: not hashed by this process yet
    check_complete_save(copy, required=True)
    hashed = len(calls)
    marker = json.loads((copy / SAVE_MARKER).read_text(encoding="utf-8"))
    assert hashed == len(marker["hashes"])
    SentenceEncoder.from_pretrained(copy)  # checks the folder twice more
    assert len(calls) == hashed


def test_a_marker_with_sizes_only_keeps_loading(saved_model: Path) -> None:
    """Folders saved before content hashes: their sizes are checked as before."""
    marker_path = saved_model / SAVE_MARKER
    marker = json.loads(marker_path.read_text(encoding="utf-8"))
    del marker["hashes"], marker["content_hash"]
    marker_path.write_text(json.dumps(marker), encoding="utf-8")
    SentenceEncoder.from_pretrained(saved_model)
    weights = saved_model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(IncompleteSaveError, match="model.safetensors has 100 bytes"):
        SentenceEncoder.from_pretrained(saved_model)


def test_a_resume_checks_the_content_of_the_training_state(saved_model: Path) -> None:
    """optimizer.pt written over in place at its size: the model loads, the resume is
    refused naming the file."""
    torch.save({"state": torch.arange(64.0)}, saved_model / "optimizer.pt")
    add_training_files(saved_model, step=4)
    check_resume_checkpoint(str(saved_model))
    optimizer = saved_model / "optimizer.pt"
    zero_in_place(optimizer, optimizer.stat().st_size - 300, 200)
    SentenceEncoder.from_pretrained(saved_model)  # the model files are intact
    with pytest.raises(ConfigError) as error:
        check_resume_checkpoint(str(saved_model))
    assert str(error.value).startswith(
        f"resume_from_checkpoint: {saved_model}: optimizer.pt does not match its save"
    )


def test_a_damaged_teacher_is_refused_before_training(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    teacher = saved(tmp_path / "teacher", tiny_bert_nodropout_dir)
    damage_weights(teacher)
    out = tmp_path / "out"
    config = write_fixture_recipe(
        tmp_path / "recipe.yaml",
        "a damaged teacher",
        tiny_bert_nodropout_dir,
        TRAIN,
        DEV,
        out,
        score_range="[0, 5]",
        teacher_model=str(teacher),
    )
    capsys.readouterr()
    assert train_main(["--config", str(config)]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert f"teacher's {teacher}: model.safetensors does not match its save" in line
    assert not out.exists()


@pytest.fixture
def saved_model(tiny_bert_dir: Path, tmp_path: Path) -> Path:
    return saved(tmp_path / "model", tiny_bert_dir)


# ----------------------------------------------------------------- staging folders (item 4)
def test_sts_eval_names_a_staging_folder_as_one(
    saved_model: Path, tiny_bert_dir: Path, capsys
) -> None:
    """A save killed while writing leaves ``.sts-partial-<pid>`` with half-written files:
    it was read as a model ("Expecting value: line 1 column 1")."""
    staging = saved_model / f"{PARTIAL_PREFIX}-4242"
    staging.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        shutil.copy(tiny_bert_dir / name, staging / name)
    (staging / "tokenizer_config.json").write_text("", encoding="utf-8")  # killed here
    argv = ["--model", str(staging), "--data-dir", str(STS_DATA), "--tasks", "stsb", "--quiet"]
    capsys.readouterr()
    assert eval_main(argv) == 2
    (line,) = errors_of(capsys.readouterr().err, "sts-eval: error: ")
    assert line == (
        f"sts-eval: error: {staging}: the staging folder of an interrupted save "
        f"({staging.name} is where a save into {saved_model} writes before it is "
        f"published), not a saved model: load {saved_model}, whose save completed"
    )


def test_a_checkpoint_staging_folder_is_not_resumed_from(saved_model: Path) -> None:
    """``.sts-staging/checkpoint-N`` marked complete but not yet renamed into place (a kill
    between the two): a resume would read it, and then remove it as a leftover."""
    output = saved_model.parent / "run"
    complete = output / "checkpoint-2"
    shutil.copytree(saved_model, complete)
    staged = output / STAGING_DIR / "checkpoint-4"
    shutil.copytree(saved_model, staged)
    with pytest.raises(ConfigError) as error:
        check_resume_checkpoint(str(staged))
    assert str(error.value) == (
        f"resume_from_checkpoint: {staged}: the staging folder of an interrupted save "
        f"({STAGING_DIR} is where a save into {output} writes before it is published), not "
        f"a saved model: load a complete save; the last complete checkpoint is {complete}"
    )


# ----------------------------------------------------------------- a write that fails (item 3)
def fail_on(path_end: str, real: Callable) -> Callable:
    """``torch.save`` that fails as on a full disk when it writes a file named ``path_end``."""

    def save(obj, target, *args, **kwargs):
        if str(target).endswith(path_end):
            raise RuntimeError(TORCH_WRITE_FAILURE)
        return real(obj, target, *args, **kwargs)

    return save


def test_a_save_that_fails_while_writing_publishes_nothing(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    folder = saved(tmp_path / "model", tiny_bert_dir)
    old_state, _ = state_of(folder)
    encoder = SentenceEncoder.from_pretrained(make_tiny_bert(tmp_path / "other", seed=1))
    monkeypatch.setattr(torch, "save", fail_on("extra.bin", torch.save))
    with pytest.raises(OSError) as error:  # SaveError
        encoder.save_pretrained(
            folder, write_extra=lambda staging: torch.save({}, staging / "extra.bin")
        )
    assert str(error.value).startswith(
        f"{folder}: the save failed ({' '.join(TORCH_WRITE_FAILURE.split())}: a full disk or "
        "a file-size limit; "
    )
    assert str(error.value).endswith(
        "GB free on its disk): nothing of it was published (an earlier save there is unchanged)"
    )
    assert not list(folder.glob(f"{PARTIAL_PREFIX}*"))
    assert same_state(state_of(folder)[0], old_state)


FILE_SIZE_LIMIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the process is killed, not refused
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from sts_core.soup import main
sys.exit(main(sys.argv[2:]))
"""


def test_a_file_size_limit_during_a_soup_s_save_is_one_line(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """A real limit (RLIMIT_FSIZE): safetensors' "File too large" was a traceback; the
    earlier soup in --output stays complete and loadable."""
    runs = [
        str(saved(tmp_path / f"seed{s}", make_tiny_bert(tmp_path / f"b{s}", seed=s)))
        for s in (0, 1)
    ]
    output = tmp_path / "soup"
    shutil.copytree(runs[0], output)  # an earlier save there
    old_state, _ = state_of(output)
    limit = (output / "model.safetensors").stat().st_size // 2
    argv = [sys.executable, "-c", FILE_SIZE_LIMIT, str(limit), *runs, "--output", str(output)]
    result = subprocess.run([*argv, "--overwrite"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    (line,) = errors_of(result.stderr, "sts-soup: error: ")
    assert line.startswith(f"sts-soup: error: {output}: the save failed (")
    assert "File too large" in line and "nothing of it was published" in line
    assert not list(output.glob(f"{PARTIAL_PREFIX}*"))
    assert same_state(state_of(output)[0], old_state)


def test_a_checkpoint_that_fails_while_writing_stops_the_run_with_one_line(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    out = tmp_path / "out"
    config = write_fixture_recipe(
        tmp_path / "recipe.yaml",
        "a full disk at checkpoint 4",
        tiny_bert_nodropout_dir,
        TRAIN,
        DEV,
        out,
        score_range="[0, 5]",
    )
    monkeypatch.setattr(torch, "save", fail_on("checkpoint-4/optimizer.pt", torch.save))
    capsys.readouterr()
    assert train_main(["--config", str(config)]) == 2
    (line,) = errors_of(capsys.readouterr().err, "error: ")
    assert line.startswith(f"error: {out / 'checkpoint-4'}: the save failed (")
    assert "unexpected pos" in line
    assert line.endswith("nothing of it was published; the earlier checkpoints are unchanged")
    assert not (out / "checkpoint-4").exists() and not (out / STAGING_DIR).exists()
    check_complete_save(out / "checkpoint-2", required=True, training=True)
    SentenceEncoder.from_pretrained(out / "checkpoint-2")


# ----------------------------------------------------------------- interrupted publishing (item 6)
class Interrupted(BaseException):
    """A kill at one step of publishing (not an Exception: nothing may catch it)."""


def interrupt_at(monkeypatch, step: int | None) -> list[str]:
    """Count the steps of publishing — each open, write, fsync, close, rename and removal,
    all of which go through :data:`sts_core.command_files.OPS` — and raise :class:`Interrupted` at
    ``step`` (1-based, once). Returns the steps seen."""
    from sts_core import command_files as files

    seen: list[str] = []

    def counted(kind: str, real: Callable) -> Callable:
        def call(*args, **kwargs):
            name = (
                Path(args[-1] if kind == "replace" else args[0]).name
                if kind in ("open", "replace", "unlink", "rmtree")
                else str(args[0])
            )
            seen.append(f"{kind} {name}")
            if len(seen) == step:
                raise Interrupted
            return real(*args, **kwargs)

        return call

    for kind in ("open", "write", "fsync", "close", "replace", "unlink", "rmtree"):
        monkeypatch.setattr(files.OPS, kind, counted(kind, getattr(files.OPS, kind)))
    return seen


def old_and_new(tmp_path: Path) -> tuple[Path, SentenceEncoder]:
    """A folder holding a complete save (mean pooling, no head) and another encoder (other
    weights, cls pooling, a head: files the old save does not have)."""
    from torch import nn

    template = saved(tmp_path / "template", make_tiny_bert(tmp_path / "old-b", seed=0))
    new = SentenceEncoder.from_pretrained(make_tiny_bert(tmp_path / "new-b", seed=1), pooling="cls")
    new.add_module("head", nn.Linear(new.dimension, 2))
    return template, new


def test_a_save_interrupted_at_each_step_of_publishing_never_loads_a_mix(
    tmp_path: Path, monkeypatch
) -> None:
    template, new = old_and_new(tmp_path)
    old_state, old_settings = state_of(template)
    reference = tmp_path / "reference"
    shutil.copytree(template, reference)
    new.save_pretrained(reference)
    new_state, new_settings = state_of(reference)
    steps = interrupt_at(monkeypatch, None)
    new.save_pretrained(tmp_path / "count")  # over nothing: fewer removals than over a save
    shutil.rmtree(tmp_path / "count")
    steps.clear()
    shutil.copytree(template, tmp_path / "count")
    new.save_pretrained(tmp_path / "count")
    total = len(steps)
    monkeypatch.undo()
    assert total > 10, steps
    outcomes = set()
    for step in range(1, total + 1):
        folder = tmp_path / f"interrupted-{step}"
        shutil.copytree(template, folder)
        interrupt_at(monkeypatch, step)
        with pytest.raises(Interrupted):
            new.save_pretrained(folder)
        monkeypatch.undo()
        try:
            state, settings = state_of(folder)
        except IncompleteSaveError:
            outcomes.add("refused")
        else:
            old = same_state(state, old_state) and settings == old_settings
            whole_new = same_state(state, new_state) and settings == new_settings
            assert old or whole_new, f"interrupted at step {step}: a mix loaded"
            outcomes.add("old" if old else "new")
        new.save_pretrained(folder)  # the next save succeeds
        state, settings = state_of(folder)
        assert same_state(state, new_state) and settings == new_settings, step
        assert not list(folder.glob(f"{PARTIAL_PREFIX}*")), step
    assert {"refused", "old"} <= outcomes, outcomes


def test_a_checkpoint_published_over_an_older_one_is_never_a_mix(
    tmp_path: Path, monkeypatch
) -> None:
    """publish_folder replacing a checkpoint-N (a resumed run saving the same step again):
    at every step the folder is the old checkpoint, the new one, absent or refused."""
    template, new = old_and_new(tmp_path)
    add_training_files(template, step=4)
    old_state, old_settings = state_of(template)
    new_template = tmp_path / "new-template"
    new.save_pretrained(new_template)
    add_training_files(new_template, step=4)
    new_state, new_settings = state_of(new_template)
    steps = interrupt_at(monkeypatch, None)
    shutil.copytree(template, tmp_path / "count" / "checkpoint-4")
    shutil.copytree(new_template, tmp_path / "count" / STAGING_DIR / "checkpoint-4")
    publish_folder(
        tmp_path / "count" / STAGING_DIR / "checkpoint-4", tmp_path / "count" / "checkpoint-4"
    )
    monkeypatch.undo()
    for step in range(1, len(steps) + 1):
        run = tmp_path / f"run-{step}"
        final, staged = run / "checkpoint-4", run / STAGING_DIR / "checkpoint-4"
        shutil.copytree(template, final)
        shutil.copytree(new_template, staged)
        interrupt_at(monkeypatch, step)
        with pytest.raises(Interrupted):
            publish_folder(staged, final)
        monkeypatch.undo()
        try:
            check_complete_save(final, required=True, training=True)
            state, settings = state_of(final)
        except IncompleteSaveError:  # refused, or not there
            pass
        else:
            old = same_state(state, old_state) and settings == old_settings
            whole_new = same_state(state, new_state) and settings == new_settings
            assert old or whole_new, f"interrupted at step {step}: a mix loaded"
        shutil.rmtree(run / STAGING_DIR)
        shutil.copytree(new_template, staged)
        publish_folder(staged, final)  # the next save succeeds
        check_complete_save(final, required=True, training=True)
        assert same_state(state_of(final)[0], new_state), step
