"""What every report figure shares: the panel grid, axis style, legend, colours and
saving (analysis.plots and analysis.error_plots draw with these)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

NCOLS = 4
PANEL = (3.7, 2.9)  # inches per panel


def by_group(rows: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["group_label"], []).append(row)
    return groups


def unique(values) -> list:
    return list(dict.fromkeys(values))


def panels(n: int, panel: tuple[float, float] = PANEL) -> tuple[Figure, list]:
    ncols = min(NCOLS, n)
    nrows = -(-n // ncols)
    fig = Figure(figsize=(panel[0] * ncols, panel[1] * nrows + 0.6))
    FigureCanvasAgg(fig)
    grid = fig.subplots(nrows, ncols, squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def style(ax, label: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(wrap(label), fontsize=8)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)


def shade_training_range(ax, rows: list[dict]) -> None:
    inside = [r["digits"] for r in rows if r["in_distribution"]]
    if inside:
        ax.axvspan(min(inside) - 0.5, max(inside) + 0.5, color="tab:green", alpha=0.1,
                   label="training lengths")


def legend(fig: Figure, ax, title: str | None = None) -> None:
    """One legend for the figure: the labels of ``ax``, then any other panel's (a panel
    with nothing drawn, e.g. n/a shares, must not leave the legend empty)."""
    unique: dict = {}
    for panel in [ax, *fig.axes]:
        handles, labels = panel.get_legend_handles_labels()
        for handle, label in zip(handles, labels):
            unique.setdefault(label, handle)  # the first artist of a label: a line, not a marker
    if not unique:
        fig.subplots_adjust(hspace=0.55, wspace=0.3)
        return
    legend = fig.legend(unique.values(), unique.keys(), loc="upper center",
                        ncol=min(len(unique), 8), fontsize=8, title=title, title_fontsize=8,
                        frameon=False, bbox_to_anchor=(0.5, 1.0))
    for handle in legend.legend_handles:
        if isinstance(handle, Line2D):
            handle.set_alpha(1)  # faint lines in the panels, readable keys in the legend
    fig.subplots_adjust(top=1 - 0.9 / fig.get_figheight(), hspace=0.55, wspace=0.3)


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


def save(fig: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return path
