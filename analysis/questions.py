"""The questions `lg-study report` answers, in page order: each one record naming the
SQL files it runs, the rows each file reads, and what the page shows (tables with
their columns and captions, figures, prose). Adding a question is one SQL file plus one
record here (and its section in docs/analysis.md and a test of the file's numbers).

Everything the page derives from the list: the files the report runs
(`report_files`), the table of contents, and coverage.sql's "left out of" lists
(`reads_table`, which analysis.query registers on every connection).
"""

from __future__ import annotations

from analysis import question_rows as q
from analysis import report_html as rendering
from analysis import report_sections
from analysis.report_parts import Computed, Plot, Prose, Question, SqlFile, Table

#: the kinds of rows a file reads (coverage.sql's `missing`), with what of the file still
#: counts a trial that lacks them ('' when nothing does)
ACCURACIES = ("accuracies", "")
SAMPLES = ("samples", "")

COVERAGE = Question(
    "coverage", "Which trials count", (SqlFile("coverage"),), nav="which trials count", parts=(
        Prose("<p>Every analysis counts the trials that finished: done, or diverged — a "
              "diverged trial keeps what it measured before its loss went non-finite, "
              "since leaving it out would flatter its group. A file leaves out a finished "
              "trial only when the trial lacks the rows the file reads; the table lists "
              "each such trial and why (coverage.sql). Failed and unfinished trials count "
              "nowhere: section 8 lists them, and section 2 the crossed cells they leave "
              "empty. Every estimate comes with its N: trials, seeds or seed pairs.</p>"),
        Table(q.rows("coverage"),
              (("group_label", "group"), ("weight_seed", "weight seed"), ("data_seed", "data seed"),
               ("trial_id", "trial"), ("status", "status"), ("missing", "lacks"),
               ("left_out_of", "left out of"), ("reason", "why")),
              "Finished trials that some analyses leave out (coverage.sql)."),
    ))

VARIANCE = Question(
    "variance", "1. Accuracy vs test length: seed variance (001 Fig. 10)",
    (SqlFile("final_accuracy", (ACCURACIES,)), SqlFile("variance", (ACCURACIES,))),
    nav="seed variance", parts=(
        Plot("accuracy_by_group.png", "Accuracy vs test length",
             lambda t: "Exact-match accuracy at each trial's final evaluation, by test length, one "
             "panel per configuration group (trials that differ only by their seeds), N = "
             "trials in the group. Grey: each trial; blue: the group mean with its "
             f"{rendering.level(t['variance'])} interval over seeds (variance.sql: crossed seeds by the "
             "two-way random-effects variance of the mean, a component at 0 dropped, Wilson at the effective n; none for one "
             "trial); red dashed: the best-of-N trial (highest mean over all "
             "lengths); green band: training lengths.",
             ("final_accuracy.sql", "variance.sql"), "plots.accuracy_by_group",
             lambda t: (q.first(t, "final_accuracy"), q.first(t, "variance"))),
        Table(q.with_intervals("variance"),
              (("group_label", "group"), ("digits", "length"), ("in_distribution", "trained"),
               ("n_trials", "N trials"), ("mean_ci", "mean [interval]"),
               ("mean_coverage", "interval's coverage"), ("sd", "sd"), ("best_of_n", "best of N")),
              lambda t: f"Per group and test length (variance.sql). Interval of the mean over seeds "
              f"({rendering.level(t['variance'])}, "
              "Wilson's at the effective number of seed pairs m(1 − m)/V with t_ν): for crossed weight × data seeds V "
              "the two-way random-effects variance of the mean, a component whose estimate is not positive "
              "dropped (docs/analysis.md); else over the seed pairs. Coverage measured by simulation at the "
              "nearest design is beside each interval. The percentile "
              "bootstrap over trials, which covered only 0.33–0.53 in crossed studies, is in the appendix. "
              "Test-noise sd: what a finite test set alone makes the trials differ by, √ of the mean over the "
              "group's trials of p(1 − p)/(n − 1) for n questions, and its share of sd² (under 'all columns').",
              more=(("mean_method", "interval"), ("min", "min"), ("median", "median"), ("max", "max"),
                    ("test_noise_sd", "test-noise sd"), ("test_noise_share", "test-noise share of sd²"))),
        Prose(q.chosen_checkpoints_words, when=q.chosen_checkpoints),
        Table(q.with_intervals("final_accuracy"),
              (("group_label", "group"), ("weight_seed", "weight seed"), ("data_seed", "data seed"),
               ("digits", "length"), ("n", "questions"), ("correct", "right"),
               ("accuracy_wilson_ci", "accuracy [Wilson]"), ("checkpoint", "checkpoint"), ("step", "step"),
               ("last_step", "last step"), ("last_step_accuracy", "accuracy at the last step")),
              lambda t: "Per trial and test length (final_accuracy.sql): accuracy with its "
              f"{rendering.level(t['final_accuracy'])} "
              "Wilson interval, the uncertainty from the trial's own test questions.",
              collapsed=True),
    ))

