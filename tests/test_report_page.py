"""The report as a reader sees it: a quickstart-shaped study (its four groups and their full
labels, windowed NoPE crossing 4 weight x 2 data seeds) rendered by `lg-study report`.

Two kinds of check: the figures' geometry from matplotlib's own bounding boxes (every
legend outside every panel and title, panels of one figure the same size; no browser
needed), and the page in headless Chromium at 1280 px (no horizontal overflow, every
table on the page as wide as the page at most, every figure loaded, every contents anchor
resolves). The browser tests run where Debian's chromium and chromium-driver (or
CHROMIUM / CHROMEDRIVER naming others) and selenium are installed, and are skipped with
that reason elsewhere (`apt-get install chromium chromium-driver`; selenium is in the
dev extras).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from analysis_rows import config, random_samples, write_trial

from analysis import figures
from analysis.report import build_report

STUDY = "quickstart_shaped"
WIDTH = 1280
#: the quickstart's groups: (pe, model settings, full label, weight seeds, data seeds, OOD level by seed)
GROUPS = (
    ("rope", {}, "successor/rope/tiny/uniform_length", 2, 1, lambda w, d: 0.0),
    ("nope", {"attention_bias": "windowed", "window": 1},
     "successor/nope/tiny/uniform_length model.attention_bias=windowed", 4, 2,
     lambda w, d: (0.75, 0.18, 0.55, 0.70)[w] - 0.05 * d),
    ("learned", {"positions": "coupled", "max_positions": 32},
     ("successor/learned/tiny/uniform_length model.attention_bias=none model.max_positions=32 "
      "model.positions=coupled"), 2, 1, lambda w, d: 0.07 * (1 - w)),
    ("learned", {"positions": "coupled", "max_positions": 32, "attention_bias": "windowed", "window": 1},
     ("successor/learned/tiny/uniform_length model.attention_bias=windowed model.max_positions=32 "
      "model.positions=coupled"), 4, 1, lambda w, d: (0.88, 0.78, 0.99, 0.77)[w]),
)


def build_quickstart_shaped(root: Path) -> None:
    rng = np.random.default_rng(3)
    for pe, model, label, weights, datas, level in GROUPS:
        for w in range(weights):
            for d in range(datas):
                cfg = config(pe, w, d)
                cfg["task"]["name"] = "successor"
                cfg["model"].update(model)
                final = {2: 1.0, 4: 1.0, 6: min(1.0, level(w, d) + 0.1), 8: level(w, d)}
                # rope without sampled answers: the error figures have nothing of it to draw
                samples = None if pe == "rope" else random_samples(rng)
                write_trial(root, STUDY, cfg, final, samples=samples, group_label=label)


@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> tuple[Path, list]:
    """The report's page, and every figure it drew (captured as each is saved)."""
    root = tmp_path_factory.mktemp("results")
    build_quickstart_shaped(root)
    saved, save = [], figures.save

    def keep(fig, path):
        saved.append((Path(path).name, fig))
        return save(fig, path)

    patch = pytest.MonkeyPatch()
    patch.setattr(figures, "save", keep)
    try:
        report = build_report(root, STUDY)
    finally:
        patch.undo()
    return report.page, saved


# --- the figures' geometry (matplotlib's bounding boxes) ----------------------------------


def _boxes(fig):
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.get_visible() and not hasattr(ax, "_colorbar")]
    legends = [*fig.legends, *(ax.get_legend() for ax in panels if ax.get_legend())]
    titles = [ax.title.get_window_extent(renderer) for ax in panels if ax.get_title()]
    return panels, [legend.get_window_extent(renderer) for legend in legends], titles, renderer


def test_every_legend_is_outside_every_panel_and_title(drawn) -> None:
    _, saved = drawn
    assert len(saved) >= 10
    for name, fig in saved:
        fig.canvas.draw()
        panels, legends, titles, _ = _boxes(fig)
        areas = [ax.get_window_extent() for ax in panels]
        for legend in legends:
            assert not any(legend.overlaps(title) for title in titles), f"{name}: a legend covers a title"
            assert not any(legend.overlaps(area) for area in areas), f"{name}: a legend covers a panel"


