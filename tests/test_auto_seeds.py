"""`resources.seeds_per_trial: auto` (orchestrator.running.auto_seeds): K is a group's
pending seeds, the memory budget over one seed's estimate, or AUTO_SEEDS, whichever is
least, at least 1; the budget is read by a Ray task where trials run. The GPU branch of
the budget runs here with injected readers (no GPU on the machines these tests run on);
the CPU branch and the probe run on a real local Ray, by a study run as a user runs it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import ray
from typer.testing import CliRunner

from analysis.query import open_results, run_query
from orchestrator.cli import app
from orchestrator.running.memory_budget import (
    CPU_SAFETY,
    GPU_SAFETY,
    MemoryBudget,
    budget_here,
    node_available_bytes,
    probe_budget,
)
from orchestrator.running.seed_batches import AUTO_SEEDS, AutoSeeds, auto_seeds
from orchestrator.running.tune_runner import start_ray
from orchestrator.studies.study import Resources

GIB = 2**30


@pytest.mark.parametrize(("pending", "budget", "per_seed", "expected"), [
    (4, 100 * GIB, GIB, AutoSeeds(4, "group", 100)),  # a group smaller than the memory bound
    (12, 6 * GIB, GIB, AutoSeeds(6, "memory", 6)),
    (12, 6.9 * GIB, GIB, AutoSeeds(6, "memory", 6)),  # whole seeds only
    (12, 1.5 * GIB, GIB, AutoSeeds(1, "memory", 1)),  # memory for fewer than 2: each seed alone
    (12, 0.5 * GIB, GIB, AutoSeeds(1, "memory", 0)),  # not even one fits: it trains alone, as without batches
    (40, 100 * GIB, GIB, AutoSeeds(AUTO_SEEDS, "cap", 100)),
    (1, 100 * GIB, GIB, AutoSeeds(1, "group", 100)),
    (6, 6 * GIB, GIB, AutoSeeds(6, "group", 6)),  # a tie names the group
])
def test_k_is_the_least_of_the_group_the_memory_and_the_cap(pending, budget, per_seed, expected):
    assert auto_seeds(pending, budget, per_seed) == expected


@pytest.mark.parametrize(("pending", "spread", "expected"), [
    (16, 8, AutoSeeds(8, "workers", 100)),  # one group of 16 on 2 CPU workers: two batches, not one
    (4, 8, AutoSeeds(4, "group", 100)),  # the quickstart's groups of 4, 16 seeds on 2 workers
    (40, 20, AutoSeeds(AUTO_SEEDS, "cap", 100)),
    (16, None, AutoSeeds(16, "group", 100)),  # a GPU: no bound by workers
])
def test_on_cpus_k_leaves_no_worker_idle(pending, spread, expected):
    assert auto_seeds(pending, 100 * GIB, GIB, spread=spread) == expected


def test_a_cpu_budget_says_how_many_trials_run_at_once_and_a_gpu_budget_does_not():
    assert budget_here(Resources(cpus_per_trial=2), 16, lambda: 64 * GIB, lambda: 0).at_once == 8
    assert budget_here(Resources(gpus_per_trial=0.5), 16, lambda: 0, lambda: 80 * GIB).at_once is None


def test_the_cpu_budget_is_the_nodes_available_memory_over_the_trials_that_run_at_once():
    def no_gpu() -> int:
        raise AssertionError("a CPU trial reads no GPU")

    budget = budget_here(Resources(cpus_per_trial=2), 16, lambda: 64 * GIB, no_gpu)
    assert budget.bytes == int(CPU_SAFETY * 64 * GIB / 8) and "over 8 trials at once" in budget.where
    assert budget_here(Resources(cpus_per_trial=2, max_concurrent_trials=2), 16, lambda: 64 * GIB, no_gpu).bytes \
        == int(CPU_SAFETY * 64 * GIB / 2)
    assert budget_here(Resources(cpus_per_trial=4), 2, lambda: 8 * GIB, no_gpu).bytes == int(CPU_SAFETY * 8 * GIB)


def test_the_gpu_budget_is_the_trials_share_of_the_cards_free_memory():
    def no_node() -> int:
        raise AssertionError("a GPU trial's budget is its card's")

    quarter = budget_here(Resources(gpus_per_trial=0.25), 16, no_node, lambda: 80 * GIB)
    assert quarter == MemoryBudget(int(GPU_SAFETY * 0.25 * 80 * GIB), f"{GPU_SAFETY} x 0.25 of the GPU's 80.0 GiB free")
    # a trial of two GPUs trains on one device: one card's memory, not two
    assert budget_here(Resources(gpus_per_trial=2), 16, no_node, lambda: 80 * GIB).bytes == int(GPU_SAFETY * 80 * GIB)


def test_the_nodes_available_memory_is_some_of_its_memory():
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    total = int(next(line for line in meminfo if line.startswith("MemTotal")).split()[1]) * 1024
    assert 0 < node_available_bytes() <= total


STUDY = """\
name: auto
base:
  task: {name: successor, train_digits: [1, 2]}
  model: {arch: decoder, size: tiny, pe: nope}
  train: {steps: 4, batch_size: 8, log_every: 2}
  eval: {digits: [2], samples: 4}
axes:
  train.lr: [1.0e-3, 3.0e-3]
  seeds.weight: [0, 1, 2]
resources: {cpus_per_trial: 1, seeds_per_trial: auto}
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    folder = tmp_path_factory.mktemp("auto_seeds")
    study_file, results = folder / "auto.yaml", folder / "results"
    study_file.write_text(STUDY)
    outcome = CliRunner().invoke(app, ["run", str(study_file), "--results", str(results)])
    assert outcome.exit_code == 0, outcome.output
    yield results, outcome.output


def test_a_study_with_auto_batches_each_groups_pending_seeds_and_says_why(ran):
    results, output = ran
    said = re.findall(r"seeds_per_trial auto: (.+?): (\d+) seeds per batch, its 3 pending seeds", output)
    assert sorted(said) == [("lr=0.001", "3"), ("lr=0.003", "3")], output
    with open_results(results, "auto") as con:
        trials = run_query(con, "select status, seeds_per_trial, seed_slot from trials").to_pylist()
    assert len(trials) == 6 and {t["status"] for t in trials} == {"done"}
    assert {t["seeds_per_trial"] for t in trials} == {3} and sorted(t["seed_slot"] for t in trials) == [0, 0, 1, 1, 2, 2]


def test_the_probe_reads_the_budget_in_a_ray_task_with_a_trials_resources(ran):
    start_ray(None)  # the run's local Ray, or a new one
    cpus = int(ray.cluster_resources()["CPU"])  # one under the test tiers' workers (tests/conftest.py)
    budget = probe_budget(Resources(cpus_per_trial=1))
    assert f"over {cpus} trial{'s' * (cpus > 1)} at once" in budget.where
    here = CPU_SAFETY * node_available_bytes() / cpus
    assert 0.5 * here < budget.bytes < 2 * here  # the same node: its available memory moves a little
    assert "over 1 trial at once" in probe_budget(Resources(cpus_per_trial=cpus)).where
