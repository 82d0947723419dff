"""`lg-study validate` and `lg-study trial`: a study file checked, one trial trained."""

from __future__ import annotations

from pathlib import Path

from orchestrator.cli_support import bad_input, load_study_file, out


def validate_study(study_file: Path, profile: str | None, trials: bool, results: Path) -> None:
    """`lg-study validate`: the number of trials, what varies, a GPU study's size and
    (``trials``) every trial."""
    study = load_study_file(study_file, profile)
    search = study.spec.search
    count = f"{study.trial_count} trials"
    if search:
        count += f" ({search.points} points x {len(search.repeat_settings())} seeds)"
    out.print(f"[green]ok[/green] {study_file}: study [bold]{study.name}[/bold]"
              f"{f' (profile {profile})' if profile else ''}, {count}", highlight=False)
    if study.spec.source:
        out.print(f"source: {study.spec.source}")
    for axis, values in study.spec.axes.items():
        out.print(f"  {axis}: {', '.join(map(str, values))}")
    if search:
        out.print(f"  search: {search.sampler}, {search.parallel_points} point(s) at a time, "
                  f"maximizing the mean {search.metric} over seeds", highlight=False)
        for key, param in search.params.items():
            out.print(f"  {key}: {param}", highlight=False)
        for key, values in search.repeat.items():
            out.print(f"  {key} (at every point): {', '.join(map(str, values))}", highlight=False)
        if search.pruner.prunes:
            out.print(f"  pruner: {search.pruner}, on {search.pruner.sees}", highlight=False)
    if study.spec.resources.gpus_per_trial > 0:
        from orchestrator.studies.study_scale import study_size_words

        out.print(f"size: {study_size_words(study, results)}", highlight=False)
    if trials:
        from orchestrator.console.render import trial_list

        out.print(trial_list(study))


def train_one_trial(config_file: Path, trial_id: str | None, profile: str | None, device: str | None) -> None:
    """`lg-study trial`: one trial trained and evaluated in this process, its reports printed."""
    from lengthgen import train
    from orchestrator.studies.study import StudyError, load_trial

    try:
        config = load_trial(config_file, trial_id, profile)
    except StudyError as error:
        raise bad_input(str(error)) from None
    out.print(f"trial {config.trial_id}: {config.task.name}, {config.model.arch} {config.model.size}, pe {config.model.pe}")

    def on_report(report):
        parts = [f"step {report.step:>6}"]
        if report.train:
            parts.append(f"loss {report.train.loss:.4f}")
        parts += [f"{r.digits}d {r.accuracy:.3f}" for r in report.eval]
        out.print("  ".join(parts), highlight=False)

    result = train(config, on_report=on_report, device=device)
    out.print(f"status {result.status}; " + ", ".join(f"{k} {v:.3f}" for k, v in result.summary.items()))
