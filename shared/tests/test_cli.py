"""Command-line tools: fast start, the evaluation table and files, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sts_core.cli import data_main, eval_main

FIXTURES = Path(__file__).parent / "fixtures" / "data"
HEAVY = (
    "torch",
    "transformers",
    "datasets",
    "sentence_transformers",
    "peft",
    "deepspeed",
    "bitsandbytes",
    "faiss",
    "stanza",
    "spacy",
    "sklearn",
)


def test_import_and_help_load_no_heavy_library():
    code = (
        "import sys, sts_core, sts_core.cli\n"
        "sts_core.cli.make_eval_parser().format_help()\n"
        "sts_core.cli.make_data_parser().format_help()\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
    assert result.stderr == ""


def test_sts_eval_help_runs_as_a_command():
    result = subprocess.run(
        [sys.executable, "-m", "sts_core.cli", "--help"], capture_output=True, text=True, check=True
    )
    assert "--protocol" in result.stdout and "--data-dir" in result.stdout
    assert result.stderr == ""


def test_sts_eval_writes_table_json_and_markdown(tiny_bert_dir, tmp_path, capsys):
    output = tmp_path / "results" / "tiny"
    code = eval_main(
        [
            "--model", str(tiny_bert_dir),
            "--data-dir", str(FIXTURES),
            "--tasks", "sts13,stsb,sickr",
            "--output", str(output),
            "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "STS-B" in printed and "SICK-R" in printed and "wall time" in printed
    saved = json.loads(output.with_suffix(".json").read_text())
    assert list(saved["tasks"]) == ["sts13", "stsb", "sickr"]
    assert saved["protocol"] == "senteval" and saved["variant"] == "senteval"
    assert saved["tasks"]["stsb"]["size"] == len(
        (FIXTURES / "senteval/STS/STSBenchmark/sts-test.csv").read_text().splitlines()
    )
    assert output.with_suffix(".md").read_text().startswith("Model `")


def test_sts_eval_missing_model_is_a_clear_error(tmp_path, capsys):
    missing = tmp_path / "no-such-model"
    code = eval_main(["--model", str(missing), "--data-dir", str(FIXTURES), "--tasks", "stsb"])
    assert code == 2
    assert str(missing) in capsys.readouterr().err


def test_sts_eval_missing_data_dir_is_a_clear_error(tiny_bert_dir, tmp_path, capsys):
    code = eval_main(["--model", str(tiny_bert_dir), "--data-dir", str(tmp_path / "nope")])
    assert code == 2
    assert "nope" in capsys.readouterr().err


def test_sts_data_filter_prints_counts(tmp_path, capsys):
    out = tmp_path / "kept.jsonl"
    assert data_main(["filter", "--data-dir", str(FIXTURES), "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    report = json.loads(printed[: printed.rindex("}") + 1])
    assert report["kept"] == len(out.read_text().splitlines())
    assert report["removed"] >= 1


def test_sts_data_list(capsys):
    assert data_main(["list"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert {"sts12", "stsb", "sickr", "nli-triplets", "stsb-zh", "wiki"} <= set(names)


def test_sts_eval_scores_extra_pair_sets(tiny_bert_dir, tmp_path, capsys):
    output = tmp_path / "pairs"
    code = eval_main(
        [
            "--model", str(tiny_bert_dir),
            "--data-dir", str(FIXTURES),
            "--tasks", "stsb",
            "--pairs", "stsb:dev",
            "--output", str(output),
            "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    saved = json.loads(output.with_suffix(".json").read_text())
    scores = saved["pairs"]["stsb:dev"]
    assert set(scores) == {"spearman", "pearson"}
    expected = f"stsb:dev: spearman {scores['spearman']:.2f}, pearson {scores['pearson']:.2f}"
    assert expected in lines


def _eval_saved(model: Path, output: Path, capsys, *options: str) -> tuple[str, dict, str]:
    """sts-eval of ``model`` on STS-B and SICK-R: printed text, saved JSON and markdown."""
    argv = ["--model", str(model), "--data-dir", str(FIXTURES), "--tasks", "stsb,sickr"]
    assert eval_main([*argv, "--output", str(output), "--quiet", *options]) == 0
    saved = json.loads(output.with_suffix(".json").read_text())
    return capsys.readouterr().out, saved, output.with_suffix(".md").read_text()


def test_sts_eval_table_names_its_scorer(tiny_bert_dir, tmp_path, capsys):
    """A model with a pair-scoring regression head is scored by cosine (the head unused), and
    its table, JSON and markdown say so; a plain model's say cosine; --pairs say theirs."""
    from sts_core.encoder import SentenceEncoder
    from sts_core.heads import LinearHead

    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    head = LinearHead.for_pairs(encoder.dimension)
    encoder.add_head("regression", head, pair_scorer=True)
    encoder.save_pretrained(tmp_path / "with-head")
    capsys.readouterr()

    printed, saved, markdown = _eval_saved(
        tmp_path / "with-head", tmp_path / "head", capsys, "--pairs", "stsb:dev"
    )
    cosine = "scored by: cosine similarity of the embeddings"
    assert f"{cosine} (the model's pair_scorer head 'regression' is not used)" in printed
    assert saved["scorer"] == "cosine" and saved["unused_pair_scorer"] == "regression"
    assert f"S{cosine[1:]} (the model's pair_scorer head 'regression' is not used)" in markdown
    # the --pairs sets go through score_pairs, i.e. the head
    assert "--pairs scored by: the head 'regression'" in printed
    assert saved["pairs_scorer"] == "head:regression"

    plain_printed, plain, plain_markdown = _eval_saved(tiny_bert_dir, tmp_path / "plain", capsys)
    assert cosine in plain_printed and "pair_scorer" not in plain_printed
    assert plain["scorer"] == "cosine" and "unused_pair_scorer" not in plain
    assert f"S{cosine[1:]}." in plain_markdown
    # the same embeddings, the same table: the head really is not what was scored
    assert saved["tasks"] == plain["tasks"]


def test_sts_data_filter_writes_the_format_its_output_names(tmp_path, capsys):
    """The probe: ``--output kept.csv`` wrote JSON lines under a .csv name, which
    ``sts-eval --pairs`` then failed to read; a name of no table format is refused first."""
    from sts_core.data import load_reference

    out = tmp_path / "kept.csv"
    assert data_main(["filter", "--data-dir", str(FIXTURES), "--output", str(out)]) == 0
    kept = load_reference(str(out), "train")[1]
    assert out.read_text(encoding="utf-8").startswith("sentence1,sentence2,score")
    jsonl = tmp_path / "kept.jsonl"
    assert data_main(["filter", "--data-dir", str(FIXTURES), "--output", str(jsonl)]) == 0
    assert load_reference(str(jsonl), "train")[1].to_list() == kept.to_list()
    capsys.readouterr()
    assert data_main(["filter", "--data-dir", str(FIXTURES), "--output", str(tmp_path / "k.txt")])
    assert "one of the suffixes .csv" in capsys.readouterr().err
    assert not (tmp_path / "k.txt").exists()
