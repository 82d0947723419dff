"""Where positions are made and read (see the docstring added in the next commit)."""