GRID = Question(
    "grid", "1b. Pairs of operand lengths (McLeish et al. 2024, Fig. 1)", (SqlFile("grid"),),
    nav="operand-length pairs", parts=(
        Prose("<p class='empty'>No trial of this study was tested on a grid of operand lengths "
              "(eval.grid: the first operand's lengths by the second's).</p>", when=lambda t: not t["grid"]),
        Plot("grid.png", "Accuracy over pairs of operand lengths",
             "Exact match on the questions of every cell of eval.grid (the first operand's digits down, "
             "the second's across; eval.grid_samples questions per cell, the same for every trial), at "
             "each trial's final evaluation, mean over the group's trials; outlined: both lengths inside "
             "the training range (McLeish et al. 2024 draw this grid to 100 x 100 digits).",
             ("grid.sql",), "plots.grid_heatmaps", lambda t: (q.first(t, "grid"),), when=lambda t: bool(t["grid"]),
             lacking=q.lacking("grid", lambda r: True, "their trials were not tested on eval.grid")),
        Table(q.rows("grid"),
              (("group_label", "group"), ("first_digits", "first operand"), ("second_digits", "second operand"),
               ("in_distribution", "trained"), ("n_trials", "trials"), ("questions", "questions"),
               ("mean_accuracy", "mean"), ("min_accuracy", "min"), ("max_accuracy", "max")),
              "Per group and cell of eval.grid (grid.sql): exact match, mean over trials, with its range.",
              collapsed=True, when=lambda t: bool(t["grid"])),
    ))

