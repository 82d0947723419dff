"""The lock files of a study's drivers: `study_lock` takes one (one driver per study at a
time, so the tables and the MLflow runs have a single writer; the lock dies with its
process, even under SIGKILL), and `driver_of` asks whether a driver holds one now, without
Ray (`lg-study status` tells an interrupted trial from a running one by it). The store,
not the runner, owns them: `migrate` and the runs all take the same locks."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from results_contract.layout import check_path_component
from results_contract.trial_status import TrialStatus

#: the lock a search driver holds for its whole run, around the study locks that each
#: batch of its trials takes (an flock cannot be taken twice by one process)
SEARCH_LOCK = ".search"
#: the lock a seed target's driver holds around its rounds (each takes the study lock)
SEEDS_LOCK = ".seeds"
#: the locks a driver of a study holds: a run's, a seed target's rounds', a search's
DRIVER_LOCKS = ("", SEEDS_LOCK, SEARCH_LOCK)


def lock_path(root: Path, study: str, kind: str = "") -> Path:
    """``<root>/.<study><kind>.lock``: beside the study's folder, so that ``--restart``
    can delete the folder while holding it."""
    check_path_component(study, "study")
    return Path(root) / f".{study}{kind}.lock"


def driver_of(root: Path, study: str) -> str | None:
    """Who drives the study now (the lock file's "pid ... on ... since ..."), or None
    when no driver holds any of its locks (DRIVER_LOCKS): its `running` trials were
    interrupted. Asks with a shared flock, which a driver's exclusive one refuses; a
    driver starting in that instant would be refused as busy, and can run again."""
    for kind in DRIVER_LOCKS:
        try:
            fd = os.open(lock_path(root, study, kind), os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
        except OSError:
            continue  # no flock on this filesystem: the lock cannot tell
        finally:
            os.close(fd)  # closing drops a shared lock taken
    return None


class StudyBusy(RuntimeError):
    """Another driver is running the study."""


def check_not_busy(root: Path, study: str, kind: str = "") -> None:
    """Raise StudyBusy now if another driver holds the study (before starting Ray);
    creates nothing."""
    path = lock_path(root, study, kind)
    if path.exists():
        with study_lock(root, study, kind):
            pass


@contextlib.contextmanager
def study_lock(root: Path, study: str, kind: str = "") -> Iterator[None]:
    """Hold ``<root>/.<study><kind>.lock`` (an flock) while the study runs, or raise StudyBusy.

    The lock file sits beside the study folder so that ``--restart`` can delete the
    folder while holding it. On a shared filesystem without flock support, run one
    driver per study by hand.
    """
    check_path_component(study, "study")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    path = lock_path(root, study, kind)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StudyBusy(
            f"study {study!r} is being run by another lg-study process ({holder}); "
            "wait for it or stop it, then run again"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since "
                      f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC\n".encode(), 0)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


#: what `lg-study status` shows for a `running` trial that no driver runs (its driver
#: died): never written, since the row stays `running` and the next run resumes it
INTERRUPTED = "interrupted"


def shown_status(status: str, driven: bool) -> str:
    """A trial's status as `status` shows it: `running` only while a driver holds the
    study (``driven``), else INTERRUPTED."""
    return INTERRUPTED if status == TrialStatus.RUNNING and not driven else status
