"""The documentation's examples, run, so that an example that stops working fails the tests.

The convention (docs/reference/README.md says it to writers):

- Collected: fenced blocks tagged ```bash, ```sh, ```shell, ```console, ```sql and
  ```python in README.md and docs/**/*.md; blocks of other languages are not examples.
- `<!-- example: skip (reason) -->` on the line before a block (blank lines between
  allowed): the block is neither checked nor run. `<!-- example: no-run (reason) -->`:
  its `lg-study` lines are checked, the block is not run (a GPU, a Ray cluster, a server
  that runs until Ctrl-C). Either needs its reason.
- A shell block is one command a line (`\\` continues one, `#` starts a comment; in a
  console block only the lines after `$ ` are commands).
- Default tier: every `lg-study` command line (also `.venv/bin/lg-study`, after
  `NAME=value` words) parses with the real command line: an unknown command or option,
  a bad choice or number fails. Every ```sql block runs: plain SQL through `lg-study query`,
  a block with DuckDB command-line `.read FILE` lines as that client's script (each
  `.read` runs the file), over a study `quickstart` of one trial whose tables are empty.
- Long tier (`pytest -m long`, `.ci/run --long`): the shell blocks not marked run in document order, each line in bash, in a
  sandbox: a copy of studies/ whose study files train 2 steps and test 8 questions a
  length (the same designs), with analysis/ beside it, and results/ holding a real
  `lg-study run studies/quickstart.yaml` of that tiny quickstart; then every ```sql
  block again, over those results, and every ```python block as a script with lg-study's
  interpreter (the default tier compiles it).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SHELL = ("bash", "sh", "shell", "console")
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
MARKER = re.compile(r"<!--\s*example:\s*(\S+)\s*(?:\((.*)\))?\s*-->")
MARKS = ("skip", "no-run")
#: what the sandbox's study files train and test: the designs stay, the trials shrink
TINY = {"train.steps": 2, "train.warmup": 0, "train.log_every": 1, "eval.samples": 8,
        "eval.validation_samples": 8, "eval.grid_samples": 2}
#: shell words that end a command (what follows is not lg-study's)
OPERATORS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1"}
COMMAND_TIMEOUT = 600
#: `<!-- output: SOURCE (reason) -->` before a ```text block: the block is what SOURCE
#: prints, `make run` (the sandbox's run of the quickstart) or `the command above` (the
#: last shell block before it); the long tier checks its layout against a real run
OUTPUT = re.compile(r"<!--\s*output:\s*(make run|the command above)\b")
RUN_OUTPUT = "make-run.out"


@dataclass(frozen=True)
class Example:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    mark: str | None
    reason: str | None

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    def commands(self) -> list[str]:
        """The block's command lines, continuations joined, console output left out."""
        lines = []
        for raw in self.text.replace("\\\n", " ").splitlines():
            line = raw.strip()
            if self.language == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if line and not line.startswith("#"):
                lines.append(line)
        return lines


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]


def examples_in(path: Path) -> list[Example]:
    lines = path.read_text().splitlines()
    found, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, language = opening.groups()
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
        body = "\n".join(line.removeprefix(indent) for line in lines[index + 1:end])
        if language in (*SHELL, "sql", "python"):
            mark, reason = _mark_before(lines, index)
            found.append(Example(path, index + 1, language, body, mark, reason))
        index = end + 1
    return found


def _mark_before(lines: list[str], index: int) -> tuple[str | None, str | None]:
    before = index - 1
    while before >= 0 and not lines[before].strip():
        before -= 1
    match = MARKER.search(lines[before]) if before >= 0 else None
    return (match.group(1), match.group(2)) if match else (None, None)


