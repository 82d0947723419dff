"""Write the generated reference pages, docs/reference/{study-file,cli,tables,questions}.md,
from the code they describe: the study file's models, the Typer app and the exit codes,
the results store and the SQL views, the SQL questions' headers and results. Run from anywhere:

    .venv/bin/python tools/gen_reference.py          # rewrite the pages
    .venv/bin/python tools/gen_reference.py --check  # exit 1, with a diff, if one is stale

tests/test_docs_reference.py runs the check in the default test tier."""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from docs_reference import cli, questions, study_file, tables

#: page -> the function that renders it
PAGES: dict[str, Callable[[], str]] = {
    "docs/reference/study-file.md": study_file.render,
    "docs/reference/cli.md": cli.render,
    "docs/reference/tables.md": tables.render,
    "docs/reference/questions.md": questions.render,
}


def rendered() -> dict[Path, str]:
    """Each page's text as the code now gives it."""
    return {REPO / page: render() for page, render in PAGES.items()}


def stale(pages: dict[Path, str]) -> dict[Path, str]:
    """Page -> a unified diff from the committed text to ``pages``' text, for those that differ."""
    diffs = {}
    for path, text in pages.items():
        committed = path.read_text() if path.exists() else ""
        if committed != text:
            diffs[path] = "".join(difflib.unified_diff(
                committed.splitlines(keepends=True), text.splitlines(keepends=True),
                f"{path.relative_to(REPO)} (committed)", f"{path.relative_to(REPO)} (from the code)"))
    return diffs


def main(argv: list[str]) -> int:
    os.chdir(REPO)
    pages = rendered()
    if "--check" in argv:
        diffs = stale(pages)
        sys.stdout.write("".join(diffs.values()))
        return 1 if diffs else 0
    for path, text in pages.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
