"""The stores that tools/group_scale_cost.py measures on (issue 54, item 4): what a
study of GROUPS configuration groups x WEIGHT x DATA seeds leaves, every trial done.

- ``DIR/live/results``: bench_scale's synthetic rows (orchestrator/benchmarks/bench_scale.py),
  its groups told apart by train.lr as well as pe and size, one file per trial and table,
  as a running study's store is (a run compacts at its end);
- ``DIR/compacted/results``: the same, compacted, as a finished run leaves it;
- ``DIR/mlflow``: a SQLite MLflow store of the study's experiment with one run per trial
  as `lg-study run` makes it (mlflow_sync.describe's tags and params, the final
  evaluation's metrics, FINISHED), in group order, each nested under its group's
  parent, whose numbers are the SQL's (group_answers.group_numbers).

    PYTHONPATH=. python tools/group_scale_store.py DIR [GROUPS WEIGHT DATA]
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

LR = (1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3, 7e-3, 8e-3, 9e-3, 1e-2,
      1.1e-2, 1.2e-2, 1.3e-2, 1.4e-2, 1.5e-2, 1.6e-2, 1.7e-2, 1.8e-2, 1.9e-2, 2e-2)


def configs(n_groups: int) -> list:
    """bench_scale's groups (pe x size), then again at each learning rate of LR."""
    from orchestrator.benchmarks import bench_scale

    base = bench_scale.group_configs(len(bench_scale.GROUPS))
    return [replace(c, train=replace(c.train, lr=lr)) for lr in LR for c in base][:n_groups]


def write_rows(root: Path, n_groups: int, weight: int, data: int) -> None:
    from orchestrator.benchmarks import bench_scale

    made, original = configs(n_groups), bench_scale.group_configs
    bench_scale.group_configs = lambda n: made[:n]
    try:
        bench_scale.write_store(root, n_groups, weight, data)
    finally:
        bench_scale.group_configs = original


def study_of(n_groups: int, weight: int, data: int) -> SimpleNamespace:
    """What group_answers.GroupAnswers reads of a study: its name, seeds target (none),
    trials and short labels (here the groups' labels)."""
    from orchestrator.benchmarks.bench_scale import STUDY
    from results_contract.groups import group_labels

    bases = configs(n_groups)
    trials = [replace(b, seeds=replace(b.seeds, weight=w, data=d))
              for b in bases for w in range(weight) for d in range(data)]
    labels = group_labels(trials)
    from results_contract.groups import group_id

    return SimpleNamespace(name=STUDY, spec=SimpleNamespace(seeds=SimpleNamespace(until=None)), trials=trials,
                           short_label=lambda config: labels[group_id(config)])


def write_mlflow(folder: Path, root: Path) -> None:
    """One FINISHED run per trial, nested under its group's parent, and every parent's
    numbers. A run is written in three calls with the tags, params and metrics
    `lg-study run` gives it (tracker.run_for_trial first searches the store for the
    trial's run, which at thousands of runs is most of the time here)."""
    import time as clock

    from mlflow.entities import Metric, Param

    from orchestrator.benchmarks.bench_scale import STUDY
    from orchestrator.mlflow_tracking.group_runs import PARENT_TAG
    from orchestrator.mlflow_tracking.mlflow_sync import describe
    from orchestrator.mlflow_tracking.tracking import RUN_NAME_TAG, StudyTracker
    from orchestrator.running.group_answers import group_numbers
    from orchestrator.store.results_store import read_table_rows
    from orchestrator.studies.metric_names import eval_metrics, length_results
    from results_contract.experiments import default_store_uri

    tracker = StudyTracker(default_store_uri(folder), STUDY)
    evals: dict[str, list[dict]] = {}
    for row in read_table_rows(root, STUDY, "eval"):
        evals.setdefault(row["trial_id"], []).append(row)
    # in group order, seeds innermost, as a run's trial list starts them
    rows = sorted(read_table_rows(root, STUDY, "trials"), key=lambda r: (r["group_label"], r["weight_seed"],
                                                                          r["data_seed"]))
    for n, row in enumerate(rows):
        trial_id, tags, params = describe(row)
        tags.update({PARENT_TAG: tracker.groups.parent(tags["group"], tags["group_label"], None, params),
                     "status": "done"})
        run_id = tracker.client.create_run(tracker.experiment_id, tags=tags, run_name=tags[RUN_NAME_TAG]).info.run_id
        stamp = int(clock.time() * 1000)
        metrics = [Metric(k, v, stamp, 1000) for k, v in eval_metrics(length_results(evals[trial_id])).items()
                   if v is not None]
        param_list = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for start in range(0, len(param_list), 100):
            tracker.client.log_batch(run_id, params=param_list[start:start + 100],
                                     metrics=metrics if start == 0 else [])
        tracker.client.set_terminated(run_id, "FINISHED")
        if n % 1000 == 0:
            print(f"{n} runs", flush=True)
    for numbers in group_numbers(root, STUDY, {}):
        tracker.groups.write(numbers)


def main(folder: Path, n_groups: int, weight: int, data: int) -> None:
    from orchestrator.benchmarks.bench_scale import STUDY
    from orchestrator.store.compaction import compact_after_run

    live, compacted = folder / "live" / "results", folder / "compacted" / "results"
    started = time.perf_counter()
    if not (live / STUDY).is_dir():
        write_rows(live, n_groups, weight, data)
        print(f"rows written: {time.perf_counter() - started:.0f} s", flush=True)
    if not (compacted / STUDY).is_dir():
        shutil.copytree(live, compacted)
        compact_after_run(compacted, STUDY)
        print(f"compacted copy: {time.perf_counter() - started:.0f} s", flush=True)
    if not (folder / "mlflow" / "mlflow.db").is_file():
        write_mlflow(folder / "mlflow", compacted)
        print(f"MLflow store: {time.perf_counter() - started:.0f} s", flush=True)


if __name__ == "__main__":
    shape = [int(a) for a in sys.argv[2:5]] or [500, 4, 5]
    main(Path(sys.argv[1]), *shape)
