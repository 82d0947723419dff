"""Plots shared by the report and the MLflow artifacts (matplotlib only)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def accuracy_vs_length(
    digits: list[int],
    accuracy: list[float],
    train_max_digits: int,  # 0 when unknown: no band
    title: str,
    path: Path,
) -> Path:
    """Exact-match accuracy by test length, with the training range shaded; saved as PNG."""
    pairs = sorted(zip(digits, accuracy))
    xs = [d for d, _ in pairs]
    ys = [a for _, a in pairs]
    # Agg canvas on a bare Figure, not pyplot: headless (Ray driver, CI) and no global
    # figure registry to leak across the hundreds of plots a study draws.
    fig = Figure(figsize=(6, 3.5))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    if train_max_digits > 0:
        ax.axvspan(
            0.5, train_max_digits + 0.5, color="tab:green", alpha=0.12, label="training range"
        )
    ax.plot(xs, ys, marker="o", color="tab:blue", label="exact match")
    ax.set_xlim(0, max(xs + [train_max_digits]) + 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("test length (digits)")
    ax.set_ylabel("exact-match accuracy")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return path
