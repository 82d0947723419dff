"""A quiet terminal for `lg-study run`: lg-study's own lines on the terminal, and what
Ray, Tune, MLflow, SQLAlchemy and alembic print in a log file under the study's folder.

They print three ways: Python logging handlers and warnings that write to whatever
`sys.stderr` is when they fire; C++ code in this process (Ray's core worker) writing
to file descriptor 2; and child processes that inherit descriptors 1 and 2. So while
a run lasts, descriptors 1 and 2 and `sys.stdout`/`sys.stderr` all point at the log
file, and lg-study's rich consoles write to the terminal through a copy of the
descriptor (or the stream) they wrote to before. A warning that asks the user to do
something (ACTIONABLE) is also said on the terminal, in lg-study's words.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from rich.console import Console

from results_contract.layout import LOGS


@dataclass(frozen=True)
class Actionable:
    """A warning of another library that the user must act on, and what lg-study says."""

    #: logger name it comes from (or a parent of it)
    logger: str
    #: words of its message that identify it
    words: str
    #: what lg-study says instead
    says: str


ACTIONABLE = (
    Actionable(
        "ray.tune", "No trial is running and no new trial has been started",
        "no trial has started for a while: the Ray cluster does not have the CPUs or GPUs that "
        "one trial asks for free (resources.cpus_per_trial, resources.gpus_per_trial); add nodes, "
        "lower those, or stop with Ctrl-C",
    ),
    Actionable(
        "ray", "object store is using",
        "Ray keeps its object store on disk because /dev/shm is too small, which slows the run "
        "down: free space in /dev/shm or enlarge it (docker run --shm-size)",
    ),
)


def run_log_path(results_root: Path, study: str) -> Path:
    """The log file of one `lg-study run` of a study: results/<study>/_logs/run-<UTC time>.log."""
    return Path(results_root) / study / LOGS / f"run-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}.log"


class _Resayer(logging.Handler):
    """Says each ACTIONABLE warning once, in lg-study's words, on the terminal console."""

    def __init__(self, console: Console, log: Path) -> None:
        super().__init__(logging.WARNING)
        self.console, self.log, self.said = console, log, set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 (a record that cannot format is not ours to report)
            return
        for known in ACTIONABLE:
            if known in self.said or not _within(record.name, known.logger) or known.words not in message:
                continue
            self.said.add(known)
            self.console.print(f"[yellow]warning:[/yellow] {known.says} (details in {self.log})", highlight=False)


def _within(name: str, parent: str) -> bool:
    return name == parent or name.startswith(parent + ".")


@dataclass
class QuietRun:
    #: where Ray's, Tune's and MLflow's messages go
    log: Path
    #: set for a run refused before it started: the log (and folders made for it) go
    discard: bool = False


#: loggers whose records the re-sayer watches (Ray's does not propagate to the root)
WATCHED = ("ray", "mlflow")


@contextlib.contextmanager
def quiet_terminal(log: Path, consoles: list[Console], say_on: Console) -> Iterator[QuietRun]:
    """While entered: descriptors 1 and 2, sys.stdout and sys.stderr write to `log`;
    `consoles` keep writing where they wrote before; ACTIONABLE warnings are said on
    `say_on`."""
    run = QuietRun(Path(log))
    made = [f for f in reversed([run.log.parent, *run.log.parent.parents]) if not f.exists()]
    for folder in made:
        folder.mkdir()
    with contextlib.ExitStack() as stack:
        file = open(run.log, "a+b", buffering=0)  # noqa: SIM115 (closed by _finish)
        stack.callback(_finish, run, file, made)
        for console in consoles:  # before the streams change: where each writes now
            stack.enter_context(_kept_on(console, stack))
        text = io.TextIOWrapper(os.fdopen(os.dup(file.fileno()), "wb"), encoding="utf-8",
                                errors="replace", line_buffering=True)
        stack.callback(_unless_full, text.close)
        stack.enter_context(_handlers_to(text))
        for fd, name in ((1, "stdout"), (2, "stderr")):
            stack.enter_context(_descriptor_to(fd, file.fileno()))
            stack.enter_context(_attribute(sys, name, text))
        resayer = _Resayer(say_on, run.log)
        for name in WATCHED:
            logging.getLogger(name).addHandler(resayer)
            stack.callback(logging.getLogger(name).removeHandler, resayer)
        yield run


