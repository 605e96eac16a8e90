"""Training on a stream of table shards (issue 63, item 4): a folder of table files, or
``streaming: true``, trains through a ``datasets.IterableDataset`` read shard by shard, each
shard checked, filtered, mapped and rescaled as the whole table would be; a bad row of a
later shard stops the run naming its file, row and column; what a stream cannot do is
refused before any weights load. (Two processes: tests/test_launch.py.)"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from datasets import Dataset

from sts_core.data.scratch import scratch_folder
from sts_core.losses import CosineMSELoss
from sts_core.method import Method
from sts_core.testing import refusal
from sts_core.training import BaseConfig, BaseTrainer, ConfigParser
from sts_core.training.method_registry import CORE_METHOD
from sts_core.training.parser import ConfigError
from sts_core.training.run import TrainingRun, prepare_inputs
from sts_core.training.run import main as sts_train
from sts_core.training.streaming import (
    check_streaming,
    remove_scratch_files,
    streams,
    table_shards,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture(autouse=True)
def users_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """No benchmark folder, the hub switched off: only the user's files."""
    monkeypatch.delenv("STS_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def rows(first: int, count: int) -> list[dict[str, Any]]:
    """Pairs numbered from ``first``, scores 0, 1, 2 in turn."""
    return [
        {"sentence1": f"a man plays {n}", "sentence2": f"a dog runs {n}", "score": float(n % 3)}
        for n in range(first, first + count)
    ]


def write_shards(folder: Path, sizes: list[int]) -> list[Path]:
    """A folder of CSV shards of ``sizes`` rows, numbered on from one to the next."""
    folder.mkdir()
    paths, first = [], 0
    for index, size in enumerate(sizes):
        path = folder / f"part-{index:02d}.csv"
        pd.DataFrame(rows(first, size)).to_csv(path, index=False)
        paths.append(path)
        first += size
    return paths


def arguments(tmp_path: Path, model: Path, train: Path, **values: Any) -> tuple[Any, Any, Any]:
    base = {
        "model_name_or_path": str(model),
        "train_datasets": [str(train)],
        "eval_dataset": "none",
        "output_dir": str(tmp_path / "out"),
        "max_steps": 2,
        "per_device_train_batch_size": 4,
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
        "dataloader_pin_memory": False,
        "shuffle_buffer": 0,
    }
    return ConfigParser.for_method(CORE_METHOD).parse_values({**base, **values}, "python")


def streamed(tmp_path: Path, model: Path, train: Path, **values: Any) -> tuple[Any, dict]:
    _, data_args, config = arguments(tmp_path, model, train, **values)
    inputs = prepare_inputs(CORE_METHOD, data_args, config)
    return inputs.train_dataset, inputs.data_summary


# ------------------------------------------------------------------ the shards
def test_a_folder_is_its_table_files_in_name_order(tmp_path: Path) -> None:
    folder = tmp_path / "shards"
    paths = write_shards(folder, [2, 2])
    Dataset.from_list(rows(4, 2)).to_parquet(folder / "part-02.parquet")
    (folder / "README.txt").write_text("not a table")
    (folder / "sub.csv").mkdir()  # a folder, not a table file
    assert table_shards(str(folder)) == [*paths, folder / "part-02.parquet"]
    assert table_shards(str(paths[1])) == [paths[1]]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda p: p.mkdir() or p,
            "streaming: folder {path} holds no table file (ending in .csv, .tsv, .json, "
            ".jsonl, .parquet)",
        ),
        (
            lambda p: p / "missing",
            "streaming: '{path}' is not a local file or folder; streaming reads local table "
            "files and folders of them (a hub dataset: download it first)",
        ),
        (
            lambda p: Dataset.from_list(rows(0, 2)).save_to_disk(str(p)) or p,
            "streaming: {path} is a save_to_disk folder, which is read memory-mapped without "
            "streaming: drop streaming",
        ),
        (
            lambda p: "stsb",
            "streaming: 'stsb' is a registry dataset; streaming reads local table files and "
            "folders of them",
        ),
    ],
    ids=["empty folder", "missing", "saved dataset", "registry"],
)
def test_what_holds_no_shards_is_refused(tmp_path: Path, make: Any, message: str) -> None:
    reference = str(make(tmp_path / "shards"))
    with pytest.raises(ConfigError) as refused:
        table_shards(reference)
    assert str(refused.value) == message.format(path=reference)


