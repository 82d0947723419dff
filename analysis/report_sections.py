"""Sections of `lg-study report` that stand on their own: where a seeds-until study's
groups stopped, where the trials ran, seed luck or numerical chaos, seed planning, and
the words for a design too small to answer."""

from __future__ import annotations

import html
from typing import Any

from analysis import report_html as rendering

#: a share interval wider than this spans "most of [0, 1]"
TOO_WIDE_SHARE = 0.5
#: the most a variance of accuracies in [0, 1] can be, where their upper bounds are capped
MOST_ACCURACY_VARIANCE = 0.25


def too_few_seeds(row: dict) -> bool:
    """Whether the group's weight share interval spans most of [0, 1], or the weight
    component's interval more than an order of magnitude or up to its cap (the most a
    variance of accuracies can be, macros.sql's accuracy_variance_high)."""
    low, high = row.get("component_share_weight_low"), row.get("component_share_weight_high")
    wide_share = low is not None and high is not None and high - low > TOO_WIDE_SHARE
    sigma_low, sigma_high = row.get("sigma2_weight_low"), row.get("sigma2_weight_high")
    wide_sigma = sigma_high is not None and (
        not sigma_low or sigma_high > 10 * sigma_low or sigma_high >= MOST_ACCURACY_VARIANCE)
    return wide_share or wide_sigma


def too_few_seeds_words(row: dict, share_plan: str | None = None) -> str:
    """The group's design is too small to separate weight from data effects: said in words,
    with how many seeds would (``share_plan``, seed planning's words for ±0.1)."""
    a, b = row["n_weight_seeds"], row["n_data_seeds"]
    return (
        f"<p class='warning'>{html.escape(row['group_label'])}: with {a} weight × {b} data seeds the "
        f"weight share's interval is [{row['component_share_weight_low'] or 0:.2f}, "
        f"{row['component_share_weight_high'] or 0:.2f}] and σ²_weight's "
        f"[{row['sigma2_weight_low'] or 0:.4f}, {row['sigma2_weight_high'] or 0:.4f}]: this many seeds "
        "cannot tell how much of the variance is the weight seed's and how much the data seed's. "
        f"σ²_weight rests on a − 1 = {a - 1} degrees of freedom, so more weight seeds narrow it; "
        "more data seeds barely do. The point estimates above are a direction, not a measurement."
        + (f" For the weight share within ±{REPORT_TARGETS['weight_share']} (seed planning below): "
           f"{html.escape(share_plan)}." if share_plan else "")
        + "</p>"
    )


def replicates_section(rows: list[dict]) -> list[str]:
    """Seed luck or numerical chaos: replicates.sql's split, where a group has perturbation
    replicates (without them lucky_tickets' residual holds both, and this says so)."""
    split = [r for r in rows if r["skipped_reason"] is None]
    # a replicated group that could not be split says why (e.g. a trial missing a length)
    unsplit = [f"<p class='warning'>{html.escape(r['group_label'])}, mean of lengths: not split: "
               f"{html.escape(r['skipped_reason'])}.</p>" for r in rows
               if r["skipped_reason"] is not None and (r["perturb_seeds"] or 0) >= 2]
    if not split:
        return unsplit or [("<p class='empty'>No group has perturbation replicates (seeds.perturb): the "
                 "residual above holds the weight × data interaction and numerical noise together "
                 "(replicates.sql splits them when each seed pair also runs perturbed).</p>")]
    shown = [{**r, "component_ci": f"{r['sigma2']:.4g} [{r['low']:.4g}, {r['high']:.4g}]",
              "at": "mean of lengths" if r["at_digits"] == 0 else r["at_digits"]} for r in split]
    return [rendering.table(
        shown,
        [("group_label", "group"), ("weight_seeds", "a"), ("data_seeds", "b"), ("perturb_seeds", "r"),
         ("at", "at digits"), ("component", "component"), ("component_ci", "σ² [interval]"),
         ("share", "share"), ("estimate", "moment estimate"), ("coverage", "interval's coverage")],
        f"Seed luck or numerical chaos (replicates.sql): variance components of a weight × b data "
        f"× r perturbation seeds (two-way random effects with replication, method of moments); "
        f"{split[0]['level']:.0%} modified large-sample intervals (Ting et al. 1990; exact χ² for the "
        "noise; bounds of ties where they tie; at most 0.25), coverage 0.94-0.97 measured by simulation "
        "at 3 × 5 × 2 to 24 × 20 × 2 seeds, less "
        "near accuracy 1 (the last column; docs/analysis.md). Numerical noise: what moving one "
        "initial weight by one ulp does.",
    ), *unsplit]


def environments_section(rows: list[dict]) -> list[str]:
    """Where the trials ran: a group whose seeds ran on two machines mixes floating-point
    chaos into its seed variance."""
    return ["<h2 id='environments'>9. Where the trials ran</h2>", rendering.table(
        rows,
        [("group_label", "group"), ("environment", "environment"), ("science_versions", "science versions"),
         ("trials", "trials"), ("trial_ids", "trials' ids")],
        "Configuration groups whose finished trials ran in more than one numerical environment "
        "(CPU or GPU model, instruction set, torch, CUDA or numpy build, threads; environments.sql): "
        "training is chaotic across machines, so their seed variance includes floating-point "
        "differences. None here means every group ran in one.",
    )]


#: the half widths the report plans for, per metric (lg-study plan takes any)
REPORT_TARGETS = {"weight_share": 0.1, "mean_accuracy": 0.05, "success": 0.1}


def planning_section(group_rows: list[dict], threshold: float) -> tuple[list[str], dict[str, str]]:
    """Seed planning from each analysed group's fit, and per group the plan for its weight
    share in words (for the too-few-seeds warning)."""
    from analysis.seed_planning import group_plans

    rows = [row for metric, target in REPORT_TARGETS.items()
            for row in group_plans(group_rows, metric, target, threshold=threshold, at_pilot_data_seeds=True)]
    share_plans = {r["group"]: r["plan"] for r in rows if r["metric"] == "weight_share"}
    return [rendering.table(
        rows,
        [("group", "group"), ("pilot", "these seeds a × b"), ("metric", "estimate"),
         ("target half width", "target ±"), ("pilot half width", "± with these seeds"), ("plan", "seeds for the target")],
        "Seed planning (analysis/seed_planning.py; `lg-study plan` for other targets and lengths): each group's "
        "fit above (grand mean and variance components of the same measure) simulated at candidate designs, "
        "each simulated study given the interval this report prints (the weight share's generalized interval, "
        f"the mean's interval (Wilson at the effective n), the success rate at accuracy ≥ {threshold:g} with Wilson at the "
        "effective N); the plan is the fewest weight seeds, at the group's own number of data seeds, whose "
        "expected (mean) half width meets the target (`lg-study plan` also tries other numbers of data seeds "
        "and finds the design with the fewest trials). The model is normal: for accuracies piled at 0 or 1 "
        "the plan is a guide.",
    )], share_plans


def seeds_section(target: str, rows: list[dict[str, Any]]) -> str:
    """Where each group of a `seeds.until` study stopped, and why."""
    return ("<h2 id='seeds'>Seeds until a precision target</h2>" + rendering.table(
        rows, [(key, key) for key in rows[0]] if rows else [],
        f"The study adds {target}. Per group: its weight seeds, the trials measured, the "
        "estimate, its interval and half width, and whether it stopped because the target "
        "held, because it reached the most seeds, or is still adding seeds "
        "(orchestrator/running/seed_answers.py over the SQL file named).",
    ))
