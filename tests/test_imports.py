"""The modules of results_contract, lengthgen, orchestrator and analysis form a graph
without cycles: every lengthgen module imports alone, no two modules import each other
(not even from inside a function, which is how cycles used to be hidden), the layers
import one way only (lengthgen <- orchestrator -> analysis, never back, and both
orchestrator and analysis -> results_contract, which imports the standard library
only), the orchestrator imports analysis only where it answers a user (ANSWERING), the
orchestrator's rooms import only the rooms below them (docs/design.md), and the data
side of lengthgen (digits, tasks, formats, distributions) loads neither torch nor the
trainer."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import analysis
import lengthgen
import orchestrator
import results_contract

PACKAGES = {package.__name__: Path(package.__file__).parent
            for package in (results_contract, lengthgen, orchestrator, analysis)}

#: the packages each package may import (besides itself): the results contract at the
#: bottom none, so that the writer and the reader share it without sharing anything else
LAYERS = {
    "results_contract": set(),
    "lengthgen": set(),
    "analysis": {"results_contract"},
    "orchestrator": {"lengthgen", "analysis", "results_contract"},
}

#: the orchestrator's modules that may import analysis, and the user's question each
#: answers with it. Running a study needs none of analysis: where the files live and
#: what the groups are called is results_contract's. A seeds-until round is a plan: it
#: asks the report's own interval (the analysis's SQL and seed planner) whether to add
#: seeds, so that the rule and the report cannot disagree.
ANSWERING = {
    "orchestrator.commands.answers": "query, report, plan and ui: what the analysis computes",
    "orchestrator.commands.status": "status's tables, and the query errors a command shows",
    "orchestrator.console.run_table": "the run table: each trial's accuracy and its export",
    "orchestrator.benchmarks.bench": "the report a benchmark times",
    "orchestrator.benchmarks.bench_scale": "the queries and the report a benchmark times",
    "orchestrator.benchmarks.bench_study_run": "the analysis files a benchmark reads back",
    "orchestrator.running.seed_target": "a seeds-until round: the report's interval, the seed planner",
    "orchestrator.running.group_answers": "a group's MLflow parent run: the report's numbers over its seeds",
    "orchestrator.running.trial_plots": "the accuracy plot a run's MLflow page shows",
    "orchestrator.running.seed_answers": "where a seeds-until group stands: the report's interval",
}
#: what no module of results_contract loads: it is read and written without any of them
CONTRACT_FREE = ("lengthgen", "orchestrator", "analysis", "torch", "ray", "mlflow", "duckdb", "pyarrow")

#: the orchestrator's rooms, bottom first: each may import the rooms before it (the
#: order of docs/design.md); the top, `commands` (the commands' bodies) with the modules
#: cli and cli_support (TOP_MODULES), may import any, and no room below imports it
ROOM_ORDER = ("studies", "store", "mlflow_tracking", "running", "console", "benchmarks", "slurm", "commands")
ROOMS = {room: set(ROOM_ORDER[:i]) for i, room in enumerate(ROOM_ORDER)}
TOP_MODULES = ("orchestrator.cli", "orchestrator.cli_support")

#: modules that must not load torch: the questions and their token rows
TORCH_FREE = (
    "lengthgen.digits",
    "lengthgen.complexity",
    "lengthgen.tokenizer",
    "lengthgen.layout",
    "lengthgen.tasks",
    "lengthgen.formats",
    "lengthgen.distributions",
)


def module_names(packages: tuple[str, ...] = tuple(PACKAGES)) -> dict[str, Path]:
    """{dotted name: file} of every module of the packages (a package by its __init__)."""
    names = {}
    for package in packages:
        folder = PACKAGES[package]
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder.parent).with_suffix("").parts
            names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _is_type_checking(node: ast.stmt) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def imported_names(tree: ast.Module) -> set[str]:
    """Every module of ours named by an import that runs: at module level or inside a
    function, not under `if TYPE_CHECKING:` (annotations only)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) and _is_type_checking(child):
                continue
            if isinstance(child, ast.Import):
                names.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                # `from a import b` names a.b when b is a module, else a
                names.update(f"{child.module}.{alias.name}" for alias in child.names)
                names.add(child.module)
            visit(child)

    visit(tree)
    return {name for name in names if name.split(".")[0] in PACKAGES}


