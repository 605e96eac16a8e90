"""The equal-budget recipe search of ``benchmarks/quality_search.py``, by concern: the cells
and their store (:mod:`.cells`), the search's data and fixed settings (:mod:`.inputs`), a
cell's saved weights (:mod:`.weights`), training and scoring them (:mod:`.search`), the rows
``sts-search`` trains (:mod:`.via_search`), the report (:mod:`.report`), the comparison of two
runs (:mod:`.reproduce`) and the levers it shows on and off (:mod:`.levers`). The modules
import one another in one direction only: ``inputs`` and ``weights`` are leaves."""
