"""The analysis files run two ways to Arrow, interleaved in one process (analysis.query's
run_query, docs/performance.md "DuckDB's share of the default tier"): the rows DuckDB
holds after running the last statement at once (one bind), against a lazy relation that
streams them (`streamed=True`: the statement bound for its columns, then bound again to
run). Prints each way's median and best wall seconds for one pass over every question
file, and their ratio.

    PYTHONPATH=. python tools/sql_fetch_ab.py RESULTS_FOLDER STUDY [ROUNDS]

RESULTS_FOLDER is a results root holding STUDY, e.g. the one `lg-study run
studies/quickstart.yaml --profile smoke --results R` writes under R/_profiles/smoke.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from analysis.query import open_results, run_query
from analysis.sql_layers import sql_root


def pass_seconds(con, texts: list[str], streamed: bool) -> float:
    start = time.perf_counter()
    for text in texts:
        run_query(con, text, streamed=streamed)
    return time.perf_counter() - start


def main(root: Path, study: str, rounds: int) -> None:
    texts = [path.read_text() for path in sorted((sql_root() / "questions").glob("*.sql"))]
    con = open_results(root, study)
    seconds: dict[bool, list[float]] = {False: [], True: []}
    for round_ in range(rounds):
        for streamed in (False, True) if round_ % 2 == 0 else (True, False):
            seconds[streamed].append(pass_seconds(con, texts, streamed))
    held, streamed = (statistics.median(seconds[way]) for way in (False, True))
    print(f"{len(texts)} question files, {rounds} interleaved passes each: held {held:.2f} s "
          f"(best {min(seconds[False]):.2f}), streamed {streamed:.2f} s (best {min(seconds[True]):.2f}); "
          f"streamed / held {streamed / held:.2f} (best passes {min(seconds[True]) / min(seconds[False]):.2f})")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 16)
