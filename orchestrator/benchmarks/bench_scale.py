"""`lg-study bench --only scale`: lucky_tickets.sql and `lg-study report` on synthetic
stores of 1,000 and 10,000 finished trials (issue 23, item 7).

A store is configuration groups (model.pe x model.size, so results_contract.groups puts them
apart) each crossing every weight seed with every data seed, one `trials` row,
six `eval` rows per trial (the final step; test lengths 5 and 10 inside the training
range 1-10, 15, 20, 30 and 40 outside it), a few `samples` rows (4 questions per
length where a real trial records all 200; with none, coverage.sql would list every
trial) and no `train` rows: its size is its trial count, not its sample rows.
Accuracies come from a two-way random-effects model with a fixed numpy seed (below),
so the statistics have something to estimate. The store is written by the results
store's own code (``write_trial_table``, without the fsync that protects real
results) and compacted, as `lg-study run` leaves a study of this size, before the
clock starts. The whole run took 25 minutes here
(docs/performance.md), most of it the report at 10,000 trials.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from lengthgen.config import EvalConfig, ModelConfig, TaskConfig, TrainConfig, TrialConfig
from orchestrator.benchmarks.measurement import Measurement, best_seconds

#: (groups, weight seeds, data seeds): 10 x 10 x 10 = 1,000 and 25 x 20 x 20 = 10,000 trials
SCALES = ((10, 10, 10), (25, 20, 20))
#: the groups, in order: a study of n groups takes the first n (5 PEs per size)
GROUPS = tuple((pe, size) for size in ("tiny", "mini", "small", "2m", "5m")
               for pe in ("nope", "rope", "alibi", "fire", "t5"))
LENGTHS = (5, 10, 15, 20, 30, 40)
TRAIN_DIGITS = (1, 10)
QUESTIONS = 200
SAMPLES_PER_LENGTH = 4
STUDY = "scale"
#: budgets, seconds (docs/performance.md says why), per trial count; another count gets
#: that of the largest count not above it (below 1,000: the 1,000-trial budget)
LUCKY_BUDGET = {1_000: 3.0, 10_000: 20.0}
REPORT_BUDGET = {1_000: 10.0, 10_000: 60.0}


def group_configs(n_groups: int) -> list[TrialConfig]:
    """The first ``n_groups`` groups' configs at weight and data seed 0."""
    if n_groups > len(GROUPS):
        raise ValueError(f"at most {len(GROUPS)} groups")
    return [
        TrialConfig(task=TaskConfig(train_digits=TRAIN_DIGITS), model=ModelConfig(pe=pe, size=size),
                    train=TrainConfig(steps=1000), eval=EvalConfig(digits=LENGTHS, samples=QUESTIONS))
        for pe, size in GROUPS[:n_groups]
    ]


def accuracies(n_groups: int, weight_seeds: int, data_seeds: int, seed: int = 0) -> np.ndarray:
    """Accuracy per (group, weight seed, data seed, length), from the two-way
    random-effects model y = μ_g(L) + s(L)·(u_w + v_d + e), clipped to [0, 1]:
    μ_g ~ U(0.3, 0.9) out of distribution, falling 0.05 per longer length, 0.97 inside
    the training range; u_w ~ N(0, 0.12²) and v_d ~ N(0, 0.05²) per group, one draw
    for every length (a lucky weight seed is lucky at each); e ~ N(0, 0.04²) per cell
    and length; s(L) = 1 outside the training range, 0.2 inside."""
    rng = np.random.default_rng(seed)
    lengths = np.array(LENGTHS)
    outside = lengths > TRAIN_DIGITS[1]
    drop = 0.05 * np.cumsum(outside) * outside
    base = rng.uniform(0.3, 0.9, (n_groups, 1, 1, 1))
    mean = np.where(outside, base - drop, 0.97)
    weight = rng.normal(0, 0.12, (n_groups, weight_seeds, 1, 1))
    data = rng.normal(0, 0.05, (n_groups, 1, data_seeds, 1))
    noise = rng.normal(0, 0.04, (n_groups, weight_seeds, data_seeds, len(LENGTHS)))
    return np.clip(mean + np.where(outside, 1.0, 0.2) * (weight + data + noise), 0, 1)