def import_graph() -> dict[str, set[str]]:
    """{module: the modules of ours importing it runs}. Importing a.b.c also runs the
    packages a and a.b, except those the importer already sits in (they are being
    imported when it runs)."""
    modules = module_names()
    graph = {}
    for name, path in modules.items():
        own_packages = {name.rsplit(".", i)[0] for i in range(name.count(".") + 1)}
        targets = set()
        for imported in imported_names(ast.parse(path.read_text())):
            parts = imported.split(".")
            runs = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
            targets |= {m for m in runs if m in modules and m not in own_packages}
        graph[name] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300
    )


def test_the_graph_reader_sees_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
    hidden = ast.parse("def f():\n    from lengthgen.formats import x\n")
    typing_only = ast.parse("if TYPE_CHECKING:\n    from lengthgen.config import TrialConfig\n")
    assert imported_names(hidden) == {"lengthgen.formats", "lengthgen.formats.x"}
    assert imported_names(typing_only) == set()


def test_no_two_modules_import_each_other():
    graph = import_graph()
    assert {"lengthgen.digits", "lengthgen.model.decoder", "orchestrator.cli",
            "orchestrator.running.tune_runner", "analysis.query"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def wrong_way(graph: dict[str, set[str]]) -> list[str]:
    """Imports that go against the layers (LAYERS) or up the orchestrator's rooms
    (ROOMS), as "importer -> imported"."""
    found = []
    for module, targets in sorted(graph.items()):
        package, room = module.split(".")[0], _room(module)
        for target in sorted(targets):
            other, other_room = target.split(".")[0], _room(target)
            across_layers = other != package and other not in LAYERS[package]
            down_rooms = room and other_room and other_room != room and other_room not in ROOMS[room]
            if across_layers or down_rooms:
                found.append(f"{module} -> {target}")
    return found


def _room(module: str) -> str | None:
    """The orchestrator room a module sits in (the top's, `commands`, for cli and
    cli_support; None for the package itself and for other packages)."""
    if module in TOP_MODULES:
        return ROOM_ORDER[-1]
    parts = module.split(".")
    return parts[1] if parts[0] == "orchestrator" and len(parts) > 2 else None


def test_the_graph_reader_sees_wrong_way_imports():
    assert wrong_way({"analysis.query": {"orchestrator.cli"}}) == ["analysis.query -> orchestrator.cli"]
    assert wrong_way({"lengthgen.training": {"results_contract.groups"}}) == ["lengthgen.training -> results_contract.groups"]
    assert wrong_way({"orchestrator.store.trial_rows": {"orchestrator.running.trainable"}}) != []
    assert wrong_way({"orchestrator.running.trainable": {"orchestrator.store.trial_rows", "lengthgen.training",
                                                         "results_contract.layout"}}) == []
    assert wrong_way({"orchestrator.cli": {"orchestrator.benchmarks.bench"}}) == []
    assert wrong_way({"results_contract.layout": {"analysis.query"}}) == ["results_contract.layout -> analysis.query"]
    assert wrong_way({"analysis.query": {"results_contract.layout"}}) == []
    assert wrong_way({"orchestrator.commands.status": {"orchestrator.store.study_locks",
                                                       "orchestrator.cli_support"}}) == []
    assert wrong_way({"orchestrator.benchmarks.bench": {"orchestrator.cli_support"}}) != []
    assert wrong_way({"orchestrator.running.dispatch": {"orchestrator.commands.running"}}) != []


def test_layers_and_rooms_import_one_way():
    """lengthgen imports neither orchestrator nor analysis, analysis does not import
    orchestrator, and each room of orchestrator imports only the rooms below it."""
    graph = import_graph()
    rooms = {_room(module) for module in graph} - {None}
    assert rooms == set(ROOMS), "a room missing from ROOMS (and from docs/design.md): " + str(rooms ^ set(ROOMS))
    assert wrong_way(graph) == []


def test_every_module_imports_alone():
    """Each lengthgen module imported first, into an interpreter holding no lengthgen
    module (torch, once loaded, stays: it is not part of any cycle of ours)."""
    code = f"""
import importlib, sys, traceback
failed = []
for name in {sorted(module_names(("lengthgen",)))!r}:
    for loaded in [m for m in sys.modules if m == "lengthgen" or m.startswith("lengthgen.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc(limit=-3))
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""
    result = run_python(code)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_data_side_loads_neither_torch_nor_the_trainer():
    code = f"""
import importlib, sys
for name in {TORCH_FREE!r}:
    importlib.import_module(name)
    loaded = [m for m in ("torch", "lengthgen.training", "lengthgen.model") if m in sys.modules]
    assert not loaded, f"importing {{name}} loaded {{loaded}}"
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr


def test_the_memory_probes_task_imports_neither_torch_nor_the_studys_modules():
    # its Ray worker is a fresh process that imports the task's module: the probe of
    # every `seeds_per_trial: auto` run waits on that import
    code = """
import sys
import orchestrator.running.memory_budget
loaded = [m for m in ("torch", "pydantic", "lengthgen", "orchestrator.studies", "pandas") if m in sys.modules]
assert not loaded, loaded
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr


def test_the_package_still_exports_the_trainer():
    result = run_python(
        "import sys, lengthgen\n"
        "assert 'lengthgen.training' not in sys.modules\n"
        "from lengthgen import Report, TrialConfig, TrialResult, train\n"
        "assert train.__module__ == 'lengthgen.training' and TrialConfig.__module__ == 'lengthgen.config'\n"
    )
    assert result.returncode == 0, result.stderr


def test_ray_stays_in_running_and_mlflow_in_mlflow_tracking():
    """What docs/design.md says of the rooms: studies, store and console load neither Ray
    nor MLflow (`status` and the report read a study without them), and mlflow_tracking
    loads MLflow without Ray."""
    rooms = {room: sorted(m for m in module_names(("orchestrator",)) if _room(m) == room)
             for room in ("studies", "store", "console", "mlflow_tracking")}
    code = f"""
import importlib, sys
rooms = {rooms!r}
for room in ("studies", "store", "console"):
    for name in rooms[room]:
        importlib.import_module(name)
        loaded = [m for m in ("ray", "mlflow") if m in sys.modules]
        assert not loaded, f"importing {{name}} loaded {{loaded}}"
for name in rooms["mlflow_tracking"]:
    importlib.import_module(name)
    assert "ray" not in sys.modules, f"importing {{name}} loaded ray"
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr


def analysis_users(graph: dict[str, set[str]]) -> set[str]:
    """The orchestrator's modules that import a module of analysis."""
    return {module for module, targets in graph.items()
            if module.startswith("orchestrator.") and any(t.split(".")[0] == "analysis" for t in targets)}


def test_the_graph_reader_sees_who_imports_analysis():
    graph = {"orchestrator.store.trial_rows": {"analysis.query", "results_contract.groups"},
             "orchestrator.store.compaction": {"results_contract.layout"}, "analysis.report": {"analysis.query"}}
    assert analysis_users(graph) == {"orchestrator.store.trial_rows"}


def test_the_orchestrator_imports_analysis_only_to_answer_a_user():
    """Exactly the modules of ANSWERING import analysis: a new one fails (what it needs
    to run a study belongs in results_contract, or ANSWERING says which question it
    answers), and so does one that no longer does (ANSWERING stays exact)."""
    users = analysis_users(import_graph())
    assert sorted(users - set(ANSWERING)) == [], "import what a study runs on from results_contract"
    assert sorted(set(ANSWERING) - users) == [], "no longer imports analysis: drop it from ANSWERING"


def test_the_results_contract_imports_the_standard_library_only():
    """By its source: every import of results_contract is the standard library's or its own."""
    imported = set()
    for path in module_names(("results_contract",)).values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    assert imported - set(sys.stdlib_module_names) - {"__future__", "results_contract"} == set()


def test_loading_the_results_contract_loads_no_other_layer():
    """By running it: importing every module of results_contract loads none of CONTRACT_FREE."""
    code = f"""
import importlib, sys
for name in {sorted(module_names(("results_contract",)))!r}:
    importlib.import_module(name)
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({CONTRACT_FREE!r}))
assert not loaded, f"importing results_contract loaded {{loaded}}"
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