LUCKY_TICKETS = Question(
    "lucky", "2. Weight seeds × data seeds: lucky tickets (001 Fig. 11, F.9)",
    (SqlFile("lucky_tickets", (ACCURACIES,)), SqlFile("replicates", (ACCURACIES,))),
    nav="lucky tickets", parts=(
        Prose("<p class='empty'>No configuration group of this study crosses weight "
              "seeds with data seeds (lucky_tickets.sql needs trials of at least 2 "
              "weight seeds and 2 data seeds in one group), so there is no weight/data "
              "decomposition to show.</p>", when=lambda t: not t["lucky_tickets"]),
        Plot("seed_heatmap.png", "Weight × data seed heatmap",
             lambda t: f"{q.measured(t)[0].upper()}{q.measured(t)[1:]} of every weight seed × data seed "
             "trial of each group's largest complete subgrid, one panel per group; * marks a "
             "lucky weight seed (its minimum over data orders above "
             f"{q.lucky_analysed(t)[0]['threshold']:g}); "
             "† marks a trial that diverged (it keeps the accuracy it had reached). "
             "Kendall's W = agreement of the data orders' rankings of the weight "
             "seeds: 1 = the same ranking everywhere; with no agreement W is about "
             "1/b (b data orders), not 0, so read it with Friedman's p, the chance of "
             "that much agreement between random rankings.",
             ("lucky_tickets.sql",), "plots.seed_heatmaps",
             lambda t: (rendering.first_groups(q.lucky_analysed(t)),), q.lucky_groups,
             when=q.lucky_analysed),
        Plot("variance_shares.png", "Variance components",
             lambda t: f"How much of the variance of the {q.measured(t)} each seed accounts for, as "
             "random-effects variance components (method of moments for the two-way "
             "layout without replication: σ²_weight = max(0, (MS_weight − "
             "MS_residual)/b), σ²_data = max(0, (MS_data − MS_residual)/a), "
             "σ²_residual = MS_residual), each as a share of their sum; error bars: "
             f"{q.share_method(t)}; black ticks: the fixed-effects shares SS/SS_total of these "
             "seeds, biased upward with few seeds. One bar triple per group, its "
             "a × b seeds beside it; n/a where every trial scored the same.",
             ("lucky_tickets.sql",), "plots.variance_shares",
             lambda t: (rendering.first_groups(q.lucky_analysed(t)),), q.lucky_groups,
             when=q.lucky_analysed),
        Plot("variance_shares_by_length.png", "Variance components per test length",
             "The same component shares and intervals at each measured test length "
             "apart and for their mean (001 F.9 shows 30, 50, 70 and 100 digits "
             "apart), one panel per group, its a × b seeds in the title.",
             ("lucky_tickets.sql",), "plots.variance_shares_by_length",
             lambda t: (rendering.first_groups(q.lucky_analysed(t)),), q.lucky_groups,
             when=q.lucky_analysed),
        Table(q.lucky_group_rows,
              (("group_label", "group"), ("n_weight_seeds", "weight seeds a"),
               ("n_data_seeds", "data seeds b"), ("measured_kind", "measured"),
               ("measured_digits", "lengths"), ("grand_mean", "mean acc."),
               ("component_share_weight_ci", "σ² share weight [interval]"),
               ("component_share_data_ci", "σ² share data [interval]"),
               ("component_share_residual_ci", "σ² share residual [interval]"),
               ("share_coverage", "share intervals' coverage"), ("kendall_w", "Kendall's W"),
               ("friedman_p", "Friedman p")),
              lambda t: "Per group, over its largest complete subgrid of a × b seeds (lucky_tickets.sql). "
              f"Variance components by the method of moments with {rendering.level(q.lucky_analysed(t)[:1])} "
              "modified large-sample intervals (σ²_residual: exact χ²; coverage measured by simulation at "
              "3 × 5, 8 × 8 and 24 × 20 seeds: 0.94–0.96 inside (0, 1), less for groups near accuracy 1, "
              f"beside them under 'all columns'); share intervals: {q.share_method(t)}, with the coverage "
              "measured by simulation at the nearest design beside them (docs/analysis.md; "
              "the percentile bootstrap over seeds, kept in the file for comparison, covered the "
              "weight share 0.88 of the time at 3 × 5 seeds); 'set to 0': "
              "components whose moment estimate was negative. SS shares: fixed-effects "
              "SS/SS_total. Friedman's χ² = b(a − 1)W with a − 1 degrees of freedom; random "
              "rankings give W ≈ 1/b. σ²_test noise: the part of σ²_residual that the finite test sets make "
              "(the mean over cells of p(1 − p)/n), with its share of σ²_residual: a lucky seed whose residual "
              "is mostly test noise is luck of the questions.",
              more=(("sigma2_weight_ci", "σ²_weight [interval]"),
               ("sigma2_data_ci", "σ²_data [interval]"),
               ("sigma2_residual_ci", "σ²_residual [interval]"),
               ("sigma2_test_noise_ci", "σ²_test noise"),
               ("test_noise_share_of_residual", "test noise share of σ²_residual"),
               ("truncated", "set to 0"), ("component_coverage", "σ² intervals' coverage"),
               ("ss_share_weight", "SS share weight"), ("ss_share_data", "SS share data"),
               ("ss_share_residual", "SS share residual"), ("friedman_chi2", "Friedman χ²"),
               ("missing_cells", "missing cells"), ("left_out_seeds", "seeds left out")),
              when=q.lucky_analysed),
        Computed(q.seed_planning, when=q.lucky_analysed),
        Table(q.lucky_by_length,
              (("group_label", "group"), ("digits", "length"), ("grand_mean", "mean acc."),
               ("component_share_weight_ci", "σ² share weight [interval]"),
               ("component_share_data_ci", "σ² share data [interval]"),
               ("component_share_residual_ci", "σ² share residual [interval]"),
               ("ss_share_weight", "SS share weight"), ("ss_share_data", "SS share data"),
               ("kendall_w", "Kendall's W"), ("friedman_p", "Friedman p")),
              "Per group and test length (lucky_tickets.sql, column by_length; 001 F.9), on "
              "the same seeds.", collapsed=True, when=q.lucky_analysed),
        Table(q.lucky_analysed,
              (("group_label", "group"), ("weight_seed", "weight seed"), ("mean", "mean"),
               ("min", "min"), ("max", "max"), ("lucky", "lucky"), ("threshold", "threshold"),
               ("accuracy_by_data_seed", "by data seed")),
              "Per weight seed, over data orders (lucky_tickets.sql).", when=q.lucky_analysed),
        Table(q.lucky_skipped,
              (("group_label", "group"), ("grid_weight_seeds", "weight seeds"),
               ("grid_data_seeds", "data seeds"), ("skipped_reason", "not analysed because"),
               ("missing_cells", "missing cells")),
              "Groups whose trials cross weight and data seeds but that lucky_tickets.sql "
              "could not analyse.", when=q.lucky_skipped),
        Computed(lambda t: report_sections.replicates_section(t["replicates"])),
    ))

