"""Several training sets in one run (``train_datasets`` as a mapping ``name: {path, loss,
weight, prompt, columns}``): each batch trains on its set's loss times the set's weight,
each set's loss is logged by name, ``metrics.json`` counts the batches each set got, the
batch plan survives a resume, one set behaves as the list form, and a bad entry stops the
run in one line before any weights load."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from datasets import Dataset

from sts_core.encoder import SentenceEncoder
from sts_core.losses import cosine_mse_loss, in_batch_infonce_loss
from sts_core.testing import quick_training_args, refusal, trainer_step_losses
from sts_core.training import BaseConfig, BaseTrainer, DataArguments
from sts_core.training.collator import TrainSetsCollator
from sts_core.training.multi_dataset import (
    DATASET_NAME_KEY,
    TrainDatasets,
    TrainSet,
    parse_train_datasets,
)
from sts_core.training.resume_settings import changed_settings, recipe_settings
from sts_core.training.run import TrainingRun, main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

PAIRS, NLI = 10, 7  # rows of the two sets: with 4 rows a batch, 3 and 2 batches an epoch


def pairs_dataset(n: int = PAIRS) -> Dataset:
    return Dataset.from_dict(
        {
            "sentence1": [f"a man plays the guitar {i}" for i in range(n)],
            "sentence2": [f"a dog runs in the park {i}" for i in range(n)],
            "score": [(i % 5) / 4 for i in range(n)],
        }
    )


def nli_dataset(n: int = NLI) -> Dataset:
    return Dataset.from_dict(
        {
            "sentence1": [f"the cat sits on the mat {i}" for i in range(n)],
            "sentence2": [f"a cat is sitting {i}" for i in range(n)],
            "hard_negative": [f"no cat is here {i}" for i in range(n)],
            "score": [1.0] * n,
        }
    )


def write_pairs(path: Path, n: int = PAIRS) -> Path:
    """Scored pairs in CoSENT's headerless ``.tsv`` (sentence1, sentence2, score)."""
    rows = pairs_dataset(n)
    lines = [f"{r['sentence1']}\t{r['sentence2']}\t{r['score']:.2f}\n" for r in rows]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def write_triplets(path: Path, n: int = NLI) -> Path:
    """NLI triplets in SimCSE's CSV (``sent0,sent1,hard_neg``)."""
    rows = nli_dataset(n)
    lines = [f"{r['sentence1']},{r['sentence2']},{r['hard_negative']}\n" for r in rows]
    path.write_text("sent0,sent1,hard_neg\n" + "".join(lines), encoding="utf-8")
    return path


def write_recipe(
    root: Path, model: Path, datasets: dict[str, str], **overrides: str
) -> tuple[Path, Path]:
    """A recipe training on ``datasets`` (name → YAML flow mapping) for two epochs of
    batches of 4, no dev set; returns it and its output folder."""
    output_dir = root / "out"
    lines = {
        "model_name_or_path": str(model),
        "eval_dataset": "none",
        "output_dir": str(output_dir),
        "per_device_train_batch_size": "4",
        "num_train_epochs": "2",
        "learning_rate": "1e-3",
        "warmup_steps": "0",
        "logging_steps": "1",
        "save_strategy": '"no"',
        "report_to": "none",
        "disable_tqdm": "true",
        "dataloader_pin_memory": "false",
        "seed": "0",
        **overrides,
    }
    text = "train_datasets:\n" + "".join(f"  {k}: {v}\n" for k, v in datasets.items())
    text += "".join(f"{key}: {value}\n" for key, value in lines.items())
    recipe = root / "recipe.yaml"
    recipe.write_text(text, encoding="utf-8")
    return recipe, output_dir


def two_sets(root: Path, weight: float = 1.0) -> dict[str, str]:
    pairs, nli = write_pairs(root / "pairs.tsv"), write_triplets(root / "nli.csv")
    return {
        "pairs": f"{{path: {pairs}, loss: cosine_mse}}",
        "nli": f"{{path: {nli}, loss: infonce, weight: {weight}}}",
    }


