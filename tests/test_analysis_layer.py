"""The analysis layer reads Parquet only: it imports duckdb, pyarrow, matplotlib and the
standard library, never lengthgen, Ray, MLflow or the orchestrator (the layering of lg-study: lengthgen, orchestrator, analysis)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ANALYSIS = Path(__file__).parents[1] / "analysis"
ALLOWED = {"duckdb", "pyarrow", "matplotlib", "numpy", "scipy", "analysis", "results_contract"} | set(sys.stdlib_module_names)
FORBIDDEN = ("lengthgen", "ray", "mlflow", "orchestrator", "torch")


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_analysis_modules_import_only_the_allowed_libraries() -> None:
    for path in sorted(ANALYSIS.glob("*.py")):
        assert imported_roots(path) <= ALLOWED, (path.name, imported_roots(path) - ALLOWED)


def test_importing_the_analysis_layer_loads_no_forbidden_package() -> None:
    modules = sorted(f"analysis.{p.stem}" for p in ANALYSIS.glob("*.py") if p.stem != "__init__")
    code = (
        f"import sys; import {', '.join(modules)}; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({FORBIDDEN!r})))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "[]"
