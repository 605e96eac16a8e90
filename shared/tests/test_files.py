"""The one door for a command's files (issue 61, item 1): atomic writes interrupted at each
step leave the old file or the new one; the steps come in an order that survives a power
loss (each swap or drop of two steps fails a test here); the ledger says which files the
project wrote; a declared output never overwrites an input or a file the project did not
write."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sts_core import command_files as files
from sts_core.command_files import (
    LEDGER_NAME,
    CommandFiles,
    FilesError,
    read_ledger,
    write_bytes,
    write_json,
    writing,
    written_by_project,
)

STEPS = ("open", "write", "fsync", "close", "replace", "unlink", "rmtree")


class Interrupted(BaseException):
    """A kill at one step (not an Exception: nothing may catch it)."""


def spy(monkeypatch, fail_at: int | None = None) -> list[tuple[str, str]]:
    """Record each step of :data:`files.OPS` as (kind, what: a path's name or the path an
    open handle was opened on); raise :class:`Interrupted` at step ``fail_at`` (1-based)."""
    seen: list[tuple[str, str]] = []
    handles: dict[int, str] = {}

    def counted(kind: str, real: Callable) -> Callable:
        def call(*args, **kwargs):
            first = args[-1] if kind == "replace" else args[0]
            what = handles.get(first, "?") if isinstance(first, int) else Path(first).name
            seen.append((kind, what))
            if len(seen) == fail_at:
                raise Interrupted
            result = real(*args, **kwargs)
            if kind == "open":
                handles[result] = Path(args[0]).name or str(args[0])
            return result

        return call

    for kind in STEPS:
        monkeypatch.setattr(files.OPS, kind, counted(kind, getattr(files.OPS, kind)))
    return seen


def write_new(path: Path, writer: str = "write_bytes") -> None:
    if writer == "write_bytes":
        write_bytes(path, b"new content")
    else:
        with writing(path) as temporary:
            temporary.write_bytes(b"new content")


def steps_of_a_write(
    tmp_path: Path, monkeypatch, writer: str = "write_bytes"
) -> list[tuple[str, str]]:
    target = tmp_path / f"count-{writer}" / "result.json"
    target.parent.mkdir()
    write_bytes(target, b"old")
    seen = spy(monkeypatch)
    write_new(target, writer)
    monkeypatch.undo()
    return seen


# ------------------------------------------------------------------ interrupted at each step
@pytest.mark.parametrize("writer", ["write_bytes", "writing"])
def test_a_write_interrupted_at_each_step_leaves_the_old_file_or_the_new(
    tmp_path: Path, monkeypatch, writer: str
) -> None:
    total = len(steps_of_a_write(tmp_path, monkeypatch, writer))
    assert total >= 8  # the file's open, write, fsync, close, rename; the folder's sync; …
    outcomes = set()
    for step in range(1, total + 1):
        folder = tmp_path / f"at-{step}"
        folder.mkdir()
        target = folder / "result.json"
        write_bytes(target, b"old")
        spy(monkeypatch, fail_at=step)
        with pytest.raises(Interrupted):
            write_new(target, writer)
        monkeypatch.undo()
        content = target.read_bytes()
        assert content in (b"old", b"new content"), (step, content)
        outcomes.add(content)
        left = sorted(p.name for p in folder.iterdir() if p.name.startswith(".sts-partial"))
        assert left == [], (step, left)  # the temporary file is removed on the way out
        ours = written_by_project(target)  # the ledger never vouches for other content
        entry = read_ledger(folder).get("result.json")
        assert ours is None or entry["size"] == len(content), step
    assert outcomes == {b"old", b"new content"}


def test_a_writer_that_fails_half_way_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "table.csv"
    write_bytes(target, b"a,b\n1,2\n")
    with pytest.raises(RuntimeError), writing(target) as temporary:
        temporary.write_bytes(b"a,b\n3,")
        raise RuntimeError("the writer failed")
    assert target.read_bytes() == b"a,b\n1,2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [LEDGER_NAME, "table.csv"]


# ------------------------------------------------------------------ the order of the steps
def test_a_write_is_synced_before_its_rename_and_the_folder_after(
    tmp_path: Path, monkeypatch
) -> None:
    """Swapping the file's fsync and the rename, dropping either fsync, or recording the
    ledger before the rename fails here (a power loss could then publish an empty file)."""
    seen = steps_of_a_write(tmp_path, monkeypatch)
    temporary = next(what for kind, what in seen if kind == "open")
    assert temporary.startswith(".sts-partial") and temporary.endswith("result.json")
    first = seen.index(("replace", "result.json"))  # the data file's rename
    assert seen[:first] == [
        ("open", temporary),
        ("write", temporary),
        ("fsync", temporary),
        ("close", temporary),
    ]
    folder = seen[first + 1][1]
    assert folder == "count-write_bytes"
    assert seen[first + 1 : first + 4] == [("open", folder), ("fsync", folder), ("close", folder)]
    ledger = seen.index(("replace", LEDGER_NAME))  # the ledger is written after, atomically
    assert ledger > first + 3
    assert ("fsync", seen[ledger - 3][1]) == seen[ledger - 2]  # its own file synced first


def test_a_file_a_writer_wrote_is_synced_before_its_rename(tmp_path: Path, monkeypatch) -> None:
    """:func:`writing` (a table, a figure): the file the writer made is synced before the
    rename, the folder after (swapping or dropping either fails here)."""
    seen = steps_of_a_write(tmp_path, monkeypatch, "writing")
    temporary = next(what for kind, what in seen if kind == "open")
    rename = seen.index(("replace", "result.json"))
    assert seen[:rename] == [("open", temporary), ("fsync", temporary), ("close", temporary)]
    folder = "count-writing"
    assert seen[rename + 1 : rename + 4] == [("open", folder), ("fsync", folder), ("close", folder)]


def test_a_published_save_is_on_disk_before_its_first_rename(tmp_path: Path, monkeypatch) -> None:
    """Every staged file of a save is fsync-ed before anything is renamed into the target;
    the old marker goes before the first entry, the new marker after the last."""
    from sts_core.saving import SAVE_MARKER, staged_contents

    target = tmp_path / "model"
    with staged_contents(target) as staging:
        (staging / "config.json").write_text("{}")
    seen = spy(monkeypatch)
    with staged_contents(target) as staging:
        (staging / "config.json").write_text('{"a": 1}')
        (staging / "weights.bin").write_bytes(b"w" * 100)
    monkeypatch.undo()
    renames = [i for i, (kind, what) in enumerate(seen) if kind == "replace"]
    synced = {what for kind, what in seen[: renames[0]] if kind == "fsync"}
    assert {"config.json", "weights.bin"} <= synced
    marker_removed = seen.index(("unlink", SAVE_MARKER))
    entry_renames = [i for i in renames if seen[i][1] in ("config.json", "weights.bin")]
    assert marker_removed < entry_renames[0]
    assert seen.index(("replace", SAVE_MARKER)) > entry_renames[-1]


def test_a_checkpoint_is_synced_before_it_replaces_the_older_one(
    tmp_path: Path, monkeypatch
) -> None:
    from sts_core.saving import publish_folder

    staged, final = tmp_path / ".sts-staging" / "checkpoint-4", tmp_path / "checkpoint-4"
    for folder, content in ((final, b"old"), (staged, b"new")):
        folder.mkdir(parents=True)
        (folder / "optimizer.pt").write_bytes(content)
    seen = spy(monkeypatch)
    publish_folder(staged, final)
    monkeypatch.undo()
    renames = [i for i, (kind, _) in enumerate(seen) if kind == "replace"]
    assert ("fsync", "optimizer.pt") in seen[: renames[0]]
    assert [seen[i][1] for i in renames] == ["checkpoint-4.replaced", "checkpoint-4"]
    assert seen[renames[-1] + 1 : renames[-1] + 3] == [
        ("open", tmp_path.name),
        ("fsync", tmp_path.name),
    ]
    assert (final / "optimizer.pt").read_bytes() == b"new"


# ------------------------------------------------------------------ the ledger
def test_the_ledger_records_what_was_written_and_forgets_a_changed_file(tmp_path: Path) -> None:
    files.set_command("sts-test")
    path = write_json(tmp_path / "results.json", {"spearman": 80.0})
    entry = read_ledger(tmp_path)["results.json"]
    assert entry["command"] == "sts-test"
    assert entry["size"] == path.stat().st_size
    assert written_by_project(path).startswith("written by sts-test on ")
    path.write_text('{"spearman": 80.1}\n', encoding="utf-8")  # same size, edited
    assert written_by_project(path) is None
    assert written_by_project(tmp_path / "other.json") is None


def test_an_unreadable_ledger_vouches_for_nothing(tmp_path: Path) -> None:
    path = write_json(tmp_path / "results.json", {})
    (tmp_path / LEDGER_NAME).write_text("{not json", encoding="utf-8")
    assert written_by_project(path) is None


def test_a_saved_model_and_its_files_are_the_projects(tmp_path: Path) -> None:
    from sts_core.saving import staged_contents

    with staged_contents(tmp_path / "run") as staging:
        (staging / "config.json").write_text("{}")
        (staging / "1_Pooling").mkdir()
        (staging / "1_Pooling" / "config.json").write_text("{}")
    assert written_by_project(tmp_path / "run") == "a model saved by sts-core"
    assert files.foreign_entries(tmp_path / "run") == []
    (tmp_path / "run" / "notes.txt").write_text("mine")
    assert files.foreign_entries(tmp_path / "run") == ["notes.txt"]
    assert written_by_project(tmp_path / "run") is None  # a folder holding a user's file


def test_a_saved_file_the_user_edited_or_a_file_added_in_its_subfolder_is_not_the_projects(
    tmp_path: Path,
) -> None:
    """The probe: a file its save marker lists counted as sts-core's whatever it held since,
    and ``1_Pooling`` whole with a user's file in it; the next save replaced or removed them."""
    from sts_core.saving import staged_contents

    with staged_contents(tmp_path / "run") as staging:
        (staging / "README.md").write_text("card")
        (staging / "1_Pooling").mkdir()
        (staging / "1_Pooling" / "config.json").write_text("{}")
    run = tmp_path / "run"
    assert written_by_project(run / "README.md") and written_by_project(run / "1_Pooling")
    edited_later(run / "README.md", "card, and my notes")  # the model card: no hash, its size
    assert written_by_project(run / "README.md") is None
    with staged_contents(tmp_path / "other") as staging:
        (staging / "config.json").write_text("{}")
    edited_later(tmp_path / "other" / "config.json", "[]")  # same size: its content hash
    assert written_by_project(tmp_path / "other" / "config.json") is None
    (run / "1_Pooling" / "notes.txt").write_text("mine")
    assert written_by_project(run / "1_Pooling") is None
    assert files.foreign_entries(run) == ["1_Pooling", "README.md"]


