"""The lock files of a study's drivers, and whether a driver holds one now, without Ray
(`lg-study status` asks; orchestrator.running.recovery.study_lock takes them)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from results_contract.layout import check_path_component

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
