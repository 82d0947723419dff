"""What the groups' MLflow parent runs cost a large study (issue 54, docs/performance.md):
on a synthetic store of GROUPS configuration groups x WEIGHT x DATA seeds, every trial
done (orchestrator/benchmarks/bench_scale.py's rows, compacted as a run leaves them),
the seconds of

- the groups' numbers: the SQL questions over the whole study (group_answers.group_numbers);
- the first write of every parent (made from a trial's params) and its numbers, on a
  SQLite MLflow store, then a rewrite where GROUPS_CHANGED groups have a new step;
- nest_runs over the study's trial runs (one bare run per trial, made first: the
  start-up's pass that nests runs made before parents existed).

    PYTHONPATH=. python tools/group_refresh_cost.py [FOLDER] [GROUPS WEIGHT DATA]
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

LR = (1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3, 7e-3, 8e-3, 9e-3, 1e-2,
      1.1e-2, 1.2e-2, 1.3e-2, 1.4e-2, 1.5e-2, 1.6e-2, 1.7e-2, 1.8e-2, 1.9e-2, 2e-2)
GROUPS_CHANGED = 25


def write_store(root: Path, n_groups: int, weight: int, data: int) -> None:
    """bench_scale's store, its groups told apart by train.lr as well as pe and size."""
    from orchestrator.benchmarks import bench_scale
    from orchestrator.store.compaction import compact_after_run

    base = bench_scale.group_configs(len(bench_scale.GROUPS))
    configs = [replace(c, train=replace(c.train, lr=lr)) for lr in LR for c in base][:n_groups]
    original = bench_scale.group_configs
    bench_scale.group_configs = lambda n: configs[:n]
    try:
        bench_scale.write_store(root, n_groups, weight, data)
    finally:
        bench_scale.group_configs = original
    compact_after_run(root, bench_scale.STUDY)


def timed(what: str, call):
    started = time.perf_counter()
    result = call()
    print(f"{what}: {time.perf_counter() - started:.2f} s", flush=True)
    return result


def main(folder: Path, n_groups: int, weight: int, data: int) -> None:
    import json

    from orchestrator.benchmarks.bench_scale import STUDY
    from orchestrator.mlflow_tracking.group_runs import nest_runs
    from orchestrator.mlflow_tracking.tracking import StudyTracker
    from orchestrator.running.group_answers import group_numbers
    from orchestrator.store.trial_rows import flatten_config
    from results_contract.experiments import default_store_uri

    root = folder / "results"
    if not (root / STUDY).is_dir():
        timed(f"store of {n_groups * weight * data} trials written", lambda: write_store(root, n_groups, weight, data))
    numbers = [timed("groups' numbers (SQL)", lambda: group_numbers(root, STUDY, {})) for _ in range(3)][-1]
    print(f"{len(numbers)} groups, {sum(len(n.metrics) for n in numbers)} metrics", flush=True)
    from analysis.query import open_results, run_query

    with open_results(root, STUDY) as con:
        rows = run_query(con, "select trial_id, group_id, group_label, config_json from trials").to_pylist()
    tracker = StudyTracker(default_store_uri(folder / "mlflow"), STUDY)
    one = {row["group_id"]: row for row in rows}
    params = {gid: flatten_config(json.loads(row["config_json"])) for gid, row in one.items()}
    timed("parents made", lambda: [tracker.groups.parent(g, one[g]["group_label"], None, params[g]) for g in one])
    timed("numbers written, every group", lambda: [tracker.groups.write(n) for n in numbers])
    for n in numbers[:GROUPS_CHANGED]:
        n.step += 1
    timed(f"numbers rewritten, {GROUPS_CHANGED} groups changed", lambda: [tracker.groups.write(n) for n in numbers])

    def bare_runs() -> None:
        for row in rows:
            tracker.client.create_run(tracker.experiment_id, tags={
                "trial_id": row["trial_id"], "group": row["group_id"], "group_label": row["group_label"]})

    timed(f"{len(rows)} bare trial runs made (setup)", bare_runs)
    moved = timed("nest_runs, every run moved", lambda: nest_runs(tracker, {}))
    assert len(moved) == len(rows)
    timed("nest_runs, nothing to move", lambda: nest_runs(tracker, {}))


if __name__ == "__main__":
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="group-cost-"))
    shape = [int(a) for a in sys.argv[2:5]] or [500, 4, 5]
    main(where, *shape)