def edited_later(path: Path, text: str) -> None:
    """Write ``text`` over ``path`` in place, as a user's editor would seconds after the save
    (a later mtime: a rewrite within the clock's tick looks unchanged to the hash cache)."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


@pytest.mark.parametrize("name", [LEDGER_NAME, ".sts-partial-results.json"])
def test_an_output_named_as_the_ledger_or_a_temporary_file_is_refused(
    tmp_path: Path, name: str
) -> None:
    """The probe: ``sts-eval --output .sts-outputs`` wrote its result over the folder's
    ledger (exit 0), which then vouched for nothing the folder held."""
    ours = write_json(tmp_path / "results.json", {"spearman": 1.0})
    with pytest.raises(FilesError, match=f"{name}: {name} is the name sts-core keeps"):
        declared(tmp_path, tmp_path / name).check()
    with pytest.raises(FilesError, match="is the name sts-core keeps for its own"):
        write_json(tmp_path / name, {"spearman": 2.0})
    assert written_by_project(ours)  # the ledger still records it


# ------------------------------------------------------------------ declared outputs
def declared(tmp_path: Path, output: Path, *inputs: tuple[str, Path], replace: bool = False):
    command = CommandFiles("sts-test", replace=replace)
    for option, path in inputs:
        command.reads(option, path)
    command.writes("--output", output)
    return command


@pytest.mark.parametrize("case", ["is", "inside", "symlink"])
def test_an_output_on_an_input_is_refused_in_one_line(tmp_path: Path, case: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    pairs = data / "pairs.csv"
    pairs.write_text("sentence1,sentence2,score\na,b,1\n")
    output = {"is": pairs, "inside": data / "new.json", "symlink": tmp_path / "link.csv"}[case]
    if case == "symlink":
        os.symlink(pairs, output)
    with pytest.raises(FilesError) as caught:
        declared(tmp_path, output, ("--pairs", pairs), ("--data-dir", data)).check()
    message = str(caught.value)
    assert "\n" not in message and f"--output {output}" in message
    assert "nothing was written" in message
    assert pairs.read_text() == "sentence1,sentence2,score\na,b,1\n"


def test_an_output_folder_holding_an_input_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "out" / "model"
    model.mkdir(parents=True)
    command = CommandFiles("sts-test")
    command.reads("--model", model)
    command.writes("--output", tmp_path / "out", kind="folder")
    with pytest.raises(FilesError, match=r"--output \S+/out holds \S+/model, the input --model"):
        command.check()


def test_a_file_the_project_did_not_write_is_never_replaced(tmp_path: Path) -> None:
    mine = tmp_path / "results.json"
    mine.write_text('{"my": "notes"}')
    for replace in (False, True):
        with pytest.raises(FilesError, match="was not written by sts-core"):
            declared(tmp_path, mine, replace=replace).check()
    assert mine.read_text() == '{"my": "notes"}'


def test_a_file_the_project_wrote_is_replaced_with_the_flag_only(tmp_path: Path) -> None:
    files.set_command("sts-test")
    ours = write_json(tmp_path / "results.json", {"spearman": 1})
    with pytest.raises(FilesError, match=r"exists \(written by sts-test on .*\): pass --overwrite"):
        declared(tmp_path, ours).check()
    declared(tmp_path, ours, replace=True).check()


def test_hub_ids_and_missing_paths_are_not_inputs(tmp_path: Path) -> None:
    command = CommandFiles("sts-test")
    command.reads("--model", "sentence-transformers/all-MiniLM-L6-v2")
    command.reads("--pairs", None)
    assert command.inputs == []


def test_the_ledger_is_json_a_reader_can_use(tmp_path: Path) -> None:
    write_bytes(tmp_path / "a.bin", b"abc")
    content = json.loads((tmp_path / LEDGER_NAME).read_text(encoding="utf-8"))
    assert content["written_by"] == "sts-core"
    assert content["entries"]["a.bin"]["size"] == 3


def test_a_recorded_write_never_replaces_a_file_sts_core_did_not_write(tmp_path: Path) -> None:
    """The last guard, at the write itself: a result whose name a user's file took since the
    command's checks (or that no declaration named) is refused, the user's file kept."""
    mine = tmp_path / "metrics.json"
    mine.write_text('{"my": "notes"}', encoding="utf-8")
    with pytest.raises(FilesError, match="exists and was not written by sts-core"):
        write_json(mine, {"spearman": 1.0})
    assert mine.read_text(encoding="utf-8") == '{"my": "notes"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]
    ours = write_json(tmp_path / "results.json", {"spearman": 1.0})
    write_json(ours, {"spearman": 2.0})  # what sts-core wrote is replaced
    assert json.loads(ours.read_text(encoding="utf-8")) == {"spearman": 2.0}


# ------------------------------------------------------------------ the Python API (the probe)
def test_a_save_never_replaces_a_file_sts_core_did_not_write(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """``SentenceEncoder.save_pretrained`` replaced a user's ``config.json``, and the files of
    the transformers folder the model was loaded from, silently (probe cases 38, 39)."""
    import shutil

    from sts_core.encoder import SentenceEncoder

    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text('{"mine": true}', encoding="utf-8")
    (mine / "notes.txt").write_text("kept", encoding="utf-8")
    with pytest.raises(
        FilesError,
        match=r"did not write that the save would replace \(config.json\): nothing was saved",
    ):
        encoder.save_pretrained(mine)
    assert sorted(p.name for p in mine.iterdir()) == ["config.json", "notes.txt"]
    assert (mine / "config.json").read_text(encoding="utf-8") == '{"mine": true}'
    loaded_from = tmp_path / "plain"
    shutil.copytree(tiny_bert_dir, loaded_from)
    before = {p.name: p.read_bytes() for p in loaded_from.iterdir() if p.is_file()}
    with pytest.raises(FilesError, match="nothing was saved"):
        SentenceEncoder.from_pretrained(loaded_from).save_pretrained(loaded_from)
    assert {p.name: p.read_bytes() for p in loaded_from.iterdir() if p.is_file()} == before
    saved = tmp_path / "saved"
    encoder.save_pretrained(saved)
    encoder.save_pretrained(saved)  # sts-core's own save is replaced
    SentenceEncoder.from_pretrained(saved)


def test_the_soup_function_checks_its_output_as_the_command_does(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """``sts_core.soup.soup([a, b], a)`` overwrote model a and deleted its run's files (probe
    case 61): the function checks its output itself, before any weights load."""
    from sts_core.encoder import SentenceEncoder
    from sts_core.soup import soup

    runs = []
    for seed in (0, 1):
        folder = tmp_path / f"seed{seed}"
        SentenceEncoder.from_pretrained(tiny_bert_dir).save_pretrained(folder)
        runs.append(str(folder))
    before = {p.name: p.read_bytes() for p in Path(runs[0]).iterdir() if p.is_file()}
    with pytest.raises(FilesError, match="is the input model of sts-soup"):
        soup(runs, runs[0])
    assert {p.name: p.read_bytes() for p in Path(runs[0]).iterdir() if p.is_file()} == before
    soup(runs, str(tmp_path / "soup"))
    with pytest.raises(FilesError, match="pass --overwrite"):
        soup(runs, str(tmp_path / "soup"))
    soup(runs, str(tmp_path / "soup"), overwrite=True)


def test_a_save_over_an_earlier_save_keeps_what_the_user_edited_or_added_there(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """The probe: a save over an earlier one replaced the model card the user had edited
    and removed a file the user put in ``1_Pooling``, exit 0. A file beside the save stays;
    an edited or added file among the save's stops the save, kept as it is."""
    from sts_core.encoder import SentenceEncoder
    from sts_core.saving import staged_contents

    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    saved = tmp_path / "saved"
    encoder.save_pretrained(saved)
    (saved / "notes.txt").write_text("my notes on this model", encoding="utf-8")
    encoder.save_pretrained(saved)  # a file the user added beside the save is kept
    assert (saved / "notes.txt").read_text(encoding="utf-8") == "my notes on this model"
    pooling = next(p for p in saved.iterdir() if p.is_dir() and p.name.endswith("_Pooling"))
    (pooling / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(FilesError, match=rf"\({pooling.name}\): nothing was saved"):
        encoder.save_pretrained(saved)
    assert (pooling / "notes.txt").read_text(encoding="utf-8") == "mine"
    (pooling / "notes.txt").unlink()
    config = saved / "config_sentence_transformers.json"
    edited_later(config, config.read_text(encoding="utf-8").replace("{", "{ ", 1)[:-1])
    with pytest.raises(FilesError, match=r"\(config_sentence_transformers.json\): nothing"):
        encoder.save_pretrained(saved)
    carded = tmp_path / "carded"  # an earlier save with a model card this save does not write
    with staged_contents(carded) as staging:
        (staging / "README.md").write_text("card", encoding="utf-8")
    edited_later(carded / "README.md", "card\nMy results: …\n")
    with pytest.raises(FilesError, match=r"\(README.md\): nothing was saved"):
        encoder.save_pretrained(carded)
    assert (carded / "README.md").read_text(encoding="utf-8") == "card\nMy results: …\n"
