"""Plots shared by the report and the MLflow artifacts (matplotlib only)."""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from analysis import figures


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
        ax.axvspan(0.5, train_max_digits + 0.5, **figures.TRAINING_BAND, label="training range")
    ax.plot(xs, ys, marker="o", color=figures.BLUE, label="exact match")
    ax.set_xlim(0, max(xs + [train_max_digits]) + 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("test length (digits)")
    ax.set_ylabel("exact-match accuracy")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left")
    with figures.png_only():
        return figures.save(fig, path)


# ---------------------------------------------------------------------------------------
# Report figures. Each takes the rows of one analysis SQL file (list of dicts, as
# pyarrow's to_pylist gives them), draws one panel per configuration group, saves a PNG
# and returns its path, or None when there is nothing to draw.

SEED_STYLES = ("-", "--", ":", "-.")


def accuracy_by_group(trial_rows: list[dict], summary_rows: list[dict], path: Path) -> Path | None:
    """Final accuracy vs test length: every trial thin, the group mean (with its
    interval over seeds, variance.sql's mean_low/high) and the best-of-N trial on top; training range
    shaded."""
    groups = figures.by_group(trial_rows)
    if not groups:
        return None
    summary = figures.by_group(summary_rows)
    fig, axes = figures.panels(len(groups), sharey=True)
    for ax, (label, rows) in zip(axes, groups.items()):
        by_trial: dict[tuple, list[dict]] = {}  # one id, two studies; in the order rows name them
        for r in rows:  # one pass: scanning every row per trial took 85 s at 10,000 trials
            by_trial.setdefault((r["study"], r["trial_id"]), []).append(r)
        curves = [tuple(sorted((r["digits"], r["accuracy"]) for r in mine if r["accuracy"] is not None))
                  for mine in by_trial.values()]
        _faint_lines(ax, [c for c in curves if c], "0.6", 0.8, 0.8, label="one trial")
        stats = sorted(summary.get(label, []), key=lambda r: r["digits"])
        if stats:
            xs = [r["digits"] for r in stats]
            # no interval for a single trial: the band closes on the mean
            low = [figures.value_or(r["mean_low"], r["mean"]) for r in stats]
            high = [figures.value_or(r["mean_high"], r["mean"]) for r in stats]
            ax.fill_between(xs, low, high, color=figures.BLUE, alpha=0.15, lw=0,
                            label="mean, interval over seeds")
            ax.plot(xs, [r["mean"] for r in stats], color=figures.BLUE, lw=2, marker="o", ms=3,
                    label="mean")
            ax.plot(xs, [r["best_of_n"] for r in stats], color=figures.VERMILLION, lw=1.5, ls="--",
                    label="best of N (one trial)")
        figures.shade_training_range(ax, rows)
        n = len({(r["study"], r["trial_id"]) for r in rows})
        figures.style(ax, f"{label} (N = {n})", "test length (digits)", "exact match")
        ax.set_xticks(sorted({r["digits"] for r in rows}))
    figures.share_x(axes)
    figures.legend(fig, axes[0])
    return figures.save(fig, path)


MEASURED_LABELS = {  # lucky_tickets.sql measured_kind -> what y is
    "out-of-distribution": "OOD exact match",
    "in-distribution": "in-distribution exact match",
    "mixed": "exact match (lengths inside and outside training)",
}


def seed_heatmaps(lucky_rows: list[dict], path: Path) -> Path | None:
    """Weight seed x data seed grid of the measured accuracy per analysed group (its
    largest complete subgrid); lucky weight seeds marked with *, trials that diverged
    (and keep the accuracy they had reached) with a dagger."""
    groups = figures.by_group([r for r in lucky_rows if r["weight_seed"] is not None])
    if not groups:
        return None
    fig, axes = figures.panels(len(groups), panel=(3.9, 3.2))
    image = None
    for ax, (label, rows) in zip(axes, groups.items()):
        rows = sorted(rows, key=lambda r: r["weight_seed"])
        data_seeds = rows[0]["data_seeds"]
        grid = [r["accuracy_by_data_seed"] for r in rows]
        diverged = [r["diverged_by_data_seed"] for r in rows]
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        few = len(rows) * len(data_seeds) <= 100
        for i, line in enumerate(grid):
            for j, value in enumerate(line):
                if few:
                    ax.text(j, i, f"{value:.2f}{'†' if diverged[i][j] else ''}", ha="center",
                            va="center", fontsize=7, color="white" if value < 0.6 else "black")
                elif diverged[i][j]:
                    ax.text(j, i, "†", ha="center", va="center", fontsize=6, color="red")
        _seed_ticks(ax, rows, data_seeds)
        ax.set_xlabel("data seed")
        ax.set_ylabel("weight seed")
        w, p = rows[0]["kendall_w"], rows[0]["friedman_p"]
        agreement = "n/a" if w is None else f"{w:.2f} (Friedman p = {p:.2g})"
        ax.set_title(f"{figures.wrap(label)}\nKendall's W = {agreement}", fontsize=8)
    kinds = {r["measured_kind"] for r in lucky_rows if r["weight_seed"] is not None}
    fig.colorbar(image, ax=axes, shrink=0.8,
                 label=MEASURED_LABELS[kinds.pop()] if len(kinds) == 1 else "exact match")
    return figures.save(fig, path)


def _seed_ticks(ax, rows: list[dict], data_seeds: list[int], most: int = 40) -> None:
    """Every seed labelled, a lucky weight seed's with " *"; past `most` weight seeds
    (hundreds of labels overlap, and drawing them took most of the figure's time) the
    weight seeds get sparse ticks and each lucky one a * at the grid's left edge."""
    _sparse_ticks(ax.set_xticks, data_seeds)
    if len(rows) <= most:
        ax.set_yticks(range(len(rows)), [f"{r['weight_seed']}{' *' if r['lucky'] else ''}" for r in rows])
        return
    _sparse_ticks(ax.set_yticks, [r["weight_seed"] for r in rows])
    lucky = [i for i, r in enumerate(rows) if r["lucky"]]
    if lucky:
        ax.plot([-0.5] * len(lucky), lucky, ls="none", marker="*", ms=4, color="black", clip_on=False)


def grid_heatmaps(grid_rows: list[dict], path: Path) -> Path | None:
    """Mean exact match over each group's trials on every cell of eval.grid, the first
    operand's length down, the second's across (grid.sql; McLeish et al. 2024, Fig. 1);
    an empty cell was not in the grid. Cells inside the training range are outlined."""
    groups = figures.by_group(grid_rows)
    if not groups:
        return None
    fig, axes = figures.panels(len(groups), panel=(3.9, 3.4))
    image = None
    for ax, (label, rows) in zip(axes, groups.items()):
        firsts = sorted({r["first_digits"] for r in rows})
        seconds = sorted({r["second_digits"] for r in rows})
        matrix = [[math.nan] * len(seconds) for _ in firsts]
        for r in rows:
            matrix[firsts.index(r["first_digits"])][seconds.index(r["second_digits"])] = figures.value_or(
                r["mean_accuracy"], math.nan)
        image = ax.imshow(matrix, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
        for r in rows:
            if r["in_distribution"]:
                ax.add_patch(Rectangle((seconds.index(r["second_digits"]) - 0.5, firsts.index(r["first_digits"]) - 0.5),
                                       1, 1, fill=False, edgecolor="white", linewidth=0.6))
        _sparse_ticks(ax.set_xticks, seconds)
        _sparse_ticks(ax.set_yticks, firsts)
        ax.set_xlabel("second operand's digits")
        ax.set_ylabel("first operand's digits")
        ax.set_title(f"{figures.wrap(label)}\n{rows[0]['n_trials']} trials", fontsize=8)
    fig.colorbar(image, ax=axes, shrink=0.8, label="exact match (mean over trials)")
    return figures.save(fig, path)


def _sparse_ticks(set_ticks, lengths: list[int], most: int = 12) -> None:
    """At most `most` labelled ticks: a 100-length axis would print 100 labels."""
    every = max(1, math.ceil(len(lengths) / most))
    set_ticks(range(0, len(lengths), every), [str(n) for n in lengths[::every]])


COMPONENT_PARTS = (("weight", "weight seed", figures.BLUE), ("data", "data seed", figures.ORANGE),
                   ("residual", "residual", "0.55"))


def _component_bars(ax, entries: list[dict], horizontal: bool) -> None:
    """Per entry, three bars: the variance-component shares of the weight seed, the data
    seed and the residual with their generalized confidence intervals as error bars, and the
    fixed-effects share SS/SS_total of each as a black tick. An entry whose shares are
    null (every trial scored the same: no variance to share out) is marked n/a."""
    width = 0.26
    for offset, (part, name, color) in zip((-width, 0.0, width), COMPONENT_PARTS):
        where = [i + offset for i in range(len(entries))]
        values = [e[f"component_share_{part}"] for e in entries]
        shown = [(x, v, e) for x, v, e in zip(where, values, entries) if v is not None]
        if not shown:
            continue
        xs = [x for x, _, _ in shown]
        ys = [v for _, v, _ in shown]
        # max(0, ...): a percentile a hair inside its estimate from round-off
        err = [[max(0.0, v - figures.value_or(e[f"component_share_{part}_low"], v)) for _, v, e in shown],
               [max(0.0, figures.value_or(e[f"component_share_{part}_high"], v) - v) for _, v, e in shown]]
        ss = [e[f"ss_share_{part}"] for _, _, e in shown]
        if horizontal:
            ax.barh(xs, ys, height=width, xerr=err, color=color, label=name, capsize=2,
                    error_kw={"lw": 0.8})
            ax.plot(ss, xs, ls="none", marker="|", ms=9, mew=1.5, color="black",
                    label="SS / SS_total (fixed effects)")
        else:
            ax.bar(xs, ys, width=width, yerr=err, color=color, label=name, capsize=2,
                   error_kw={"lw": 0.8})
            ax.plot(xs, ss, ls="none", marker="_", ms=9, mew=1.5, color="black",
                    label="SS / SS_total (fixed effects)")
    for i, entry in enumerate(entries):
        if entry["component_share_weight"] is None:
            where = (0.5, i) if horizontal else (i, 0.5)
            ax.text(*where, "n/a: every trial scored the same", ha="center", va="center",
                    fontsize=7, color="0.3", rotation=0 if horizontal else 90)


def variance_shares(lucky_rows: list[dict], path: Path) -> Path | None:
    """Variance components as shares of the total, with their intervals: weight seed,
    data seed and residual, one bar triple per analysed group; the label says the
    seeds (a x b) and the resamples behind them."""
    groups = {label: rows[0] for label, rows in
              figures.by_group([r for r in lucky_rows if r["weight_seed"] is not None]).items()}
    if not groups:
        return None
    labels = list(groups)
    fig = Figure(figsize=(7.5, 0.9 * len(labels) + 1.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    _component_bars(ax, [groups[label] for label in labels], horizontal=True)
    ax.set_yticks(range(len(labels)), [
        f"{figures.wrap(label, 40)}\n{groups[label]['n_weight_seeds']} weight x "
        f"{groups[label]['n_data_seeds']} data seeds" for label in labels], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel("share of the variance: σ² component / sum of the three "
                  f"({figures.level_words(groups[labels[0]])})", fontsize=8)
    figures.legend(fig, ax)
    return figures.save(fig, path)


def variance_shares_by_length(lucky_rows: list[dict], path: Path) -> Path | None:
    """001 F.9: the variance-component shares at each measured test length apart (and
    for their mean), with their intervals, one panel per analysed group."""
    groups = {label: rows[0] for label, rows in
              figures.by_group([r for r in lucky_rows if r["weight_seed"] is not None]).items()
              if len(rows[0]["by_length"] or []) > 1}
    if not groups:
        return None
    fig, axes = figures.panels(len(groups), sharey=True)
    for ax, (label, row) in zip(axes, groups.items()):
        entries = list(row["by_length"]) + [row]
        _component_bars(ax, entries, horizontal=False)
        ax.set_xticks(range(len(entries)), [str(e["digits"]) for e in row["by_length"]] + ["mean"])
        figures.style(ax, f"{label} ({row['n_weight_seeds']} x {row['n_data_seeds']} seeds)",
               "test length (digits)", "share of the variance")
    figures.legend(fig, axes[0])
    return figures.save(fig, path)


def success_probability(success_rows: list[dict], path: Path) -> Path | None:
    """Share of trials whose accuracy reaches the threshold, by test length, with its
    Wilson interval; each point is labelled k/n (successes of trials)."""
    groups = figures.by_group(success_rows)
    if not groups:
        return None
    fig, axes = figures.panels(len(groups), sharey=True)
    for ax, (label, rows) in zip(axes, groups.items()):
        rows = sorted(rows, key=lambda r: r["digits"])
        xs = [r["digits"] for r in rows]
        ys = [r["p_success"] for r in rows]
        err = [[max(0.0, y - r["p_success_low"]) for y, r in zip(ys, rows)],
               [max(0.0, r["p_success_high"] - y) for y, r in zip(ys, rows)]]
        ax.errorbar(xs, ys, yerr=err, color=figures.PURPLE, marker="o", ms=3, lw=1.2, capsize=2,
                    label=f"P(accuracy ≥ {rows[0]['threshold']:g}), Wilson {figures.level_words(rows[0])}")
        for x, y, r in zip(xs, ys, rows):
            ax.annotate(f"{r['n_success']}/{r['n_trials']}", (x, y), textcoords="offset points",
                        xytext=(3, 4), fontsize=6, color="0.25")
        figures.shade_training_range(ax, rows)
        n = max(r["n_trials"] for r in rows)
        figures.style(ax, f"{label} (N = {n})", "test length (digits)", "share of trials that succeed")
        ax.set_xticks(xs)
    figures.share_x(axes)
    figures.legend(fig, axes[0])
    return figures.save(fig, path)


def _curve(rows: list[dict], digits: int) -> list[tuple[int, float]]:
    return sorted((r["step"], math.nan if r["accuracy"] is None else r["accuracy"])
                  for r in rows if r["digits"] == digits)


def _seed_styled_curves(ax, by_trial: dict, colors: dict) -> None:
    """A few trials: each its own line style, its grokking step a vertical in that style."""
    for i, mine in enumerate(by_trial.values()):
        for digits in sorted({r["digits"] for r in mine}):
            ax.plot(*zip(*_curve(mine, digits)), color=colors[digits], ls=SEED_STYLES[i], lw=1,
                    label=f"{digits} digits" if i == 0 else None)
        if mine[0]["grok_step"] is not None:
            ax.axvline(mine[0]["grok_step"], color="black", ls=SEED_STYLES[i], lw=0.8, alpha=0.6)


def _faint_lines(ax, curves: list[tuple], color, alpha: float, width: float, label: str) -> None:
    """Curves drawn faint as one collection (a thousand trials are a thousand artists
    otherwise), each distinct curve once at the opacity of its copies (figures.stacked)."""
    opacity = figures.stacked(curves, alpha)
    ax.add_collection(LineCollection(list(opacity), colors=[to_rgba(color, a) for a in opacity.values()],
                                     linewidths=width, label=label))
    ax.autoscale_view()


def _faint_curves(ax, by_trial: dict, colors: dict) -> None:
    """Many trials: one faint line each per test length, and each grokking step a
    faint vertical."""
    lengths = sorted({r["digits"] for mine in by_trial.values() for r in mine})
    for digits in lengths:
        curves = [tuple(curve) for mine in by_trial.values() if (curve := _curve(mine, digits))]
        _faint_lines(ax, curves, colors[digits], 0.35, 0.7, label=f"{digits} digits")
    groks = figures.stacked((mine[0]["grok_step"] for mine in by_trial.values()
                             if mine[0]["grok_step"] is not None), 0.2)
    if groks:
        ax.vlines(list(groks), 0, 1, transform=ax.get_xaxis_transform(), lw=0.8,
                  colors=[to_rgba("black", a) for a in groks.values()])


def training_curves(training_rows: list[dict], path: Path) -> Path | None:
    """Accuracy per test length over training steps, one line style per trial; dotted
    verticals at each trial's grokking step."""
    groups = figures.by_group(training_rows)
    if not groups:
        return None
    colors = figures.length_colors(r["digits"] for r in training_rows)
    fig, axes = figures.panels(len(groups), sharey=True)
    for ax, (label, rows) in zip(axes, groups.items()):
        by_trial: dict[str, list[dict]] = {}
        for row in rows:
            by_trial.setdefault((row["study"], row["trial_id"]), []).append(row)
        few = len(by_trial) <= len(SEED_STYLES)  # else one faint solid line per trial
        if few:
            _seed_styled_curves(ax, by_trial, colors)
        else:
            _faint_curves(ax, by_trial, colors)
        figures.style(ax, label, "training step", "exact match")
        firsts = [mine[0] for mine in by_trial.values()]
        if few:
            styles = [Line2D([], [], color="black", lw=1, ls=SEED_STYLES[i])
                      for i in range(len(firsts))]
            names = [f"w{r['weight_seed']} d{r['data_seed']}" for r in firsts]
            # the panel's own trials, beside it (outside, as every legend)
            ax.legend(styles, names, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=6,
                      handlelength=2.5, frameon=False)
        else:
            ax.text(0.98, 0.5, f"{len(firsts)} trials", transform=ax.transAxes, ha="right",
                    fontsize=7)
    figures.share_x(axes)
    figures.legend(fig, axes[0], title="test length")
    return figures.save(fig, path)
