"""results_contract/layout.py owns the results layout (standard library only, like the
whole results_contract package: tests/test_imports.py): the writer and the readers use
its names, and no other module spells a folder or file name of the layout again."""

from __future__ import annotations

import ast
import types
from pathlib import Path

from results_contract import layout

ROOT = Path(__file__).parents[1]
NAMES = (layout.FILE_NAME, layout.PROFILES, layout.ARTIFACTS, layout.CHECKPOINTS, layout.LOGS,
         layout.SUPERSEDED, layout.TUNE)


def test_the_layouts_names_are_imported_from_the_layout() -> None:
    """The writer and the readers import the layout's names from results_contract.layout itself,
    never through another module (so no module re-exports them)."""
    names = {name for name, value in vars(layout).items() if not name.startswith("_")
             and not isinstance(value, types.ModuleType) and getattr(value, "__module__", layout.__name__) == layout.__name__}
    through = []
    for package in ("results_contract", "analysis", "orchestrator", "tests"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module not in (None, "results_contract.layout"):
                    through += [f"{path.relative_to(ROOT)}:{node.lineno} {alias.name} from {node.module}"
                                for alias in node.names
                                if alias.name in names and node.module.split(".")[0] in ("results_contract", "analysis", "orchestrator")]
    assert through == []
    assert {"TABLES", "table_path", "profile_root", "list_studies", "checkpoint_path", "artifact_folder"} <= names


def test_no_other_module_spells_a_layout_name() -> None:
    spelled = []
    for package in ("results_contract", "analysis", "orchestrator"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "results_contract" / "layout.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and node.value in NAMES:
                    spelled.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert spelled == []


def test_a_table_path_is_checked_and_partitioned_by_trial(tmp_path: Path) -> None:
    import pytest

    assert layout.table_path(tmp_path, "s", "eval", "abc") == tmp_path / "s" / "eval" / "trial_id=abc" / "part-0.parquet"
    with pytest.raises(ValueError, match="valid tables: trials, train, eval, samples"):
        layout.table_path(tmp_path, "s", "evals", "abc")
    with pytest.raises(ValueError, match="study '..' is not a safe folder name"):
        layout.table_path(tmp_path, "..", "eval", "abc")
