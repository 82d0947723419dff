"""`lg-study ui`'s runs page over a study's group parents (tests/test_group_runs.py makes
them), in a headless Chromium: the groups listed folded in the model-training view, and
two parents compared side by side (slow)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from test_group_runs import STUDY, runs, sync, write_trials

from orchestrator.commands.running import run_names_of
from orchestrator.running.group_answers import short_names
from orchestrator.studies.study import load_study
from results_contract.experiments import default_store_uri


@pytest.fixture
def study(tmp_path: Path):
    """test_group_runs' study of two groups of 2 x 2 seeds."""
    path = tmp_path / "parents.yaml"
    path.write_text(STUDY)
    return load_study(path)


@pytest.mark.slow  # `lg-study ui` and a headless Chromium: about a minute
def test_the_runs_page_lists_the_groups_folded_and_compares_two(tmp_path: Path, study,
                                                                write_finished_trial) -> None:
    """`lg-study ui`'s address opens the model-training view (its menu has the model
    registry, not the GenAI judges), listing one row per group and no trial until
    unfolded; two parents selected and Compare pressed, their numbers stand side by side."""
    from chromium_pipe import Chromium, browser_path
    from test_ui import LG_STUDY, as_from_a_terminal, free_port

    browser = browser_path()
    if browser is None:
        pytest.skip("no Chromium or Chrome on PATH (e.g. `apt-get install chromium`)")
    root = tmp_path / "results"
    write_trials(root, study, write_finished_trial, study.trials)
    sync(default_store_uri(root), root, study)
    with as_from_a_terminal():
        ui = subprocess.Popen([str(LG_STUDY), "ui", "--study", study.name, "--port", str(free_port()),
                               "--results", str(root)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, start_new_session=True)
    page = None
    try:
        url = next(line.split(": ", 1)[1].strip() for line in ui.stdout if line.startswith("experiment "))
        page = Chromium(browser, tmp_path / "profile")
        page.go(url)
        names = sorted(short_names(study).values())
        page.wait_for(" && ".join(f"document.body.innerText.includes({name!r})" for name in names), 90,
                      "the groups on the runs page")
        text = " ".join(page.text().split())
        assert all(f" {name} " in text for name in names), text[:2000]
        assert not [n for n in run_names_of(study).values() if n in text], "trials folded under their groups"
        assert "Model registry" in text and "Judges" not in text, "the model-training view"
        shown = compared(page, names)
    finally:
        if page is not None:
            page.close()
        os.killpg(ui.pid, signal.SIGINT)
        ui.wait(60)
    parents = runs(default_store_uri(root), study)[0]
    by_name = {parent.info.run_name: parent.data.metrics for parent in parents.values()}
    for metric in ("mean/digits_003", "mean_low/digits_003", "p_success/digits_003", "share_weight/digits_003"):
        assert [float(value) for value in shown[metric]] == pytest.approx(
            [by_name[name][metric] for name in shown["Run Name:"]], abs=1e-3), metric


def compared(page, names: list[str]) -> dict[str, list[str]]:
    """Tick the rows of the parents ``names``, press Compare, and read the comparison's
    run names (key "Run Name:") and metrics table: metric -> its values, run by run."""
    for name in names:
        row = page.run(f"Array.from(document.querySelectorAll('.ag-row')).find("
                       f"r => r.innerText.includes({name!r})).getAttribute('row-index')")
        box = f"document.querySelector('.ag-row[row-index=\"{row}\"] input[type=checkbox]')"
        page.click(box)
        page.wait_for(f"{box}.checked", 60, f"{name} ticked")  # a page sharing the cores is slow to
    compare = "Array.from(document.querySelectorAll('button')).find(b => b.innerText.trim() === 'Compare')"
    page.wait_for(f"!{compare}.disabled", 60, "Compare enabled")  # take a tick: wait, then press
    page.click(compare)
    page.wait_for("location.hash.includes('compare-runs')", 60, "the comparison page")
    page.wait_for("document.body.innerText.includes('trials/digits_003')", 60, "the parents' metrics compared")
    lines = [line.strip() for line in page.text().splitlines() if line.strip()]
    run_names = lines[lines.index("Run Name:") + 1:][:len(names)]
    table = lines[lines.index("Metrics", lines.index("Run Name:")) + 1:lines.index("Artifacts")]
    metrics = [line for line in table if re.fullmatch(r"\w+/digits_\d+", line)]
    values = table[table.index(metrics[-1]) + 1:]
    assert len(values) == len(names) * len(metrics), table
    shown = {metric: values[i * len(names):(i + 1) * len(names)] for i, metric in enumerate(metrics)}
    return {"Run Name:": run_names, **shown}
