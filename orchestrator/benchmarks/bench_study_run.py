"""`lg-study bench --only scale_run`: a real study of 1,000 one-step trials on the local
Ray (`--trials 10000`: ten thousand), and the commands a user runs after it.

The study runs as `lg-study run` in a child process, the way a user starts it; while
it runs, the driver's resident memory (Linux /proc) and the count of finished trials
are sampled, so memory growth is read per trial between the first tenth of the trials
and the last. The per-trial time is the span from the first trial's start to the last
trial's end (the trials rows' own times) over the trial count: what each further trial
costs once Ray is up. Ray's start, MLflow's store and the exit are the rest of the
command's wall time, reported beside it. Then `lg-study status`, `lg-study query
--file lucky_tickets.sql` and `lg-study report` run as commands over the
study's store, each timed from process start to exit (interpreter and imports
included: what the user waits for). A last row checks the store: every trial has its
rows in every table once (the same count per trial, no key twice), after `run` has
compacted them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from analysis.query import sql_file
from orchestrator.benchmarks.measurement import Measurement

#: seconds per trial once Ray is up, MB of driver memory per trial, seconds per command
BUDGETS = {"trial": 0.2, "memory": 0.1, "status": 2.0, "lucky": 3.0, "report": 10.0}
#: from 10,000 trials: status and report get more time, and the whole run has 30 minutes
BUDGETS_AT_10K = {**BUDGETS, "status": 3.0, "report": 20.0, "end_to_end": 1800.0}


def budgets(trials: int) -> dict[str, float]:
    return BUDGETS_AT_10K if trials >= 10_000 else BUDGETS
STUDY = "bench_scale_run"


def study_text(weight_seeds: int, data_seeds: int, learning_rates: list[float] | None = None,
               name: str = STUDY) -> str:
    """A study of one-step trials: one configuration group of weight x data seeds, or
    one group per learning rate of ``learning_rates``."""
    groups = f"\n          train.lr: {learning_rates}" if learning_rates else ""  # the axes' indent
    return textwrap.dedent(f"""\
        name: {name}
        source: "lg-study bench: a study of one-step trials at the scale users run"
        base:
          task: {{name: successor, train_digits: [1, 2]}}
          model: {{size: tiny, pe: nope}}
          train: {{steps: 1, batch_size: 2, warmup: 1, log_every: 1}}
          eval: {{digits: [2, 4], samples: 8}}
        axes:{groups}
          seeds.weight: {list(range(weight_seeds))}
          seeds.data: {list(range(data_seeds))}
        resources: {{cpus_per_trial: 1}}
        """)


def resident_mb(pid: int) -> float | None:
    """VmRSS of ``pid`` in MB, None where /proc has no such file (not Linux, or gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def run_sampled(command: list[str], eval_dir: Path, every: float) -> tuple[float, list[tuple[int, float]]]:
    """Run ``command``; return its wall seconds and (finished trials, driver MB) samples.
    A trial has finished when its `eval` rows exist (its `trials` row is written at its
    start)."""
    env = {**os.environ, "RAY_ADDRESS": ""}
    # its progress goes to a file: a pipe nobody reads fills after ~600 trials' lines
    # and blocks the driver's next print
    with tempfile.TemporaryFile() as log:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        samples: list[tuple[int, float]] = []
        done = 0
        while process.poll() is None:
            memory = resident_mb(process.pid)
            # the most seen: compaction, at the end, merges the trials' folders away
            done = max(done, len(list(eval_dir.glob("trial_id=*"))) if eval_dir.exists() else 0)
            if memory is not None:
                samples.append((done, memory))
            time.sleep(every)
        wall = time.perf_counter() - started
        if process.returncode != 0:
            log.seek(0)
            raise RuntimeError(f"{' '.join(command)} failed:\n{log.read().decode()[-2000:]}")
    return wall, samples


def memory_per_trial(samples: list[tuple[int, float]], trials: int) -> float | None:
    """MB the driver grew per trial between a tenth of the trials done and all done
    (the first sample of each: the compaction after the last trial is not the trials')."""
    early = [(done, mb) for done, mb in samples if done >= trials // 10]
    late = [mb for done, mb in samples if done >= trials]
    if not early or not late:
        return None
    return (late[0] - early[0][1]) / max(trials - early[0][0], 1)


def trial_span(root: Path) -> tuple[int, float]:
    """Finished trials and the seconds from the first one's start to the last one's end."""
    from analysis.query import open_results

    with open_results(root, STUDY) as con:
        [(count, span)] = con.sql(
            "select count(*), epoch(max(finished_at) - min(started_at)) from trials "
            "where status = 'done'"
        ).fetchall()
    return count, span


def timed_command(arguments: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "orchestrator.cli", *arguments], check=True,
                   capture_output=True, env={**os.environ, "RAY_ADDRESS": ""})
    return time.perf_counter() - started


def study_run_scale(trials: int = 1000, data_seeds: int = 25) -> list[Measurement]:
    """Run a study of ``trials`` one-step trials (trials / data_seeds weight seeds x
    data_seeds), then time what follows and check the store's rows."""
    weight_seeds = trials // data_seeds
    with tempfile.TemporaryDirectory() as folder:
        study, root = Path(folder) / "study.yaml", Path(folder) / "results"
        study.write_text(study_text(weight_seeds, data_seeds))
        command = [sys.executable, "-m", "orchestrator.cli", "run", str(study), "--results", str(root)]
        # each sample lists the trials' folders: every 2 s at 10,000 of them, not to
        # take the CPU from the run it measures
        wall, samples = run_sampled(command, root / STUDY / "eval", every=max(0.5, trials / 5000))
        done, span = trial_span(root)
        growth = memory_per_trial(samples, trials)
        common = ["--results", str(root)]
        status = timed_command(["status", STUDY, *common])
        lucky = timed_command(["query", "--study", STUDY, "--file", str(sql_file("lucky_tickets.sql")), *common])
        report = timed_command(["report", STUDY, *common])
        check = row_check(root, trials)
    return [*rows(trials, done, wall, span, samples, growth, status, lucky, report), check]


#: the columns that name one row of each table: no trial may hold the same key twice
ROW_KEYS = {"trials": ("trial_id",), "train": ("trial_id", "step"),
            "eval": ("trial_id", "step", "digits"), "samples": ("trial_id", "step", "digits", "idx")}


def row_check(root: Path, trials: int) -> Measurement:
    """Every trial's rows present once in every table: per table, the trials with rows,
    the least and most rows per trial (the same for one-step trials of one design), and
    the keys seen more than once."""
    from analysis.query import open_results

    found, complete = [], trials
    with open_results(root, STUDY) as con:
        for table, key in ROW_KEYS.items():
            columns = ", ".join(key)
            [(with_rows, least, most)] = con.sql(
                f"select count(*), min(n), max(n) from (select count(*) as n from {table} group by trial_id)").fetchall()
            [(twice,)] = con.sql(
                f"select count(*) from (select {columns} from {table} group by {columns} having count(*) > 1)").fetchall()
            found.append(f"{table} {with_rows:,} trials x {least}" + (f"-{most}" if most != least else "")
                         + (f", {twice:,} keys twice" if twice else ""))
            complete = min(complete, with_rows if least == most and not twice else 0)
    files = sum(1 for _ in (root / STUDY).glob("*/**/*.parquet"))
    return Measurement(f"rows after {trials:,} trials: every trial's rows once in every table "
                       "(trials complete / trials)", complete / trials, ">= 1",
                       f"{'; '.join(found)} rows; {files} Parquet files in the study")


def rows(trials: int, done: int, wall: float, span: float, samples: list[tuple[int, float]],
         growth: float | None, status: float, lucky: float, report: float) -> list[Measurement]:
    per_trial = span / max(done, 1)
    setting = f"{trials:,} one-step trials, {done:,} done"
    budget = budgets(trials)
    peak = max((mb for _, mb in samples), default=None)
    memory = (Measurement(f"driver memory per trial, {setting} (budget {budget['memory']:g} MB / measured)",
                          budget["memory"] / max(growth, 1e-3), ">= 1",
                          f"{growth:+.3f} MB per trial after the first tenth; peak {peak:.0f} MB")
              if growth is not None else
              Measurement(f"driver memory per trial, {setting}", None, ">= 1",
                          "not measured: no /proc on this machine, or the run ended between samples"))
    commands = [
        Measurement(f"lg-study {name} after {trials:,} trials (budget {budget[key]:g} s / measured)",
                    budget[key] / seconds, ">= 1", f"{seconds:.1f} s, interpreter start included")
        for name, key, seconds in (("status", "status", status),
                                   ("query lucky_tickets.sql", "lucky", lucky),
                                   ("report", "report", report))
    ]
    whole = ([Measurement(f"lg-study run end to end, {setting} (budget {budget['end_to_end'] / 60:g} min / measured)",
                          budget["end_to_end"] / wall, ">= 1",
                          f"{wall / 60:.1f} min, Ray start, the trials, compaction and exit")]
             if "end_to_end" in budget else [])
    return [
        Measurement(f"per-trial time of lg-study run once Ray is up, {setting} "
                    f"(budget {budget['trial']:g} s / measured)", budget["trial"] / per_trial, ">= 1",
                    f"{per_trial:.3f} s per trial ({span:.0f} s from first start to last end); "
                    f"the command {wall:.0f} s, so {wall - span:.0f} s of Ray start, MLflow store and exit"),
        *whole,
        memory,
        *commands,
    ]
