"""The docs' commands as a newcomer types them, from the repository root after the
README's two commands (`make run`, `make test`), which leave the tools in `.venv/bin`
and activate nothing:

- every program that `make setup` installs (`lg-study`, `python`, `pytest`, `ray`,
  `mlflow`, `pip`, `ruff`) is written `.venv/bin/NAME` in a shell block, the one
  convention of every page (docs/reference/README.md says it to writers);
- every ```yaml block that is a study file (it has `name` and `base`) validates with
  `lg-study validate`; a block of some of a study file's keys (a `search:`, `seeds:`
  or `profiles:` block) validates grafted onto studies/quickstart.yaml;
- every `--profile` a command line names exists in the study file it names (a file of
  studies/, or a study block of the docs, such as write-a-study.md's my_study).

Fast: nothing trains (tests/test_doc_examples.py parses every command and, in the slow
tier, runs them)."""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path

import pytest
import yaml
from test_doc_examples import EXAMPLES, FENCE, REPO, SHELL, doc_files, lg_study_words

#: what `make setup` puts in .venv/bin, the names a page must write with that prefix
VENV_PROGRAMS = ("lg-study", "python", "pytest", "ray", "mlflow", "pip", "ruff")
SHELL_BLOCKS = [e for e in EXAMPLES if e.language in SHELL and e.mark != "skip"]
#: commands whose study is a file argument; the others name the study (argument or --study)
FILE_COMMANDS = ("run", "validate", "slurm", "sync", "migrate", "trial")


def yaml_blocks() -> list[tuple[str, dict]]:
    """(page:line, parsed block) for every ```yaml block of README.md and docs/."""
    found = []
    for path in doc_files():
        lines = path.read_text().splitlines()
        index = 0
        while index < len(lines):
            opening = FENCE.match(lines[index])
            if not opening:
                index += 1
                continue
            end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
            if opening.group(2) == "yaml":
                text = "\n".join(line.removeprefix(opening.group(1))
                                 for line in lines[index + 1:end])
                found.append((f"{path.relative_to(REPO)}:{index + 1}", yaml.safe_load(text)))
            index = end + 1
    return found


YAML_BLOCKS = yaml_blocks()
STUDY_BLOCKS = [(where, block) for where, block in YAML_BLOCKS if {"name", "base"} <= set(block)]
FRAGMENTS = [(where, block) for where, block in YAML_BLOCKS if (where, block) not in STUDY_BLOCKS]


def program_words(command: str) -> list[str]:
    """The first word of each simple command of a shell line, after `NAME=value` words."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    firsts, starting = [], True
    for word in lexer:
        if word in ("&&", "||", ";", "|", "&"):
            starting = True
        elif starting and not re.fullmatch(r"\w+=\S*", word):
            firsts.append(word)
            starting = False
    return firsts


def validate(tmp_path: Path, study: dict, profile: str | None = None) -> str | None:
    """Why `lg-study validate` refuses ``study`` (None: it is valid)."""
    from typer.testing import CliRunner

    from orchestrator.cli import app

    path = tmp_path / f"{study['name']}.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    arguments = ["validate", str(path), *(["--profile", profile] if profile else [])]
    outcome = CliRunner().invoke(app, arguments)
    return None if outcome.exit_code == 0 else f"exit {outcome.exit_code}: {outcome.output[-1500:]}"


def test_the_collectors_find_the_docs_blocks():
    assert any(where.startswith("docs/how-to/write-a-study.md") for where, _ in STUDY_BLOCKS)
    assert any("search" in block for _, block in FRAGMENTS)
    assert program_words("A=1 .venv/bin/lg-study run x.yaml && cd y | grep z") == [
        ".venv/bin/lg-study", "cd", "grep"]


@pytest.mark.parametrize("example", SHELL_BLOCKS, ids=lambda e: e.id)
def test_every_installed_program_is_written_from_the_venv(example):
    wrong = [f"{command!r}: write .venv/bin/{Path(word).name}" for command in example.commands()
             for word in program_words(command) if Path(word).name in VENV_PROGRAMS
             and word != f".venv/bin/{Path(word).name}"]
    assert wrong == [], f"{example.id}: " + "; ".join(wrong)


@pytest.mark.parametrize(("where", "block"), STUDY_BLOCKS, ids=[where for where, _ in STUDY_BLOCKS])
def test_every_study_block_validates(where, block, tmp_path):
    problem = validate(tmp_path, block)
    assert problem is None, f"{where}: {problem}"
    for profile in block.get("profiles") or {}:
        problem = validate(tmp_path, block, profile)
        assert problem is None, f"{where}, profile {profile}: {problem}"


@pytest.mark.parametrize(("where", "block"), FRAGMENTS, ids=[where for where, _ in FRAGMENTS])
def test_every_study_fragment_validates_in_a_study(where, block, tmp_path):
    study = yaml.safe_load((REPO / "studies" / "quickstart.yaml").read_text())
    if "search" in block:  # a search replaces the grid
        study.pop("axes", None)
        study.pop("exclude", None)
        for key in ("profiles", "measured"):  # the quickstart's perturb the grid's axes
            study.pop(key, None)
        study["base"]["eval"]["digits"] = [2, 4, 100]  # its metric is acc/digits_100
        study["base"]["model"]["max_positions"] = 256
    block = copy.deepcopy(block)
    profiles = block.pop("profiles", {})
    study.update(block)
    study["profiles"] = {**study.get("profiles", {}), **profiles}
    problem = validate(tmp_path, study)
    assert problem is None, f"{where}: {problem}"
    for profile in profiles:
        problem = validate(tmp_path, study, profile)
        assert problem is None, f"{where}, profile {profile}: {problem}"


def study_profiles() -> dict[str, set[str]]:
    """Study name -> its profiles: the study files of studies/, then the docs' study blocks."""
    known = {path.stem: set(yaml.safe_load(path.read_text()).get("profiles") or {})
             for path in (REPO / "studies").glob("*.yaml")}
    for _, block in STUDY_BLOCKS:
        known.setdefault(block["name"], set(block.get("profiles") or {}))
    return known


