"""The report's figures at 10,000 trials draw each distinct curve or dot once, at the
opacity of its stacked copies (figures.stacked), and a seed heatmap of hundreds of
weight seeds keeps its lucky marks once its labels thin out. These tests show that the
shortcuts draw the picture the copies drew wherever a stroke covers a pixel whole; on
the antialiased rim of a stroke copies darken more than one stroke does."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from analysis import figures, plots


def pixels(draw) -> np.ndarray:
    fig = Figure(figsize=(3, 2), dpi=100)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 1)
    ax.set_axis_off()
    draw(ax)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).astype(int)


def same_inside_strokes(drawn: np.ndarray, shortcut: np.ndarray, opaque: np.ndarray) -> None:
    """Within 6 of 255 levels where the strokes, drawn opaque black, cover a pixel whole
    (Agg rounds each copy's composite to 8 bits: seven copies drift 5 levels from the
    exact stack); lighter, never darker, on their rim."""
    inside, rim = opaque[..., 0] == 0, (opaque[..., 0] > 0) & (opaque[..., 0] < 255)
    assert inside.sum() > 20  # something is drawn
    assert np.abs(drawn - shortcut)[inside].max() <= 6
    assert (shortcut[..., :3][rim] >= drawn[..., :3][rim] - 3).all()
    assert (drawn == shortcut)[~(inside | rim)].all()


def test_stacked_counts_copies_in_first_seen_order() -> None:
    opacity = figures.stacked([(1, 2), (3, 4), (1, 2), (1, 2)], 0.5)
    assert list(opacity) == [(1, 2), (3, 4)]
    assert opacity[(1, 2)] == pytest.approx(1 - 0.5 ** 3)
    assert opacity[(3, 4)] == 0.5


@pytest.mark.parametrize("copies", [1, 2, 5, 40])
def test_one_line_at_stacked_opacity_looks_like_its_copies(copies) -> None:
    curve = ((0.5, 0.1), (4.0, 0.8), (9.5, 0.3))
    alpha = 0.35

    def each_copy(ax):
        ax.add_collection(LineCollection([curve] * copies, colors=[to_rgba("C0", alpha)], linewidths=2))

    def stacked_once(ax):
        [(line, opacity)] = figures.stacked([curve] * copies, alpha).items()
        ax.add_collection(LineCollection([line], colors=[to_rgba("C0", opacity)], linewidths=2))

    def opaque(ax):
        ax.add_collection(LineCollection([curve], colors="black", linewidths=2))

    same_inside_strokes(pixels(each_copy), pixels(stacked_once), pixels(opaque))


def test_dots_at_stacked_opacity_look_like_their_copies() -> None:
    dots = [(2.0, 0.5)] * 7 + [(6.0, 0.25)] * 2 + [(8.0, 0.75)]

    def each_copy(ax):
        ax.plot(*zip(*dots), ls="none", marker=".", ms=6, color="C1", alpha=0.6)

    def stacked_once(ax):
        for dot, opacity in figures.stacked(dots, 0.6).items():
            ax.plot(*dot, ls="none", marker=".", ms=6, color="C1", alpha=opacity)

    def opaque(ax):
        ax.plot(*zip(*dots), ls="none", marker=".", ms=6, color="black", markeredgecolor="black")

    same_inside_strokes(pixels(each_copy), pixels(stacked_once), pixels(opaque))


def heatmap_rows(weight_seeds: int, lucky: set[int]) -> list[dict]:
    return [{"weight_seed": w, "lucky": w in lucky} for w in range(weight_seeds)]


def test_a_few_weight_seeds_are_each_labelled_and_lucky_ones_starred() -> None:
    ax = Figure().subplots()
    plots._seed_ticks(ax, heatmap_rows(5, {3}), [0, 1, 2])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1", "2", "3 *", "4"]
    assert not ax.lines


def test_hundreds_of_weight_seeds_get_sparse_labels_and_every_lucky_seed_a_star() -> None:
    ax = Figure().subplots()
    lucky = {7, 123, 398}
    plots._seed_ticks(ax, heatmap_rows(400, lucky), list(range(25)))
    assert len(ax.get_yticklabels()) <= 12 and len(ax.get_xticklabels()) <= 12
    [stars] = ax.lines
    assert stars.get_marker() == "*" and sorted(stars.get_ydata()) == sorted(lucky)


def five_panels() -> Figure:
    """A report-shaped figure: two rows of panels, titles, labels and the legend below."""
    fig, axes = figures.panels(5, sharey=True)
    for k, ax in enumerate(axes):
        ax.plot([1, 2, 4, 8], [1.0, 0.9, 0.5 / (k + 1), 0.1], marker="o", label=f"group {k}")
        figures.style(ax, f"addition/rope/tiny/uniform_length train.lr={k}e-3", "test digits", "accuracy")
    figures.legend(fig, axes[0], "group")
    return fig


def test_a_figure_laid_out_once_saves_the_png_that_tight_saves(tmp_path) -> None:
    """figures.save lays a figure out and measures its box once for its PNG and SVG;
    matplotlib's bbox_inches="tight" (each its own fresh figure: a draw changes state)."""
    saved = figures.save(five_panels(), tmp_path / "once.png")
    five_panels().savefig(tmp_path / "tight.png", dpi=100, bbox_inches="tight")
    assert saved.read_bytes() == (tmp_path / "tight.png").read_bytes()
    assert saved.with_suffix(".svg").read_text().startswith("<?xml")
    with figures.png_only():
        figures.save(five_panels(), tmp_path / "alone.png")
    assert not (tmp_path / "alone.svg").exists()
