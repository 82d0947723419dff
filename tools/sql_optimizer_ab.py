"""The analysis question files planned with DuckDB's optimizer passes disabled in sets,
against its whole optimizer, interleaved in one process (analysis.query's
SKIPPED_OPTIMIZERS; docs/performance.md "DuckDB's share of the default tier"). Prints
each set's median wall seconds for one pass over every question file and its speed-up,
and names any file whose rows differ from the whole optimizer's.

    PYTHONPATH=. python tools/sql_optimizer_ab.py RESULTS_FOLDER STUDY ROUNDS SET [SET ...]

Each SET is a comma-separated list of DuckDB optimizer names (`select name from
duckdb_optimizers()`), e.g. projection_pullup,statistics_propagation. RESULTS_FOLDER is
a results root holding STUDY: `lg-study run studies/quickstart.yaml --profile smoke
--results R` writes one under R/_profiles/smoke, and
orchestrator.benchmarks.bench_scale.write_store writes the scale bench's.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from analysis.query import open_results, run_query
from analysis.sql_layers import sql_root

WHOLE = ""  # no pass disabled


def main(root: Path, study: str, rounds: int, sets: list[str]) -> None:
    files = sorted((sql_root() / "questions").glob("*.sql"))
    texts = [path.read_text() for path in files]
    con = open_results(root, study)
    seconds: dict[str, list[float]] = {way: [] for way in (WHOLE, *sets)}
    reference: list[list[dict]] = []
    for round_ in range(rounds):
        ways = list(seconds) if round_ % 2 == 0 else list(reversed(seconds))
        for way in ways:
            con.execute(f"set disabled_optimizers = '{way}'")
            started = time.perf_counter()
            rows = [run_query(con, text).to_pylist() for text in texts]
            seconds[way].append(time.perf_counter() - started)
            if way == WHOLE and not reference:
                reference = rows
            elif reference:
                for path, mine, whole in zip(files, rows, reference, strict=True):
                    if mine != whole:
                        what = f"with {way} disabled" if way else "on another pass of the whole optimizer"
                        print(f"{path.name}: rows differ {what}")
    whole = statistics.median(seconds[WHOLE])
    print(f"{len(texts)} question files, {rounds} interleaved passes each; whole optimizer {whole:.2f} s")
    for way in sets:
        median = statistics.median(seconds[way])
        print(f"  without {way}: {median:.2f} s, {whole / median:.2f}x")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4:])
