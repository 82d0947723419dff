"""A study across a real two-node Ray cluster on this machine (slow: `pytest -m slow`).

The `cluster` fixture (tests/ray_studies.py) is two `ray start --block` processes, a
head and a second node joining it, each with one CPU and a resource of its own; a study
of four one-CPU trials must then use both.
"""

from __future__ import annotations

import subprocess

import pytest
from ray_studies import one_finished_run_each, study_command, tiny_study

from analysis.query import open_results, run_query

pytestmark = pytest.mark.slow
STUDY = tiny_study("cluster", 60, {"seeds.weight": [0, 1, 2, 3]}, "{cpus_per_trial: 1}",
                   source="test fixture: four one-CPU trials on two one-CPU nodes")


def test_study_runs_on_both_nodes_of_a_cluster(cluster, tmp_path):
    address, node_ids, env = cluster
    _, results, command = study_command(tmp_path, STUDY)
    run = subprocess.run([*command, "--address", address], capture_output=True, text=True, timeout=300,
                         check=False, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    with open_results(results, "cluster") as con:
        trials = run_query(con, "select trial_id, status, node from trials").to_pylist()
        counts = run_query(con, "select count(*) as n, count(distinct trial_id) as trials from eval").to_pylist()
    assert [t["status"] for t in trials] == ["done"] * 4
    assert {t["node"] for t in trials} == node_ids  # both nodes ran trials
    assert counts == [{"n": 4 * 3 * 2, "trials": 4}]
    one_finished_run_each(results, "cluster", [t["trial_id"] for t in trials])
