"""`lg-study report`: one HTML page with its PNGs, built from the analysis SQL files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from analysis_rows import STUDY, build_study, config, write_trial
from typer.testing import CliRunner

from analysis.report import build_report
from orchestrator.cli import app

PNG = b"\x89PNG\r\n\x1a\n"
runner = CliRunner()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    build_study(root)
    outcome = runner.invoke(app, ["report", STUDY, "--results", str(root),
                                  "--param", "threshold=0.4"])
    return root, outcome


def test_cli_writes_the_page_to_the_default_folder_and_prints_it(built) -> None:
    root, outcome = built
    assert outcome.exit_code == 0, outcome.output
    page = root / STUDY / "report" / "index.html"
    assert str(page) in outcome.stdout.replace("\n", "")
    assert page.is_file()


def test_every_plot_is_a_png_beside_the_page_and_embedded_in_it(built) -> None:
    root, _ = built
    folder = root / STUDY / "report"
    html = (folder / "index.html").read_text()
    names = {"accuracy_by_group.png", "seed_heatmap.png", "variance_shares.png", "cascade.png",
             "errors_carry.png", "errors_ending.png", "errors_position.png", "errors_count.png",
             "errors_checkpoints.png", "training.png", "variance_shares_by_length.png",
             "success.png", "grid.png", "profiles.png"}
    assert {p.name for p in folder.glob("*.png")} == names
    for name in names:
        assert (folder / name).read_bytes().startswith(PNG)
        assert f"href='{name}'" in html
    assert html.count("data:image/png;base64,") == len(names)


def test_captions_name_the_sql_file_behind_each_plot(built) -> None:
    root, _ = built
    html = (root / STUDY / "report" / "index.html").read_text()
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html, flags=re.DOTALL)
    assert len(captions) == 14
    assert all(re.search(r"Computed by <code>analysis/sql/questions/\w+\.sql</code>", c) for c in captions)
    for sql in ("variance", "final_accuracy", "lucky_tickets", "success", "profiles", "compare", "cascade",
                "errors", "training", "grid"):
        assert f"analysis/sql/questions/{sql}.sql" in html


def test_key_numbers_are_html_tables(built) -> None:
    root, _ = built
    html = (root / STUDY / "report" / "index.html").read_text()
    # the rope group's weight seed explains all the variance: share 1.000, W 1.000, and
    # Friedman's chi2 = b(a - 1)W = 4 with p = exp(-2) (2 degrees of freedom)
    # (the group by its short label, the full one on hover; every column behind "all columns")
    every = html[html.index("<summary>All 25 columns</summary>"):]
    rope_row = re.search(r"<tr><td class='text' title='addition/rope/tiny/uniform_length'>rope</td>"
                         r"<td>3</td><td>2</td>(.*?)</tr>", every)
    assert rope_row, "per-group variance shares table"
    cells = re.findall(r"<td>([^<]*)</td>", rope_row.group(1))
    # W, p, the test noise's share of a residual of 0 (none), SS, χ²
    assert cells[1:] == ["1.000", "0.135", "", "1.000", "0.000", "0.000", "4.000", "", ""]
    # the component shares with their generalized intervals, as "estimate [low, high]"
    texts = re.findall(r"<td class='text(?: ci)?'>([^<]*)</td>", rope_row.group(1))
    assert "<td class='text ci'>1.000 [1.000, 1.000]</td>" in rope_row.group(1)  # kept on one line
    assert texts[2:5] == ["1.000 [1.000, 1.000]", "0.000 [0.000, 0.000]", "0.000 [0.000, 0.000]"]
    assert "<th>best of N</th>" in html and "<th>mean [interval]</th>" in html
    assert "<th>accuracy [Wilson]</th>" in html and "<th>N trials</th>" in html
    # the bootstrap over trials (coverage 0.33-0.53) only in the appendix, labelled so
    appendix = html.index("<h2 id='appendix'>")
    assert html.index("<th>mean [percentile bootstrap over trials]</th>") > appendix
    assert "covered the mean only 0.33–0.53" in html[appendix:]
    assert "Trials: done 53, failed 1" in html
    # seed planning from the crossed groups' fits, one row per group and estimate
    assert "Seed planning" in html and "<th>seeds for the target</th>" in html
    assert re.search(r"<td class='text'>rope</td><td class='text'>3 x 2</td>"
                     r"<td class='text'>weight_share</td>", html)


def test_parameters_reach_the_files_that_take_them(built) -> None:
    root, _ = built
    html = (root / STUDY / "report" / "index.html").read_text()
    assert "Parameters: threshold=0.4" in html
    assert "minimum over data orders above 0.4)" in html  # the heatmap's caption
    # lucky at 0.4: the rope group's weight seeds 0 and 1 (min 0.95 and 0.5), not 2
    lucky = re.findall(r"<tr><td class='text' title='addition/rope/tiny/uniform_length'>rope</td>"
                       r"<td>(\d)</td>(?:<td>[^<]*</td>){3}<td class='text'>(yes|no)</td>"
                       r"<td>0.400</td>", html)
    assert lucky == [("0", "yes"), ("1", "yes"), ("2", "no")]
    outcome = runner.invoke(app, ["report", STUDY, "--results", str(root),
                                  "--out", str(root / "other"), "--param", "nope=1"])
    assert outcome.exit_code == 2 and "no analysis file takes parameter nope" in outcome.output
    assert not (root / "other").exists()


def test_a_study_without_results_yet_still_gets_a_page(tmp_path: Path) -> None:
    write_trial(tmp_path, "fresh", config("fire", 0, 0), None, status="running")
    report = build_report(tmp_path, "fresh")
    html = report.page.read_text()
    assert report.figures == []
    assert "nothing to draw" in html and "does not cross weight" not in html
    assert "No configuration group of this study crosses weight seeds" in html


def test_unknown_study_is_bad_input(tmp_path: Path) -> None:
    outcome = runner.invoke(app, ["report", "nope", "--results", str(tmp_path)])
    assert outcome.exit_code == 2


def test_a_study_file_names_its_study_and_profile(built) -> None:
    """`report STUDY.yaml --profile P` reads the study the file names, as `status` does."""
    root, _ = built
    study_file = Path(__file__).parent / "study_files" / "good_two_trials.yaml"
    outcome = runner.invoke(app, ["report", str(study_file), "--profile", "longer", "--results", str(root)])
    assert outcome.exit_code == 2
    assert "no study 'two_trials' under" in outcome.output and "_profiles/longer" in outcome.output
    outcome = runner.invoke(app, ["report", str(study_file), "--profile", "nope", "--results", str(root)])
    assert outcome.exit_code == 2 and "unknown profile 'nope'" in outcome.output


def test_failed_and_diverged_trials_are_listed(built) -> None:
    root, _ = built
    html = (root / STUDY / "report" / "index.html").read_text()
    section = html[html.index("<h2 id='failures'>"):]
    rows = re.findall(r"<tr><td class='text'>(\w+)</td><td class='text'>(failed|diverged)</td>", section)
    assert [status for _, status in rows] == ["failed"]  # build_study writes one failed trial