def _unless_full(close: Callable[[], object]) -> None:
    """A step of the teardown that writes the log's last buffered lines: on a disk too
    full (or gone) for them it raises, which must not replace what the run itself
    raised (a full disk's own message and exit code, orchestrator.commands.running)."""
    with contextlib.suppress(OSError, ValueError):
        close()


def _finish(run: QuietRun, file: IO[bytes], made: list[Path]) -> None:
    """Close the log; keep it where its name says (`run --restart` deletes the study's
    folder, the log with it, while the run still writes to it), or discard it. A log
    that cannot be written is given up, never raised over the run's own outcome."""
    try:
        _unless_full(lambda: _keep_or_discard(run, file, made))
    finally:
        _unless_full(file.close)


def _keep_or_discard(run: QuietRun, file: IO[bytes], made: list[Path]) -> None:
    if run.discard:
        run.log.unlink(missing_ok=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if empty
    elif not run.log.exists():
        run.log.parent.mkdir(parents=True, exist_ok=True)
        file.seek(0)
        with open(run.log, "wb") as copy:
            shutil.copyfileobj(file, copy)


@contextlib.contextmanager
def _descriptor_to(fd: int, target: int):
    """Point descriptor `fd` at `target` (flushing what Python buffered for it first)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = os.dup(fd)
    os.dup2(target, fd)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(saved, fd)
        os.close(saved)


@contextlib.contextmanager
def _handlers_to(stream: IO[str]):
    """Point the logging handlers that write to stdout or stderr at `stream`: they hold
    the stream they were made with (Ray's and MLflow's, made at import)."""
    terminals = {id(s) for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__) if s is not None}
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in list(logging.root.manager.loggerDict))]
    moved = []
    for handler in {h for logger in loggers for h in logger.handlers}:
        writes_to_file = isinstance(handler, logging.FileHandler) or not isinstance(handler, logging.StreamHandler)
        if not writes_to_file and (id(handler.stream) in terminals or _descriptor(handler.stream) in (1, 2)):
            moved.append((handler, handler.setStream(stream)))
    try:
        yield
    finally:
        for handler, previous in moved:
            _set_stream(handler, previous)


def _set_stream(handler: logging.StreamHandler, stream: IO[str]) -> None:
    """handler.setStream(stream), which first flushes the stream it leaves: when that is
    the log on a full disk, the flush fails and the handler is moved all the same."""
    try:
        handler.setStream(stream)
    except (OSError, ValueError):
        with handler.lock:
            handler.stream = stream


def _descriptor(stream: Any) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


@contextlib.contextmanager
def _attribute(owner: Any, name: str, value: Any):
    previous = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, previous)


@contextlib.contextmanager
def _kept_on(console: Console, stack: contextlib.ExitStack):
    """Keep `console` writing where it writes now: to a copy of the descriptor behind
    its stream when that is stdout's or stderr's (about to be redirected), else to the
    stream itself (a test runner's buffer)."""
    current = console.file
    fd = _descriptor(current)
    if fd in (1, 2):
        current.flush()
        kept = open(os.dup(fd), "w", encoding=getattr(current, "encoding", None) or "utf-8",  # noqa: SIM115
                    errors="replace", buffering=1)
        stack.callback(kept.close)
    else:
        kept = current
    previous = console._file  # None: the console follows sys.stdout / sys.stderr
    console.file = kept
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            kept.flush()
        console.file = previous
