"""The error-anatomy figures of the report (analysis/sql/questions/cascade.sql, errors.sql,
error_checkpoints.sql): accuracy by carry-cascade length, error rate with and without a
carry into a digit, the number and place of wrong digits, and both per checkpoint."""

from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import MaxNLocator

from analysis import figures


def cascade_breakdown(cascade_rows: list[dict], path: Path) -> Path | None:
    """Accuracy by carry-cascade length, one line per test length (dashed: longer than
    trained): the mean over trials with its trial-bootstrap 95 % interval, and each
    trial's accuracy as a small dot."""
    groups = figures.by_group(cascade_rows)
    if not groups:
        return None
    colors = figures.length_colors(r["digits"] for r in cascade_rows)
    fig, axes = figures.panels(len(groups), sharey=True)
    for ax, (label, rows) in zip(axes, groups.items()):
        lengths = sorted({r["digits"] for r in rows})
        for i, digits in enumerate(lengths):
            cells = sorted((r for r in rows if r["digits"] == digits), key=lambda r: r["cascade"])
            shift = 0.06 * (i - (len(lengths) - 1) / 2)  # keeps the error bars apart
            xs = [r["cascade"] + shift for r in cells]
            ys = [r["accuracy"] for r in cells]
            # no bar for a single seed pair; max(0, ...): the line is the mean over trials,
            # the interval's centre the mean over seed pairs (the same unless one ran twice)
            err = [[max(0.0, y - r["mean_low"]) if r["mean_low"] is not None else 0.0
                    for y, r in zip(ys, cells)],
                   [max(0.0, r["mean_high"] - y) if r["mean_high"] is not None else 0.0
                    for y, r in zip(ys, cells)]]
            ax.errorbar(xs, ys, yerr=err, color=colors[digits], marker="o", ms=3, lw=1.2,
                        capsize=2, ls="-" if cells[0]["in_distribution"] else "--",
                        label=f"{digits} digits")
            # every trial's dot: one artist per length and opacity, each distinct dot once
            # at the opacity of its copies (figures.stacked)
            dots: dict[float, list] = {}
            for dot, opacity in figures.stacked(
                    ((x, value) for x, r in zip(xs, cells) for value in r["trial_accuracies"]), 0.6).items():
                dots.setdefault(opacity, []).append(dot)
            for opacity, same in dots.items():
                ax.plot(*zip(*same), ls="none", marker=".", ms=2.5, color=colors[digits], alpha=opacity)
        figures.style(ax, label, "carry-cascade length", "exact match")
        ax.set_xticks(sorted({r["cascade"] for r in rows}))
    figures.share_x(axes)
    figures.legend(fig, axes[0], title="test length")
    return figures.save(fig, path)


def error_by_carry(error_rows: list[dict], path: Path) -> Path | None:
    """Error rate of answer places with vs without a carry into them, by test length
    (001 Fig. 9); a kind of place that a length does not have is marked n/a, no bar."""
    rows = [r for r in error_rows if r["facet"] == "carry"]
    groups = {k: v for k, v in figures.by_group(rows).items() if any(r["count"] for r in v)}
    if not groups:
        return None
    fig, axes = figures.panels(len(groups), sharey=True)
    for ax, (label, cells) in zip(axes, groups.items()):
        lengths = sorted({r["digits"] for r in cells})
        for offset, bucket, color in ((-0.2, "without carry", figures.SKY),
                                      (0.2, "with carry", figures.VERMILLION)):
            rates = {r["digits"]: r["error_rate"] for r in cells if r["bucket"] == bucket}
            xs = [i + offset for i, d in enumerate(lengths) if d in rates]
            ax.bar(xs, [rates[d] for d in lengths if d in rates], width=0.4, color=color,
                   label=bucket)
            for i, d in enumerate(lengths):
                if d not in rates:
                    ax.text(i + offset, 0.02, "n/a", ha="center", va="bottom", fontsize=6,
                            rotation=90, color="0.4")
        ax.set_xticks(range(len(lengths)), [str(d) for d in lengths])
        figures.style(ax, label, "test length (digits)", "error rate per answer digit")
    figures.legend(fig, axes[0])
    return figures.save(fig, path)