# ---------------------------------------------------------------- the mapping as a setting
def test_the_mapping_is_read_with_its_defaults() -> None:
    parsed = parse_train_datasets(
        [{"a": "x.tsv", "b": {"path": "y.csv", "loss": "infonce", "weight": 2, "prompt": "q: "}}]
    )
    assert parsed == {
        "a": {"path": "x.tsv", "loss": None, "weight": 1.0, "prompt": None, "columns": None},
        "b": {"path": "y.csv", "loss": "infonce", "weight": 2.0, "prompt": "q: ", "columns": None},
    }
    assert parse_train_datasets(['{"a": {"path": "x"}}'])["a"]["path"] == "x"  # command line
    assert parse_train_datasets(["x.tsv", "y.csv"]) == ["x.tsv", "y.csv"]


def test_the_sets_are_parsed_once_into_typed_specs_that_travel_with_the_arguments() -> None:
    """``DataArguments`` keeps the parsed specs (``train_specs``) beside the option's value;
    the run, the data and the Trainer's check read them, never the dicts again."""
    from sts_core.training.multi_dataset import TrainDatasetSpec

    data = DataArguments(train_datasets=[{"a": "x.tsv", "b": {"path": "y.csv", "weight": 2}}])
    assert data.train_specs == (
        TrainDatasetSpec("a", "x.tsv"),
        TrainDatasetSpec("b", "y.csv", weight=2.0),
    )
    assert data.train_datasets == {spec.name: spec.to_dict() for spec in data.train_specs}
    assert "train_specs" not in {f.name for f in dataclasses.fields(DataArguments)}
    assert DataArguments(train_datasets=["x.tsv"]).train_specs is None


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"a": {"path": "x", "los": "infonce"}}, "a: unknown key 'los' (did you mean 'loss'?)"),
        ({"a": {"loss": "infonce"}}, "a: path is required"),
        ({"a": {"path": "x", "weight": 0}}, "a: weight must be finite and > 0, got 0"),
        ({"a": {"path": "x", "weight": "big"}}, "a: weight must be a number"),
        ({"a": {"path": "x", "prompt": 3}}, "a: prompt: expected a mapping"),
        ({"a": {"path": "x", "columns": ["s"]}}, "a: columns: expected a mapping"),
        ([{"a": "x"}, {"b": "y"}], "not a list of mappings"),
        ({}, "is an empty mapping"),
    ],
)
def test_a_bad_entry_is_refused_naming_it(value: Any, words: str) -> None:
    with pytest.raises(ValueError) as caught:
        DataArguments(train_datasets=value if isinstance(value, list) else [value])
    assert f"train_datasets: {words}" in str(caught.value) or words in str(caught.value)


@pytest.mark.parametrize(
    ("option", "value"), [("batch_sampler", "unique"), ("multi_dataset_sampler", "random")]
)
def test_an_unknown_sampler_is_refused(option: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"{option} must be one of"):
        BaseConfig(output_dir="unused", report_to="none", **{option: value})


def test_the_sets_losses_and_samplers_are_settings_a_resume_must_repeat() -> None:
    def settings(**changes: Any) -> dict[str, Any]:
        spec = {"pairs": {"path": "p.tsv", "loss": "cosine_mse"}, **changes.pop("sets", {})}
        data = DataArguments(train_datasets=[spec])
        config = BaseConfig(output_dir="unused", report_to="none", **changes)
        return recipe_settings(config, None, data)

    base = settings()
    assert changed_settings(base, settings(), {}) == []
    changed = changed_settings(base, settings(multi_dataset_sampler="round_robin"), {})
    assert changed == ["multi_dataset_sampler proportional → round_robin"]
    assert changed_settings(base, settings(batch_sampler="no_duplicates"), {})
    other_loss = settings(sets={"pairs": {"path": "p.tsv", "loss": "infonce"}})
    (line,) = changed_settings(base, other_loss, {})
    assert line.startswith("train_datasets") and "infonce" in line


# ---------------------------------------------------------------- training
def spy_on_losses(trainer: BaseTrainer) -> list[dict[str, Any]]:
    """Record each call of each loss module: its name, the embeddings, labels and value."""
    calls: list[dict[str, Any]] = []
    for name, module in trainer.loss_modules.items():

        def spy(embeddings, labels, _name=name, _forward=module.forward):
            value = _forward(embeddings, labels)
            detached = {k: v.detach().clone() for k, v in embeddings.items()}
            calls.append({"loss": _name, "embeddings": detached, "labels": labels, "value": value})
            return value

        module.forward = spy
    return calls


