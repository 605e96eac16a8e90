r"""The contrastive ceiling (Pcc-tuning §2): the best Spearman correlation a predictor with
only two levels ("similar" / "dissimilar") can reach against a set of gold scores.

Two numbers:

- the paper's closed form (eq. 7), :math:`\rho_{\max} = (7n^2 - 4) / (8(n^2 - 1))` for
  ``n`` pairs with distinct scores, which tends to 0.875. It comes from
  :math:`\rho = 1 - 6\sum d_i^2 / (n(n^2 - 1))` with the tied predictions ranked by their
  group's mean rank; that formula is exact only without ties, so it is not the Spearman
  correlation scipy or SentEval computes for a two-level predictor.
- the exact optimum for the real gold scores, ties included: Spearman as SentEval computes
  it (Pearson correlation of average ranks) of the best two-level predictor. For any
  predictor putting ``k`` pairs in the upper level, the correlation grows with the sum of
  the gold ranks in that level, so the best puts the ``k`` highest-scored pairs there; the
  optimum is the maximum over ``k``. ``best_threshold`` restricts the cut to fall between
  distinct gold values (a predictor that is a function of the gold score);
  ``best_two_level`` allows splitting a group of tied scores (any two-level predictor;
  on every set tried, the tests' and the seven test sets, the two coincide). For ``n``
  distinct scores both tend to :math:`\sqrt{3}/2 \approx 0.866`, below eq. 7's 0.875.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import rankdata

from sts_core.command_files import CommandFiles, write_json
from sts_core.options import ListOptionsParser

__all__ = [
    "Ceiling",
    "ceilings_of_tasks",
    "closed_form_ceiling",
    "contrastive_ceiling",
    "load_gold_scores",
    "main",
]

PROG = "sts-pcc-ceiling"


def closed_form_ceiling(n: int) -> float:
    """Eq. 7 of Pcc-tuning: ``(7n² − 4) / (8(n² − 1))`` for ``n ≥ 2`` pairs."""
    if n < 2:
        raise ValueError(f"the closed form needs at least 2 pairs, got {n}")
    return (7 * n * n - 4) / (8 * (n * n - 1))


@dataclass(frozen=True)
class Ceiling:
    """The ceilings of one set of gold scores (correlations in [−1, 1])."""

    pairs: int
    distinct_scores: int
    closed_form: float  # eq. 7 with n = pairs
    best_threshold: float  # cut between distinct gold values
    threshold_positives: int  # pairs in the upper level at that cut
    best_two_level: float  # any two-level predictor (ties may be split)
    two_level_positives: int


def _split_correlations(ranks_descending: np.ndarray) -> np.ndarray:
    """Pearson correlation of the ranks with the indicator of the first ``k`` entries, for
    ``k = 1 … n − 1`` (entry ``k − 1``)."""
    n = ranks_descending.size
    centred = ranks_descending - ranks_descending.mean()
    spread = float(np.sqrt((centred**2).sum()))
    k = np.arange(1, n)
    top = np.cumsum(centred)[:-1]  # Σ over the first k of (r − r̄)
    # cov(r, z)·n = Σ_top (r − r̄);  ‖z − z̄‖ = sqrt(k (n − k) / n)
    return top / (spread * np.sqrt(k * (n - k) / n))


def contrastive_ceiling(gold: Sequence[float] | np.ndarray) -> Ceiling:
    """The ceilings of a two-level predictor on ``gold`` (see the module docstring)."""
    scores = np.asarray(gold, dtype=np.float64).reshape(-1)
    if scores.size < 2 or np.unique(scores).size < 2:
        raise ValueError(
            "a ceiling needs at least two pairs with different gold scores, got "
            f"{scores.size} pair(s), {np.unique(scores).size} distinct score(s)"
        )
    order = np.argsort(-scores, kind="stable")
    ranks = rankdata(scores)[order]  # average ranks, highest score first
    correlations = _split_correlations(ranks)
    sorted_scores = scores[order]
    at_boundary = sorted_scores[:-1] != sorted_scores[1:]  # cut after k keeps ties together
    best_any = int(np.argmax(correlations))
    boundary_k = np.flatnonzero(at_boundary)
    best_cut = int(boundary_k[np.argmax(correlations[boundary_k])])
    return Ceiling(
        pairs=int(scores.size),
        distinct_scores=int(np.unique(scores).size),
        closed_form=closed_form_ceiling(int(scores.size)),
        best_threshold=float(correlations[best_cut]),
        threshold_positives=best_cut + 1,
        best_two_level=float(correlations[best_any]),
        two_level_positives=best_any + 1,
    )


def load_gold_scores(
    tasks: Sequence[str], data_dir: str | None = None, variant: str = "senteval"
) -> dict[str, np.ndarray]:
    """Each STS test set's gold scores (SentEval's 'all' setting: its pairs pooled). The
    data folder is checked first, then every task is read; a missing folder or file raises
    the data layer's error (a ValueError and an OSError) naming it."""
    from sts_core.data import resolve_data_dir
    from sts_core.evaluation.sts import load_task_pairs

    folder = resolve_data_dir(data_dir)
    return {
        task: np.asarray(load_task_pairs(task, "senteval", variant, folder)["score"])
        for task in tasks
    }


