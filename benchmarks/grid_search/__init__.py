"""The equal-budget recipe search of ``benchmarks/quality_search.py``, by concern: the cells
and their store (:mod:`.cells`), training and scoring them (:mod:`.search`), the report
(:mod:`.report`) and the levers it shows on and off (:mod:`.levers`)."""
