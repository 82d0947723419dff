"""The warning every reader of a study's files gives for one it cannot read: the store
(orchestrator.store.results_store) and the analysis (analysis.query) skip such a file,
and `lg-study` commands show the warning once per file (orchestrator.cli_support)."""

from __future__ import annotations


class DamagedResultsWarning(UserWarning):
    """A file under a study's results that the readers leave out (truncated, not Parquet,
    or outside the ``<table>/trial_id=<id>/*.parquet`` layout of results_contract.layout)."""