def write_store(root: Path, n_groups: int, weight_seeds: int, data_seeds: int, seed: int = 0) -> int:
    """A results store under ``root`` (study ``scale``) with every trial done; returns
    the number of trials."""
    from orchestrator.store.results_store import write_trial_table
    from orchestrator.store.trial_rows import trials_row
    from results_contract.groups import group_id, group_labels

    bases = group_configs(n_groups)
    labels = group_labels(bases)
    correct = np.rint(accuracies(n_groups, weight_seeds, data_seeds, seed) * QUESTIONS).astype(int)
    started = datetime(2026, 1, 1, tzinfo=timezone.utc)
    inside = [n <= TRAIN_DIGITS[1] for n in LENGTHS]
    rng = np.random.default_rng(seed + 1)
    for g, base in enumerate(bases):
        label = labels[group_id(base)]
        for w in range(weight_seeds):
            for d in range(data_seeds):
                config = replace(base, seeds=replace(base.seeds, weight=w, data=d))
                trial = config.trial_id
                row = trials_row(STUDY, config, "done", "cpu", started, started + timedelta(seconds=60), 1,
                                 group_label=label)
                write_trial_table(root, STUDY, "trials", trial, [row], durable=False)
                write_trial_table(root, STUDY, "eval", trial, [
                    {"step": 1000, "digits": n, "n": QUESTIONS, "correct": int(c),
                     "accuracy": int(c) / QUESTIONS, "in_distribution": i}
                    for n, c, i in zip(LENGTHS, correct[g, w, d], inside)
                ], durable=False)
                write_trial_table(root, STUDY, "samples", trial, _samples(rng, correct[g, w, d]), durable=False)
    return n_groups * weight_seeds * data_seeds


def _samples(rng: np.random.Generator, correct: np.ndarray) -> list[dict]:
    """`SAMPLES_PER_LENGTH` questions per length, each right with the length's accuracy;
    a wrong answer is wrong at its last place."""
    rows = []
    for n, right in zip(LENGTHS, correct):
        for idx in range(SAMPLES_PER_LENGTH):
            ok = bool(rng.random() < right / QUESTIONS)
            target = "".join(map(str, rng.integers(0, 10, n + 1)))
            wrong = target[:-1] + str((int(target[-1]) + 1) % 10)
            rows.append({"step": 1000, "digits": n, "idx": idx, "cascade": int(rng.integers(0, n + 1)),
                         "correct": ok, "wrong_digits": 0 if ok else 1, "first_wrong": None if ok else n,
                         "target": target, "prediction": target if ok else wrong,
                         "carry_in": "".join(map(str, rng.integers(0, 2, n + 1))),
                         "wrong_places": "0" * (n + 1) if ok else "0" * n + "1"})
    return rows


def query_file(root: Path, name: str, params: dict[str, str] | None = None) -> None:
    """What `lg-study query --study scale --file analysis/<name>.sql` does, less printing."""
    from analysis.query import open_results, run_query
    from analysis.report import sql_path

    with open_results(root, STUDY) as con:
        run_query(con, sql_path(name).read_text(), params)


def scale(scales=SCALES, repeat: int = 1, params: dict[str, str] | None = None) -> list[Measurement]:
    """Per store shape (groups, weight seeds, data seeds): `lg-study query` of
    lucky_tickets.sql and `lg-study report`, each as budget / measured seconds."""
    rows = []
    for shape in scales:
        with tempfile.TemporaryDirectory() as folder:
            rows += measure(Path(folder), shape, repeat, params)
    return rows


def measure(root: Path, shape: tuple[int, int, int], repeat: int = 1,
            params: dict[str, str] | None = None) -> list[Measurement]:
    """Write the store of ``shape`` under ``root`` (untimed), then time, best of
    ``repeat``, lucky_tickets.sql as `lg-study query` runs it and `lg-study report`
    (its page in ``root/report``); ``params`` go to both."""
    from analysis.report import build_report
    from orchestrator.store.compaction import compact_study

    n_groups, weight_seeds, data_seeds = shape
    started = time.perf_counter()
    trials = write_store(root, n_groups, weight_seeds, data_seeds)
    written = time.perf_counter() - started
    started = time.perf_counter()
    compact_study(root, STUDY)  # as `lg-study run` leaves a study of this size
    compacted = time.perf_counter() - started
    lucky = best_seconds(lambda: query_file(root, "lucky_tickets", params), repeat)
    report = best_seconds(lambda: build_report(root, STUDY, root / "report", params), repeat)
    store = (f"{trials:,} trials ({n_groups} groups x {weight_seeds} weight x {data_seeds} data seeds, "
             f"{len(LENGTHS)} lengths; written in {written:.0f} s and compacted in {compacted:.0f} s, not timed)")
    rows = []
    for what, seconds, budgets in (("lg-study query lucky_tickets.sql", lucky, LUCKY_BUDGET),
                                   ("lg-study report", report, REPORT_BUDGET)):
        budget = budgets[max((n for n in budgets if n <= trials), default=min(budgets))]
        rows.append(Measurement(f"{what} on {trials:,} trials (budget {budget:g} s / measured)",
                                budget / seconds, ">= 1", f"{store}: {seconds:.1f} s"))
    return rows
