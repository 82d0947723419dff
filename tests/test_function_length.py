"""No function in the project over 80 lines (the house rule: one screen, one job), tests
included."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("lengthgen", "orchestrator", "analysis", "tests")
MAX_LINES = 80


def long_functions(files: list[Path]) -> list[str]:
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    found.append(f"{path}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_80_lines() -> None:
    files = [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]
    assert len(files) > 100
    assert long_functions(files) == []


def test_the_rule_finds_a_long_method_and_spares_one_of_80_lines(tmp_path: Path) -> None:
    def method(name: str, lines: int) -> str:
        return f"    def {name}(self):\n" + "".join(f"        x = {i}\n" for i in range(lines - 1))

    source = tmp_path / "module.py"
    source.write_text("class C:\n" + method("fits", MAX_LINES) + method("long", MAX_LINES + 1))
    assert long_functions([source]) == [f"{source}:{MAX_LINES + 2} long ({MAX_LINES + 1} lines)"]