def error_distribution(error_rows: list[dict], facet: str, xlabel: str, path: Path) -> Path | None:
    """Share of the errors per bucket of ``facet`` (error_position: answer place;
    wrong_digits: wrong places per answer), averaged over trials, one line per test
    length; buckets between the observed ones are true zeros."""
    rows = [r for r in error_rows if r["facet"] == facet and r["bucket_value"] is not None]
    groups = figures.by_group(rows)
    if not groups:
        return None
    colors = figures.length_colors(r["digits"] for r in rows)
    fig, axes = figures.panels(len(groups), sharey=True)
    for ax, (label, cells) in zip(axes, groups.items()):
        for digits in sorted({r["digits"] for r in cells}):
            share = {r["bucket_value"]: r["share_of_errors"] for r in cells if r["digits"] == digits}
            xs = list(range(min(share), max(share) + 1))
            ax.plot(xs, [share.get(x, 0.0) for x in xs], color=colors[digits], marker="o",
                    ms=2.5, lw=1, label=f"{digits} digits")
        figures.style(ax, label, xlabel, "share of errors (mean over trials)")
        # whole places or digits only, one either side: one bucket is a point, not 0.96-1.04
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(min(r["bucket_value"] for r in cells) - 1, max(r["bucket_value"] for r in cells) + 1)
    figures.share_x(axes)
    figures.legend(fig, axes[0], title="test length")
    return figures.save(fig, path)


def error_endings(error_rows: list[dict], path: Path) -> Path | None:
    """How the wrong answers end (on time, premature, late), share averaged over
    trials, one stacked bar per test length."""
    rows = [r for r in error_rows if r["facet"] == "ending"]
    groups = figures.by_group(rows)
    if not groups:
        return None
    fig, axes = figures.panels(len(groups), sharey=True)
    for ax, (label, cells) in zip(axes, groups.items()):
        lengths = sorted({r["digits"] for r in cells})
        bottom = [0.0] * len(lengths)
        for bucket, color in (("on time", figures.BLUE), ("premature end", figures.ORANGE),
                              ("late end", figures.VERMILLION)):
            share = {r["digits"]: r["share_of_errors"] for r in cells if r["bucket"] == bucket}
            values = [share.get(d, 0.0) for d in lengths]
            ax.bar(range(len(lengths)), values, bottom=bottom, color=color, label=bucket)
            bottom = [b + v for b, v in zip(bottom, values)]
        ax.set_xticks(range(len(lengths)), [str(d) for d in lengths])
        figures.style(ax, label, "test length (digits)", "share of wrong answers")
    figures.legend(fig, axes[0])
    return figures.save(fig, path)


#: y labels of a panel of error_checkpoints; a longer list labels every k-th checkpoint
LABELLED_CHECKPOINTS = 20


def error_checkpoints(checkpoint_rows: list[dict], path: Path) -> Path | None:
    """001 F.12: one row per checkpoint (trial and step), the share of its wrong places
    at each answer place, at the group's longest test length with wrong answers."""
    groups = figures.by_group(checkpoint_rows)
    if not groups:
        return None
    fig, axes = figures.panels(len(groups), panel=(3.9, 3.2))
    image = None
    for ax, (label, rows) in zip(axes, groups.items()):
        digits = max(r["digits"] for r in rows)
        rows = [r for r in rows if r["digits"] == digits]
        checkpoints = figures.unique((r["weight_seed"], r["data_seed"], r["study"], r["trial_id"],
                               r["step"]) for r in rows)
        width = max(r["place"] for r in rows) + 1
        grid = [[0.0] * width for _ in checkpoints]
        where = {c: i for i, c in enumerate(checkpoints)}
        for r in rows:
            key = (r["weight_seed"], r["data_seed"], r["study"], r["trial_id"], r["step"])
            grid[where[key]][r["place"]] = r["share"]
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="magma", aspect="auto",
                          interpolation="nearest")
        # at most LABELLED_CHECKPOINTS labels: more are unreadable at 6 pt, and slow to lay out
        shown = range(0, len(checkpoints), -(-len(checkpoints) // LABELLED_CHECKPOINTS))
        ax.set_yticks(shown, [f"w{checkpoints[i][0]} d{checkpoints[i][1]} @{checkpoints[i][4]}"
                              for i in shown], fontsize=6)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("answer place (0 = units)", fontsize=8)
        ax.set_title(f"{figures.wrap(label)}\n{digits} digits", fontsize=8)
    fig.colorbar(image, ax=axes, shrink=0.8, label="share of the checkpoint's wrong places")
    return figures.save(fig, path)
