"""What the groups' MLflow parents add to a real study, end to end (issue 54, item 4;
docs/performance.md, "Group parents at 10,000 trials"): the same study of one-step
trials in GROUPS configuration groups of WEIGHT x DATA seeds, run by `lg-study run` in
a child process with the parents (today's code) and without them (the driver's MLflow
thread handed no group answers, so it makes trial runs alone), the two interleaved in
ROUNDS rounds so that the machine's load falls on both alike. One-step trials make the
run all overhead: the parents' share of it is at its largest.

    PYTHONPATH=. python tools/group_parents_e2e.py [GROUPS WEIGHT DATA [ROUNDS]]

prints each run's wall time and the ratio with / without per round.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STUDY = "parents_e2e"
#: the driver's MLflow thread handed nothing of the groups: no parent, no nesting
WITHOUT_PARENTS = (
    "from orchestrator.running import tune_runner\n"
    "from orchestrator.mlflow_tracking.handed import Handed\n"
    "tune_runner.handed = lambda study, root: Handed()\n"
    "from orchestrator.cli import app\n"
    "app()\n"
)
WITH_PARENTS = "from orchestrator.cli import app\napp()\n"


def study_text(groups: int, weight: int, data: int) -> str:
    from orchestrator.benchmarks.bench_study_run import study_text as one_step_study

    return one_step_study(weight, data, [round(1e-3 * (1 + k), 6) for k in range(groups)], STUDY)


def run_once(program: str, study: Path, folder: Path) -> tuple[float, str]:
    """Wall seconds of one `lg-study run` of ``study`` into a fresh results folder."""
    root = folder / "results"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", program, "run", str(study), "--results", str(root)],
                          check=False, capture_output=True, text=True, env={**os.environ, "RAY_ADDRESS": ""})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"lg-study run failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    said = [line for line in done.stdout.splitlines() if "figures of" in line]
    return wall, " ".join(said)


def main(groups: int, weight: int, data: int, rounds: int) -> None:
    print(f"{groups * weight * data} one-step trials in {groups} groups of {weight} x {data} seeds", flush=True)
    ratios = []
    with tempfile.TemporaryDirectory() as folder:
        study = Path(folder) / "study.yaml"
        study.write_text(study_text(groups, weight, data))
        for round_ in range(rounds):
            walls = {}
            # the order alternates, so that neither arm always runs second
            arms = [("with", WITH_PARENTS), ("without", WITHOUT_PARENTS)]
            for name, program in arms if round_ % 2 == 0 else arms[::-1]:
                with tempfile.TemporaryDirectory(dir=folder) as results:
                    walls[name], said = run_once(program, study, Path(results))
                print(f"round {round_ + 1}: {name} parents {walls[name]:.1f} s {said}".rstrip(), flush=True)
            ratios.append(walls["with"] / walls["without"])
            print(f"round {round_ + 1}: with / without = {ratios[-1]:.3f}", flush=True)
    print(f"median with / without over {rounds} rounds: {statistics.median(ratios):.3f}", flush=True)


if __name__ == "__main__":
    shape = [int(a) for a in sys.argv[1:5]]
    main(*(shape[:3] or [50, 4, 5]), shape[3] if len(shape) > 3 else 3)
