"""Readers of sts_core.data on small fixture files and on broken files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sts_core.data import (
    DataFileNotFoundError,
    DataFormatError,
    read_cosent_tsv,
    read_mrpc,
    read_nli_csv,
    read_nli_jsonl,
    read_nli_senteval,
    read_nli_triplets,
    read_quora,
    read_sentences,
    read_senteval_sts,
    read_sick,
    read_sst,
    read_stsb_csv,
    read_wikiqa,
)

FIXTURES = Path(__file__).parent / "fixtures" / "data"


def dtypes(ds) -> dict[str, str]:
    """Column name -> dtype string."""
    return {name: feature.dtype for name, feature in ds.features.items()}


# --------------------------------------------------------------------------- good files


def test_senteval_sts_reads_subsets_sorted_and_skips_empty_gold(caplog):
    caplog.set_level(logging.INFO, logger="sts_core.data")
    ds = read_senteval_sts(FIXTURES / "senteval/STS/STS16-en-test")
    assert dtypes(ds) == {
        "sentence1": "string",
        "sentence2": "string",
        "score": "float64",
        "subset": "string",
    }
    assert ds["subset"] == ["answer-answer", "headlines"]
    assert ds["score"] == [4.0, 4.5]
    assert ds[0]["sentence1"] == "you should ask first ."
    assert "skipped 2 of 3 rows (empty gold score" in caplog.text
    assert "skipped 2 of 3 rows" in ds.info.description


def test_senteval_sts_row_order_within_subsets():
    ds = read_senteval_sts(FIXTURES / "senteval/STS/STS12-en-test")
    assert ds["subset"] == ["MSRpar", "MSRpar", "surprise.OnWN"]
    assert ds["score"] == [4.0, 3.25, 2.5]


def test_senteval_sts_raw_2016_takes_first_two_columns():
    ds = read_senteval_sts(FIXTURES / "raw/sts12-16/STS2016-en-test-gs")
    assert ds["sentence2"] == ["ask before you do it .", "showers forecast today"]


def test_senteval_sts_raw_2012_ignores_gold_without_input(caplog):
    caplog.set_level(logging.INFO, logger="sts_core.data")
    ds = read_senteval_sts(FIXTURES / "raw/sts12-16/STS2012-en-test-gold")
    assert len(ds) == 3
    assert "STS.gs.ALL.txt: ignored" in caplog.text


def test_stsb_csv_tolerates_extra_fields_and_quotes():
    train = read_stsb_csv(FIXTURES / "senteval/STS/STSBenchmark/sts-train.csv")
    assert train[3]["sentence1"] == 'he said " sunny " .'
    assert train["genre"][0] == "main-captions"
    test = read_stsb_csv(FIXTURES / "senteval/STS/STSBenchmark/sts-test.csv")
    assert test[0] == {
        "sentence1": "a man plays guitar .",
        "sentence2": "someone plays a guitar .",
        "score": 4.2,
        "genre": "main-news",
    }


@pytest.mark.parametrize("layout", ["senteval", "raw"])
def test_sick_labels_scores_and_crlf(layout):
    ds = read_sick(FIXTURES / layout / "SICK/SICK_test_annotated.txt")
    assert dtypes(ds)["label"] == "int64"
    assert ds["score"] == [4.7, 1.0]
    assert ds["label"] == [0, 1]
    assert ds["sentence2"][1] == "The cat is quiet"  # no trailing \r


def test_nli_senteval_strips_and_maps_labels():
    ds = read_nli_senteval(FIXTURES / "nli/snli-devtest", "dev")
    assert ds["sentence1"][0] == "Two people walk a dog ."
    assert ds["label"] == [0, 2, 1]
    assert ds["score"] == [2.0, 0.0, 1.0]


def test_nli_csv_skips_dash_and_logs(caplog):
    caplog.set_level(logging.INFO, logger="sts_core.data")
    path = FIXTURES / "nli/snli-devtest-raw/snli_1.0_dev.csv"
    ds = read_nli_csv(path)
    assert len(ds) == 3
    assert ds["label"] == [0, 2, 1]
    assert f"{path}: skipped 1 of 4 rows (no gold label '-')" in caplog.text
    assert "skipped 1 of 4 rows" in ds.info.description


def test_nli_csv_quoted_commas():
    ds = read_nli_csv(FIXTURES / "nli/mnli-dev/multinli_1.0_dev_matched.goldonly.csv")
    assert ds["sentence1"][0] == "The rights are fine, mostly."
    assert ds["label"] == [1, 2]


def test_nli_jsonl_matches_csv():
    jsonl = read_nli_jsonl(FIXTURES / "nli/snli-jsonl/snli_1.0_dev.jsonl")
    csv = read_nli_csv(FIXTURES / "nli/snli-devtest-raw/snli_1.0_dev.csv")
    assert jsonl.to_list() == csv.to_list()


def test_nli_triplets_crlf_and_quotes():
    ds = read_nli_triplets(FIXTURES / "nli/triplets/nli_triplets.csv")
    assert list(ds.features) == ["sentence1", "sentence2", "hard_negative", "score"]
    assert ds[0]["hard_negative"] == '"Not enough," she said.'
    assert ds["score"] == [1.0, 1.0]
    assert ds["hard_negative"][1] == "He never left."


def test_cosent_binary_and_graded():
    ds = read_cosent_tsv(FIXTURES / "chinese/ATEC/ATEC.valid.data", score_range=(0, 1))
    assert ds["label"] == [1, 0]
    assert ds["score"] == [1.0, 0.0]
    assert ds["sentence1"][0] == "花呗怎么还款"
    graded = read_cosent_tsv(FIXTURES / "chinese/STS-B/STS-B.train.data", score_range=(0, 5))
    assert graded["label"] == [5, 3]


def test_cosent_float_labels_give_no_label_column(tmp_path):
    path = tmp_path / "x.data"
    path.write_text("甲\t乙\t0.5\n丙\t丁\t1\n", encoding="utf-8")
    ds = read_cosent_tsv(path)
    assert "label" not in ds.column_names
    assert ds["score"] == [0.5, 1.0]


def test_mrpc_bom_header():
    ds = read_mrpc(FIXTURES / "pairwise/mrpc/msr_paraphrase_train.txt")
    assert ds["label"] == [1, 0]
    assert ds["score"] == [1.0, 0.0]
    assert ds["sentence1"][0] == 'He called it " the witness " .'


def test_wikiqa_query_ids_follow_consecutive_runs():
    ds = read_wikiqa(FIXTURES / "pairwise/wikiqa/train.txt")
    assert ds["query_id"] == [0, 0, 1, 2]
    assert dtypes(ds)["query_id"] == "int64"
    assert ds["label"] == [1, 0, 0, 1]


def test_quora_three_and_four_column_layouts(tmp_path):
    ds = read_quora(FIXTURES / "pairwise/quora-devtest/dev.txt")
    assert ds["label"] == [1, 0]
    assert ds["sentence2"][0] == "What is the best way to learn Python ?"
    bimpm = tmp_path / "train.tsv"
    bimpm.write_text("1\tHow are you ?\tHow do you do ?\t7\n0\tA ?\tB ?\t8\n", encoding="utf-8")
    assert read_quora(bimpm).to_dict() == {
        "sentence1": ["How are you ?", "A ?"],
        "sentence2": ["How do you do ?", "B ?"],
        "score": [1.0, 0.0],
        "label": [1, 0],
    }


def test_sst_both_layouts():
    tabbed = read_sst(FIXTURES / "sst/binary/sentiment-train")
    assert tabbed.to_dict() == {
        "sentence": ["a gorgeous , witty film", "dull and lifeless", "not bad at all"],
        "label": [1, 0, 1],
    }
    spaced = read_sst(FIXTURES / "sst/sentence-level/stsa.binary.train")
    assert spaced["sentence"][0] == "a bright , clever film -lrb- mostly -rrb-"
    assert spaced["label"] == [1, 0]


def test_sentences():
    ds = read_sentences(FIXTURES / "wiki/wiki1m_first11914.txt")
    assert ds["sentence"][1] == "The lake (LO) is fed by two small rivers."
    assert list(ds.features) == ["sentence"]


def test_sentences_empty_line_is_error_unless_skipped(tmp_path, caplog):
    path = tmp_path / "corpus.txt"
    path.write_text("one\n\n  \ntwo\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r":2: empty sentence"):
        read_sentences(path)
    with caplog.at_level(logging.WARNING, logger="sts_core.data"):
        ds = read_sentences(path, skip_empty=True)
    assert ds["sentence"] == ["one", "two"]
    assert "skipped 2 of 4 rows (empty line)" in caplog.text


# --------------------------------------------------------------------------- broken files

STS_INPUT = "a b .\tc d .\n"


def write(path: Path, data: str | bytes) -> Path:
    """Write text (UTF-8) or bytes to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


