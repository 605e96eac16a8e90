"""Our levers, each on and off: pairs of recipes of the cells that differ in that lever
alone (the report's "Levers" table, :func:`grid_search.report.lever_lines`)."""

from __future__ import annotations

from dataclasses import dataclass

from sts_core.search.cells import Recipe, settings_of


@dataclass(frozen=True)
class Lever:
    """One of our levers, on and off: two recipes of the cells that differ in that lever
    alone; ``soup`` compares a recipe's soup of its seeds with its runs."""

    name: str
    on: Recipe
    off: Recipe
    soup: bool = False


def recipe_at(method: str, epochs: int, **settings: str) -> Recipe:
    """A lever's recipe: ``method`` with the ``--set`` ``settings``, ``epochs``, lr 4e-5."""
    return Recipe(method, settings_of(settings), float(epochs), 4e-5)


TEACHER_WITH_NEIGHBOURS = {
    "teacher_model": "mpnet-sts-teacher",
    "teacher_weight": "1",
    "teacher_neighbours": "1",
}


TEACHER_AT_HALF_WEIGHT = {"teacher_model": "mpnet-sts-teacher", "teacher_weight": "0.5"}


OUR_PICK = recipe_at("ours-pcc_pearson", 2, **TEACHER_WITH_NEIGHBOURS)


LEVERS = (
    Lever("soup of the three seeds", OUR_PICK, OUR_PICK, soup=True),
    Lever(
        "Pearson loss instead of cosine MSE (the peer's CosineSimilarityLoss), same teacher pairs",
        OUR_PICK,
        recipe_at("st-cosine", 2, **TEACHER_WITH_NEIGHBOURS),
    ),
    Lever(
        "cosine MSE added to the Pearson loss (loss_weights 1 : 1), same teacher pairs",
        recipe_at(
            "ours-pcc_pearson",
            2,
            **TEACHER_WITH_NEIGHBOURS,
            loss_weights='{"pearson":1,"cosine_mse":1}',
        ),
        OUR_PICK,
    ),
    Lever(
        "checkpoints averaged along the run (weight_averaging uniform), same teacher pairs",
        recipe_at("ours-pcc_pearson", 2, **TEACHER_WITH_NEIGHBOURS, weight_averaging="uniform"),
        OUR_PICK,
    ),
    Lever(
        "Pcc-tuning's two stages (1 epoch of cosine MSE, then 1 of the Pearson loss) instead "
        "of 2 epochs of the Pearson loss, same teacher pairs",
        recipe_at(
            "ours-pcc_pearson",
            1,
            **TEACHER_WITH_NEIGHBOURS,
            stage1_epochs="1",
            stage1_loss="cosine_mse",
        ),
        OUR_PICK,
    ),
    Lever("the teacher (w 1, one neighbour pair)", OUR_PICK, recipe_at("ours-pcc_pearson", 2)),
    Lever(
        "Pearson loss instead of cosine MSE, no teacher",
        recipe_at("ours-pcc_pearson", 2),
        recipe_at("ours-cosine_mse", 2),
    ),
    Lever(
        "one neighbour pair per sentence (cosine MSE, teacher w 0.5)",
        recipe_at("ours-cosine_mse", 1, **TEACHER_AT_HALF_WEIGHT, teacher_neighbours="1"),
        recipe_at("ours-cosine_mse", 1, **TEACHER_AT_HALF_WEIGHT),
    ),
    Lever(
        "Pearson added to cosine MSE (loss_weights pearson 0.5), no teacher",
        recipe_at("ours-cosine_mse", 1, loss_weights='{"cosine_mse":1,"pearson":0.5}'),
        recipe_at("ours-cosine_mse", 1),
    ),
    Lever(
        "checkpoints averaged along the run (weight_averaging uniform), no teacher",
        recipe_at("ours-cosine_mse", 1, weight_averaging="uniform"),
        recipe_at("ours-cosine_mse", 1),
    ),
)