def test_each_batch_trains_on_its_sets_loss_times_its_weight(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """The batches come from one set each, in the plan's order; a batch of scored pairs
    trains on cosine MSE, a batch of triplets on InfoNCE with the hard negatives, each
    recomputed here from the batch's embeddings; the step's loss is the value times the
    set's weight, and each set's value is logged as ``loss_<set>``."""
    sets = TrainDatasets(
        [
            TrainSet("pairs", pairs_dataset(), "cosine_mse"),
            TrainSet("nli", nli_dataset(), "infonce", weight=0.5),
        ]
    )
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = quick_training_args(
        BaseConfig, tmp_path, per_device_train_batch_size=4, num_train_epochs=1, max_steps=-1
    )
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=sets)
    calls = spy_on_losses(trainer)
    trainer.train()
    plan = trainer.batch_plan()
    order = [plan.names[plan.set_of_row(batch[0])] for batch in plan.batches(0)]
    assert sorted(order) == ["nli", "nli", "pairs", "pairs", "pairs"]
    assert [c["loss"] for c in calls] == [
        {"pairs": "cosine_mse", "nli": "infonce"}[name] for name in order
    ]
    logged = [e for e in trainer.state.log_history if "loss" in e and "train_loss" not in e]
    for call, name, entry in zip(calls, order, logged, strict=True):
        e = call["embeddings"]
        if name == "pairs":
            assert "hard_negative" not in e
            direct = cosine_mse_loss(e["sentence1"], e["sentence2"], call["labels"])
        else:
            direct = in_batch_infonce_loss(e["sentence1"], e["sentence2"], 0.05, e["hard_negative"])
        assert float(call["value"].detach()) == pytest.approx(float(direct), rel=1e-5)
        weight = 0.5 if name == "nli" else 1.0
        assert entry["loss"] == pytest.approx(weight * float(direct), rel=1e-4, abs=1e-6)
        assert entry[f"loss_{name}"] == pytest.approx(float(direct), rel=1e-4, abs=1e-6)
        other = "loss_nli" if name == "pairs" else "loss_pairs"
        assert other not in entry
    report = trainer.batch_plan_report()
    assert {n: d["batches"] for n, d in report["datasets"].items()} == {"pairs": 3, "nli": 2}


