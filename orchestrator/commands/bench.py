"""`lg-study bench`: the chosen benchmarks run, each row printed as it comes, then the table."""

from __future__ import annotations

from pathlib import Path

from orchestrator.cli_support import DEFAULT_RESULTS, bad_input, err, out


def run_bench(only: list[str] | None, run_all: bool, trials: int | None, results: Path = DEFAULT_RESULTS) -> None:
    """The benchmarks ``only`` (keys of orchestrator.benchmarks.bench.BENCHMARKS), else all
    of them (``run_all``), else the quick ones; the scale_run study sized to ``trials``; the
    gpu rows' rates recorded under ``results``."""
    from rich.table import Table

    from orchestrator.benchmarks.bench import BENCHMARKS, default_names, left_out, machine
    from orchestrator.benchmarks.bench import run as run_benchmarks

    names = only if only else list(BENCHMARKS) if run_all else default_names()
    if trials is not None and ("scale_run" not in names or trials % 25):
        raise bad_input("--trials sizes the scale_run study (a multiple of 25: weight seeds x 25 data seeds): "
                        "give it with --only scale_run")
    table = Table(title=f"lg-study bench: {machine()}")
    for column in ("measurement", "ratio", "target", "met", "measured"):
        table.add_column(column, overflow="fold")

    def show(m):
        ratio = "-" if m.ratio is None else f"{m.ratio:.2f}"
        err.print(f"{m.name}: {ratio} ({m.detail})", highlight=False)
        table.add_row(m.name, ratio, m.target, {True: "yes", False: "no", None: "-"}[m.met], m.detail)

    for line in left_out(names):
        err.print(line, highlight=False)
    run_benchmarks(names, on_result=show, trials=trials, results_root=results)
    out.print(table)
    for line in left_out(names):
        out.print(line, highlight=False)
