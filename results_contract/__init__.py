"""The contract between the writer and the reader of a study's results."""
