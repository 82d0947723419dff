"""What a study's writer and its reader agree on: where results live, and what names a trial."""