def sts_dir(tmp_path: Path, inputs: str | bytes, gold: str) -> tuple[Path, Path, Path]:
    """An STS folder with one subset ``x``."""
    input_path = write(tmp_path / "sts" / "STS.input.x.txt", inputs)
    gold_path = write(tmp_path / "sts" / "STS.gs.x.txt", gold)
    return tmp_path / "sts", input_path, gold_path


def assert_error(err: DataFormatError, path: Path, line: int | None, problem: str) -> None:
    """The error names file, line and problem, in that order."""
    location = f"{path}" if line is None else f"{path}:{line}"
    assert str(err).startswith(f"{location}: "), str(err)
    assert problem in str(err)
    assert err.path == path
    assert err.line == line


STS_CASES = [
    pytest.param(
        STS_INPUT + "only one\n",
        "1\n2\n",
        "input",
        2,
        "expected at least 2 tab-separated fields, found 1",
        id="too few columns",
    ),
    pytest.param(
        STS_INPUT * 2, "1\nabc\n", "gold", 2, "score 'abc' is not a number", id="score not a number"
    ),
    pytest.param(
        STS_INPUT * 2,
        "5.5\n1\n",
        "gold",
        1,
        "score 5.5 outside the stated range [0, 5]",
        id="score out of range",
    ),
    pytest.param(STS_INPUT, "nan\n", "gold", 1, "not a finite number", id="score nan"),
    pytest.param(
        STS_INPUT + " \tc\n",
        "1\n2\n",
        "input",
        2,
        "empty sentence in column 'sentence1'",
        id="empty sentence",
    ),
    pytest.param(
        STS_INPUT.encode() + b"caf\xe9\tx\n",
        "1\n2\n",
        "input",
        2,
        "not valid UTF-8: byte 0xe9 at column 4",
        id="bad utf-8",
    ),
]


