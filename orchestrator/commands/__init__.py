"""The bodies of the `lg-study` commands, by what they do: a study file checked or one
trial trained (`study_files`), a study run or migrated (`running`), a study's status
or compaction (`status`), the questions asked of its results (`answers`: query,
report, plan, the MLflow UI) and the benchmarks (`bench`). orchestrator.cli holds each
command's options and calls one function here; the top of the orchestrator, with cli
and cli_support: it may import every room, and no room imports it."""
