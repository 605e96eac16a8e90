"""``sts-search``: the recipe search as a user's command (docs/search.md).

- :mod:`~sts_core.search.spec`: what a search is (:class:`SearchSpec`, its identity, its grid);
- :mod:`~sts_core.search.cells`: a cell (method × recipe × seed) and its folder;
- :mod:`~sts_core.search.stages`: a cell's first stage (``stage1_loss``, ``stage1_epochs``);
- :mod:`~sts_core.search.schedule`: one worker process per cell, several at a time;
- :mod:`~sts_core.search.worker`: the worker (``sts-train``'s path, then the dev score);
- :mod:`~sts_core.search.soups`: ``--soup``, each pick's seeds averaged into one model;
- :mod:`~sts_core.search.untrained`: the untrained model's dev and test rows;
- :mod:`~sts_core.search.select`: the picks by dev alone, seeds' mean ± sd, the headline;
- :mod:`~sts_core.search.report`: ``results.json``, ``search.md``, the chart, ``pick.yaml``;
- :mod:`~sts_core.search.command`: the command line (:func:`main`) and :func:`run_search`.
"""

from sts_core.search.command import main, run_search
from sts_core.search.spec import SearchError, SearchSpec

__all__ = ["SearchError", "SearchSpec", "main", "run_search"]