SUCCESS = Question(
    "success", "3. How likely a seed succeeds, and best of N seeds", (SqlFile("success", (ACCURACIES,)),),
    nav="success and best of N", parts=(
        Plot("success.png", "Success probability",
             lambda t: f"Share of a group's trials whose accuracy reaches {q.success_threshold(t):g} at each "
             f"test length, with its {rendering.level(t['success'])} interval over seeds (Wilson's at the "
             "effective number of seed pairs); each point is labelled successes/trials.",
             ("success.sql",), "plots.success_probability", lambda t: (q.first(t, "success"),)),
        Table(lambda t: [rendering.with_intervals(r) for r in t["success"]],
              lambda t: (("group_label", "group"), ("digits", "length"), ("in_distribution", "trained"),
                         ("n_trials", "N trials"), ("n_success", "succeed"),
                         ("p_success_ci", f"P(acc. ≥ {q.success_threshold(t):g}) [interval]"),
                         ("p_success_n_effective", "effective N"),
                         ("p_success_coverage", "interval's coverage"),
                         ("seeds_for_a_success", "seeds for a success"),
                         ("expected_best_of_5", "E best of 5")),
              lambda t: "Per group and test length (success.sql). Seeds for a success: the fewest seeds "
              f"that give at least one success with probability {rendering.level(t['success'])[:-1]} if the "
              "success rate is the interval's lower end (blank: the trials cannot rule out 0). "
              "E best of N: the exact expected maximum accuracy of N trials drawn with "
              "replacement from the group's N trials. The interval is Wilson's at an effective number of "
              "seed pairs (Korn & Graubard 1998): crossed weight × data seeds share their seeds, so N "
              "trials count as fewer, by the two-way random-effects variance of the success rate and "
              "its degrees of freedom (docs/analysis.md); its coverage measured by simulation at the nearest "
              "design is beside it (docs/analysis.md). With few weight seeds it is wide: that is what "
              "they can say.",
              more=(("expected_best_of_1", "E best of 1"), ("expected_best_of_10", "E best of 10"))),
    ))

