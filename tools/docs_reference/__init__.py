"""The generated reference pages under docs/reference/ (tools/gen_reference.py writes
them, tests/test_docs_reference.py checks that the committed ones are current)."""