@pytest.mark.parametrize("inputs,gold,which,line,problem", STS_CASES)
def test_senteval_sts_broken(tmp_path, inputs, gold, which, line, problem):
    folder, input_path, gold_path = sts_dir(tmp_path, inputs, gold)
    with pytest.raises(DataFormatError) as info:
        read_senteval_sts(folder)
    assert_error(info.value, input_path if which == "input" else gold_path, line, problem)


def test_senteval_sts_line_count_mismatch_names_both_files(tmp_path):
    folder, input_path, gold_path = sts_dir(tmp_path, STS_INPUT * 2, "1\n")
    with pytest.raises(DataFormatError) as info:
        read_senteval_sts(folder)
    assert_error(info.value, gold_path, None, "1 gold lines")
    assert f"{input_path} has 2 input lines" in str(info.value)


def test_senteval_sts_missing_or_empty_folder(tmp_path):
    with pytest.raises(DataFileNotFoundError) as info:
        read_senteval_sts(tmp_path / "absent")
    assert isinstance(info.value, FileNotFoundError)
    assert_error(info.value, tmp_path / "absent", None, "no such folder")
    with pytest.raises(DataFormatError, match="no STS.input"):
        read_senteval_sts(tmp_path)


def write_sts_subset(folder: Path, subset: str, pairs: list[str], gold: str | None) -> None:
    """``STS.input.<subset>.txt`` (and ``STS.gs.<subset>.txt`` unless ``gold`` is None)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"STS.input.{subset}.txt").write_text("".join(p + "\n" for p in pairs))
    if gold is not None:
        (folder / f"STS.gs.{subset}.txt").write_text(gold)


def test_senteval_sts_subset_with_all_gold_blank_is_a_warning(tmp_path, caplog):
    folder = tmp_path / "STS15-en-test"
    write_sts_subset(folder, "good", ["a b\tc d", "e f\tg h"], "1\n4\n")
    write_sts_subset(folder, "blank", ["a b\tc d", "e f\tg h"], "\n \n")
    with caplog.at_level(logging.WARNING, logger="sts_core.data"):
        ds = read_senteval_sts(folder)
    assert set(ds["subset"]) == {"good"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert str(folder / "STS.gs.blank.txt") in warnings[0]
    assert "subset 'blank' dropped" in warnings[0]
    assert "subset 'blank' dropped" in ds.info.description


def test_senteval_sts_input_without_gold_is_a_warning(tmp_path, caplog):
    folder = tmp_path / "STS14-en-test"
    write_sts_subset(folder, "good", ["a b\tc d", "e f\tg h"], "1\n4\n")
    write_sts_subset(folder, "orphan", ["a b\tc d"], None)
    with caplog.at_level(logging.WARNING, logger="sts_core.data"):
        ds = read_senteval_sts(folder)
    assert len(ds) == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "subset 'orphan' dropped, it has no gold file" in warnings[0]


def test_senteval_sts_folder_without_any_scored_pair_is_an_error(tmp_path):
    folder = tmp_path / "STS13-en-test"
    write_sts_subset(folder, "blank", ["a b\tc d", "e f\tg h"], "\n\n")
    with pytest.raises(DataFormatError, match="no scored pair: every gold score line is empty"):
        read_senteval_sts(folder)


HEADER_SICK = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
NLI_HEADER = "pairID,sentence1,sentence2,label\n"
JSON_AB = '{"sentence1": "a", "sentence2": "b"'
STSB_ROW = "g\tf\t2012\t1\t3.0\t"
MRPC_HEADER = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
SIMPLE_CASES = [
    pytest.param(
        read_stsb_csv,
        STSB_ROW + "only one\n",
        1,
        "expected at least 7 tab-separated fields, found 6",
        id="stsb columns",
    ),
    pytest.param(
        read_stsb_csv,
        STSB_ROW + "a\tb\ng\tf\t2012\t2\tx\ta\tb\n",
        2,
        "score 'x' is not a number",
        id="stsb score",
    ),
    pytest.param(
        read_stsb_csv,
        STSB_ROW + "a\t \n",
        1,
        "empty sentence in column 'sentence2'",
        id="stsb empty sentence",
    ),
    pytest.param(read_sick, "id\ta\tb\n", 1, "header lacks column(s)", id="sick header"),
    pytest.param(
        read_sick,
        HEADER_SICK + "1\tA\tB\t3.0\n",
        2,
        "expected 5 tab-separated fields, found 4",
        id="sick columns",
    ),
    pytest.param(
        read_sick,
        HEADER_SICK + "1\tA\tB\t0.5\tNEUTRAL\n",
        2,
        "score 0.5 outside the stated range [1, 5]",
        id="sick range",
    ),
    pytest.param(
        read_sick,
        HEADER_SICK + "1\tA\tB\t3\tNEUTRAL\r\n2\tA\tB\t3\tMAYBE\r\n",
        3,
        "unknown NLI label 'MAYBE'",
        id="sick label",
    ),
    pytest.param(
        read_cosent_tsv,
        "甲\t乙\t1\n甲\t乙\n",
        2,
        "expected 3 tab-separated fields, found 2",
        id="cosent columns",
    ),
    pytest.param(
        read_cosent_tsv, "甲\t乙\t是\n", 1, "score '是' is not a number", id="cosent score"
    ),
    pytest.param(read_mrpc, "1\t1\t2\tA\tB\n", 1, "expected header ['Quality'", id="mrpc header"),
    pytest.param(
        read_mrpc, MRPC_HEADER + "2\t1\t2\tA\tB\n", 2, "label 2 not in [0, 1]", id="mrpc label"
    ),
    pytest.param(
        read_mrpc,
        MRPC_HEADER + "1\t1\t2\tA\n",
        2,
        "expected 5 tab-separated fields, found 4",
        id="mrpc columns",
    ),
    pytest.param(
        read_wikiqa,
        "q ?\ta .\t1\nq ?\tb .\tyes\n",
        2,
        "label 'yes' is not an integer",
        id="wikiqa label",
    ),
    pytest.param(
        read_quora,
        "a ?\tb ?\t1\na ?\tb ?\n",
        2,
        "expected 3 tab-separated fields, found 2",
        id="quora columns",
    ),
    pytest.param(read_quora, "a ?\tb ?\t3\n", 1, "label 3 not in [0, 1]", id="quora label"),
    pytest.param(
        read_sst, "good \t1\nbad \tx\n", 2, "label 'x' is not an integer", id="sst tab label"
    ),
    pytest.param(
        read_sst,
        "good \t1\nbad 0\n",
        2,
        "expected 2 tab-separated fields, found 1",
        id="sst tab columns",
    ),
    pytest.param(read_sst, "1 good .\n0\n", 2, "empty sentence", id="sst space sentence"),
    pytest.param(
        read_sentences,
        b"ok\n\xff\xfe\n",
        2,
        "not valid UTF-8: byte 0xff at column 1",
        id="sentences utf-8",
    ),
    pytest.param(
        read_nli_jsonl,
        JSON_AB + ', "gold_label": "neutral"}\n{bad\n',
        2,
        "invalid JSON",
        id="jsonl syntax",
    ),
    pytest.param(read_nli_jsonl, JSON_AB + "}\n", 1, "key 'gold_label' missing", id="jsonl key"),
    pytest.param(read_nli_jsonl, "[1, 2]\n", 1, "expected a JSON object", id="jsonl object"),
    pytest.param(
        read_nli_jsonl,
        JSON_AB + ', "gold_label": "yes"}\n',
        1,
        "unknown NLI label 'yes'",
        id="jsonl label",
    ),
    pytest.param(
        read_nli_csv,
        "pairID,premise,hypothesis,label\n",
        1,
        "header lacks column 'sentence1'",
        id="nli csv header",
    ),
    pytest.param(
        read_nli_csv,
        NLI_HEADER + "1,a,b\n",
        2,
        "expected 4 comma-separated fields, found 3",
        id="nli csv columns",
    ),
    pytest.param(
        read_nli_csv,
        NLI_HEADER + '1,"a\nb",c,neutral\n2,a,b,maybe\n',
        4,
        "unknown NLI label 'maybe'",
        id="nli csv after multiline",
    ),
    pytest.param(
        read_nli_csv,
        NLI_HEADER + "1,,b,neutral\n",
        2,
        "empty sentence in column 'sentence1'",
        id="nli csv empty sentence",
    ),
    pytest.param(
        read_nli_triplets,
        "premise,pos,neg\n",
        1,
        "expected header ['sent0', 'sent1', 'hard_neg']",
        id="triplets header",
    ),
    pytest.param(
        read_nli_triplets,
        "sent0,sent1,hard_neg\r\na,b,c\r\na,b\r\n",
        3,
        "expected 3 comma-separated fields, found 2",
        id="triplets columns",
    ),
    pytest.param(read_stsb_csv, "", None, "file is empty", id="empty file"),
]


@pytest.mark.parametrize("reader,content,line,problem", SIMPLE_CASES)
def test_reader_broken(tmp_path, reader, content, line, problem):
    path = write(tmp_path / "broken.txt", content)
    with pytest.raises(DataFormatError) as info:
        reader(path)
    assert_error(info.value, path, line, problem)


def test_cosent_score_range(tmp_path):
    path = write(tmp_path / "x.data", "甲\t乙\t1\n甲\t乙\t7\n")
    with pytest.raises(DataFormatError) as info:
        read_cosent_tsv(path, score_range=(0, 5))
    assert_error(info.value, path, 2, "score 7 outside the stated range [0, 5]")


def test_nli_senteval_broken(tmp_path):
    write(tmp_path / "s1.dev", "a .\nb .\n")
    write(tmp_path / "s2.dev", "c .\n \n")
    write(tmp_path / "labels.dev", "neutral\nentailment\n")
    with pytest.raises(DataFormatError) as info:
        read_nli_senteval(tmp_path, "dev")
    assert_error(info.value, tmp_path / "s2.dev", 2, "empty sentence in column 'sentence2'")
    write(tmp_path / "s2.dev", "c .\nd .\n")
    write(tmp_path / "labels.dev", "neutral\nsomething\n")
    with pytest.raises(DataFormatError) as info:
        read_nli_senteval(tmp_path, "dev")
    assert_error(info.value, tmp_path / "labels.dev", 2, "unknown NLI label 'something'")
    write(tmp_path / "labels.dev", "neutral\n")
    with pytest.raises(DataFormatError) as info:
        read_nli_senteval(tmp_path, "dev")
    assert_error(
        info.value, tmp_path, None, "line counts differ (s1.dev: 2, s2.dev: 2, labels.dev: 1)"
    )


@pytest.mark.parametrize(
    "reader",
    [read_stsb_csv, read_sick, read_nli_csv, read_nli_jsonl, read_nli_triplets, read_cosent_tsv,
     read_mrpc, read_wikiqa, read_quora, read_sst, read_sentences],
)  # fmt: skip
def test_missing_file_is_data_format_error(tmp_path, reader):
    path = tmp_path / "absent.txt"
    with pytest.raises(DataFileNotFoundError) as info:
        reader(path)
    assert isinstance(info.value, (DataFormatError, FileNotFoundError, ValueError))
    assert_error(info.value, path, None, "no such file")


def test_nli_missing_split_file(tmp_path):
    write(tmp_path / "s1.test", "a .\n")
    with pytest.raises(DataFileNotFoundError) as info:
        read_nli_senteval(tmp_path, "test")
    assert_error(info.value, tmp_path / "s2.test", None, "no such file")