def test_one_set_in_the_mapping_trains_as_the_list_form(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """A mapping of one set (the method's loss) takes the Trainer's own random batches:
    the same steps, with the same losses, as the same rows given as a list."""

    def step_losses(dataset: Any, name: str) -> dict[int, float]:
        encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
        args = quick_training_args(
            BaseConfig, tmp_path / name, per_device_train_batch_size=4, max_steps=-1
        )
        trainer = BaseTrainer(model=encoder, args=args, train_dataset=dataset)
        trainer.train()
        return trainer_step_losses(trainer)

    listed = step_losses(pairs_dataset(), "list")
    mapped = step_losses(TrainDatasets([TrainSet("pairs", pairs_dataset(), "cosine_mse")]), "map")
    assert len(listed) == math.ceil(PAIRS / 4)
    assert mapped == pytest.approx(listed, rel=1e-6)


def test_a_resumed_run_takes_the_batches_and_counts_of_the_uninterrupted_one(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    from sts_core.training.checkpoints import EPOCH_BATCHES_NAME

    def run(output_dir: Path, resume: Path | None = None) -> BaseTrainer:
        sets = TrainDatasets(
            [
                TrainSet("pairs", pairs_dataset(), "cosine_mse"),
                TrainSet("nli", nli_dataset(), "infonce"),
            ]
        )
        encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
        args = quick_training_args(
            BaseConfig,
            output_dir,
            per_device_train_batch_size=4,
            num_train_epochs=2,
            max_steps=-1,
            multi_dataset_sampler="round_robin",
            batch_sampler="no_duplicates",
            save_strategy="steps",
            save_steps=3,
            save_total_limit=None,
        )
        trainer = BaseTrainer(model=encoder, args=args, train_dataset=sets)
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        return trainer

    full = run(tmp_path / "full")
    checkpoint = tmp_path / "full" / "checkpoint-3"  # mid-way through epoch 0 (4 batches)
    assert checkpoint.is_dir()
    assert not (checkpoint / EPOCH_BATCHES_NAME).exists()  # the plan's: from the seed
    resumed = run(tmp_path / "resumed", resume=checkpoint)
    steps = trainer_step_losses(full)
    assert len(steps) == 2 * 2 * 2  # round robin: 2 sets × min(3, 2) batches, 2 epochs
    after = {s: loss for s, loss in trainer_step_losses(resumed).items() if s > 3}
    assert after == pytest.approx({s: steps[s] for s in steps if s > 3})
    assert resumed.batch_plan_report()["datasets"] == full.batch_plan_report()["datasets"]
    assert full.batch_plan_report()["datasets"]["pairs"]["batches"] == 4


def test_a_batch_of_rows_from_two_sets_is_refused() -> None:
    collator = TrainSetsCollator({})
    rows = [{DATASET_NAME_KEY: "a"}, {DATASET_NAME_KEY: "b"}]
    with pytest.raises(ValueError, match="rows of one training set"):
        collator(rows)


# ---------------------------------------------------------------- the command
@pytest.mark.parametrize(
    ("sampler", "batch_sampler", "per_epoch", "unused"),
    [
        ("proportional", "default", {"pairs": 3, "nli": 2}, None),
        ("round_robin", "default", {"pairs": 2, "nli": 2}, {"pairs": 2, "nli": 0}),
        ("round_robin", "no_duplicates", {"pairs": 2, "nli": 2}, {"pairs": 2, "nli": 0}),
    ],
)
def test_two_sets_train_through_sts_train(
    tiny_bert_nodropout_dir: Path,
    tmp_path: Path,
    sampler: str,
    batch_sampler: str,
    per_epoch: dict[str, int],
    unused: dict[str, int] | None,
) -> None:
    """Scored pairs with cosine_mse and NLI triplets with infonce, for two epochs of
    batches of 4 (10 and 7 rows: ⌈10/4⌉ = 3 and ⌈7/4⌉ = 2 batches a set, all of them under
    proportional, 2 of each under round_robin, leaving 10 − 2·4 pairs unused an epoch)."""
    recipe, output_dir = write_recipe(
        tmp_path,
        tiny_bert_nodropout_dir,
        two_sets(tmp_path),
        multi_dataset_sampler=sampler,
        batch_sampler=batch_sampler,
    )
    run = TrainingRun(["--config", str(recipe)])
    run.run()
    metrics = json.loads((output_dir / "metrics.json").read_text(encoding="utf-8"))
    trained = {name: d["batches"] for name, d in metrics["train"]["datasets"].items()}
    assert trained == {name: 2 * count for name, count in per_epoch.items()}
    assert metrics["data"]["sources"] == {"pairs": PAIRS, "nli": NLI}
    assert metrics["data"]["datasets"]["nli"]["loss"] == "infonce"
    plan = metrics["train"]["batch_plan"]
    assert plan["batches_per_epoch"] == sum(per_epoch.values())
    assert [e["batches"] for e in plan["epochs"]] == [per_epoch, per_epoch]
    assert [e.get("unused_rows") for e in plan["epochs"]] == [unused, unused]
    if batch_sampler == "no_duplicates":
        counts = plan["epochs"][0]["no_duplicates"]["pairs"]
        assert counts == {"rows": PAIRS, "kept": PAIRS, "deferred": 0, "with_duplicate": 0}
    logged = [e for e in run.trainer.state.log_history if "loss" in e and "train_loss" not in e]
    assert sum("loss_pairs" in e for e in logged) == trained["pairs"]
    assert sum("loss_nli" in e for e in logged) == trained["nli"]
    encoder = SentenceEncoder.from_pretrained(output_dir)
    assert encoder.encode(["a man plays the guitar 1"], show_progress_bar=False).shape[0] == 1


def test_each_sets_loss_is_resolved_once_in_a_run(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run resolves each set's loss class once (``TrainingRun.set_losses``): its
    checks, the sets' loading and the Trainer (through each ``TrainSet``) use it."""
    from sts_core.training import data, trainer
    from sts_core.training.multi_dataset import set_loss_class

    calls: list[str | None] = []

    def counted(method: Any, config: Any, name: str | None) -> Any:
        calls.append(name)
        return set_loss_class(method, config, name)

    monkeypatch.setattr(data, "set_loss_class", counted)
    monkeypatch.setattr(trainer, "set_loss_class", counted)
    recipe, output_dir = write_recipe(
        tmp_path, tiny_bert_nodropout_dir, two_sets(tmp_path), max_steps="1"
    )
    run = TrainingRun(["--config", str(recipe)])
    run.run()
    assert calls == ["cosine_mse", "infonce"]
    assert [s.loss_class for s in run.trainer.train_dataset.sets] == list(run.set_losses.values())


def test_infonce_of_a_set_takes_the_methods_settings(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """A set's loss is built from the run's config: a method config with
    ``infonce_temperature`` gives it to the set's InfoNCE (here the core's BaseConfig with
    that field added)."""
    from dataclasses import dataclass, field

    @dataclass
    class TemperatureConfig(BaseConfig):
        infonce_temperature: float = field(default=0.2)

    sets = TrainDatasets([TrainSet("nli", nli_dataset(), "infonce")])
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = quick_training_args(TemperatureConfig, tmp_path, max_steps=1)
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=sets)
    assert trainer.loss_modules["infonce"].temperature == 0.2


@pytest.mark.usefixtures("no_model_loading")
@pytest.mark.parametrize(
    ("entry", "overrides", "words"),
    [
        (
            "{path: NLI, loss: no_such_loss}",
            {},
            "train_datasets: nli: unknown loss 'no_such_loss'",
        ),
        (
            "{path: NLI, loss: softmax}",
            {},
            "train_datasets: nli: the training set has no label column 'label'",
        ),
        (
            "{path: WIKI, loss: cosine_mse}",
            {},
            "train_datasets: nli: the training set has no column sentence1, sentence2",
        ),
        (
            "{path: 'stsb:train', loss: cosine_mse, columns: {sentence1: a, sentence2: b}}",
            {},
            "train_datasets: nli: columns is for tables, and 'stsb:train' is a registry dataset",
        ),
        (
            "{path: NLI, loss: infonce, prompt: {score: 'q: '}}",
            {},
            "train_datasets: nli: prompt names the column 'score'",
        ),
        (
            "{path: NLI, loss: infonce}",
            {"teacher_model": "MODEL"},
            "teacher_model with train_datasets as a mapping",
        ),
        (
            "{path: NLI, loss: infonce}",
            {"freeze_backbone": "true"},
            "train_datasets: pairs: freeze_backbone: loss cosine_mse trains no head",
        ),
    ],
)
def test_a_bad_set_stops_in_one_line_before_the_model_loads(
    tiny_bert_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    entry: str,
    overrides: dict[str, str],
    words: str,
) -> None:
    nli = write_triplets(tmp_path / "nli.csv")
    wiki = tmp_path / "wiki1m_sentences.txt"
    wiki.write_text("one sentence here\nanother sentence there\n", encoding="utf-8")
    pairs = write_pairs(tmp_path / "pairs.tsv")
    sets = {
        "pairs": f"{{path: {pairs}, loss: cosine_mse}}",
        "nli": entry.replace("NLI", str(nli)).replace("WIKI", str(wiki)),
    }
    settings = {k: v.replace("MODEL", str(tiny_bert_dir)) for k, v in overrides.items()}
    recipe, output_dir = write_recipe(tmp_path, tiny_bert_dir, sets, **settings)
    assert words in refusal(main, ["--config", str(recipe)], capsys)
    assert not output_dir.exists()


# ---------------------------------------------------------------- prompts
def training_time_embedding(run: TrainingRun, row: dict[str, Any], column: str) -> Any:
    """The embedding of ``row[column]`` as training computed it: the run's collator
    (the set's prompt put before the text), then the trained encoder's forward."""
    from sts_core.training.collator import split_features

    trainer = run.trainer
    encoder = trainer.accelerator.unwrap_model(trainer.model).eval()
    batch = trainer.data_collator([row])
    features = split_features(batch, trainer.text_columns)[column]
    with torch.no_grad():
        return encoder(**features)[0].numpy()


def test_a_model_trained_with_one_prompt_encodes_with_it_after_saving(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """Both sets with ``prompt: "query: "``: the saved folder records it as the default
    prompt (ours and sentence-transformers' files), and ``encode`` of a text by the
    reloaded model — and by sentence-transformers — is the embedding training computed
    for it (the prompt before the text)."""
    from sentence_transformers import SentenceTransformer

    sets = two_sets(tmp_path)
    sets = {name: entry[:-1] + ', prompt: "query: "}' for name, entry in sets.items()}
    recipe, output_dir = write_recipe(tmp_path, tiny_bert_nodropout_dir, sets)
    run = TrainingRun(["--config", str(recipe)])
    run.run()
    st_config = json.loads((output_dir / "config_sentence_transformers.json").read_text())
    assert st_config["prompts"] == {"pairs": "query: ", "nli": "query: "}
    assert st_config["default_prompt_name"] == "pairs"
    row = {**pairs_dataset()[3], DATASET_NAME_KEY: "pairs"}
    trained = training_time_embedding(run, row, "sentence1")
    reloaded = SentenceEncoder.from_pretrained(output_dir)
    assert reloaded.prompts == st_config["prompts"]
    encoded = reloaded.encode([row["sentence1"]], show_progress_bar=False)[0]
    np.testing.assert_allclose(encoded, trained, rtol=1e-5, atol=1e-6)
    theirs = SentenceTransformer(str(output_dir), device="cpu").encode([row["sentence1"]])[0]
    np.testing.assert_allclose(theirs, trained, rtol=1e-4, atol=1e-5)
    reloaded.set_prompts(reloaded.prompts, None)
    bare = reloaded.encode([row["sentence1"]], show_progress_bar=False)[0]
    assert np.abs(bare - trained).max() > 1e-3  # the prompt changes the embedding


def test_prompts_by_column_are_recorded_by_name_without_a_default(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    prompts = '{sentence1: "query: ", sentence2: "passage: "}'
    pairs = write_pairs(tmp_path / "pairs.tsv")
    sets = {"pairs": f"{{path: {pairs}, loss: cosine_mse, prompt: {prompts}}}"}
    recipe, output_dir = write_recipe(tmp_path, tiny_bert_nodropout_dir, sets)
    run = TrainingRun(["--config", str(recipe)])
    run.run()
    row = {**pairs_dataset()[2], DATASET_NAME_KEY: "pairs"}
    batch = run.trainer.data_collator([row])
    decode = run.trainer.processing_class.decode
    assert decode(batch["sentence2_input_ids"][0], skip_special_tokens=True).startswith("passage")
    assert decode(batch["sentence1_input_ids"][0], skip_special_tokens=True).startswith("query")
    reloaded = SentenceEncoder.from_pretrained(output_dir)
    assert reloaded.prompts == {"pairs_sentence1": "query: ", "pairs_sentence2": "passage: "}
    assert reloaded.default_prompt_name is None
    # sentence-transformers reads the same named prompts from the folder (beside its own
    # empty "query" and "document")
    from sentence_transformers import SentenceTransformer

    peer = SentenceTransformer(str(output_dir), device="cpu")
    assert {name: peer.prompts[name] for name in reloaded.prompts} == reloaded.prompts
    assert peer.default_prompt_name is None
    embeddings = {}
    for column in ("sentence1", "sentence2"):
        trained = embeddings[column] = training_time_embedding(run, row, column)
        named = reloaded.encode(
            [row[column]], show_progress_bar=False, prompt_name=f"pairs_{column}"
        )[0]
        np.testing.assert_allclose(named, trained, rtol=1e-5, atol=1e-6)
        theirs = peer.encode([row[column]], prompt_name=f"pairs_{column}")[0]
        np.testing.assert_allclose(theirs, trained, rtol=1e-4, atol=1e-5)
    # what the comparison can see: sentence1 under sentence2's prompt
    swapped = peer.encode([row["sentence1"]], prompt_name="pairs_sentence2")[0]
    assert np.abs(swapped - embeddings["sentence1"]).max() > 1e-3
    with pytest.raises(ValueError, match="prompt_name 'query' is not one of"):
        reloaded.encode(["x"], prompt_name="query")


def test_check_only_names_each_set_with_its_loss_and_weight(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe, output_dir = write_recipe(
        tmp_path, tiny_bert_dir, two_sets(tmp_path, weight=0.5), check_only="true"
    )
    assert main(["--config", str(recipe)]) == 0
    out = capsys.readouterr().out
    assert "training set pairs: 10 rows, loss cosine_mse, weight 1" in out
    assert "training set nli: 7 rows, loss infonce, weight 0.5" in out
    assert not output_dir.exists()


# ---------------------------------------------------------------- tables with their own columns
def write_tables(root: Path) -> tuple[Path, Path]:
    """The two sets as tables with a header and column names of their own: scored pairs
    in JSON Lines (``q``, ``d``, ``sim``) and triplets in Parquet (``a``, ``p``, ``n``)."""
    pairs, nli = pairs_dataset(), nli_dataset()
    jsonl = root / "pairs.jsonl"
    with jsonl.open("w", encoding="utf-8") as handle:
        for row in pairs:
            record = {"q": row["sentence1"], "d": row["sentence2"], "sim": row["score"]}
            handle.write(json.dumps(record) + "\n")
    parquet = root / "nli.parquet"
    nli.rename_columns({"sentence1": "a", "sentence2": "p", "hard_negative": "n"}).remove_columns(
        "score"
    ).to_parquet(str(parquet))
    return jsonl, parquet


def test_each_set_reads_its_table_with_its_own_columns(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """A set's ``columns`` maps its own table's names (the pairs' ``q``/``d``/``sim``, the
    triplets' ``a``/``p``/``n``): both sets train, each with every row, and the pairs'
    scores are the file's ``sim`` values."""
    jsonl, parquet = write_tables(tmp_path)
    sets = {
        "pairs": f"{{path: {jsonl}, loss: cosine_mse, "
        "columns: {sentence1: q, sentence2: d, score: sim}}",
        "nli": f"{{path: {parquet}, loss: infonce, "
        "columns: {sentence1: a, sentence2: p, hard_negative: n}}",
    }
    recipe, output_dir = write_recipe(tmp_path, tiny_bert_nodropout_dir, sets)
    run = TrainingRun(["--config", str(recipe)])
    run.run()
    metrics = json.loads((output_dir / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["data"]["sources"] == {"pairs": PAIRS, "nli": NLI}
    trained = {name: d["batches"] for name, d in metrics["train"]["datasets"].items()}
    assert trained == {"pairs": 2 * 3, "nli": 2 * 2}  # ⌈10/4⌉ and ⌈7/4⌉ a set, two epochs
    loaded = run.trainer.train_dataset
    pair_rows = [row for row in loaded if row["dataset_name"] == "pairs"]
    assert sorted(row["score"] for row in pair_rows) == sorted(pairs_dataset()["score"])


def test_a_sets_columns_naming_an_absent_column_stops_in_one_line(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jsonl, parquet = write_tables(tmp_path)
    sets = {
        "pairs": f"{{path: {jsonl}, loss: cosine_mse, "
        "columns: {sentence1: q, sentence2: d, score: similarity}}",
        "nli": f"{{path: {parquet}, loss: infonce, "
        "columns: {sentence1: a, sentence2: p, hard_negative: n}}",
    }
    recipe, output_dir = write_recipe(tmp_path, tiny_bert_dir, sets)
    capsys.readouterr()  # the progress bar of writing the Parquet file
    message = refusal(main, ["--config", str(recipe)], capsys)
    assert "similarity" in message and str(jsonl) in message, message
    assert not output_dir.exists()


def test_score_range_rescales_the_sets_whose_loss_reads_scores_only(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """``score_range: [0, 1]`` with a ``softmax`` set of NLI labels: the NLI scores (2.0 for
    entailment) lie outside the range but the softmax loss reads the class labels, so the
    set is neither refused nor rescaled; the cosine_mse set's scores are checked and kept
    (already in [0, 1])."""
    nli = tmp_path / "snli.csv"
    labels = ["entailment", "neutral", "contradiction"] * 3
    rows = [f"premise {i},hypothesis {i},{label}\n" for i, label in enumerate(labels)]
    nli.write_text("sentence1,sentence2,label\n" + "".join(rows), encoding="utf-8")
    sets = {
        "pairs": f"{{path: {write_pairs(tmp_path / 'pairs.tsv')}, loss: cosine_mse}}",
        "nli": f"{{path: {nli}, loss: softmax}}",
    }
    recipe, _ = write_recipe(tmp_path, tiny_bert_dir, sets, score_range="[0, 1]")
    run = TrainingRun(["--config", str(recipe)])
    run.parse()
    from sts_core.training.data import build_train_sets

    built, _ = build_train_sets(run.data_args, run.method, run.config)
    by_name = {train_set.name: train_set.dataset for train_set in built.sets}
    assert sorted(by_name["nli"]["score"]) == sorted([2.0, 1.0, 0.0] * 3)
    assert by_name["nli"]["label"] == [0, 1, 2] * 3
    assert by_name["pairs"]["score"] == pytest.approx(
        [float(f"{s:.2f}") for s in pairs_dataset()["score"]]
    )
