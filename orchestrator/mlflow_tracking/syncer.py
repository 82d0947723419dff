"""One thread in the driver that keeps a study's MLflow runs in step with its rows, so
that no MLflow call runs in Tune's loop or in a worker.

The Parquet store is the source of truth and every run is a function of its trial's
rows (orchestrator.mlflow_tracking.mlflow_sync): a trial only has to be marked as
behind, and one sync later brings its run up to date however many reports it missed.
So the Tune callback only marks trials (`trial`), and this thread syncs them, oldest
first, after the study-wide writes queued before them (`job`: the start-up's repairs)
and before those queued to come after them (the end's). A call that fails (the server
is unreachable, refuses, times out or answers 5xx: each call bounded by
mlflow_store.HTTP_BOUNDS) puts its work back, the thread says so once and tries again
every RETRY_S, and training never waits for it. `close` waits while the server
answers, then leaves what is still owed in the study's folder (lag_ledger), for
`status` to show and for the next run to catch up.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from orchestrator.mlflow_tracking.group_runs import nest_runs
from orchestrator.mlflow_tracking.handed import Handed
from orchestrator.mlflow_tracking.lag_ledger import Lag, read_lag, write_lag
from orchestrator.mlflow_tracking.mlflow_store import sqlite_database
from orchestrator.mlflow_tracking.mlflow_sync import behind, sync_trial
from orchestrator.mlflow_tracking.tracking import StudyTracker
from orchestrator.store.storage_faults import StorageFault, fault_of

#: seconds between tries of a server that failed its last call
RETRY_S = 5.0
#: trials synced side by side on a tracking server (each sync is a dozen calls, which
#: a slow server answers one by one); a local SQLite store takes one writer at a time
SERVER_THREADS = 4
#: the groups' parents are rewritten at most this often while trials finish, and after
#: a rewrite not before GROUP_SHARE_INVERSE times its duration has passed: their
#: numbers take at most about a tenth of the MLflow thread's time at any study size.
#: A rewrite asks for the groups of the trials finished since the last one alone, so
#: its cost is theirs, not the study's (docs/performance.md, "Group parents")
GROUP_REFRESH_S = 5.0
GROUP_SHARE_INVERSE = 10
#: groups whose figures are drawn in one go, then logged (a folder of them at a time);
#: while trials run, one such batch per rewrite, so that a rewrite stays short
FIGURE_BATCH = 5
#: at a run's end, the figures still owed are drawn for at most a tenth of the run's
#: time so far (never less than END_FIGURES_FLOOR_S): a study whose trials all finish
#: at once would otherwise wait about 1.6 s a group for them (docs/performance.md,
#: "Group parents at 10,000 trials"). The parents' numbers are always brought up to
#: date; the figures left are drawn by `lg-study sync` or the study's next run.
END_FIGURES_SHARE = 0.1
END_FIGURES_FLOOR_S = 60.0

#: the study-wide writes, by name: (tracker, results root, study, arguments) -> the
#: trial ids they touched. Their arguments are JSON, so that a run can leave them owed.
def _delete_runs(tracker: StudyTracker, root: Path, study: str, args: None) -> list[str]:
    tracker.delete_runs()  # `run --restart`
    return []


def _end_running_runs(tracker: StudyTracker, root: Path, study: str, args: None) -> list[str]:
    return tracker.end_running_runs("KILLED")  # runs of interrupted trials


def _tag_trial_runs(tracker: StudyTracker, root: Path, study: str, tags: dict[str, dict[str, str]]) -> list[str]:
    tracker.tag_trial_runs(tags)
    return []


def _sync_study(tracker: StudyTracker, root: Path, study: str, trial_ids: list[str]) -> list[str]:
    # the trials found behind are queued, and synced side by side (MlflowSyncer._do)
    return behind(tracker, root, study, trial_ids)


JOBS: dict[str, Callable[[StudyTracker, Path, str, Any], list[str]]] = {
    "delete_runs": _delete_runs,
    "end_running_runs": _end_running_runs,
    "tag_trial_runs": _tag_trial_runs,
    "sync_study": _sync_study,
}

#: how a failed call reads in MLflow's and requests' words -> in lg-study's
_REASONS = (
    ("Connection refused", "connection refused"),
    ("timed out", "timed out"),
    ("too many 5", "it answers with server errors (5xx)"),
    ("Name or service not known", "unknown host"),
    ("Failed to resolve", "unknown host"),
    ("RemoteDisconnected", "connection closed without an answer"),
    ("Connection aborted", "connection closed without an answer"),
    ("Connection reset", "connection reset"),
)


@dataclass
class _Trial:
    """A trial whose run is behind its rows: the worker's params (results_root, study,
    trial_id, run_name), whether a driver still runs it, and tags to add to its run."""

    params: dict[str, Any]
    live: bool
    tags: dict[str, str] = field(default_factory=dict)


def reason(error: BaseException) -> str:
    """Why an MLflow call failed, in a few words."""
    text = str(error)
    said = next((words for sign, words in _REASONS if sign in text), None)
    return said or f"{type(error).__name__}: {text.strip().splitlines()[0][:160] if text.strip() else ''}"


def network_failure(error: BaseException) -> bool:
    return any(sign in str(error) for sign, _ in _REASONS)


class MlflowSyncer:
    """The study's MLflow writes, done in order by a few threads (see the module).

    Study-wide jobs run alone, those queued before the trials first; a trial is synced
    by one thread at a time; while the server is down, one write is tried every RETRY_S.
    """

    def __init__(self, tracking_uri: str, experiment: str, root: Path, study: str,
                 say: Callable[[str], None], on_fault: Callable[[StorageFault], None] | None = None,
                 run_names: dict[str, str] | None = None, handed: Handed | None = None) -> None:
        self.uri, self.experiment, self.root, self.study = tracking_uri, experiment, Path(root), study
        self.say, self.on_fault = say, on_fault
        #: trial id -> the name the driver gives its run (results_contract.groups.run_name),
        #: for the trials the start-up finds behind
        self.run_names = run_names or {}
        #: the groups' numbers and names and the accuracy plot, as the code that runs
        #: the study asks the analysis for them (orchestrator.running.group_answers)
        self.handed = handed or Handed()
        #: the parents' numbers are behind (a trial finished); every trial run is to be
        #: nested again (the start-up's sync_study: runs made before parents existed);
        #: every group's numbers are (the start-up's), else those of these trials' groups
        self._groups_owed = self._nest_owed = self._all_owed = False
        self._finished: set[str] = set()
        self._groups_next = 0.0
        #: the analysis failed to answer the groups' numbers (said once)
        self._unanswered = False
        self.tracker: StudyTracker | None = None
        self._cond = threading.Condition()
        self._connecting = threading.Lock()
        self._before: deque[list] = deque()
        self._after: deque[list] = deque()
        self._trials: dict[str, _Trial] = {}
        #: thread -> its write in flight: ("job", [name, args], the queue it came from) or
        #: ("trial", (trial_id, _Trial), None)
        self._busy: dict[int, tuple[str, Any, deque | None]] = {}
        earlier = read_lag(root, study)
        mine = earlier is not None and earlier.tracking_uri == tracking_uri
        #: trials an earlier run left behind (until this run's sync_study finds what is)
        self._carried: set[str] = set(earlier.trials) if mine else set()
        for name, args, *phase in earlier.jobs if mine else []:
            (self._after if phase == ["after"] else self._before).append([name, args])
        self.down_since: datetime | None = None
        self.why = ""
        self._retry_at = 0.0
        self.fault: StorageFault | None = None
        #: job name -> the trial ids its calls touched (for the run's summary)
        self.results: dict[str, list[str]] = defaultdict(list)
        self._closing = self._abandoned = False
        self._started = time.monotonic()
        #: monotonic time after which the end draws no more figures (None: all of them)
        self._figures_until: float | None = None
        #: groups whose figures the end left owed (said once)
        self.figures_left = 0
        #: groups whose parent's numbers were rewritten, and whose figures were drawn
        self.groups_written: set[str] = set()
        self.figures_drawn: set[str] = set()
        count = 1 if sqlite_database(tracking_uri) is not None else SERVER_THREADS
        self._threads = [threading.Thread(target=self._work, name=f"lg-study-mlflow-{n}", daemon=True)
                         for n in range(count)]
        for thread in self._threads:
            thread.start()

    # --- what the driver asks -------------------------------------------------------------

    def job(self, name: str, args: Any = None, after: bool = False) -> None:
        """Queue a study-wide write (a key of JOBS): before the trials' syncs, or ``after``."""
        if name not in JOBS:
            raise ValueError(f"MLflow job {name!r}: expected one of {sorted(JOBS)}")
        with self._cond:
            (self._after if after else self._before).append([name, args])
            self._cond.notify_all()

    def trial(self, params: dict[str, Any], live: bool, tags: dict[str, str] | None = None) -> None:
        """Mark a trial's run as behind its rows (its latest state wins; tags add up)."""
        with self._cond:
            earlier = self._trials.pop(params["trial_id"], None)
            kept = {**(earlier.tags if earlier else {}), **(tags or {})}
            self._trials[params["trial_id"]] = _Trial(params, live, kept)
            self._cond.notify_all()

    def lag(self) -> Lag:
        """What the runs miss now."""
        with self._cond:
            busy = list(self._busy.values())
            jobs = [[*work, "after" if queue is self._after else "before"] for kind, work, queue in busy if kind == "job"]
            jobs += [[*work, "before"] for work in self._before] + [[*work, "after"] for work in self._after]
            trials = set(self._trials) | self._carried | {work[0] for kind, work, _ in busy if kind == "trial"}
            since = self.down_since.isoformat(timespec="seconds") if self.down_since else ""
            return Lag(self.uri, sorted(trials), jobs, since, self.why)

    def wait(self) -> bool:
        """Wait while something is owed and the server answers (the jobs queued `after`
        count once closing); say whether all caught up."""
        with self._cond:
            while self._owed() and self.down_since is None and self.fault is None and self._alive():
                self._cond.wait(0.5)
            return not self._owed()

    def _alive(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    def close(self, figures_share: float | None = None) -> Lag:
        """No driver runs the trials now: wait while the server answers and something is
        owed, then leave what is still owed in the study's folder and return it. Ctrl-C
        stops the wait (what is owed is left all the same). ``figures_share``: the groups'
        figures still owed are drawn for at most that share of the time since this syncer
        started (END_FIGURES_FLOOR_S at least); None: all of them."""
        with self._cond:
            for trial in self._trials.values():
                trial.live = False
            self._closing = True
            if figures_share is not None:
                spent = time.monotonic() - self._started
                self._figures_until = time.monotonic() + max(END_FIGURES_FLOOR_S, figures_share * spent)
            # the figures of groups whose numbers moved are drawn now, even where the
            # numbers were rewritten before the driver closed
            self._groups_owed = self._groups_owed or self.handed.group_figures is not None
            self._cond.notify_all()
        try:
            self.wait()
        finally:
            with self._cond:
                self._abandoned = True
                self._cond.notify_all()
            lag = self.lag()
            write_lag(self.root, self.study, lag)
        return lag

    # --- the threads --------------------------------------------------------------------

    def _owed(self) -> bool:
        groups = (self._groups_owed or self._nest_owed) and self._closing and self.handed.group_numbers is not None
        return bool(self._before or self._trials or ((self._after or groups) and self._closing) or self._busy)

    def _work(self) -> None:
        while (work := self._next()) is not None:
            try:
                self._do(*work)
            except Exception as error:  # noqa: BLE001 (MLflow never stops training: said, retried)
                if not self._failed(work, error):
                    return
            else:
                self._done(work)

    def _next(self) -> tuple[str, Any, deque | None] | None:
        """This thread's next write, once there is one; None once the driver stopped waiting."""
        with self._cond:
            while not self._abandoned:
                work = self._pick()
                if work is not None:
                    self._busy[threading.get_ident()] = work
                    return work
                self._cond.wait(RETRY_S if self.down_since is not None else None)
            return None

    def _pick(self) -> tuple[str, Any, deque | None] | None:
        """What may start now: a job when nothing else runs (the end's once the driver
        closed and no trial is left), else a trial no other thread syncs; while the server is down, one write
        RETRY_S after the last failure."""
        if self.down_since is not None and (self._busy or time.monotonic() < self._retry_at):
            return None
        if self._before:
            return None if self._busy else ("job", self._before.popleft(), self._before)
        if self._groups_due():
            work = (self._nest_owed, None if self._all_owed else sorted(self._finished))
            self._groups_owed = self._nest_owed = self._all_owed = False
            self._finished = set()
            return "groups", work, None
        taken = {work[0] for kind, work, _ in self._busy.values() if kind == "trial"}
        free = next((trial_id for trial_id in self._trials if trial_id not in taken), None)
        if free is not None:
            return "trial", (free, self._trials.pop(free)), None
        if self._after and self._closing and not self._busy and not self._trials:
            return "job", self._after.popleft(), self._after
        return None

    def _groups_due(self) -> bool:
        """Whether the parents' numbers are rewritten now: owed, none in flight, and their
        time has come (at the end: once no trial is left to sync)."""
        if not (self._groups_owed or self._nest_owed) or self.handed.group_numbers is None:
            return False
        if any(kind == "groups" for kind, _, _ in self._busy.values()):
            return False
        if self._closing:
            return not self._trials_left()
        return time.monotonic() >= self._groups_next

    def _trials_left(self) -> bool:
        """Whether a trial's run is still to sync or syncing (the condition held)."""
        return bool(self._trials) or any(kind == "trial" for kind, _, _ in self._busy.values())

    def _do(self, kind: str, work: Any, queue: deque | None) -> None:
        with self._connecting:  # never the condition: Tune's loop takes that to mark trials
            if self.tracker is None:
                self.tracker = StudyTracker(self.uri, self.experiment)
        if kind == "groups":
            self._write_groups(*work)
            return
        if kind == "job":
            name, args = work
            touched = JOBS[name](self.tracker, self.root, self.study, args)
            with self._cond:
                self.results[name] += touched
                if name == "sync_study":
                    self._carried.clear()
                    self._groups_owed = self._nest_owed = self._all_owed = True
                    for trial_id in touched:
                        self._trials.setdefault(trial_id, _Trial(self._params(trial_id), live=False))
            return
        trial_id, trial = work
        params = trial.params
        run_id = sync_trial(self.tracker, Path(params["results_root"]), params["study"], trial_id, trial.live,
                            params.get("run_name"), self.handed)
        if run_id is not None and trial.tags:
            self.tracker.set_tags(run_id, trial.tags)
        if run_id is not None and not trial.live:
            with self._cond:
                self._groups_owed = True
                self._finished.add(trial_id)

    def _write_groups(self, nest: bool, trials: list[str] | None) -> None:
        """Nest the study's runs under their parents (``nest``), then log the numbers of
        every group (``trials`` None) or of these trials' groups as the analysis answers
        them now, and the figures of the groups whose numbers moved since theirs."""
        started = time.monotonic()
        if nest:
            nest_runs(self.tracker, self.handed.group_names)
        if trials is None or trials:  # none: only the end's figures are owed
            answered = self._answer(self.handed.group_numbers, trials)
            if answered is None:
                self._owe_again(trials)
            for numbers in answered or []:
                if self.tracker.groups.write(numbers):
                    self.groups_written.add(numbers.group_id)
        if self.handed.group_figures is not None and not self._numbers_owed_at_end():
            # while trials run, a batch of the groups whose trials are all done (their
            # figures are final then, and drawing them spreads over the run); at the
            # end, every group whose numbers moved
            stale = self.tracker.groups.stale_figures(complete=not self._closing)
            self._log_figures(stale if self._closing else stale[:FIGURE_BATCH])
        with self._cond:
            spent = time.monotonic() - started
            self._groups_next = time.monotonic() + max(GROUP_REFRESH_S, GROUP_SHARE_INVERSE * spent)

    def _numbers_owed_at_end(self) -> bool:
        """At the end, whether trials finished (or are still syncing) since these numbers
        were asked: the next rewrite moves the numbers again and draws the figures then,
        so figures drawn now would be drawn twice."""
        with self._cond:
            return self._closing and (bool(self._finished) or self._trials_left())

    def _owe_again(self, trials: list[str] | None) -> None:
        """The numbers of these trials' groups (None: every group's) are asked again at
        the next rewrite, while the study runs: a failed answer is most often a file being
        replaced, and no later trial may finish to ask for them. At the end they are left
        to the next run's or sync's start-up, which asks every group's."""
        with self._cond:
            if self._closing:
                return
            self._groups_owed = True
            self._all_owed = self._all_owed or trials is None
            self._finished.update(trials or [])

    def _answer(self, ask: Callable, *args: Any) -> Any:
        """What the analysis answers, None when it fails: no MLflow outage, said once, and
        nothing is logged (the parents keep what they show)."""
        try:
            return ask(*args)
        except Exception as error:  # noqa: BLE001 (said, skipped)
            if not self._unanswered:
                self.say(f"the configuration groups' numbers or figures for MLflow could not be worked out "
                         f"({type(error).__name__}: {str(error).strip()[:200]}); their parent runs keep "
                         "what they had, and the trials' runs are kept up to date")
            self._unanswered = True
            return None

    def _log_figures(self, stale: list[str]) -> None:
        """Draw and log the figures of the ``stale`` groups, FIGURE_BATCH at a time; at
        the end, until its time for them is spent (what is left is said)."""
        began, batch_s = time.monotonic(), 0.0
        for start in range(0, len(stale), FIGURE_BATCH):
            # a batch that would end past the end's time for figures is not begun
            if self._closing and self._figures_until is not None and time.monotonic() + batch_s > self._figures_until:
                self._leave_figures(len(stale) - start, (time.monotonic() - began) / start if start else None)
                return
            batch_began = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="lg-study-figures-") as folder:
                batch = stale[start:start + FIGURE_BATCH]
                drawn = self._answer(self.handed.group_figures, batch, Path(folder))
                if drawn is None:
                    return  # drawn at the next end or sync
                for group_id in batch:  # one with nothing to draw is done with too
                    self.tracker.groups.log_figures(group_id, drawn.get(group_id, {}))
                    self.figures_drawn.add(group_id)
            batch_s = time.monotonic() - batch_began

    def _leave_figures(self, left: int, seconds_each: float | None) -> None:
        """Say what the end left; ``seconds_each``: a group's figures as drawn at this end
        (None: none was drawn, so no time is guessed)."""
        self.figures_left = left
        groups = "1 configuration group's MLflow parent is" if left == 1 else \
            f"{left} configuration groups' MLflow parents are"
        more = f"about {left * seconds_each:.0f} s more" if seconds_each is not None else "more"
        self.say(f"the figures of {groups} left for `lg-study sync` or the study's next run (their numbers "
                 f"are current): drawing them now would take {more}, beyond a tenth of this run's time")

    def _params(self, trial_id: str) -> dict[str, Any]:
        return {"results_root": str(self.root), "study": self.study, "trial_id": trial_id,
                "run_name": self.run_names.get(trial_id)}

    def _done(self, work: tuple[str, Any, deque | None]) -> None:
        with self._cond:
            self._busy.pop(threading.get_ident(), None)
            back = self.down_since is not None and not self._abandoned
            self.down_since, self.why = None, ""
            self._cond.notify_all()
        if back:
            lag = self.lag()
            self.say(f"MLflow at {self.uri} answers again: the runs of {len(lag.trials)} trials catch up now")
            write_lag(self.root, self.study, lag)

    def _failed(self, work: tuple[str, Any, deque | None], error: Exception) -> bool:
        """Put the work back and say the server is down (the first time); a storage fault
        of a local store (its disk is full) is handed on and ends the thread."""
        fault = fault_of(error, self.root, sqlite_database(self.uri))
        with self._cond:
            self._busy.pop(threading.get_ident(), None)
            if self._abandoned:  # the driver left what is owed in the study's folder already
                return False
            kind, item, queue = work
            if kind == "groups":
                self._groups_owed, self._nest_owed = True, self._nest_owed or item[0]
                self._all_owed = self._all_owed or item[1] is None
                self._finished.update(item[1] or [])
            elif queue is not None:
                queue.appendleft(item)
            elif item[0] not in self._trials:
                self._trials[item[0]] = item[1]
            first = self.down_since is None and fault is None
            if first:
                self.down_since, self.why = datetime.now(timezone.utc), reason(error)
            self._retry_at = time.monotonic() + RETRY_S
            self.fault = self.fault or fault
            self._cond.notify_all()
        if fault is not None:
            if self.on_fault is not None:
                self.on_fault(fault)
            return False
        if first:
            self.say(down_words(self.uri, self.down_since, self.why, network_failure(error),
                                self.root / self.study))
        write_lag(self.root, self.study, self.lag())
        return True


def down_words(uri: str, since: datetime, why: str, network: bool, folder: Path) -> str:
    """lg-study's one message for an MLflow that stopped answering."""
    state = "is unreachable" if network else "fails"
    return (f"MLflow at {uri} {state} since {since:%H:%M:%S} UTC ({why}). Training goes on: every trial's "
            f"rows are safe in {folder}. The MLflow runs catch up when it answers again (tried every "
            f"{RETRY_S:.0f} s), else at the next `lg-study run` of this study or `lg-study sync`.")
