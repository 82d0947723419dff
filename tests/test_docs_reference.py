"""The reference pages under docs/reference/ are generated from the code
(tools/gen_reference.py): the study file's models, the Typer app, the exit codes and
the results views. A field, option or column changed without regenerating them fails
here with the diff; `.venv/bin/python tools/gen_reference.py` rewrites them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "tools" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_reference", module)
    spec.loader.exec_module(module)
    return module


GENERATOR = load_generator()


def test_the_committed_reference_pages_are_the_code_s():
    diffs = GENERATOR.stale(GENERATOR.rendered())
    assert not diffs, ("docs/reference is stale; run .venv/bin/python tools/gen_reference.py\n"
                       + "".join(diffs.values()))


def test_a_changed_page_is_found_with_its_diff():
    path = REPO / "docs/reference/cli.md"
    pages = GENERATOR.rendered()
    pages[path] = pages[path].replace("## `lg-study run`", "## `lg-study start`")
    diffs = GENERATOR.stale(pages)
    assert list(diffs) == [path]
    assert "-## `lg-study run`" in diffs[path] and "+## `lg-study start`" in diffs[path]


def test_every_field_of_every_block_is_listed_with_a_meaning():
    """Each field of the study file's blocks, down to TrialConfig's sections, has a line,
    and each says what the field means (a `#:` comment in its model)."""
    from docs_reference.study_file import blocks

    from orchestrator.studies.study import StudyFile

    page = (REPO / "docs/reference/study-file.md").read_text()
    without_meaning = []
    for block in blocks(StudyFile, ""):
        for field in block.fields:
            assert f"- **`{field.name}`**" in page, f"{block.path}.{field.name}"
            if not field.meaning:
                without_meaning.append(f"{block.path}.{field.name}")
    assert without_meaning == [], "fields without a #: comment in their model: " + ", ".join(without_meaning)


def test_every_section_of_a_trial_config_has_its_block():
    """`base` holds one TrialConfig: each of its sections gets a block of its own, from the
    config classes themselves (not from the study file's model, where `base` is a mapping)."""
    import dataclasses

    from lengthgen.config import TrialConfig

    page = (REPO / "docs/reference/study-file.md").read_text()
    for section in dataclasses.fields(TrialConfig):
        assert f"## `base.{section.name}`" in page, section.name


def test_every_command_and_exit_code_is_listed():
    import typer.main

    from orchestrator.cli import app
    from orchestrator.exit_codes import ExitCode

    page = (REPO / "docs/reference/cli.md").read_text()
    for name in typer.main.get_command(app).commands:
        assert f"## `lg-study {name}`" in page
    for code in ExitCode:
        assert f"| {code.value} | `{code.name}` |" in page


def test_every_question_file_says_its_rows_and_its_parameters():
    """docs/reference/questions.md is written from each question file's header: a
    `-- one row per:` line, and a `-- parameters:` line naming exactly the parameters the
    file reads (getvariable or $name), or `none`."""
    import duckdb
    from docs_reference.questions import declared_and_used, question_files

    con = duckdb.connect()
    wrong = []
    for question in question_files():
        declared, used = declared_and_used(question, con)
        if not question.rows or not question.parameters or not question.question.endswith("?"):
            wrong.append(f"{question.name}: no one-row-per or parameters line, or no question")
        elif declared != used:
            wrong.append(f"{question.name}: the header names {sorted(declared)}, the SQL reads {sorted(used)}")
    assert wrong == [], "; ".join(wrong)