COMPARE = Question(
    "compare", "4. Comparing configurations",
    (SqlFile("profiles", (ACCURACIES,)), SqlFile("compare", (ACCURACIES,))),
    nav="comparisons", parts=(
        Prose(q.comparison_words),
        Plot("profiles.png", "Performance profiles",
             lambda t: "Per test length (outside the training range first), each group's share of seed "
             "pairs whose accuracy reaches τ, for τ from 0 to 1 (a performance profile: Agarwal et al. "
             "2021, rliable); the unit is the seed pair (weight and data seed; with replicates, the share "
             "of its trials). Band: the share's "
             f"{rendering.level(t['profiles'])} interval over seeds, success.sql's at every τ (Wilson's "
             "at the effective number of seed pairs of the crossed two-way variance); dotted: the success "
             f"threshold {q.success_threshold(t):g}, where the line is section 3's P(success) when each seed "
             "pair is one trial. The interval's coverage, measured by simulation for success.sql at the "
             f"nearest design (docs/analysis.md): {q.profile_coverage(t)}.",
             ("profiles.sql",), "profile_plots.performance_profiles", lambda t: (q.first(t, "profiles"),)),
        Table(lambda t: [rendering.with_intervals(r) for r in t["compare"]],
              (("label_a", "group a"), ("label_b", "group b"),
               ("digits", "length"), ("design", "design"), ("n_a", "N a"), ("n_b", "N b"),
               ("accuracy_diff_ci", "acc. a − b [interval]"), ("accuracy_p_holm", "p Holm"),
               ("success_diff_ci", "success a − b [interval]"), ("success_p_holm", "p Holm "),
               ("p_improvement_ci", "P(a > b) [interval]"), ("verdict", "verdict")),
              lambda t: "Pairs of groups whose configs differ in one setting, per test length "
              "(analysis/sql/questions/compare.sql; N = seed pairs). The unit is the seed: seed pairs "
              "that share a weight or a data seed share its luck. Paired (both groups on the same seed "
              "pairs): the interval of the mean per-seed difference from the crossed weight × data "
              "variance of the differences, t on its degrees of freedom; otherwise each group's crossed "
              "variance of its mean, combined (Welch). Success: Newcombe's interval from the two groups' "
              f"success intervals over seeds. Intervals at {rendering.level(t['compare'])}; Holm's "
              f"correction over all {t['compare'][0]['holm_comparisons'] if t['compare'] else 0} "
              "comparisons of the table, accuracy and success apart. P(a > b): the share of seed pairs "
              "on which a scores above b (paired), or of runs of a and b that share no seed. Coverage "
              "measured by simulation at the nearest design in the last column (docs/analysis.md).",
              more=(("differs_in", "differs in"), ("accuracy_p", "p"), ("accuracy_df", "df"),
                    ("success_p", "p (success)"), ("coverage", "intervals' coverage"),
                    ("warning", "warning"))),
    ))

CASCADE = Question(
    "cascade", "5. Carry-cascade breakdown (003 Fig. 8a, 8c)", (SqlFile("cascade", (SAMPLES,)),),
    nav="carry cascades", parts=(
        Plot("cascade.png", "Accuracy by carry-cascade length",
             "Exact match by the question's longest carry cascade (003 §4; 0 = no carry), "
             "one line per test length (dashed: longer than trained), at each trial's "
             "last sampled step. Line = mean of the trials' accuracies, error bars = "
             "the interval of that mean over seeds (section 1's, at its level; none for "
             "a single seed pair), dots = each trial. The trials answer the same questions, so "
             "pooling their answers would hide seed-to-seed variation; each trial's own "
             "question-level uncertainty is its Wilson 95 % interval, in the table below.",
             ("cascade.sql",), "error_plots.cascade_breakdown", lambda t: (q.first(t, "cascade"),),
             lacking=q.lacking("cascade", lambda r: True, "no sampled answers")),
        Table(q.with_intervals("cascade"),
              (("group_label", "group"), ("digits", "length"), ("cascade", "cascade"),
               ("n_trials", "trials"), ("accuracy_seeds_ci", "mean over trials [seeds]"), ("level", "level"),
               ("mean_coverage", "interval's coverage"),
               ("share_of_questions", "share of questions"), ("trial_accuracies", "each trial")),
              "Per group, test length and cascade length (cascade.sql): mean of the trials' "
              "accuracies with its interval over seeds (at `level`) and that interval's measured "
              "coverage.", collapsed=True),
        Table(q.cascade_trials,
              (("group_label", "group"), ("digits", "length"), ("cascade", "cascade"),
               ("weight_seed", "weight seed"), ("data_seed", "data seed"),
               ("questions", "questions"), ("correct", "right"),
               ("wilson95_ci", "accuracy [95 % Wilson, questions]")),
              "Per trial (cascade.sql, column trials): accuracy with its Wilson 95 % interval, "
              "the uncertainty from the few questions of one trial.", collapsed=True),
    ))

