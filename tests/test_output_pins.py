"""Refactors keep every number: the outputs of every analysis SQL file and the rendered
report, on a fixed synthetic store, compared with tests/output_pins.json.

The store is test_analysis_sql's `build_study` (four configuration groups, a crossed
3 x 4 seed grid, a failed trial, samples and training curves), which every number of
the analysis reads. Each SQL file runs at its defaults and at level 0.9 with its
threshold at 0.4, and the report is rendered with the same parameters.

On the machine and library versions that wrote the pins, outputs must match bit for
bit (floats are hashed as their exact hexadecimal form) and so must the report's HTML
and PNG figures. Elsewhere floating-point rounding and font rendering may differ in the
last bits, so only the numbers rounded to 9 significant digits are compared.

A change that is meant to move numbers writes the pins anew, and its commit says why:
`.venv/bin/python tests/test_output_pins.py --write` (tests/ is no package).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import re
from pathlib import Path
from typing import Any

import duckdb
import matplotlib
import numpy as np
import pyarrow
import pytest
from analysis_rows import STUDY, build_study

from analysis.query import (
    DEFINITION_FILES,
    open_results,
    read_once,
    run_sql_file,
    sql_file,
    sql_parameters,
)
from analysis.report import build_report

PINS_FILE = Path(__file__).with_name("output_pins.json")
#: SQL files that define views, macros or functions rather than answer a question
DEFINITIONS = {Path(name).stem for name in DEFINITION_FILES}
PARAMETER_SETS = {"defaults": {}, "level=0.9,threshold=0.4": {"level": "0.9", "threshold": "0.4"}}


def machine() -> dict[str, str]:
    """What bit-for-bit equality depends on besides the code."""
    cpu = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.MULTILINE)
        cpu = names[0].strip() if names else cpu
    return {"cpu": cpu, "platform": platform.platform(), "python": platform.python_version(),
            "duckdb": duckdb.__version__, "numpy": np.__version__,
            "pyarrow": pyarrow.__version__, "matplotlib": matplotlib.__version__}


def query_files() -> list[str]:
    folder = sql_file("variance.sql").parent  # analysis/sql/questions
    return sorted(p.stem for p in folder.glob("*.sql") if p.stem not in DEFINITIONS)


def _exact(value: Any) -> Any:
    if isinstance(value, float):
        return value.hex()
    return _canonical(value, _exact)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.9g}"
    return _canonical(value, _rounded)


def _canonical(value: Any, leaf) -> Any:
    if isinstance(value, dict):
        return {str(k): leaf(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [leaf(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def sql_outputs(root: Path) -> dict[str, list[dict]]:
    outputs = {}
    with open_results(root, STUDY) as con:
        read_once(con)
        for name in query_files():
            path = sql_file(f"{name}.sql")
            taken = set().union(*sql_parameters(con, path.read_text()))
            for label, params in PARAMETER_SETS.items():
                given = {k: v for k, v in params.items() if k in taken}
                outputs[f"{name}.sql {label}"] = run_sql_file(con, path, given).to_pylist()
    return outputs


def report_outputs(root: Path, out_dir: Path) -> dict[str, str]:
    """The page without the two lines that name the machine's folder and the time, and
    each figure's bytes."""
    report = build_report(root, STUDY, out_dir, params={"threshold": "0.4"})
    page = report.page.read_text()
    page = page.replace(str(root.resolve()), "<root>")
    page = re.sub(r"generated\n\d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated <time>", page)
    figures = {f"figure {p.name}": hashlib.sha256(p.read_bytes()).hexdigest()
               for p in sorted(report.figures)}
    return {"report page": hashlib.sha256(page.encode()).hexdigest(), **figures}


def compute(workdir: Path) -> dict[str, Any]:
    root = workdir / "results"
    build_study(root)
    sql = sql_outputs(root)
    return {
        "machine": machine(),
        "exact": {**{k: digest(_exact(v)) for k, v in sql.items()},
                  **report_outputs(root, workdir / "report")},
        "rounded": {k: digest(_rounded(v)) for k, v in sql.items()},
    }


@pytest.fixture(scope="module")
def computed(tmp_path_factory) -> dict[str, Any]:
    return compute(tmp_path_factory.mktemp("pins"))


def test_every_number_is_as_pinned(computed) -> None:
    pinned = json.loads(PINS_FILE.read_text())
    same_machine = pinned["machine"] == computed["machine"]
    kind = "exact" if same_machine else "rounded"
    assert sorted(computed[kind]) == sorted(pinned[kind]), (
        "the set of SQL files, parameter sets or figures changed; if meant, write the pins anew")
    moved = [k for k in pinned[kind] if computed[kind][k] != pinned[kind][k]]
    assert not moved, f"outputs moved ({kind} comparison): {moved}"


def test_the_pins_cover_every_query_file(computed) -> None:
    names = {key.split(".sql")[0] for key in computed["rounded"]}
    assert names == set(query_files())
    assert any(key.startswith("figure ") for key in computed["exact"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write tests/output_pins.json")
    if parser.parse_args().write:
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            PINS_FILE.write_text(json.dumps(compute(Path(tmp)), indent=1, sort_keys=True) + "\n")
        print(f"wrote {PINS_FILE}")