EXAMPLES = [example for path in doc_files() for example in examples_in(path)]
SHELL_EXAMPLES = [e for e in EXAMPLES if e.language in SHELL and e.mark != "skip"]
SQL_EXAMPLES = [e for e in EXAMPLES if e.language == "sql" and e.mark != "skip"]
RUN_EXAMPLES = [e for e in SHELL_EXAMPLES if e.mark is None]
PYTHON_EXAMPLES = [e for e in EXAMPLES if e.language == "python" and e.mark != "skip"]


def lg_study_words(command: str) -> list[str] | None:
    """The arguments of an `lg-study` command line (None for another program)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    while words and re.fullmatch(r"\w+=\S*", words[0]):
        words.pop(0)
    if not words or Path(words[0]).name != "lg-study":
        return None
    arguments = []
    for word in words[1:]:
        if word in OPERATORS:
            break
        arguments.append(word)
    return arguments


def parse_error(arguments: list[str]) -> str | None:
    """Why the real command line refuses ``arguments`` (None: it parses); nothing runs."""
    import typer.main

    from orchestrator.cli import app

    group = typer.main.get_command(app)
    name, *rest = arguments or [""]
    context = group.context_class(group, info_name="lg-study")
    command = group.get_command(context, name)
    if command is None:
        return f"no command {name!r}; commands: {', '.join(group.commands)}"
    try:
        command.make_context(name, rest, parent=context).close()
    except Exception as error:  # noqa: BLE001 (click's usage errors, whatever their class)
        return f"{type(error).__name__}: {getattr(error, 'message', None) or error}"
    return None


# --- the convention itself ----------------------------------------------------------------


def test_examples_are_found_and_markers_are_known_and_give_reasons():
    assert any(e.path.name == "README.md" for e in EXAMPLES), "no example in README.md: the collector is broken"
    wrong = [f"{e.id}: {e.mark!r}" for e in EXAMPLES if e.mark is not None and e.mark not in MARKS]
    wrong += [f"{e.id}: {e.mark} without a reason" for e in EXAMPLES if e.mark and not (e.reason or "").strip()]
    assert wrong == [], "example markers are <!-- example: skip (reason) --> or no-run (reason): " + "; ".join(wrong)


def test_the_parser_check_refuses_what_the_cli_refuses():
    assert parse_error(["status", "quickstart", "--format", "csv"]) is None
    assert parse_error(["status", "quickstart", "--format", "xml"]) is not None
    assert parse_error(["run", "studies/quickstart.yaml", "--no-such-option"]) is not None
    assert parse_error(["no-such-command"]) is not None
    assert lg_study_words("RAY_AUTH_MODE=token .venv/bin/lg-study run a.yaml > out.txt") == ["run", "a.yaml"]
    assert lg_study_words("make run  # lg-study run studies/quickstart.yaml") is None


# --- default tier: every command line parses, every SQL block binds ------------------------


@pytest.mark.parametrize("example", SHELL_EXAMPLES, ids=lambda e: e.id)
def test_every_lg_study_line_parses(example: Example):
    refused = []
    for command in example.commands():
        arguments = lg_study_words(command)
        error = parse_error(arguments) if arguments is not None else None
        if error:
            refused.append(f"{command!r}: {error}")
    assert refused == [], f"{example.id}: " + "; ".join(refused)


@pytest.fixture(scope="module")
def one_trial_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with analysis/ (the repository's) and results/ holding a study
    `quickstart` of one finished trial whose tables have no rows."""
    sys.path.insert(0, str(REPO / "tools"))
    from docs_reference.tables import one_trial_store

    folder = tmp_path_factory.mktemp("docs-sql")
    (folder / "analysis").symlink_to(REPO / "analysis")
    (folder / ".venv").symlink_to(BIN.parent)  # the docs' `.venv/bin/lg-study`
    one_trial_store(folder / "results", "quickstart")
    return folder


@pytest.mark.parametrize("example", SQL_EXAMPLES, ids=lambda e: e.id)
def test_every_sql_block_runs_on_an_empty_study(example: Example, one_trial_sandbox: Path):
    problem = run_sql_example(example, one_trial_sandbox)
    assert problem is None, f"{example.id}: {problem}"


