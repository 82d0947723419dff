"""`lg-study report`: the analysis SQL files run over one study, as one HTML page.

The page holds the key numbers as HTML tables and the plots as PNG files (written
beside it and embedded in it, so the page also stands alone). Every number comes from
one of the analysis/*.sql files; this module only runs them, draws and lays out.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis import error_plots, plots, report_sections
from analysis import report_html as rendering
from analysis.layout import REPORT
from analysis.query import (
    QueryError,
    open_results,
    read_once,
    run_sql_file,
    sql_file,
    sql_parameters,
)
from analysis.report_html import MAX_GROUPS, Figure

SQL_FILES = (
    "status_counts",
    "final_accuracy",
    "variance",
    "lucky_tickets",
    "success",
    "compare",
    "cascade",
    "errors",
    "error_checkpoints",
    "training",
    "failures",
    "coverage",
    "environments",
    "replicates",
)


@dataclass
class Report:
    page: Path
    figures: list[Path] = field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def sql_path(name: str) -> Path:
    return sql_file(f"{name}.sql")


def build_report(
    results_root: Path,
    study: str,
    out_dir: Path | None = None,
    params: dict[str, str] | None = None,
    seeds: tuple[str, list[dict[str, Any]]] | None = None,
    profile: str | None = None,
) -> Report:
    """Run the analysis files over ``study`` and write ``index.html`` plus PNGs to
    ``out_dir`` (default ``<results_root>/<study>/report``). ``seeds``: a `seeds.until`
    study's target in words and where each group stands (orchestrator.store.seed_plan).
    ``results_root`` is the profile's when the study ran under one (analysis.query.
    profile_root); ``profile`` names it on the page.

    ``params`` go to the files that take them (e.g. ``threshold`` to lucky_tickets.sql);
    a parameter no file takes is refused. Raises LookupError for an unknown study and
    QueryError for SQL that DuckDB refuses.
    """
    results_root = Path(results_root)
    out_dir = Path(out_dir) if out_dir is not None else results_root / study / REPORT
    params = params or {}
    with open_results(results_root, study) as con:
        read_once(con)
        texts = {name: sql_path(name).read_text() for name in SQL_FILES}
        taken = {name: set().union(*sql_parameters(con, text)) for name, text in texts.items()}
        unused = sorted(set(params) - set().union(*taken.values()))
        if unused:
            accepted = ", ".join(sorted(set().union(*taken.values())))
            raise QueryError(f"no analysis file takes parameter {', '.join(unused)}; "
                             f"they take: {accepted}")
        tables = {
            name: run_sql_file(
                con, sql_path(name), {k: v for k, v in params.items() if k in taken[name]}
            ).to_pylist()
            for name in SQL_FILES
        }
    out_dir.mkdir(parents=True, exist_ok=True)
    report = Report(page=out_dir / "index.html", tables=tables)
    sections = _sections(tables, out_dir, report)
    if seeds is not None:
        sections.insert(0, report_sections.seeds_section(*seeds))
    report.page.write_text(rendering.page(study, results_root, tables, sections, params, profile))
    return report


# --- the sections ---------------------------------------------------------------------


def _sections(tables: dict[str, list[dict]], out_dir: Path, report: Report) -> list[str]:
    def figure(fig: Figure, draw: Callable[[Path], Path | None], groups: int) -> str:
        path = draw(out_dir / fig.file)
        if path is None:
            return f"<p class='empty'>{html.escape(fig.title)}: nothing to draw.</p>"
        report.figures.append(path)
        left_out = ""
        if groups > MAX_GROUPS:
            left_out = f" Only the first {MAX_GROUPS} of {groups} groups are drawn."
        return rendering.figure_html(path, fig, left_out)

    final = tables["final_accuracy"]
    variance = tables["variance"]
    lucky = tables["lucky_tickets"]
    cascade = tables["cascade"]
    errors = tables["errors"]
    training = tables["training"]
    n_groups = len({r["group_id"] for r in final})
    out: list[str] = []

    # 0. which trials count
    out.append("<h2 id='coverage'>Which trials count</h2>")
    out.append("<p>Every analysis counts the trials that finished: done, or diverged — a "
               "diverged trial keeps what it measured before its loss went non-finite, "
               "since leaving it out would flatter its group. A file leaves out a finished "
               "trial only when the trial lacks the rows the file reads; the table lists "
               "each such trial and why (coverage.sql). Failed and unfinished trials count "
               "nowhere: section 8 lists them, and section 2 the crossed cells they leave "
               "empty. Every estimate comes with its N: trials, seeds or seed pairs.</p>")
    out.append(rendering.table(
        tables["coverage"],
        [("group_label", "group"), ("weight_seed", "weight seed"), ("data_seed", "data seed"),
         ("trial_id", "trial"), ("status", "status"), ("missing", "lacks"),
         ("left_out_of", "left out of"), ("reason", "why")],
        "Finished trials that some analyses leave out (coverage.sql).",
    ))

    # 1. seed variance
    out.append("<h2 id='variance'>1. Accuracy vs test length: seed variance (001 Fig. 10)</h2>")
    out.append(figure(
        Figure("accuracy_by_group.png", "Accuracy vs test length",
               "Exact-match accuracy at each trial's final evaluation, by test length, one "
               "panel per configuration group (trials that differ only by their seeds), N = "
               "trials in the group. Grey: each trial; blue: the group mean with its "
               f"{rendering.level(variance)} interval over seeds (variance.sql: crossed seeds by the "
               "two-way random-effects variance of the mean with Satterthwaite's t; none for one "
               "trial); red dashed: the best-of-N trial (highest mean over all "
               "lengths); green band: training lengths.",
               ("final_accuracy.sql", "variance.sql")),
        lambda p: plots.accuracy_by_group(rendering.first_groups(final), rendering.first_groups(variance), p),
        n_groups,
    ))
    out.append(rendering.table(
        variance,
        [("group_label", "group"), ("digits", "length"), ("in_distribution", "trained"),
         ("n_trials", "N trials"), ("mean", "mean"), ("mean_low", "low"), ("mean_high", "high"),
         ("mean_method", "interval"), ("mean_coverage", "interval's coverage"), ("mean_boot_low", "low (bootstrap)"),
         ("mean_boot_high", "high (bootstrap)"), ("sd", "sd"), ("min", "min"),
         ("median", "median"), ("max", "max"), ("best_of_n", "best of N")],
        f"Per group and test length (variance.sql). Interval of the mean over seeds ({rendering.level(variance)}, "
        "clipped to [0, 1]): for crossed weight × data seeds, mean ± t·√((MS_w + MS_d − MS_e)/(ab)) with "
        "Satterthwaite's degrees of freedom; else a t interval over the seed pairs. Coverage measured by "
        "simulation (docs/analysis.md): 0.95 inside (0, 1), 0.87–0.94 for groups near 1. The percentile "
        "bootstrap over trials, kept for comparison, treats trials as independent and covered only "
        "0.33–0.53 in crossed studies.",
    ))
    out.append(rendering.table(
        final,
        [("group_label", "group"), ("weight_seed", "weight seed"), ("data_seed", "data seed"),
         ("digits", "length"), ("n", "questions"), ("correct", "right"),
         ("accuracy", "accuracy"), ("wilson_low", "low (Wilson)"),
         ("wilson_high", "high (Wilson)")],
        f"Per trial and test length (final_accuracy.sql): accuracy with its {rendering.level(final)} "
        "Wilson interval, the uncertainty from the trial's own test questions.",
        collapsed=True,
    ))

    # 2. lucky tickets
    out.append("<h2 id='lucky'>2. Weight seeds × data seeds: lucky tickets "
               "(001 Fig. 11, F.9)</h2>")
    analysed = [r for r in lucky if r["weight_seed"] is not None]
    skipped = [r for r in lucky if r["weight_seed"] is None]
    if not lucky:
        out.append("<p class='empty'>No configuration group of this study crosses weight "
                   "seeds with data seeds (lucky_tickets.sql needs trials of at least 2 "
                   "weight seeds and 2 data seeds in one group), so there is no weight/data "
                   "decomposition to show.</p>")
    if analysed:
        n_analysed = len({r["group_id"] for r in analysed})
        threshold = analysed[0]["threshold"]
        what = rendering.measured_words(analysed[0])
        out.append(figure(
            Figure("seed_heatmap.png", "Weight × data seed heatmap",
                   f"{what[0].upper()}{what[1:]} of every weight seed × data seed trial of "
                   "each group's largest complete subgrid, one panel per group; * marks a "
                   f"lucky weight seed (its minimum over data orders above {threshold:g}); "
                   "† marks a trial that diverged (it keeps the accuracy it had reached). "
                   "Kendall's W = agreement of the data orders' rankings of the weight "
                   "seeds: 1 = the same ranking everywhere; with no agreement W is about "
                   "1/b (b data orders), not 0, so read it with Friedman's p, the chance of "
                   "that much agreement between random rankings.",
                   ("lucky_tickets.sql",)),
            lambda p: plots.seed_heatmaps(rendering.first_groups(analysed), p),
            n_analysed,
        ))
        first = analysed[0]
        method = (f"{rendering.level([first])} generalized confidence intervals from the mean squares' "
                  "pivots (Weerahandi 1993; Hamada & Weerahandi 2000)")
        out.append(figure(
            Figure("variance_shares.png", "Variance components",
                   f"How much of the variance of the {what} each seed accounts for, as "
                   "random-effects variance components (method of moments for the two-way "
                   "layout without replication: σ²_weight = max(0, (MS_weight − "
                   "MS_residual)/b), σ²_data = max(0, (MS_data − MS_residual)/a), "
                   "σ²_residual = MS_residual), each as a share of their sum; error bars: "
                   f"{method}; black ticks: the fixed-effects shares SS/SS_total of these "
                   "seeds, biased upward with few seeds. One bar triple per group, its "
                   "a × b seeds beside it; n/a where every trial scored the same.",
                   ("lucky_tickets.sql",)),
            lambda p: plots.variance_shares(rendering.first_groups(analysed), p),
            n_analysed,
        ))
        out.append(figure(
            Figure("variance_shares_by_length.png", "Variance components per test length",
                   "The same component shares and intervals at each measured test length "
                   "apart and for their mean (001 F.9 shows 30, 50, 70 and 100 digits "
                   "apart), one panel per group, its a × b seeds in the title.",
                   ("lucky_tickets.sql",)),
            lambda p: plots.variance_shares_by_length(rendering.first_groups(analysed), p),
            n_analysed,
        ))
        group_rows = [rendering.with_intervals(r) for r in {r["group_id"]: r for r in analysed}.values()]
        out.append(rendering.table(
            group_rows,
            [("group_label", "group"), ("n_weight_seeds", "weight seeds a"),
             ("n_data_seeds", "data seeds b"), ("measured_kind", "measured"),
             ("measured_digits", "lengths"), ("grand_mean", "mean acc."),
             ("component_share_weight_ci", "σ² share weight [interval]"),
             ("component_share_data_ci", "σ² share data [interval]"),
             ("component_share_residual_ci", "σ² share residual [interval]"),
             ("sigma2_weight_ci", "σ²_weight [interval]"),
             ("sigma2_data_ci", "σ²_data [interval]"),
             ("sigma2_residual_ci", "σ²_residual [interval]"),
             ("truncated", "set to 0"),
             ("ss_share_weight", "SS share weight"), ("ss_share_data", "SS share data"),
             ("ss_share_residual", "SS share residual"), ("kendall_w", "Kendall's W"),
             ("friedman_chi2", "Friedman χ²"), ("friedman_p", "Friedman p"),
             ("missing_cells", "missing cells"), ("left_out_seeds", "seeds left out"),
             ("component_coverage", "σ² intervals' coverage"), ("share_coverage", "share intervals' coverage")],
            "Per group, over its largest complete subgrid of a × b seeds (lucky_tickets.sql). "
            f"Variance components by the method of moments with {rendering.level([first])} modified "
            "large-sample intervals (σ²_residual: exact χ²; coverage measured by simulation at 3 × 5, "
            f"8 × 8 and 24 × 20 seeds: 0.94–0.96 inside (0, 1), less for groups near accuracy 1, in "
            f"the last columns); share intervals: {method}, with the coverage "
            "measured by simulation at the nearest design in the last column (docs/analysis.md; "
            "the percentile bootstrap over seeds, kept in the file for comparison, covered the "
            "weight share 0.88 of the time at 3 × 5 seeds); 'set to 0': "
            "components whose moment estimate was negative. SS shares: fixed-effects "
            "SS/SS_total. Friedman's χ² = b(a − 1)W with a − 1 degrees of freedom; random "
            "rankings give W ≈ 1/b.",
        ))
        planning, share_plans = report_sections.planning_section(
            group_rows, tables["success"][0]["threshold"] if tables["success"] else 0.9)
        out += [report_sections.too_few_seeds_words(r, share_plans.get(r["group_label"]))
                for r in group_rows if report_sections.too_few_seeds(r)]
        out += planning
        out.append(rendering.table(
            [rendering.with_intervals({"group_label": r["group_label"], **entry})
             for r in group_rows for entry in (r["by_length"] or [])],
            [("group_label", "group"), ("digits", "length"), ("grand_mean", "mean acc."),
             ("component_share_weight_ci", "σ² share weight [interval]"),
             ("component_share_data_ci", "σ² share data [interval]"),
             ("component_share_residual_ci", "σ² share residual [interval]"),
             ("ss_share_weight", "SS share weight"), ("ss_share_data", "SS share data"),
             ("kendall_w", "Kendall's W"), ("friedman_p", "Friedman p")],
            "Per group and test length (lucky_tickets.sql, column by_length; 001 F.9), on "
            "the same seeds.",
            collapsed=True,
        ))
        out.append(rendering.table(
            analysed,
            [("group_label", "group"), ("weight_seed", "weight seed"), ("mean", "mean"),
             ("min", "min"), ("max", "max"), ("lucky", "lucky"), ("threshold", "threshold"),
             ("accuracy_by_data_seed", "by data seed")],
            "Per weight seed, over data orders (lucky_tickets.sql).",
        ))
    if skipped:
        out.append(rendering.table(
            skipped,
            [("group_label", "group"), ("grid_weight_seeds", "weight seeds"),
             ("grid_data_seeds", "data seeds"), ("skipped_reason", "not analysed because"),
             ("missing_cells", "missing cells")],
            "Groups whose trials cross weight and data seeds but that lucky_tickets.sql "
            "could not analyse.",
        ))
    out += report_sections.replicates_section(tables["replicates"])

    # 3. success probability
    success = tables["success"]
    out.append("<h2 id='success'>3. How likely a seed succeeds, and best of N seeds</h2>")
    threshold = success[0]["threshold"] if success else 0.9
    out.append(figure(
        Figure("success.png", "Success probability",
               f"Share of a group's trials whose accuracy reaches {threshold:g} at each test "
               f"length, with its {rendering.level(success)} interval over seeds (Wilson's at the "
               "effective number of seed pairs); each point is labelled successes/trials.",
               ("success.sql",)),
        lambda p: plots.success_probability(rendering.first_groups(success), p),
        n_groups,
    ))
    out.append(rendering.table(
        [rendering.with_intervals(r) for r in success],
        [("group_label", "group"), ("digits", "length"), ("in_distribution", "trained"),
         ("n_trials", "N trials"), ("n_success", "succeed"),
         ("p_success_ci", f"P(acc. ≥ {threshold:g}) [interval]"),
         ("p_success_n_effective", "effective N"), ("p_success_coverage", "interval's coverage"),
         ("seeds_for_a_success", "seeds for a success"),
         ("expected_best_of_1", "E best of 1"), ("expected_best_of_5", "E best of 5"),
         ("expected_best_of_10", "E best of 10")],
        "Per group and test length (success.sql). Seeds for a success: the fewest seeds "
        f"that give at least one success with probability {rendering.level(success)[:-1]} if the "
        "success rate is the interval's lower end (blank: the trials cannot rule out 0). "
        "E best of N: the exact expected maximum accuracy of N trials drawn with "
        "replacement from the group's N trials. The interval is Wilson's at an effective number of "
        "seed pairs (Korn & Graubard 1998): crossed weight × data seeds share their seeds, so N "
        "trials count as fewer, by the two-way random-effects variance of the success rate and "
        "Satterthwaite's degrees of freedom; its coverage measured by simulation at the nearest "
        "design is beside it (docs/analysis.md). With few weight seeds it is wide: that is what "
        "they can say.",
    ))

    # 4. comparisons
    compare = tables["compare"]
    out.append("<h2 id='compare'>4. Comparing configurations</h2>")
    family = compare[0]["holm_comparisons"] if compare else 0
    out.append(rendering.table(
        [rendering.with_intervals(r) for r in compare],
        [("label_a", "group a"), ("label_b", "group b"), ("differs_in", "differs in"),
         ("digits", "length"), ("design", "design"), ("n_a", "N a"), ("n_b", "N b"),
         ("accuracy_diff_ci", "acc. a − b [bootstrap]"),
         ("accuracy_p_perm", "p (permutation)"), ("accuracy_p_holm", "p Holm"),
         ("success_diff_ci", "success a − b [Newcombe]"),
         ("success_p_exact", "p (exact)"), ("success_p_holm", "p Holm")],
        "Pairs of groups whose configs differ in one setting, per test length "
        f"(analysis/compare.sql). Paired on the seed pairs both share when they share at least 2 "
        f"(N = seed pairs), else unpaired. Accuracy: {rendering.level(compare)} percentile bootstrap "
        "of the mean difference and a permutation p; success: Newcombe's score interval and "
        f"an exact p (McNemar paired, Fisher unpaired). Holm's correction over all {family} "
        "comparisons of the table, accuracy and success apart.",
    ))

    # 5. carry cascades
    out.append("<h2 id='cascade'>5. Carry-cascade breakdown (003 Fig. 8a, 8c)</h2>")
    out.append(figure(
        Figure("cascade.png", "Accuracy by carry-cascade length",
               "Exact match by the question's longest carry cascade (003 §4; 0 = no carry), "
               "one line per test length (dashed: longer than trained), at each trial's "
               "last sampled step. Line = mean of the trials' accuracies, error bars = "
               "the interval of that mean over seeds (section 1's, at its level; none for "
               "a single seed pair), dots = each trial. The trials answer the same questions, so pooling their answers "
               "would hide seed-to-seed variation; each trial's own question-level "
               "uncertainty is its Wilson 95 % interval, in the table below.",
               ("cascade.sql",)),
        lambda p: error_plots.cascade_breakdown(rendering.first_groups(cascade), p),
        n_groups,
    ))
    out.append(rendering.table(
        cascade,
        [("group_label", "group"), ("digits", "length"), ("cascade", "cascade"),
         ("n_trials", "trials"), ("accuracy", "mean over trials"),
         ("mean_low", "low (seeds)"), ("mean_high", "high (seeds)"), ("level", "level"),
         ("mean_coverage", "interval's coverage"),
         ("share_of_questions", "share of questions"), ("trial_accuracies", "each trial")],
        "Per group, test length and cascade length (cascade.sql): mean of the trials' "
        "accuracies with its interval over seeds (at `level`) and that interval's measured "
        "coverage.",
        collapsed=True,
    ))
    out.append(rendering.table(
        [{"group_label": r["group_label"], "digits": r["digits"], "cascade": r["cascade"], **t}
         for r in cascade for t in r["trials"]],
        [("group_label", "group"), ("digits", "length"), ("cascade", "cascade"),
         ("weight_seed", "weight seed"), ("data_seed", "data seed"),
         ("questions", "questions"), ("correct", "right"), ("accuracy", "accuracy"),
         ("wilson95_low", "95 % low (questions)"), ("wilson95_high", "95 % high (questions)")],
        "Per trial (cascade.sql, column trials): accuracy with its Wilson 95 % interval, "
        "the uncertainty from the few questions of one trial.",
        collapsed=True,
    ))

    # 6. errors
    checkpoints = tables["error_checkpoints"]
    min_accuracy = errors[0]["min_accuracy"] if errors else 0.05
    out.append("<h2 id='errors'>6. Error anatomy (001 Fig. 9, F.10–F.12)</h2>")
    out.append("<p>Counted in answer <i>digits</i> (places): a place is one digit of the "
               "answer and, with index hints, the hint before it; places are numbered from "
               "the least significant, 0 = units (001's written order). Each quantity is "
               "computed per trial at its last sampled step and then averaged over the "
               "group's trials (001 F.10 averages over runs).</p>")
    out.append(figure(
        Figure("errors_carry.png", "Errors with and without carry, per answer digit",
               "Error rate of the answer digits that have a carry into them and of those "
               "that do not, by test length (001 Fig. 9): every digit of every question, "
               "mean over trials of each trial's rate; a digit not written (the answer "
               "ended early) is wrong; n/a where a length has no digit of that kind.",
               ("errors.sql",)),
        lambda p: error_plots.error_by_carry(rendering.first_groups(errors), p),
        n_groups,
    ))
    out.append(figure(
        Figure("errors_ending.png", "How wrong answers end",
               "Share of the wrong answers that end on time, end early (premature end) or "
               "run on (late end), mean over trials.", ("errors.sql",)),
        lambda p: error_plots.error_endings(rendering.first_groups(errors), p),
        n_groups,
    ))
    out.append(figure(
        Figure("errors_position.png", "Error positions",
               "Where the wrong digits of wrong answers that end on time are: every wrong "
               "place of each answer (not only the first), as a share of the trial's wrong "
               "places, averaged over trials (001 F.10 left).", ("errors.sql",)),
        lambda p: error_plots.error_distribution(
            rendering.first_groups(errors), "error_position", "answer place (0 = units)", p),
        n_groups,
    ))
    out.append(figure(
        Figure("errors_count.png", "Wrong digits per wrong answer",
               "How many answer digits are wrong in a wrong answer that ends on time, as a "
               "share of those answers, averaged over trials; trials whose accuracy at the "
               f"length is below {min_accuracy:g} are left out (001 F.10 right, F.11: "
               "near-zero accuracy runs excluded).", ("errors.sql",)),
        lambda p: error_plots.error_distribution(
            rendering.first_groups(errors), "wrong_digits", "wrong digits per wrong answer", p),
        n_groups,
    ))
    out.append(figure(
        Figure("errors_checkpoints.png", "Error positions per checkpoint",
               "One row per checkpoint (trial and step: weight seed, data seed, @step): the "
               "share of its wrong digits at each answer place, at the group's longest test "
               "length with wrong answers that end on time (001 F.12).",
               ("error_checkpoints.sql",)),
        lambda p: error_plots.error_checkpoints(rendering.first_groups(checkpoints), p),
        n_groups,
    ))
    out.append(rendering.table(
        [r for r in errors if r["facet"] == "carry"],
        [("group_label", "group"), ("digits", "length"), ("bucket", "kind"),
         ("n_trials", "trials"), ("total", "digits"), ("count", "wrong"),
         ("error_rate", "error rate (mean over trials)")],
        "Answer digits with and without a carry into them (errors.sql, facet carry).",
        collapsed=True,
    ))
    out.append(rendering.table(
        [r for r in errors if r["facet"] in ("ending", "wrong_digits")],
        [("group_label", "group"), ("digits", "length"), ("facet", "facet"),
         ("bucket", "bucket"), ("n_trials", "trials"), ("n_excluded", "left out"),
         ("count", "wrong answers"), ("share_of_errors", "share (mean over trials)")],
        "How wrong answers end, and wrong digits per wrong answer that ends on time "
        f"(errors.sql; 'left out': trials below accuracy {min_accuracy:g}).",
        collapsed=True,
    ))

    # 7. training
    out.append("<h2 id='training'>7. Accuracy over training (001 App. F.3, Fig. 6)</h2>")
    threshold = training[0]["grok_threshold"] if training else 0.99
    out.append(figure(
        Figure("training.png", "Accuracy over training steps",
               "Exact match at each evaluation step, one colour per test length and one line "
               "style per trial (seeds in the corner); dotted verticals: the step at which "
               f"the trial's mean in-distribution accuracy first reached {threshold:.0%} "
               "(grokking step).", ("training.sql",)),
        lambda p: plots.training_curves(rendering.first_groups(training), p),
        n_groups,
    ))
    per_trial = list({(r["study"], r["trial_id"]): r for r in training}.values())
    out.append(rendering.table(
        per_trial,
        [("group_label", "group"), ("weight_seed", "weight seed"), ("data_seed", "data seed"),
         ("trial_id", "trial"), ("grok_step", f"first step with in-dist. ≥ {threshold:.0%}"),
         ("in_distribution_accuracy", "final in-dist. acc."),
         ("ood_accuracy", "final OOD acc."), ("loss", "final loss")],
        "Grokking step per trial (training.sql); the last three columns at the final step.",
    ))

    # 8. trials that did not finish: a mean over the others can hide them
    out.append("<h2 id='failures'>8. Failed and diverged trials</h2>")
    out.append(rendering.table(
        tables["failures"],
        [("trial_id", "trial"), ("status", "status"), ("task", "task"), ("pe", "pe"),
         ("weight_seed", "weight seed"), ("data_seed", "data seed"), ("error", "error")],
        "Trials whose status is failed or diverged (failures.sql), with their error; "
        "`lg-study trial STUDY.yaml --trial ID` trains one again in this process, printing "
        "its loss and accuracies as it goes (no Ray, no MLflow).",
    ))

    out += report_sections.environments_section(tables["environments"])
    return out


# --- HTML -------------------------------------------------------------------------------