ERRORS = Question(
    "errors", "6. Error anatomy (001 Fig. 9, F.10–F.12)",
    (SqlFile("errors", (SAMPLES, ("per-place samples", "but its ending facet"))),
     SqlFile("error_checkpoints", (SAMPLES, ("per-place samples", "")))),
    nav="errors", parts=(
        Prose("<p>Counted in answer <i>digits</i> (places): a place is one digit of the "
              "answer and, with index hints, the hint before it; places are numbered from "
              "the least significant, 0 = units (001's written order). Each quantity is "
              "computed per trial at its last sampled step and then averaged over the "
              "group's trials (001 F.10 averages over runs).</p>"),
        Plot("errors_carry.png", "Errors with and without carry, per answer digit",
             "Error rate of the answer digits that have a carry into them and of those "
             "that do not, by test length (001 Fig. 9): every digit of every question, "
             "mean over trials of each trial's rate; a digit not written (the answer "
             "ended early) is wrong; n/a where a length has no digit of that kind.",
             ("errors.sql",), "error_plots.error_by_carry", lambda t: (q.first(t, "errors"),),
             lacking=q.lacking("errors", lambda r: r["facet"] == "carry" and r["count"],
                               "none of their sampled answer digits is wrong")),
        Plot("errors_ending.png", "How wrong answers end",
             "Share of the wrong answers that end on time, end early (premature end) or "
             "run on (late end), mean over trials.",
             ("errors.sql",), "error_plots.error_endings", lambda t: (q.first(t, "errors"),),
             lacking=q.lacking("errors", lambda r: r["facet"] == "ending", "no sampled answer is wrong")),
        Plot("errors_position.png", "Error positions",
             "Where the wrong digits of wrong answers that end on time are: every wrong "
             "place of each answer (not only the first), as a share of the trial's wrong "
             "places, averaged over trials (001 F.10 left).",
             ("errors.sql",), "error_plots.error_distribution",
             q.error_distribution("error_position", "answer place (0 = units)"),
             lacking=q.lacking("errors", lambda r: r["facet"] == "error_position" and r["bucket_value"] is not None,
                               "no wrong answer of theirs ends on time")),
        Plot("errors_count.png", "Wrong digits per wrong answer",
             lambda t: "How many answer digits are wrong in a wrong answer that ends on time, as a "
             "share of those answers, averaged over trials; trials whose accuracy at the "
             f"length is below {q.min_accuracy(t):g} are left out (001 F.10 right, F.11: "
             "near-zero accuracy runs excluded).",
             ("errors.sql",), "error_plots.error_distribution",
             q.error_distribution("wrong_digits", "wrong digits per wrong answer"),
             lacking=q.lacking("errors", lambda r: r["facet"] == "wrong_digits" and r["bucket_value"] is not None,
                               "no wrong answer of theirs ends on time at a length they pass the accuracy bar")),
        Plot("errors_checkpoints.png", "Error positions per checkpoint",
             "One row per checkpoint (trial and step: weight seed, data seed, @step): the "
             "share of its wrong digits at each answer place, at the group's longest test "
             "length with wrong answers that end on time (001 F.12).",
             ("error_checkpoints.sql",), "error_plots.error_checkpoints",
             lambda t: (q.first(t, "error_checkpoints"),),
             lacking=q.lacking("error_checkpoints", lambda r: True, "no wrong answer of theirs ends on time")),
        Table(q.errors_facet("carry"),
              (("group_label", "group"), ("digits", "length"), ("bucket", "kind"),
               ("n_trials", "trials"), ("total", "digits"), ("count", "wrong"),
               ("error_rate", "error rate (mean over trials)")),
              "Answer digits with and without a carry into them (errors.sql, facet carry).",
              collapsed=True),
        Table(q.errors_facet("ending", "wrong_digits"),
              (("group_label", "group"), ("digits", "length"), ("facet", "facet"),
               ("bucket", "bucket"), ("n_trials", "trials"), ("n_excluded", "left out"),
               ("count", "wrong answers"), ("share_of_errors", "share (mean over trials)")),
              lambda t: "How wrong answers end, and wrong digits per wrong answer that ends on time "
              f"(errors.sql; 'left out': trials below accuracy {q.min_accuracy(t):g}).",
              collapsed=True),
    ))

