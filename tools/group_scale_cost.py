"""What the groups' MLflow parents add to a study of 10,000 trials in 500 groups (issue
54, item 4; docs/performance.md, "Group parents at 10,000 trials"), timed on the stores
tools/group_scale_store.py writes into DIR, with the code the driver's MLflow thread
runs (orchestrator.mlflow_tracking.syncer._write_groups):

- a rewrite as trials finish: group_answers.GroupAnswers.numbers for the groups of the
  trials finished since the last rewrite (1, and 25 in 25 groups), then those parents'
  numbers written (tracker.groups.write), on the running study's store (one file per
  trial) and on the compacted one (a resumed run's);
- a complete group's figures drawn (GroupAnswers.figures, FIGURE_BATCH groups at a
  time) and logged on its parent (tracker.groups.log_figures);
- every group's numbers at once, as the start-up and `lg-study sync` ask them, on each store.

    PYTHONPATH=. python tools/group_scale_cost.py DIR [REPEATS [GROUPS WEIGHT DATA]]
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from group_scale_store import study_of  # the tools folder is no package


def seconds(call, *args) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call(*args)
    return time.perf_counter() - started, result


def say(what: str, times: list[float]) -> None:
    spread = f" (median of {len(times)}: {min(times):.2f}–{max(times):.2f})" if len(times) > 1 else ""
    print(f"{what}: {statistics.median(times):.2f} s{spread}", flush=True)


def write_all(tracker, numbers) -> None:
    for n in numbers:
        tracker.groups.write(n)


def log_all(tracker, drawn) -> None:
    for group_id, files in drawn.items():
        tracker.groups.log_figures(group_id, files)


def rewrites(answers, tracker, study, repeats: int, label: str) -> None:
    """A rewrite for 1 finished trial, and for 25 in 25 groups, each ``repeats`` times."""
    trials = study.trials
    per_group = len(trials) // len({t for t in answers.group_of.values()})
    for count in (1, 25):
        asked, written = [], []
        for repeat in range(repeats):
            # trials of groups not asked before, so that no cache of an earlier round helps
            picked = [trials[(repeat * 25 + k) * per_group + 3].trial_id for k in range(count)]
            spent, numbers = seconds(answers.numbers, picked)
            assert len(numbers) == count, len(numbers)
            asked.append(spent)
            for n in numbers:
                n.step = time.time_ns()  # a step not logged before: the write is not skipped
            written.append(seconds(write_all, tracker, numbers)[0])
        say(f"{label}: numbers of the groups of {count} finished trials (SQL)", asked)
        say(f"{label}: their parents' numbers written ({count} groups)", written)


def figures(answers, tracker, repeats: int, label: str) -> None:
    """FIGURE_BATCH groups' figures drawn, then logged, per group."""
    from orchestrator.mlflow_tracking.syncer import FIGURE_BATCH

    group_ids = sorted(set(answers.group_of.values()))
    drawn_s, logged_s = [], []
    for repeat in range(repeats):
        batch = group_ids[repeat * FIGURE_BATCH:(repeat + 1) * FIGURE_BATCH]
        folder = Path(tempfile.mkdtemp(prefix="group-figures-"))
        try:
            spent, drawn = seconds(answers.figures, batch, folder)
            drawn_s.append(spent / len(batch))
            logged_s.append(seconds(log_all, tracker, drawn)[0] / len(batch))
        finally:
            shutil.rmtree(folder)
    say(f"{label}: one group's figures drawn ({FIGURE_BATCH} at a time)", drawn_s)
    say(f"{label}: one group's figures logged", logged_s)


def main(folder: Path, repeats: int, shape: list[int]) -> None:
    from orchestrator.benchmarks.bench_scale import STUDY
    from orchestrator.mlflow_tracking.tracking import StudyTracker
    from orchestrator.running.group_answers import GroupAnswers
    from results_contract.experiments import default_store_uri

    study = study_of(*shape)
    tracker = StudyTracker(default_store_uri(folder / "mlflow"), STUDY)
    print(f"{len(study.trials)} trials in {shape[0]} groups", flush=True)
    for label in ("running study (one file per trial)", "compacted study"):
        root = folder / ("live" if label.startswith("running") else "compacted") / "results"
        answers = GroupAnswers(study, root)
        say(f"{label}: the study's trials rows read for their groups (once a run)",
            [seconds(answers.members, set())[0]])
        rewrites(answers, tracker, study, repeats, label)
        figures(answers, tracker, repeats, label)
        say(f"{label}: every group's numbers (start-up, sync)", [seconds(answers.numbers)[0]])


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3,
         [int(a) for a in sys.argv[3:6]] or [500, 4, 5])