def run_sql_example(example: Example, folder: Path) -> str | None:
    """Run one ```sql block in ``folder`` (with results/ and analysis/): why it failed, or None."""
    if any(line.lstrip().startswith(".") for line in example.text.splitlines()):
        return run_duckdb_script(example.text, folder)
    from typer.testing import CliRunner

    from orchestrator.cli import app

    outcome = CliRunner().invoke(app, ["query", example.text, "--results", str(folder / "results")])
    return None if outcome.exit_code == 0 else f"lg-study query exited {outcome.exit_code}: {outcome.output}"


def run_duckdb_script(script: str, folder: Path) -> str | None:
    """A DuckDB command-line script: SQL, and `.read FILE` lines that run the file."""
    import duckdb

    con, pending = duckdb.connect(), []
    cwd = Path.cwd()
    os.chdir(folder)  # the script's paths are relative to where the client runs
    try:
        for line in [*script.splitlines(), ".end"]:
            if not line.lstrip().startswith("."):
                pending.append(line)
                continue
            if "".join(pending).strip():
                con.execute("\n".join(pending))
            pending = []
            command, *argument = line.split("--")[0].split()
            if command == ".read":
                con.execute(Path(argument[0]).read_text())
            elif command != ".end":
                return f"{command}: a DuckDB client command this harness does not run"
    except (duckdb.Error, OSError) as error:
        return f"{type(error).__name__}: {error}"
    finally:
        os.chdir(cwd)
        con.close()
    return None


# --- long tier: the shell blocks run on tiny studies ----------------------------------------


def tiny_study_files(source: Path, target: Path) -> None:
    """Copy the study files, each trained and tested at TINY's sizes, in base and in
    every profile that names one of them; designs (axes, profiles) unchanged."""
    target.mkdir()
    for path in sorted(source.glob("*.yaml")):
        study = yaml.safe_load(path.read_text())
        for key, value in TINY.items():
            section, field = key.split(".")
            study["base"].setdefault(section, {})[field] = value
            for overrides in (study.get("profiles") or {}).values():
                if key in overrides:
                    overrides[key] = value
        study["base"]["eval"]["every"] = min(study["base"]["eval"].get("every", 0), 1)
        (target / path.name).write_text(yaml.safe_dump(study, sort_keys=False))


