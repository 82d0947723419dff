"""The order the test files run in (tests/conftest.py, LONGEST_FIRST)."""

from __future__ import annotations

from pathlib import Path

from conftest import LONGEST_FIRST


def test_every_file_named_to_run_first_is_a_test_file():
    # a renamed file would quietly drop back to its place in the alphabet
    assert [name for name in LONGEST_FIRST if not (Path(__file__).parent / name).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