def test_the_panels_of_a_figure_are_one_size(drawn) -> None:
    _, saved = drawn
    for name, fig in saved:
        fig.canvas.draw()
        panels, _, _, _ = _boxes(fig)
        sizes = {(round(ax.get_window_extent().width), round(ax.get_window_extent().height)) for ax in panels}
        widths, heights = zip(*sizes)
        assert max(widths) - min(widths) <= 1 and max(heights) - min(heights) <= 1, f"{name}: {sizes}"


def test_panel_titles_are_short_labels_and_figures_have_svg_twins(drawn) -> None:
    page, saved = drawn
    titles = {ax.get_title().split("\n")[0] for _, fig in saved for ax in fig.axes if ax.get_title()}
    assert {"rope (N = 2)", "nope · windowed (N = 8)", "learned · windowed (N = 4)"} <= titles
    assert not any("uniform_length" in title for title in titles)
    for name, _ in saved:
        svg = (page.parent / name).with_suffix(".svg")
        assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()[:2000]
        assert f"<a href='{svg.name}'>SVG</a>" in page.read_text()


def test_a_quantity_a_group_lacks_is_said_not_drawn(drawn) -> None:
    page, saved = drawn
    cascade = next(fig for name, fig in saved if name == "cascade.png")
    assert "rope" not in {ax.get_title() for ax in cascade.axes}
    assert "No panel for rope: no sampled answers." in page.read_text()
    # the lucky-ticket figures draw only the crossed group; the rest say nothing of the others
    heatmap = next(fig for name, fig in saved if name == "seed_heatmap.png")
    assert [ax.get_title().split("\n")[0] for ax in heatmap.axes if ax.get_title()] == ["nope · windowed"]


# --- the page in a browser -----------------------------------------------------------------


def _chromium() -> tuple[str | None, str | None, str]:
    """The browser, its driver and why either is missing."""
    browser = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return None, None, "selenium is not installed (pip install -e '.[dev]')"
    if not browser or not driver:
        return None, None, "no chromium and chromium-driver here (apt-get install chromium chromium-driver)"
    return browser, driver, ""


BROWSER, DRIVER, MISSING = _chromium()
browser_only = pytest.mark.skipif(not BROWSER, reason=MISSING)


@pytest.fixture(scope="module")
def browser(drawn, tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = BROWSER
    profile = tmp_path_factory.mktemp("chromium-profile")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--window-size={WIDTH},900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        page, _ = drawn
        driver.get(page.resolve().as_uri())
        yield driver
    finally:
        driver.quit()


@browser_only
def test_nothing_is_wider_than_the_page_at_1280_px(browser) -> None:
    assert browser.execute_script("return window.innerWidth") == WIDTH
    overflow = browser.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0
    # every table the page shows (not those behind "all columns" or a collapsed <details>) fits
    # without its own scroll bar
    wide = browser.execute_script("""
        return [...document.querySelectorAll('div.table')]
            .filter(d => !d.closest('details') && d.scrollWidth > d.clientWidth + 1)
            .map(d => d.querySelector('caption').textContent.slice(0, 80));""")
    assert wide == []


@browser_only
def test_every_figure_loads(browser) -> None:
    images = browser.execute_script(
        "return [...document.images].map(i => [i.alt, i.complete && i.naturalWidth > 0])")
    assert len(images) >= 10
    assert [alt for alt, loaded in images if not loaded] == []


@browser_only
def test_every_contents_anchor_resolves(browser) -> None:
    anchors = browser.execute_script(
        "return [...document.querySelectorAll('p.contents a')].map(a => a.getAttribute('href'))")
    assert len(anchors) >= 10
    missing = browser.execute_script(
        "return arguments[0].filter(h => !document.getElementById(h.slice(1)))", anchors)
    assert missing == []


@browser_only
def test_a_group_cell_shows_its_full_label_on_hover(browser) -> None:
    cells = browser.execute_script(
        "return [...document.querySelectorAll('td[title]')].map(td => [td.textContent, td.title])")
    assert ("nope · windowed", GROUPS[1][2]) in {tuple(c) for c in cells}