def ceilings_of_tasks(
    tasks: Sequence[str], data_dir: str | None = None, variant: str = "senteval"
) -> dict[str, Ceiling]:
    """The ceiling of each STS test set, every set read before any ceiling is computed."""
    gold = load_gold_scores(tasks, data_dir, variant)
    return {task: contrastive_ceiling(scores) for task, scores in gold.items()}


def format_table(ceilings: dict[str, Ceiling]) -> str:
    """A Markdown table of the ceilings (×100)."""
    lines = [
        "| task | pairs | distinct scores | closed form (eq. 7) | best threshold | "
        "upper level | best two-level | upper level |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for task, c in ceilings.items():
        lines.append(
            f"| {task} | {c.pairs} | {c.distinct_scores} | {100 * c.closed_form:.2f} | "
            f"{100 * c.best_threshold:.2f} | {c.threshold_positives} | "
            f"{100 * c.best_two_level:.2f} | {c.two_level_positives} |"
        )
    if ceilings:
        mean = {
            key: 100 * float(np.mean([getattr(c, key) for c in ceilings.values()]))
            for key in ("closed_form", "best_threshold", "best_two_level")
        }
        lines.append(
            f"| avg. | | | {mean['closed_form']:.2f} | {mean['best_threshold']:.2f} | | "
            f"{mean['best_two_level']:.2f} | |"
        )
    return "\n".join(lines)


def make_parser() -> argparse.ArgumentParser:
    from sts_core.names import STS_TASKS

    parser = ListOptionsParser(
        prog=PROG,
        description="The best Spearman correlation (×100) a two-level ('similar' / "
        "'dissimilar') predictor reaches on each STS test set: Pcc-tuning's closed form "
        "(eq. 7) and the exact optimum for the real gold scores (average ranks).",
    )
    parser.add_argument("--tasks", nargs="+", default=list(STS_TASKS), choices=STS_TASKS)
    parser.add_argument("--data-dir", default=None, help="benchmark folder ($STS_DATA_DIR)")
    parser.add_argument("--data-variant", default="senteval", choices=("senteval", "raw"))
    parser.add_argument("--json", default=None, help="also write the ceilings here")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a --json written by an earlier sts-pcc-ceiling (a file sts-core did not "
        "write is never replaced)",
    )
    return parser


def ceiling_files(args: argparse.Namespace) -> CommandFiles:
    """What ``sts-pcc-ceiling`` reads (the data folder) and writes (``--json``), for
    :meth:`CommandFiles.check` before any task is read."""
    files = CommandFiles(PROG, "--overwrite", args.overwrite)
    files.reads("--data-dir", args.data_dir or os.environ.get("STS_DATA_DIR"))
    if args.json:
        files.writes("--json", args.json)
    return files


def main(argv: Sequence[str] | None = None) -> int:
    """``sts-pcc-ceiling``: the contrastive ceiling of each STS test set.

    The ``--json`` location (its folder is created; never the data folder or in it, never
    a file sts-core did not write, one it wrote only with ``--overwrite``) and every task's
    data are checked before any ceiling is computed; a problem is one line on stderr and
    exit status 2. The JSON is written atomically.
    """
    from sts_core.cli import fail

    args = make_parser().parse_args(argv)
    try:
        ceiling_files(args).check()
        ceilings = ceilings_of_tasks(args.tasks, args.data_dir, args.data_variant)
    except (OSError, ValueError) as error:
        return fail(PROG, error)
    print(format_table(ceilings))
    if args.json:
        content = {task: asdict(c) for task, c in ceilings.items()}
        try:
            write_json(os.path.expanduser(args.json), content)
        except (OSError, ValueError) as error:
            return fail(PROG, error)
    return 0
