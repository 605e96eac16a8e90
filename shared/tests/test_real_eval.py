"""all-MiniLM-L6-v2 on the seven STS tasks of the real benchmark, checked independently.

The independent side reads the SentEval files with plain Python, encodes with
sentence-transformers and correlates with scipy; the evaluator side goes through
``sts_core.data``, ``SentenceEncoder`` and ``STSEvaluator``. Needs STS_DATA_DIR and
STS_MODELS_DIR (CI sets both).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from sts_core.encoder import SentenceEncoder
from sts_core.evaluation.sts import STS_TASKS, STSEvaluator

pytestmark = [pytest.mark.real_data, pytest.mark.real_model, pytest.mark.slow]

EXPECTED_PAIRS = {
    "sts12": 3108, "sts13": 1500, "sts14": 3750, "sts15": 3000,
    "sts16": 1186, "stsb": 1379, "sickr": 4927,
}  # fmt: skip


def read_sts_year(folder: Path) -> tuple[list[str], list[str], list[float], list[str]]:
    left, right, gold, subsets = [], [], [], []
    for gs_file in sorted(folder.glob("STS.gs.*.txt")):
        subset = gs_file.name[len("STS.gs.") : -len(".txt")]
        inputs = (folder / f"STS.input.{subset}.txt").read_text(encoding="utf-8").splitlines()
        scores = gs_file.read_text(encoding="utf-8").splitlines()
        for line, score in zip(inputs, scores, strict=True):
            if score.strip():
                a, b = line.split("\t")[:2]
                left.append(a.strip())
                right.append(b.strip())
                gold.append(float(score))
                subsets.append(subset)
    return left, right, gold, subsets


def read_independently(
    data_dir: Path, task: str
) -> tuple[list[str], list[str], list[float], list[str]]:
    senteval = data_dir / "senteval"
    if task.startswith("sts1"):
        return read_sts_year(senteval / "STS" / f"STS{task[3:]}-en-test")
    if task == "stsb":
        rows = (senteval / "STS/STSBenchmark/sts-test.csv").read_text(encoding="utf-8").splitlines()
        fields = [row.split("\t") for row in rows]
        return (
            [f[5].strip() for f in fields],
            [f[6].strip() for f in fields],
            [float(f[4]) for f in fields],
            [],
        )
    rows = (senteval / "SICK/SICK_test_annotated.txt").read_text(encoding="utf-8").splitlines()[1:]
    fields = [row.split("\t") for row in rows]
    return (
        [f[1].strip() for f in fields],
        [f[2].strip() for f in fields],
        [float(f[3]) for f in fields],
        [],
    )


def encode_each_sentence_once(
    model: Any, left: list[str], right: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """The embeddings of ``left`` and ``right``, row by row, each distinct sentence encoded
    once (a quarter of the 37,700 repeat one: SICK-R's, above all)."""
    distinct = list(dict.fromkeys(left + right))
    row = {sentence: i for i, sentence in enumerate(distinct)}
    embeddings = model.encode(distinct, batch_size=128, convert_to_numpy=True)
    return embeddings[[row[s] for s in left]], embeddings[[row[s] for s in right]]


@pytest.fixture(scope="module")
def evaluator_report(sts_data_dir, minilm_dir):
    encoder = SentenceEncoder.from_pretrained(minilm_dir)
    evaluator = STSEvaluator(data_dir=sts_data_dir, batch_size=128, show_progress_bar=False)
    return evaluator.evaluate(encoder, model_name="all-MiniLM-L6-v2")


def test_minilm_seven_tasks_match_independent_computation(
    evaluator_report, sts_data_dir, minilm_dir
):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(minilm_dir), device="cpu")
    assert list(evaluator_report.results) == list(STS_TASKS)
    for task in STS_TASKS:
        left, right, gold, subsets = read_independently(sts_data_dir, task)
        result = evaluator_report.results[task]
        assert result.size == len(gold) == EXPECTED_PAIRS[task]
        a, b = encode_each_sentence_once(model, left, right)
        cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        # Encoders agree to ~1e-7; that can swap near-tied ranks, hence 0.02 on the ×100 scale.
        assert result.spearman["all"] == pytest.approx(100 * spearmanr(cosine, gold)[0], abs=0.02)
        assert result.pearson["all"] == pytest.approx(100 * pearsonr(cosine, gold)[0], abs=0.02)
        if subsets:
            names = sorted(set(subsets))
            per_subset = []
            for name in names:
                mask = np.array(subsets) == name
                per_subset.append(100 * spearmanr(cosine[mask], np.array(gold)[mask])[0])
            sizes = [subsets.count(n) for n in names]
            assert result.spearman["mean"] == pytest.approx(np.mean(per_subset), abs=0.02)
            assert result.spearman["wmean"] == pytest.approx(
                np.average(per_subset, weights=sizes), abs=0.02
            )


def test_minilm_scores_are_in_the_published_range(evaluator_report):
    # all-MiniLM-L6-v2 is a strong general-purpose model: every task well above 70 and below 90.
    for task, result in evaluator_report.results.items():
        assert 70 < result.spearman["all"] < 90, task
