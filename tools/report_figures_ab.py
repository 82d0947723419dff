"""`lg-study report`'s figures saved two ways, interleaved in one process
(docs/performance.md, "The report's figures"): analysis.figures.save, which lays a
figure out and measures its tight box once for its PNG and SVG, against matplotlib's
`bbox_inches="tight"` for each file, which draws each twice and runs the constrained
layout in each. Builds the report of the tests' synthetic store (four configuration
groups, 14 figures) each round, each way, and prints each way's median wall seconds,
their ratio, and whether the two ways' PNGs of the last round are the same bytes.

    OMP_NUM_THREADS=1 PYTHONPATH=.:tests python tools/report_figures_ab.py [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from analysis_rows import STUDY, build_study
from matplotlib import rc_context

from analysis import figures, report


def save_tight(fig, path: Path) -> Path:
    """Each file cut by matplotlib's own tight box, the way figures.save did before."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    with rc_context({"svg.hashsalt": "lg-study", "svg.fonttype": "none"}):  # a report writes both
        fig.savefig(path.with_suffix(".svg"), bbox_inches="tight", metadata={"Date": None})
    return path


def main(rounds: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="figures_ab"))
    build_study(root)
    ways = {"tight": save_tight, "once": figures.save}
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for round_ in range(rounds):
        for name, save in ways.items():
            figures.save = save
            started = time.perf_counter()
            report.build_report(root, STUDY, out_dir=root / f"{name}{round_}")
            seconds[name].append(time.perf_counter() - started)
    for name, values in seconds.items():
        print(f"{name}: median {statistics.median(values):.2f} s ({', '.join(f'{v:.2f}' for v in values)})")
    print(f"tight / once: {statistics.median(seconds['tight']) / statistics.median(seconds['once']):.2f}")
    last = rounds - 1
    pngs = sorted((root / f"tight{last}").glob("*.png"))
    same = sum(p.read_bytes() == (root / f"once{last}" / p.name).read_bytes() for p in pngs)
    print(f"PNGs the same bytes: {same} of {len(pngs)}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
