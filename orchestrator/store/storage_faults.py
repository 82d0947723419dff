"""Faults of the storage under a study that no retry can fix: a full disk, a read-only
filesystem, a results folder that vanished (unmounted, moved, deleted while a study ran).

A trial retried on such a fault fails again at its first write, so the worker raises
StorageFault instead of writing a `failed` row (the trial stays `running`: it was
interrupted, and resumes from its last checkpoint), the driver stops the study as on
Ctrl-C (orchestrator.running.recovery.StorageFaultStop) and `lg-study run` prints one
message (`words`) and exits with EXIT_CODE. The fault is recognised in an exception's
chain (its errno, or SQLite's words through SQLAlchemy and MLflow) and in the error
text Tune keeps of a worker's exception (`fault_in_text`).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from orchestrator.exit_codes import ExitCode

#: `lg-study run`'s exit code when the results could not be written (orchestrator.exit_codes)
EXIT_CODE = ExitCode.STORAGE


@dataclass(frozen=True)
class FaultKind:
    """One kind of storage fault: how it shows, what it is in words, what frees it."""

    errnos: frozenset[int]
    #: how it reads where no errno is kept (SQLite through SQLAlchemy and MLflow, and
    #: a worker's error text as Tune keeps it)
    texts: tuple[str, ...]
    what: str
    remedy: str


#: kind -> how it shows and what to do about it
FAULT_KINDS = {
    "full": FaultKind(
        frozenset({errno.ENOSPC, errno.EDQUOT}),
        ("database or disk is full", "No space left on device", "Disk quota exceeded", "[errno 28]"),
        "the disk holding the results is full", "free space there (or raise the quota)"),
    "read-only": FaultKind(
        frozenset({errno.EROFS}),
        ("attempt to write a readonly database", "Read-only file system", "[errno 30]"),
        "the results folder is on a read-only filesystem", "make it writable (remount it read-write)"),
    "gone": FaultKind(
        frozenset({errno.ESTALE, errno.ENOTCONN, errno.ENODEV}),
        ("Stale file handle", "Transport endpoint is not connected"),
        "the results folder is gone (unmounted, moved or deleted while the study ran)",
        "bring it back at the same path (mount it again)"),
}

#: how a missing file shows, or a database made again empty in a deleted one's place: a
#: fault ("gone") only when the results root itself is gone (root_gone)
_MISSING = ("[Errno 2]", "No such file or directory", "unable to open database file", "no such table",
            "readonly database")

#: how a worker's StorageFault reads in Tune's error text: "storage fault (full): PATH: DETAIL"
_MARK = re.compile(r"storage fault \((" + "|".join(map(re.escape, FAULT_KINDS)) + r")\): ([^:\n]+)(?:: ([^\n]*))?")


class StorageFault(OSError):
    """A write under the study failed for a reason no retry fixes; ``kind`` is a key
    of FAULT_KINDS and ``path`` the file or folder it named (else the results root)."""

    def __init__(self, kind: str, path: str, detail: str = "") -> None:
        super().__init__(kind, path, detail)  # the arguments again: Ray pickles it
        self.kind, self.path, self.detail = kind, path, detail

    def __str__(self) -> str:
        return f"storage fault ({self.kind}): {self.path}{': ' + self.detail if self.detail else ''}"


def _chain(error: BaseException):
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def fault_of(error: BaseException, root: Path, store: Path | None = None) -> StorageFault | None:
    """The storage fault behind ``error`` (anywhere in its chain of causes), or None.

    ``root`` is the results root: a missing file is a fault only when the root itself
    is gone. ``store`` is the SQLite file of the MLflow store, named by SQLite's faults.
    """
    for link in _chain(error):
        if isinstance(link, StorageFault):
            return link
        kind = fault_in_text(str(link))
        named = getattr(link, "filename", None)
        if isinstance(link, OSError):
            kind = next((k for k, f in FAULT_KINDS.items() if link.errno in f.errnos), kind)
        missing = getattr(link, "errno", None) == errno.ENOENT or any(t in str(link) for t in _MISSING)
        # SQLite calls a database whose file was deleted "readonly"
        deleted_store = "readonly database" in str(link) and store is not None and not Path(store).exists()
        if (kind is not None or missing) and root_gone(root, strict=missing) or deleted_store:
            kind = "gone"
        if kind is not None:
            path = named or (store if store is not None and "database" in str(link) else root)
            return StorageFault(kind, str(path), _first_line(link))
    return None


def fault_in_text(text: str) -> str | None:
    """The kind of storage fault an error text names, or None (for Tune's error files)."""
    marked = _MARK.search(text)
    if marked:
        return marked.group(1)
    return next((kind for kind, f in FAULT_KINDS.items() if any(t in text for t in f.texts)), None)


def fault_from_text(text: str, root: Path) -> StorageFault | None:
    """The storage fault an error text tells of (a worker's StorageFault as Tune keeps
    it, with its path), or None."""
    marked = _MARK.search(text)
    if marked:
        return StorageFault(marked.group(1), marked.group(2).strip(), (marked.group(3) or "").strip())
    kind = fault_in_text(text)
    missing = any(t in text for t in _MISSING)
    if (kind is not None or missing) and root_gone(root, strict=missing):
        kind = "gone"
    return None if kind is None else StorageFault(kind, str(root))


def root_gone(root: Path, strict: bool = False) -> bool:
    """Whether the results root is gone: no folder, or an empty one (the mount point an
    unmounted filesystem leaves). ``strict``, for errors that name no fault of their own
    (a missing file or table): also a root without the lock file of a study's driver
    (``.<study>.lock``), which every run takes there first, so that a folder Tune or
    SQLite made again in a deleted one's place counts as gone."""
    root = Path(root)
    try:
        if not root.is_dir() or not any(root.iterdir()):
            return True
        return strict and not any(root.glob(".*.lock"))
    except OSError:
        return True


def _first_line(error: BaseException) -> str:
    """The error's name and the line of its text that names the fault (SQLAlchemy's and
    MLflow's texts start with other advice), else its first line."""
    signs = (*(t for kind in FAULT_KINDS.values() for t in kind.texts), *_MISSING)
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    named = next((line for line in lines if any(sign in line for sign in signs)), lines[0] if lines else "")
    return f"{type(error).__name__}: {named[:200]}" if named else type(error).__name__


def free_space(path: Path) -> str:
    """"<free> free of <size> on <mount point>" for the filesystem holding ``path`` (its
    nearest existing folder), or why it cannot be told."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        usage = shutil.disk_usage(path)
    except OSError as error:
        return f"free space unknown ({error.strerror})"
    mount = path
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    # "now": the failed writes' temporary files are gone by the time this is said
    return f"{_size(usage.free)} free now, of {_size(usage.total)}, on the filesystem mounted at {mount}"


def _size(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def words(fault: StorageFault, kept: str, command: str) -> list[str]:
    """The message `lg-study run` prints for ``fault``: what failed and where (with the
    free space of a full disk), what was kept, and the command that continues."""
    kind = FAULT_KINDS[fault.kind]
    where = f"{fault.path} ({free_space(Path(fault.path))})" if fault.kind == "full" else fault.path
    return [
        f"{kind.what}: {where}" + (f"; {fault.detail}" if fault.detail else ""),
        f"kept: {kept}",
        f"to continue: {kind.remedy}, then run  {command}",
    ]