@pytest.fixture(scope="module")
def tiny_sandbox(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    folder = tmp_path_factory.mktemp("docs-run")
    tiny_study_files(REPO / "studies", folder / "studies")
    (folder / "analysis").symlink_to(REPO / "analysis")
    (folder / ".venv").symlink_to(BIN.parent)  # the docs' `.venv/bin/lg-study`
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([str(BIN / "lg-study"), "run", "studies/quickstart.yaml"], check=False, cwd=folder,
                          env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    (folder / RUN_OUTPUT).write_text(done.stdout)  # what `make run` prints: the tutorial's table
    return folder, env


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("example", RUN_EXAMPLES, ids=lambda e: e.id)
def test_every_shell_block_runs(example: Example, tiny_sandbox: tuple[Path, dict[str, str]]):
    folder, env = tiny_sandbox
    for command in example.commands():
        done = subprocess.run(["bash", "-c", command], check=False, cwd=folder, env=env, capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT)
        assert done.returncode == 0, (f"{example.id}: {command!r} exited {done.returncode}\n"
                                      f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")


@pytest.mark.parametrize("example", PYTHON_EXAMPLES, ids=lambda e: e.id)
def test_every_python_block_compiles(example: Example):
    compile(example.text, example.id, "exec")


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("example", [e for e in PYTHON_EXAMPLES if e.mark is None], ids=lambda e: e.id)
def test_every_python_block_runs(example: Example, tiny_sandbox: tuple[Path, dict[str, str]]):
    folder, env = tiny_sandbox
    done = subprocess.run([sys.executable, "-c", example.text], check=False, cwd=folder, env=env,
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, f"{example.id} exited {done.returncode}\n{done.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("example", SQL_EXAMPLES, ids=lambda e: e.id)
def test_every_sql_block_runs_on_the_tiny_quickstart(example: Example, tiny_sandbox: tuple[Path, dict[str, str]]):
    problem = run_sql_example(example, tiny_sandbox[0])
    assert problem is None, f"{example.id}: {problem}"


@pytest.mark.slow
@pytest.mark.long
def test_the_tables_page_names_every_column_a_real_run_writes(tiny_sandbox: tuple[Path, dict[str, str]]):
    """docs/reference/tables.md lists the trials columns a worker adds by name; a real run's
    columns must all be on it."""
    import duckdb

    page = (REPO / "docs" / "reference" / "tables.md").read_text()
    glob = str(tiny_sandbox[0] / "results" / "quickstart" / "trials" / "*" / "*.parquet")
    columns = [row[0] for row in duckdb.sql(f"describe select * from read_parquet('{glob}', union_by_name=true)")
               .fetchall()]
    assert [c for c in columns if f"`{c}`" not in page] == []


# --- long tier: the tutorial's terminal output is the terminal's ----------------------------


@dataclass(frozen=True)
class Output:
    """A ```text block that shows what a command prints (an `output:` marker before it)."""

    path: Path
    line: int
    source: str  # "make run" or "the command above"
    text: str
    command: str | None  # the command above's last line, for "the command above"

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def outputs_in(path: Path) -> list[Output]:
    lines, found = path.read_text().splitlines(), []
    shell = [e for e in examples_in(path) if e.language in SHELL]
    for index, line in enumerate(lines):
        opening = FENCE.match(line)
        marker = OUTPUT.search(lines[index - 1]) if index and opening and opening.group(2) == "text" else None
        if marker:
            end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
            above = [e for e in shell if e.line < index + 1]
            command = above[-1].commands()[-1] if above and marker.group(1) != "make run" else None
            found.append(Output(path, index + 1, marker.group(1), "\n".join(lines[index + 1:end]), command))
    return found


OUTPUTS = [output for path in doc_files() for output in outputs_in(path)]


def layout(text: str) -> list[str]:
    """The printed lines with every digit a 9 and trailing blanks dropped: a table whose
    numbers differ (another machine, a tiny run) has the same layout."""
    return [re.sub(r"\d", "9", line).rstrip() for line in text.strip("\n").splitlines()]


def column_names(text: str) -> list[str]:
    """A rich table's column names: its header row, the first line of ┃ cells."""
    header = next(line for line in text.splitlines() if line.lstrip().startswith("┃"))
    return [cell.strip() for cell in header.strip().strip("┃").split("┃")]


def test_the_tutorial_shows_terminal_output():
    sources = {(o.path.name, o.source) for o in OUTPUTS}
    assert {("quickstart.md", "make run"), ("quickstart.md", "the command above")} <= sources
    assert layout("│ w1 d0 │ 0.815 │  \n") == ["│ w9 d9 │ 9.999 │"]


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("output", OUTPUTS, ids=lambda o: o.id)
def test_the_docs_output_is_what_the_command_prints(output: Output, tiny_sandbox: tuple[Path, dict[str, str]]):
    """`make run`'s table line for line, digits aside (the page names the machine its digits
    are from); another command's table by its columns (its rows wrap by their words)."""
    folder, env = tiny_sandbox
    if output.command is None:
        printed = (folder / RUN_OUTPUT).read_text()
        assert layout(output.text) == layout(printed), (
            f"{output.id}: the page's table is not laid out as `lg-study run` prints it; it printed:\n{printed}")
        return
    done = subprocess.run(["bash", "-c", output.command], check=False, cwd=folder, env=env, capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert column_names(output.text) == column_names(done.stdout), f"{output.id}: it printed:\n{done.stdout}"
