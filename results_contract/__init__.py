"""What a study's writer and its reader agree on: where results live, what names a trial and
its group, and what a trial's status means."""
