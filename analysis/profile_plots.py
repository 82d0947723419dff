"""The report's performance profiles (profiles.sql; Agarwal et al. 2021, rliable): per
test length, each configuration group's share of seed pairs whose accuracy reaches a
threshold τ, as a function of τ, with its interval over seeds. Kept out of
analysis/plots.py, which holds the figures of one panel per group."""

from __future__ import annotations

from pathlib import Path

from analysis import figures
from analysis.plots import SEED_STYLES

#: a line colour per group (Okabe & Ito's, yellow last: thin on white it is hard to see),
#: then the next line style once the palette is used up
COLORS = (figures.BLUE, figures.ORANGE, figures.GREEN, figures.VERMILLION, figures.PURPLE, figures.SKY,
          figures.OKABE_ITO["black"], figures.OKABE_ITO["yellow"])


def panel_lengths(rows: list[dict]) -> list[tuple[int, bool]]:
    """(test length, trained) per panel: the lengths outside the training range first,
    shortest first, then the trained ones. Length generalization is what the groups are
    compared on, so those panels come where a reader starts; the trained lengths follow
    as the check that each group learned the task at all."""
    trained = {}
    for row in rows:
        trained[row["digits"]] = trained.get(row["digits"], True) and bool(row["in_distribution"])
    return sorted(trained.items(), key=lambda item: (item[1], item[0]))


def _seed_pairs_words(rows: list[dict]) -> str:
    counts = {r["n_seed_pairs"] for r in rows}
    low, high = min(counts), max(counts)
    return f"N = {low} seed pairs" if low == high else f"N = {low}–{high} seed pairs"


def performance_profiles(profile_rows: list[dict], path: Path) -> Path | None:
    """One panel per test length (panel_lengths' order): x = τ, y = the share of a group's
    seed pairs with accuracy ≥ τ, one line per group with its interval over seeds as a
    band (profiles.sql's share_low, share_high); a dotted vertical marks the study's
    success threshold, where the share is success.sql's P(success)."""
    if not profile_rows:
        return None
    lengths = panel_lengths(profile_rows)
    labels = figures.unique(r["group_label"] for r in profile_rows)
    styles = {label: (COLORS[i % len(COLORS)], SEED_STYLES[i // len(COLORS) % len(SEED_STYLES)])
              for i, label in enumerate(labels)}
    threshold, first = profile_rows[0]["threshold"], profile_rows[0]
    fig, axes = figures.panels(len(lengths), sharey=True)
    for ax, (digits, trained) in zip(axes, lengths):
        here = [r for r in profile_rows if r["digits"] == digits]
        for label, rows in figures.by_group(here).items():
            rows = sorted(rows, key=lambda r: r["tau"])
            taus = [r["tau"] for r in rows]
            color, line = styles[label]
            ax.fill_between(taus, [r["share_low"] for r in rows], [r["share_high"] for r in rows],
                            color=color, alpha=0.12, lw=0)
            ax.plot(taus, [r["share"] for r in rows], color=color, ls=line, lw=1.5, label=label)
        ax.axvline(threshold, color="black", ls=":", lw=1,
                   label=f"success threshold {threshold:g}")
        where = "trained" if trained else "outside training"
        figures.style(ax, f"{digits} digits, {where} ({_seed_pairs_words(here)})",
                      "τ (accuracy threshold)", "share of seed pairs with accuracy ≥ τ")
        ax.set_xlim(0, 1)
    figures.legend(fig, axes[0], title=f"group (band: {figures.level_words(first)} over seeds)")
    return figures.save(fig, path)
