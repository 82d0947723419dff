"""What every report figure shares: the panel grid, axis style, legend, colours and
saving (analysis.plots and analysis.error_plots draw with these).

Figures use matplotlib's constrained layout: panels of one grid are the same size, and
the one legend of a figure sits outside every panel, below them (``outside lower
center``), where it cannot cover a title or a curve. Panels that show the same quantity
share their y axis (and their x axis where `share_x` says). Colours are Okabe and Ito's
palette, which readers with the common colour-vision deficiencies tell apart, and
viridis/magma for maps. Each figure is saved as PNG (for the page) and SVG (for papers)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

NCOLS = 4
PANEL = (3.7, 2.9)  # inches per panel
#: Okabe & Ito (2008), "Color universal design": distinct under the common colour-vision deficiencies
OKABE_ITO = {"orange": "#E69F00", "sky blue": "#56B4E9", "green": "#009E73", "yellow": "#F0E442",
             "blue": "#0072B2", "vermillion": "#D55E00", "purple": "#CC79A7", "black": "#000000"}
BLUE, ORANGE, GREEN, VERMILLION, PURPLE, SKY = (OKABE_ITO[c] for c in (
    "blue", "orange", "green", "vermillion", "purple", "sky blue"))
#: the margin around a saved figure's tight bounding box (matplotlib's savefig.pad_inches default)
TIGHT_PAD_INCHES = 0.1
#: the band of the training lengths
TRAINING_BAND = {"color": GREEN, "alpha": 0.12}
#: whether save writes the SVG beside the PNG (a context's own: the driver's MLflow
#: thread draws a group's figures while other threads may draw)
_SVG: contextvars.ContextVar[bool] = contextvars.ContextVar("lg_study_figures_svg", default=True)


def by_group(rows: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["group_label"], []).append(row)
    return groups


def unique(values) -> list:
    return list(dict.fromkeys(values))


def stacked(items, alpha: float) -> dict:
    """Each distinct item (a curve as a tuple of points, a point) once, with the opacity
    its copies had drawn on top of one another: 1 - (1 - alpha)^copies, as source-over
    compositing of one colour gives. Thousands of trials share a few curves and dots
    (one-step trials, accuracies of a few questions), and drawing every copy was most
    of the report's drawing time at 10,000 trials. The picture is the same wherever a
    stroke covers a pixel whole; on a stroke's antialiased rim stacked copies come out
    darker than one stroke (tests/test_report_figures.py)."""
    copies: dict = {}
    for item in items:
        copies[item] = copies.get(item, 0) + 1
    return {item: 1 - (1 - alpha) ** n for item, n in copies.items()}


def panels(n: int, panel: tuple[float, float] = PANEL, sharey: bool = False) -> tuple[Figure, list]:
    """``n`` panels of one size in rows of at most NCOLS; ``sharey``: one y axis for all
    (its tick labels on the first column only)."""
    ncols = min(NCOLS, n)
    nrows = -(-n // ncols)
    fig = Figure(figsize=(panel[0] * ncols, panel[1] * nrows + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.subplots(nrows, ncols, squeeze=False, sharey=sharey)
    axes = [ax for row in grid for ax in row]
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def style(ax, label: str, xlabel: str, ylabel: str) -> None:
    """Title, axis labels (the y label on the first column only: the rows share it) and
    the 0-1 range of a share or an accuracy."""
    ax.set_title(wrap(label), fontsize=8)
    ax.set_xlabel(xlabel, fontsize=8)
    if ax.get_subplotspec() is None or ax.get_subplotspec().is_first_col():
        ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)


def shade_training_range(ax, rows: list[dict]) -> None:
    inside = [r["digits"] for r in rows if r["in_distribution"]]
    if inside:
        ax.axvspan(min(inside) - 0.5, max(inside) + 0.5, **TRAINING_BAND, label="training lengths")


def share_x(axes: list) -> None:
    """One x range for panels of the same quantity (test lengths, steps, places), so that
    a reader compares them by eye; tick labels stay on every panel."""
    lows, highs = zip(*(ax.get_xlim() for ax in axes))
    for ax in axes:
        ax.set_xlim(min(lows), max(highs))


def legend(fig: Figure, ax, title: str | None = None) -> None:
    """One legend for the figure: the labels of ``ax``, then any other panel's (a panel
    with nothing drawn, e.g. n/a shares, must not leave the legend empty)."""
    unique: dict = {}
    for panel in [ax, *fig.axes]:
        handles, labels = panel.get_legend_handles_labels()
        for handle, label in zip(handles, labels):
            unique.setdefault(label, handle)  # the first artist of a label: a line, not a marker
    if not unique:
        return
    # outside every panel, below them: constrained layout makes room for it
    legend = fig.legend(unique.values(), unique.keys(), loc="outside lower center",
                        ncol=min(len(unique), 4), fontsize=8, title=title, title_fontsize=8,
                        frameon=False)
    for handle in legend.legend_handles:
        if isinstance(handle, Line2D):
            handle.set_alpha(1)  # faint lines in the panels, readable keys in the legend


def length_colors(lengths) -> dict[int, tuple]:
    from matplotlib import colormaps

    ordered = sorted(set(lengths))
    cmap = colormaps["viridis"]
    return {d: cmap(0.9 * i / max(len(ordered) - 1, 1)) for i, d in enumerate(ordered)}


def value_or(value: float | None, fallback: float) -> float:
    return fallback if value is None else value


def level_words(row: dict) -> str:
    return f"{row['level']:.0%} interval"


def wrap(label: str, width: int = 34) -> str:
    """Break a group label into lines of about ``width`` characters, after '/' or ' '."""
    import re

    lines, line = [], ""
    for piece in re.findall(r"[^/ ]+[/ ]?|[/ ]", label):
        if line and len(line) + len(piece.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += piece
    lines.append(line.rstrip())
    return "\n".join(lines)


@contextlib.contextmanager
def png_only() -> Iterator[None]:
    """Figures saved within are PNG alone: a group's figures on its MLflow parent, which
    the UI shows as PNG, are drawn a quarter faster without their SVG (docs/performance.md)."""
    token = _SVG.set(False)
    try:
        yield
    finally:
        _SVG.reset(token)


def save(fig: Figure, path: Path) -> Path:
    """The figure as ``path`` (PNG) and beside it as SVG (same name), which a paper
    scales without loss (not within png_only); the SVG's ids and metadata fixed, so the
    same figure writes the same bytes.

    Both files are cut to the figure's tight bounding box, padded by TIGHT_PAD_INCHES,
    and laid out once: `bbox_inches="tight"` would draw each file twice and run the
    constrained layout in each, where one draw that renders nothing lays the figure out
    and gives its box for both. The PNG's bytes are those that "tight" writes; the
    SVG takes the layout the PNG's renderer measured (docs/performance.md, "The report's
    figures")."""
    from matplotlib import rc_context

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.draw_without_rendering()
    box = fig.get_tightbbox().padded(TIGHT_PAD_INCHES)
    engine = fig.get_layout_engine()
    # no engine rather than "none"'s placeholder, which savefig still draws for
    with rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)
    try:
        fig.savefig(path, dpi=100, bbox_inches=box)
        if _SVG.get():
            with rc_context({"svg.hashsalt": "lg-study", "svg.fonttype": "none"}):
                fig.savefig(path.with_suffix(".svg"), bbox_inches=box, metadata={"Date": None})
    finally:
        fig.set_layout_engine(engine)
    return path
