"""Test-run settings and the fixtures several test files share: an MLflow store and a
tracker of one experiment per test (test_tracking, test_recovery), a finished trial
written into a results store as a worker writes it (test_group_columns,
test_seed_target), and a two-node Ray cluster on this machine (`cluster`, registered
here from tests/ray_studies.py, which also holds the helpers of the tests that run
`lg-study run` over Ray and stop it). The model tests share plain helpers instead
(tests/model_helpers.py).

The studies that test modules run in this process share one local Ray: `start_ray`
starts it for the first and the others join it (a start costs about 4 s); it ends
with the process. A module that needs a Ray of its own (test_tracking's one CPU, the
slow tier's clusters) shuts the shared one down first."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pytest
from ray_studies import cluster  # noqa: F401  (registers the fixture for every test file)

# `make test` runs one pytest worker per core; torch's default of one compute thread per
# core in each of them (and in the Ray workers they start, which inherit the variable)
# oversubscribes the machine: one thread each ran the default tier 15 % faster here.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # Likewise each worker's local Ray (and the `lg-study run` processes the tests start,
    # which inherit the variable) counts one CPU, so its studies train one trial at a
    # time: two workers then keep two trials on the two cores, not four, and each study
    # starts one trial worker, whose imports cost about 9 s of CPU (docs/performance.md,
    # "Test tiers"). Ray reads the variable when it starts a node.
    os.environ.setdefault("RAY_OVERRIDE_RESOURCES", '{"CPU": 1}')


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a `long` test that is not also `slow`: the default tier deselects by `slow`
    alone, so a test marked only `long` would run in `make test`."""
    unmarked = [item.nodeid for item in items if item.get_closest_marker("long") and not item.get_closest_marker("slow")]
    if unmarked:
        raise pytest.UsageError("marked long but not slow: " + ", ".join(unmarked))


#: when the rows these fixtures write say their trial started
STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def mlflow_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One MLflow store per test module: creating one (schema migrations) costs about a second."""
    from results_contract.experiments import default_store_uri

    return default_store_uri(tmp_path_factory.mktemp("results"))


@pytest.fixture
def tracker(mlflow_store: str, request: pytest.FixtureRequest):
    """A StudyTracker on the module's store, with an experiment of the test's own (named
    after it, cut to 60 characters, brackets of a parametrized name replaced)."""
    from orchestrator.mlflow_tracking.tracking import StudyTracker

    return StudyTracker(mlflow_store, request.node.name[:60].replace("[", "_").replace("]", ""))


@pytest.fixture(scope="session")
def write_finished_trial():
    """write(root, study, config, accuracy, started=STARTED, legacy=False): one finished
    trial of `study` in the results store at `root`, its trials row (group columns
    included; without them, as the previous version wrote it, with `legacy`) and one
    evaluation at step 10 of 4 questions of 3 digits at `accuracy`."""
    from orchestrator.store.results_store import write_trial_table
    from orchestrator.store.trial_rows import trials_row

    def write(root: Path, study, config, accuracy: float, started: datetime = STARTED, legacy: bool = False) -> None:
        row = trials_row(study.name, config, "done", "cpu", started, group_label=study.group_label(config))
        if legacy:
            del row["group_id"], row["group_label"]
        write_trial_table(root, study.name, "trials", config.trial_id, [row])
        evaluation = {"step": 10, "digits": 3, "n": 4, "correct": round(4 * accuracy), "accuracy": accuracy,
                      "in_distribution": False}
        write_trial_table(root, study.name, "eval", config.trial_id, [evaluation])

    return write
