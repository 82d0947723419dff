"""The exit codes of `lg-study`, in one registry: every command exits with one of these
(or, for `lg-study ui`, with the MLflow server's own code), and docs/reference/cli.md
lists them with the comments below (tools/gen_reference.py). Standard library only, so
that any room of the orchestrator may name a code."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    #: success
    OK = 0
    #: a study that ran but had failed trials; `run --restart` declined at its question
    #: (nothing changed); `sync` while MLflow did not answer. An error lg-study did not
    #: foresee (a Python traceback) also exits 1
    FAILED = 1
    #: bad input, nothing run: a study file, option, SQL or parameter refused, an
    #: unknown study, a study busy with another driver, more resources per trial than the
    #: cluster has, finished trials of another science version without `--retrain-stale`
    #: (command-line syntax errors, such as an unknown option, too)
    BAD_INPUT = 2
    #: a run stopped because its results could not be written (sysexits' EX_IOERR): a
    #: full disk (the results folder's or the MLflow store's), a read-only or vanished
    #: results folder (orchestrator.store.storage_faults). No trial is retried on it and
    #: nothing is lost: fix it and run the same command again
    STORAGE = 74
    #: a run stopped by Ctrl-C or SIGTERM (128 + SIGINT); the same command resumes it
    INTERRUPTED = 130