def test_a_local_folder_named_as_a_registry_dataset_is_the_dataset(
    tmp_path: Path, tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``stsb`` names the registry's STS-B, even beside a folder of tables called stsb."""
    write_shards(tmp_path / "stsb", [2])
    monkeypatch.chdir(tmp_path)
    assert not streams(arguments(tmp_path, tiny_bert_dir, Path("stsb"))[1])
    assert not streams(arguments(tmp_path, tiny_bert_dir, Path("stsb:train"))[1])


def test_a_folder_of_tables_streams_and_a_file_streams_when_asked(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    paths = write_shards(tmp_path / "shards", [2])
    assert streams(arguments(tmp_path, tiny_bert_dir, tmp_path / "shards")[1])
    assert not streams(arguments(tmp_path, tiny_bert_dir, paths[0])[1])
    assert streams(arguments(tmp_path, tiny_bert_dir, paths[0], streaming=True)[1])


# ------------------------------------------------------------------ the rows
def test_the_stream_is_the_rows_the_whole_table_gives(
    tmp_path: Path, tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Filter, label mapping and rescaling applied shard by shard give the rows (in order,
    unshuffled) that the concatenated table gives without streaming."""
    paths = write_shards(tmp_path / "shards", [5, 4, 6])
    whole = tmp_path / "whole.csv"
    pd.concat([pd.read_csv(path) for path in paths]).to_csv(whole, index=False)
    test_pairs = Dataset.from_list([rows(1, 1)[0], rows(9, 1)[0]])  # one in two shards
    for module in ("sts_core.training.streaming", "sts_core.training.data"):
        monkeypatch.setattr(f"{module}.load_test_sets", lambda *a, **k: {"sts12": test_pairs})
    options = {
        "filter_test_overlap": True,
        "label_mapping": {0: 0, 1: 4, 2: 5},
        "score_range": [0, 5],
    }
    stream, summary = streamed(tmp_path, tiny_bert_dir, tmp_path / "shards", **options)
    _, data_args, config = arguments(tmp_path, tiny_bert_dir, whole, **options)
    expected = prepare_inputs(CORE_METHOD, data_args, config).train_dataset
    assert len(expected) == 13
    assert list(stream) == list(expected)
    assert [row["score"] for row in stream][:4] == [0.0, 1.0, 0.0, 0.8]  # row 1 filtered
    assert summary["streaming"] == {
        "shards": 3,
        "first_shard": {"path": str(paths[0]), "rows": 4},
        "shuffle_buffer": 0,
    }


def test_the_shuffle_buffer_shuffles_by_the_seed_and_the_pass(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    write_shards(tmp_path / "shards", [6, 6])
    in_order = [row["sentence1"] for row in rows(0, 12)]

    def order(seed: int, epoch: int = 0, **values: Any) -> list[str]:
        stream, _ = streamed(tmp_path, tiny_bert_dir, tmp_path / "shards", data_seed=seed, **values)
        stream.set_epoch(epoch)
        return [row["sentence1"] for row in stream]

    assert order(1) == in_order  # shuffle_buffer 0: the files' order
    shuffled = order(1, shuffle_buffer=4)
    assert sorted(shuffled) == sorted(in_order) and shuffled != in_order
    assert order(1, shuffle_buffer=4) == shuffled
    assert order(2, shuffle_buffer=4) != shuffled
    assert order(1, epoch=1, shuffle_buffer=4) != shuffled


def test_each_shards_checked_copy_is_removed_after_its_rows(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    write_shards(tmp_path / "shards", [3, 3, 3])
    before = sorted(scratch_folder().iterdir())
    stream, _ = streamed(tmp_path, tiny_bert_dir, tmp_path / "shards")
    assert len(list(stream)) == 9
    assert sorted(scratch_folder().iterdir()) == before


def test_one_shard_is_read_at_a_time_while_the_buffer_shuffles(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    """The buffer is filled from one shard at a time: at most one shard's checked copy
    exists while the rows are read (each shard is read whole before its first row)."""
    write_shards(tmp_path / "shards", [3, 3, 3])
    before = set(scratch_folder().iterdir())
    stream, _ = streamed(tmp_path, tiny_bert_dir, tmp_path / "shards", shuffle_buffer=2)
    copies = []
    for _ in stream:
        copies.append(len(set(scratch_folder().iterdir()) - before))
    assert len(copies) == 9 and max(copies) == 1


def test_a_shard_with_other_columns_is_refused_naming_it(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    paths = write_shards(tmp_path / "shards", [3, 3])
    frame = pd.read_csv(paths[1]).assign(hard_negative="a cat sleeps")
    frame.to_csv(paths[1], index=False)
    stream, _ = streamed(tmp_path, tiny_bert_dir, tmp_path / "shards")
    with pytest.raises(ConfigError, match=f"shard {paths[1]} has the columns"):
        list(stream)


# ------------------------------------------------------------------ the command
def sts_train_argv(tmp_path: Path, model: Path, train: Path, *options: str) -> list[str]:
    return [
        "--model_name_or_path", str(model),
        "--train_datasets", str(train),
        "--eval_dataset", "none",
        "--output_dir", str(tmp_path / "out"),
        "--per_device_train_batch_size", "2",
        "--save_strategy", "no",
        "--report_to", "none",
        "--disable_tqdm", "true",
        *options,
    ]  # fmt: skip


def test_a_bad_row_of_a_later_shard_stops_training_naming_it(
    tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    paths = write_shards(tmp_path / "shards", [4, 4])
    frame = pd.read_csv(paths[1]).astype({"score": object})
    frame.loc[2, "score"] = "high"
    frame.to_csv(paths[1], index=False)
    argv = sts_train_argv(tmp_path, tiny_bert_dir, tmp_path / "shards", "--max_steps", "6")
    assert sts_train(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {paths[1]}: row 3, column 'score'" in err
    saved = [p.name for p in (tmp_path / "out").iterdir() if p.name != ".sts-run.lock"]
    assert saved == []  # nothing saved


def test_check_only_reads_the_first_shard(
    tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    paths = write_shards(tmp_path / "shards", [4, 4])
    argv = sts_train_argv(tmp_path, tiny_bert_dir, tmp_path / "shards", "--max_steps", "3")
    assert sts_train([*argv, "--check_only", "true"]) == 0
    out = capsys.readouterr().out
    assert f"a stream of 2 shard(s) from {tmp_path / 'shards'} (the first, {paths[0]}, 4" in out


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ((), "a stream has no length, so set max_steps"),
        (("--max_steps", "2", "--max_train_samples", "3"), "not with max_train_samples"),
        (("--max_steps", "2", "--batch_sampler", "no_duplicates"), "not with batch_sampler"),
        (("--max_steps", "2", "--teacher_model", "{model}"), "not with teacher_model"),
        (
            ("--max_steps", "2", "--accelerator_config", '{"dispatch_batches": true}'),
            "dispatch_batches",
        ),
        (("--max_steps", "2", "--shuffle_buffer", "-1"), "shuffle_buffer must be at least 0"),
    ],
    ids=["max_steps", "max_train_samples", "no_duplicates", "teacher", "dispatch", "buffer"],
)
def test_what_a_stream_cannot_do_is_refused(
    tmp_path: Path,
    tiny_bert_dir: Path,
    capsys: pytest.CaptureFixture,
    options: tuple[str, ...],
    message: str,
) -> None:
    write_shards(tmp_path / "shards", [4])
    options = tuple(o.replace("{model}", str(tiny_bert_dir)) for o in options)
    argv = sts_train_argv(tmp_path, tiny_bert_dir, tmp_path / "shards", *options)
    assert message in refusal(sts_train, argv, capsys)


def test_a_mapping_of_sets_with_streaming_is_refused(
    tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    paths = write_shards(tmp_path / "shards", [4])
    argv = sts_train_argv(tmp_path, tiny_bert_dir, paths[0], "--max_steps", "2")
    argv[argv.index("--train_datasets") + 1] = json.dumps({"a": str(paths[0])})
    line = refusal(sts_train, [*argv, "--streaming", "true"], capsys)
    assert "not with train_datasets as a mapping" in line


def test_a_set_in_memory_with_streaming_is_refused(tmp_path: Path, tiny_bert_dir: Path) -> None:
    paths = write_shards(tmp_path / "shards", [4])
    model_args, data_args, config = arguments(
        tmp_path, tiny_bert_dir, paths[0], streaming=True, max_steps=2
    )
    run = TrainingRun.from_arguments(
        CORE_METHOD, model_args, data_args, config, Dataset.from_list(rows(0, 4))
    )
    with pytest.raises(ConfigError, match="not with a training set given in memory"):
        run.run()


@pytest.mark.parametrize(
    ("method", "message"),
    [
        ("sifter", "prepares its training set as a whole (prepare_train_dataset)"),
        ("bsc", "builds its own batches"),
    ],
)
def test_a_method_that_needs_the_whole_set_is_refused(
    tmp_path: Path,
    tiny_bert_dir: Path,
    capsys: pytest.CaptureFixture,
    method: str,
    message: str,
) -> None:
    pytest.importorskip(f"sts_{method}")
    write_shards(tmp_path / "shards", [4])
    argv = sts_train_argv(tmp_path, tiny_bert_dir, tmp_path / "shards", "--max_steps", "2")
    line = refusal(sts_train, ["--method", method, *argv], capsys)
    why = "streaming (a folder of table files streams) trains on rows as they are read: not with"
    assert line == f"error: {why} method {method}, which {message}"


def test_a_first_shard_left_empty_or_refused_by_the_loss_stops_before_training(
    tmp_path: Path,
    tiny_bert_dir: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    paths = write_shards(tmp_path / "shards", [2, 2])
    test_pairs = Dataset.from_list(rows(0, 2))  # the first shard's two rows
    monkeypatch.setattr(
        "sts_core.training.streaming.load_test_sets", lambda *a, **k: {"sts12": test_pairs}
    )
    argv = sts_train_argv(tmp_path, tiny_bert_dir, tmp_path / "shards", "--max_steps", "2")
    line = refusal(sts_train, [*argv, "--filter_test_overlap", "true"], capsys)
    assert f"the first shard {paths[0]} has no rows (after filtering)" in line
    for path in paths:  # pairs without scores: the loss reads scores
        pd.read_csv(path).drop(columns="score").to_csv(path, index=False)
    line = refusal(sts_train, argv, capsys)
    assert line.startswith(f"error: streaming: shard {paths[0]}: ")


def test_only_the_runs_own_copies_are_removed(tmp_path: Path) -> None:
    """A dataset memory-mapped from a user's Arrow file keeps its file."""
    Dataset.from_list(rows(0, 3)).save_to_disk(str(tmp_path / "saved"))
    users = Dataset.load_from_disk(str(tmp_path / "saved"))
    remove_scratch_files(users)
    assert len(Dataset.load_from_disk(str(tmp_path / "saved"))) == 3


def test_a_resume_trains_on_the_rows_the_whole_run_trains_on(
    tmp_path: Path, tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run resumed from its checkpoint at step 3 trains steps 4–6 on the rows that the
    run without the interruption trains them on (the stream read again, the first three
    steps' batches skipped)."""
    write_shards(tmp_path / "shards", [5, 5])
    seen: list[list[float]] = []
    real_compute_loss = BaseTrainer.compute_loss

    def recording(self: Any, model: Any, inputs: dict, *args: Any, **kwargs: Any) -> Any:
        seen.append(inputs["labels"].tolist())
        return real_compute_loss(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(BaseTrainer, "compute_loss", recording)
    argv = sts_train_argv(tmp_path, tiny_bert_dir, tmp_path / "shards", "--max_steps", "6")
    argv += ["--save_strategy", "steps", "--save_steps", "3", "--shuffle_buffer", "4"]
    assert sts_train(argv) == 0
    whole, seen[:] = list(seen), []
    checkpoint = tmp_path / "out" / "checkpoint-3"
    assert sts_train([*argv, "--resume_from_checkpoint", str(checkpoint)]) == 0
    assert len(whole) == 6 and seen == whole[3:]


def test_a_shards_number_column_is_the_score_the_loss_reads(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    """A shard is read for what the loss reads: its one column of numbers, under another
    name, is the score (as a table file's is)."""
    folder = tmp_path / "shards"
    folder.mkdir()
    texts = {"text1": ["a man", "a cat"], "text2": ["a dog", "a cow"]}
    table = pd.DataFrame({**texts, "value": [2.5, 4.0]})
    table.to_csv(folder / "part-00.csv", index=False)
    stream, _ = streamed(tmp_path, tiny_bert_dir, folder)
    assert [row["score"] for row in stream] == [2.5, 4.0]


def test_the_summary_the_log_and_the_columns_say_what_streams(
    tmp_path: Path, tiny_bert_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    paths = write_shards(tmp_path / "shards", [3, 2])
    with caplog.at_level("INFO", logger="sts_core.training.streaming"):
        stream, summary = streamed(tmp_path, tiny_bert_dir, tmp_path / "shards", shuffle_buffer=7)
    assert summary == {
        "sources": {str(tmp_path / "shards"): "stream"},
        "train_pairs": None,
        "streaming": {
            "shards": 2,
            "first_shard": {"path": str(paths[0]), "rows": 3},
            "shuffle_buffer": 7,
        },
    }
    expected = f"streaming: 2 shard(s), the first ({paths[0]}) 3 rows; shuffle buffer 7 rows"
    assert expected in caplog.messages
    assert stream.column_names == ["sentence1", "sentence2", "score"]
    assert stream.features["score"].dtype == "float64"


def test_the_filter_reads_the_test_sets_of_the_runs_data_folder(
    tmp_path: Path, tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_shards(tmp_path / "shards", [2, 2])
    asked = []

    def test_sets(*args: Any, **kwargs: Any) -> dict[str, Dataset]:
        asked.append((args, kwargs))
        return {"sts12": Dataset.from_list(rows(0, 1))}

    monkeypatch.setattr("sts_core.training.streaming.load_test_sets", test_sets)
    data = tmp_path / "benchmark data"
    data.mkdir()
    options = {"filter_test_overlap": True, "data_dir": str(data), "data_variant": "raw"}
    stream, _ = streamed(tmp_path, tiny_bert_dir, tmp_path / "shards", **options)
    assert len(list(stream)) == 3
    assert asked == [((str(data), "raw"), {})]  # once for the stream, for the first shard


@pytest.mark.parametrize(
    ("streaming", "why"),
    [(False, "streaming (a folder of table files streams)"), (True, "streaming")],
)
def test_max_steps_is_asked_for_in_the_words_of_how_the_run_streams(
    tmp_path: Path,
    tiny_bert_dir: Path,
    capsys: pytest.CaptureFixture,
    streaming: bool,
    why: str,
) -> None:
    paths = write_shards(tmp_path / "shards", [2])
    train = paths[0] if streaming else tmp_path / "shards"
    argv = sts_train_argv(tmp_path, tiny_bert_dir, train, "--streaming", str(streaming).lower())
    for steps in ("-1", "0"):
        line = refusal(sts_train, [*argv, "--max_steps", steps], capsys)
        expected = f"{why}: a stream has no length, so set max_steps (the optimizer steps to train)"
        assert line == f"error: {expected}"
    assert sts_train([*argv, "--max_steps", "1", "--check_only", "true"]) == 0


def test_a_packages_own_check_reads_each_shard_with_the_runs_settings(
    tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    """The regression package checks the labels against its loss and ``label_range``
    (its config): the check runs on the first shard with the run's settings."""
    pytest.importorskip("sts_regression")
    write_shards(tmp_path / "shards", [3])
    argv = sts_train_argv(tmp_path, tiny_bert_dir, tmp_path / "shards", "--max_steps", "2")
    argv = ["--method", "regression", *argv]
    assert sts_train([*argv, "--check_only", "true"]) == 0
    line = refusal(sts_train, [*argv, "--label_range", "0", "1"], capsys)
    assert line.startswith(f"error: streaming: shard {tmp_path / 'shards' / 'part-00.csv'}: ")


def test_what_a_loss_without_labels_reads_of_a_shard(tmp_path: Path, tiny_bert_dir: Path) -> None:
    """Pcc-tuning's stage 1 (``loss: infonce``, not the method's default) reads no labels:
    a shard's unnamed column of numbers is refused, as a table file's is (the default loss,
    ``pearson``, reads it as the score)."""
    pytest.importorskip("sts_pcctuning")
    from sts_core.data import DataFormatError
    from sts_core.training.method_registry import installed_method

    folder = tmp_path / "shards"
    folder.mkdir()
    texts = {"text1": ["a man", "a cat"], "text2": ["a dog", "a cow"]}
    pd.DataFrame({**texts, "value": [2.5, 4.0]}).to_csv(folder / "part-00.csv", index=False)
    method = installed_method("pcctuning")
    base = {"model_name_or_path": str(tiny_bert_dir), "train_datasets": [str(folder)]}
    values = {**base, "output_dir": str(tmp_path / "out"), "eval_dataset": "none"}
    values |= {"max_steps": 2, "shuffle_buffer": 0, "report_to": "none"}
    parser = ConfigParser.for_method(method)
    _, data_args, config = parser.parse_values(values, "python")
    stream = prepare_inputs(method, data_args, config).train_dataset
    assert [row["score"] for row in stream] == [2.5, 4.0]
    _, data_args, config = parser.parse_values({**values, "loss": "infonce"}, "python")
    with pytest.raises(DataFormatError, match="column 'value' holds numbers, so it is no text"):
        prepare_inputs(method, data_args, config)


@dataclass
class OwnBatchesConfig(BaseConfig):
    own_batches: bool = False


class OwnBatchesTrainer(BaseTrainer):
    def build_epoch_batches(self, dataset: Any, epoch: int) -> Any:  # pragma: no cover
        return None


class OwnBatchesMethod(Method):
    def trainer_for(self, config: Any) -> Any:
        """Its own batches only when the config says so."""
        return OwnBatchesTrainer if config.own_batches else None


def test_a_trainer_that_builds_its_own_batches_under_the_runs_config_is_refused(
    tmp_path: Path,
) -> None:
    method = OwnBatchesMethod(
        name="own-batches", title="test", config=OwnBatchesConfig, losses=(CosineMSELoss,)
    )
    for own in (False, True):
        values = {"model_name_or_path": "m", "train_datasets": [str(tmp_path)], "max_steps": 2}
        values |= {"output_dir": str(tmp_path / "out"), "own_batches": own}
        _, data_args, config = ConfigParser.for_method(method).parse_values(values, "python")
        if not own:
            check_streaming(method, data_args, config)
            continue
        with pytest.raises(ConfigError, match="method own-batches, which builds its own batches"):
            check_streaming(method, data_args, config)
