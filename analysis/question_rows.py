"""Rows and words the question records (analysis/questions.py) compute from the SQL
files' tables: which rows a table or figure shows, and thresholds and levels its caption
names."""

from __future__ import annotations

import html

from analysis import report_html as rendering
from analysis import report_sections
from analysis.report_parts import Tables


def rows(name: str):
    return lambda tables: tables[name]


def with_intervals(name: str):
    """The file's rows with their intervals as "estimate [low, high]" cells."""
    return lambda tables: [rendering.with_intervals(r) for r in tables[name]]


def first(tables: Tables, name: str) -> list[dict]:
    return rendering.first_groups(tables[name])


# --- lucky tickets: the analysed groups, and those lucky_tickets.sql could not analyse ---


def lucky_analysed(tables: Tables) -> list[dict]:
    return [r for r in tables["lucky_tickets"] if r["weight_seed"] is not None]


def lucky_skipped(tables: Tables) -> list[dict]:
    return [r for r in tables["lucky_tickets"] if r["weight_seed"] is None]


def lucky_groups(tables: Tables) -> int:
    return len({r["group_id"] for r in lucky_analysed(tables)})


def lucky_group_rows(tables: Tables) -> list[dict]:
    """One row per analysed group, with its intervals as text cells."""
    by_group = {r["group_id"]: r for r in lucky_analysed(tables)}
    return [rendering.with_intervals(r) for r in by_group.values()]


def lucky_by_length(tables: Tables) -> list[dict]:
    return [rendering.with_intervals({"group_label": r["group_label"], **entry})
            for r in lucky_group_rows(tables) for entry in (r["by_length"] or [])]


def measured(tables: Tables) -> str:
    return rendering.measured_words(lucky_analysed(tables)[0])


def share_method(tables: Tables) -> str:
    return (f"{rendering.level(lucky_analysed(tables)[:1])} generalized confidence intervals from "
            "the mean squares' pivots (Weerahandi 1993; Hamada & Weerahandi 2000)")


def success_threshold(tables: Tables) -> float:
    return tables["success"][0]["threshold"] if tables["success"] else 0.9


def profile_coverage(tables: Tables) -> str:
    """The measured coverages of profiles.sql's intervals, each once, e.g. 'measured
    0.96-0.97 at 8 x 8 seeds'."""
    found = list(dict.fromkeys(r["share_coverage"] for r in tables["profiles"]))
    return "; ".join(found) if found else "none drawn"


def seed_planning(tables: Tables) -> list[str]:
    """The words for groups with too few seeds, then seed planning's table."""
    group_rows = lucky_group_rows(tables)
    planning, share_plans = report_sections.planning_section(group_rows, success_threshold(tables))
    warnings = [report_sections.too_few_seeds_words(r, share_plans.get(r["group_label"]))
                for r in group_rows if report_sections.too_few_seeds(r)]
    return warnings + planning


def lacking(name: str, keep, words: str):
    """The caption's words for the groups with finished trials that have no row of ``name``
    that ``keep`` accepts, e.g. ' No panel for rope: no wrong answer ends on time.' (none
    when every group has one, or when the figure draws only the first groups anyway)."""
    def said(tables: Tables) -> str:
        every = list(dict.fromkeys(r["group_label"] for r in tables["final_accuracy"]))
        present = {r["group_label"] for r in tables[name] if keep(r)}
        missing = [label for label in every if label not in present]
        if not missing or len(every) > rendering.MAX_GROUPS:
            return ""
        return f" No panel for {', '.join(missing)}: {words}."
    return said


# --- errors, training -----------------------------------------------------------------


def min_accuracy(tables: Tables) -> float:
    return tables["errors"][0]["min_accuracy"] if tables["errors"] else 0.05


def grok_threshold(tables: Tables) -> float:
    return tables["training"][0]["grok_threshold"] if tables["training"] else 0.99


def errors_facet(*facets: str):
    return lambda tables: [r for r in tables["errors"] if r["facet"] in facets]


def error_distribution(column: str, label: str):
    return lambda tables: (first(tables, "errors"), column, label)


def cascade_trials(tables: Tables) -> list[dict]:
    return [rendering.with_intervals({"group_label": r["group_label"], "digits": r["digits"],
                                      "cascade": r["cascade"], **t})
            for r in tables["cascade"] for t in r["trials"]]


def training_trials(tables: Tables) -> list[dict]:
    return list({(r["study"], r["trial_id"]): r for r in tables["training"]}.values())


def chosen_checkpoints(tables: Tables) -> list[dict]:
    """The per-trial rows at a checkpoint chosen on long lengths (eval.select best_long_loss)."""
    return [r for r in tables["final_accuracy"] if r["checkpoint"] != "final"]


def chosen_checkpoints_words(tables: Tables) -> str:
    trials = len({(r["study"], r["trial_id"]) for r in chosen_checkpoints(tables)})
    return (f"<p class='warning'>{trials} trials report the checkpoint with the lowest loss on their "
            "long-length validation set (eval.select best_long_loss, as Cho et al. 2024 report), not "
            "their last step: every number of theirs on this page is at that checkpoint, chosen on long "
            "lengths. The per-trial table below shows the last step's accuracy beside it.</p>")



# --- comparisons: what holds beyond seed luck, in words ---


def _comparison(row: dict) -> str:
    return (f"<b>{html.escape(row['label_a'])}</b> vs <b>{html.escape(row['label_b'])}</b> at "
            f"{row['digits']} digits")


def comparison_words(tables: Tables) -> str:
    """Section 4's opening paragraph: which comparisons hold beyond seed luck, which the
    seeds are too few to decide, and the designs whose intervals covered less than 0.93
    in simulation."""
    rows = tables["compare"]
    if not rows:
        return "<p class='empty'>No two groups of this study differ in one setting.</p>"
    held = [f"{_comparison(r)} (a − b = {r['accuracy_diff']:+.3f} "
            f"[{r['accuracy_diff_low']:+.3f}, {r['accuracy_diff_high']:+.3f}])"
            for r in rows if r["verdict"].endswith("beyond seed luck")]
    undecided = [_comparison(r) for r in rows if r["verdict"].startswith("too few seeds to decide")]
    uncompared = [_comparison(r) for r in rows if r["verdict"].startswith("too few seeds to compare")]
    warned = sorted({r["coverage"] for r in rows if r["warning"]})
    level = rendering.level(rows)
    listed = ": " + "; ".join(held) if held else ""
    parts = [(f"<p>Of {len(rows)} comparisons, {len(held)} hold beyond seed luck (Holm-corrected, "
              f"at {level}){listed}. ")]
    if undecided:
        parts.append(f"The seeds are too few to decide {len(undecided)}: their intervals allow a "
                     f"difference of 0.1 either way ({'; '.join(undecided)}). ")
    if uncompared:
        parts.append(f"{len(uncompared)} cannot be compared: a group has fewer than 3 seeds of the kind "
                     f"it varies and no crossed 2 × 2 grid, which can show nothing beyond seed luck "
                     f"({'; '.join(uncompared)}). ")
    rest = len(rows) - len(held) - len(undecided) - len(uncompared)
    if rest:
        parts.append(f"The other {rest} show no difference beyond seed luck, and their intervals "
                     "bound how large one could be. ")
    if warned:
        parts.append("<b>Warning</b>: at this design the intervals covered less than 0.93 in "
                     f"simulation ({html.escape('; '.join(warned))}).")
    return "".join(parts) + "</p>"