def named_study(arguments: list[str]) -> str | None:
    """The study a command line names: its file's stem, or its name."""
    if "--study" in arguments:
        return arguments[arguments.index("--study") + 1]
    positional = [word for index, word in enumerate(arguments[1:], 1)
                  if not word.startswith("-") and not arguments[index - 1].startswith("-")]
    if not positional:
        return None
    is_file = arguments[0] in FILE_COMMANDS or positional[0].endswith(".yaml")
    return Path(positional[0]).stem if is_file else positional[0]


@pytest.mark.parametrize("example", SHELL_BLOCKS, ids=lambda e: e.id)
def test_every_profile_named_exists(example):
    known, missing = study_profiles(), []
    for command in example.commands():
        arguments = lg_study_words(command) or []
        for flag in ("--profile", "-p"):
            if flag in arguments:
                profile, study = arguments[arguments.index(flag) + 1], named_study(arguments)
                if study not in known or profile not in known[study]:
                    missing.append(f"{command!r}: no profile {profile!r} in study {study!r}")
    assert missing == [], f"{example.id}: " + "; ".join(missing)


def test_no_query_joins_on_trial_id_alone():
    """One trial reused by two studies has a row in each: a join on trial_id alone, over
    every study (`lg-study query` without --study), counts it twice. The docs join on
    (study, trial_id), as docs/reference/tables.md says."""
    alone = re.compile(r"using\s*\(\s*trial_id\s*\)"
                       r"|on\s+\w+\.trial_id\s*=\s*\w+\.trial_id(?!\s+and)", re.IGNORECASE)
    wrong = [f"{path.relative_to(REPO)}:{number}" for path in doc_files()
             for number, line in enumerate(path.read_text().splitlines(), 1) if alone.search(line)]
    assert wrong == [], "join on (study, trial_id): " + ", ".join(wrong)


def test_the_views_analyse_md_lists_are_the_reference_s():
    """analyse.md lists the views it uses; the reference (generated from the views
    themselves) is the one list of every view, and has each of them."""
    page = (REPO / "docs/how-to/analyse.md").read_text()
    reference = (REPO / "docs/reference/tables.md").read_text()
    listed = re.findall(r"^\| `(\w+)` \|", page, re.MULTILINE)
    assert len(listed) >= 4 and [v for v in listed if f"### `{v}`" not in reference] == []


def test_the_readme_names_every_dependency():
    """README's Set-up lists what `make setup` installs: every dependency in pyproject.toml."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[<>=\[ ]", spec)[0] for spec in
             (*project["dependencies"], *project["optional-dependencies"]["dev"])]
    setup = (REPO / "README.md").read_text().split("## Set-up")[1].split("\n## ")[0]
    assert [name for name in names if not re.search(rf"\b{re.escape(name)}\b", setup)] == []


def test_troubleshooting_explains_every_exit_code():
    from orchestrator.exit_codes import ExitCode

    page = (REPO / "docs/troubleshooting.md").read_text()
    assert [code.value for code in ExitCode if f"\n| {code.value} |" not in page] == []
    index = (REPO / "docs/README.md").read_text()
    assert "(glossary.md)" in index and "(troubleshooting.md)" in index
