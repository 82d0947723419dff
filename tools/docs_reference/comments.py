"""The `#:` comments written above a class's fields (or an enum's members): the one place
a field's meaning is written (lengthgen.config's docstring; Sphinx autodoc reads the
same convention), read here from the class's source."""

from __future__ import annotations

import ast
import inspect
import textwrap


def field_comments(cls: type) -> dict[str, str]:
    """Field name -> its `#:` comment as one line ('' for a field without one)."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    (klass,) = ast.parse(source).body
    comments = {}
    for node in klass.body:
        name = _assigned_name(node)
        if name is not None:
            comments[name] = _comment_above(lines, node.lineno - 1)
    return comments


def _assigned_name(node: ast.stmt) -> str | None:
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    return None


def _comment_above(lines: list[str], index: int) -> str:
    """The `#:` lines right above line ``index`` (0-based), joined."""
    parts = []
    while index > 0 and lines[index - 1].strip().startswith("#:"):
        index -= 1
        parts.insert(0, lines[index].strip().removeprefix("#:").strip())
    return " ".join(part for part in parts if part)


def docstring_paragraphs(obj: object) -> str:
    """An object's docstring, its lines joined into paragraphs (blank lines kept)."""
    doc = inspect.getdoc(obj) or ""
    return "\n\n".join(" ".join(p.split()) for p in doc.split("\n\n"))


def class_docstring(cls: type) -> str:
    """The docstring written in the class's body, as one paragraph ('' without one: a
    dataclass's generated signature is not one)."""
    (klass,) = ast.parse(textwrap.dedent(inspect.getsource(cls))).body
    return " ".join((ast.get_docstring(klass) or "").split())