TRAINING = Question(
    "training", "7. Accuracy over training (001 App. F.3, Fig. 6)", (SqlFile("training", (ACCURACIES,)),),
    nav="training", parts=(
        Plot("training.png", "Accuracy over training steps",
             lambda t: "Exact match at each evaluation step, one colour per test length and one line "
             "style per trial (seeds in the corner); dotted verticals: the step at which "
             f"the trial's mean in-distribution accuracy first reached {q.grok_threshold(t):.0%} "
             "(grokking step).", ("training.sql",), "plots.training_curves",
             lambda t: (q.first(t, "training"),)),
        Table(q.training_trials,
              lambda t: (("group_label", "group"), ("weight_seed", "weight seed"),
                         ("data_seed", "data seed"), ("trial_id", "trial"),
                         ("grok_step", f"first step with in-dist. ≥ {q.grok_threshold(t):.0%}"),
                         ("in_distribution_accuracy", "final in-dist. acc."),
                         ("ood_accuracy", "final OOD acc."), ("loss", "final loss")),
              "Grokking step per trial (training.sql); the last three columns at the final step."),
    ))

# trials that did not finish: a mean over the others can hide them
FAILURES = Question(
    "failures", "8. Failed and diverged trials", (SqlFile("failures"),),
    nav="failed and diverged trials", parts=(
        Table(q.rows("failures"),
              (("trial_id", "trial"), ("status", "status"), ("task", "task"), ("pe", "pe"),
               ("weight_seed", "weight seed"), ("data_seed", "data seed"), ("error", "error")),
              "Trials whose status is failed or diverged (failures.sql), with their error; "
              "`lg-study trial STUDY.yaml --trial ID` trains one again in this process, printing "
              "its loss and accuracies as it goes (no Ray, no MLflow)."),
    ))

# a group whose seeds ran on two machines mixes floating-point chaos into its seed variance
ENVIRONMENTS = Question(
    "environments", "9. Where the trials ran", (SqlFile("environments"),), parts=(
        Table(q.rows("environments"),
              (("group_label", "group"), ("environment", "environment"),
               ("science_versions", "science versions"), ("trials", "trials"),
               ("trial_ids", "trials' ids")),
              "Configuration groups whose finished trials ran in more than one numerical environment "
              "(CPU or GPU model, instruction set, torch, CUDA or numpy build, threads; environments.sql): "
              "training is chaotic across machines, so their seed variance includes floating-point "
              "differences. None here means every group ran in one."),
    ))

# intervals whose coverage is poor or unmeasured: kept for comparison, out of the main tables
APPENDIX = Question(
    "appendix", "Appendix: intervals of poor or unmeasured coverage", (), nav="appendix", parts=(
        Table(q.with_intervals("variance"),
              (("group_label", "group"), ("digits", "length"), ("n_trials", "N trials"),
               ("mean_boot_ci", "mean [percentile bootstrap over trials]")),
              lambda t: f"variance.sql's percentile bootstrap of the mean ({rendering.level(t['variance'])}, "
              f"{rendering.resamples(t['variance'])} resamples of the trials): it treats the trials as "
              "independent, and in crossed weight × data seed studies it covered the mean only 0.33–0.53 "
              "of the time (docs/analysis.md, coverage of the mean). Section 1's interval covers 0.95.",
              collapsed=True),
    ))

#: the trials per status, for the page's header
STATUS_COUNTS = Question("status", None, (SqlFile("status_counts"),))

QUESTIONS: tuple[Question, ...] = (
    STATUS_COUNTS, COVERAGE, VARIANCE, GRID, LUCKY_TICKETS, SUCCESS, COMPARE, CASCADE, ERRORS,
    TRAINING, FAILURES, ENVIRONMENTS, APPENDIX,
)


def report_files() -> tuple[str, ...]:
    """Every SQL file the report runs, in page order."""
    return tuple(f.name for q in QUESTIONS for f in q.files)


def reads_table() -> list[tuple[str, str, str, int]]:
    """(kind of rows, file, what of the file still counts a trial without them, order):
    the rows of coverage.sql's `analysis_reads`."""
    return [(kind, f.name, still, order)
            for order, f in enumerate(f for q in QUESTIONS for f in q.files)
            for kind, still in f.reads]
