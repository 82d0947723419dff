"""A trial's status, the `status` column of `trials`, and which statuses are finished:
what the writer (the trial's worker and the driver) stores and every reader (the views,
`status`, the run's skipping of finished trials) compares.

The members are strings ("done", ...): a member is written to Parquet, compared in
SQL and equal to its text, so tables written before this enum read the same. What
`status` shows of a trial no driver runs (orchestrator.store.study_locks.shown_status)
is never stored, so it is the store's, not this contract's.
"""

from __future__ import annotations

from enum import StrEnum


class TrialStatus(StrEnum):
    #: written by the worker when an attempt starts; stays when a run is interrupted,
    #: and the next run resumes the trial from its checkpoint
    RUNNING = "running"
    #: trained to the last step; every table has the trial's rows
    DONE = "done"
    #: a non-finite loss ended it (trials.diverged_at); its rows up to then stand
    DIVERGED = "diverged"
    #: it raised, or its worker died with no retries left; the next run runs it again
    FAILED = "failed"
    #: a search's pruner stopped its point at trials.pruned_at, every seed together; its
    #: rows up to that step stand. Not run again, and not compared: a censored seed is
    #: not a sample of the final accuracy (ENDED, not FINISHED)
    PRUNED = "pruned"

    @property
    def finished(self) -> bool:
        """Not run again: its results are final (analysis/sql/staging/tables.sql, finished_trials)."""
        return self in FINISHED


#: the statuses of trials that the analysis compares (and a run skips)
FINISHED = frozenset({TrialStatus.DONE, TrialStatus.DIVERGED})
#: the statuses of trials that a run skips: finished, or stopped early by a pruner
ENDED = FINISHED | {TrialStatus.PRUNED}
