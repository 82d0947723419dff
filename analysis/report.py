"""`lg-study report`: the analysis SQL files run over one study, as one HTML page.

The page holds the key numbers as HTML tables and the plots as PNG files (written
beside it and embedded in it, so the page also stands alone). Every number comes from
one of the analysis/*.sql files; this module only runs them, draws and lays out.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from analysis import error_plots, plots
from analysis.query import QueryError, open_results, run_sql_file, sql_parameters

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
)
MAX_GROUPS = 24  # panels per figure; the caption says when groups were left out
MAX_TABLE_ROWS = 300


@dataclass
class Figure:
    file: str  # PNG name beside the page
    title: str
    caption: str
    sql: tuple[str, ...]


@dataclass
class Report:
    page: Path
    figures: list[Path] = field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def sql_path(name: str) -> Path:
    return Path(str(files("analysis") / f"{name}.sql"))


def build_report(
    results_root: Path,
    study: str,
    out_dir: Path | None = None,
    params: dict[str, str] | None = None,
) -> Report:
    """Run the analysis files over ``study`` and write ``index.html`` plus PNGs to
    ``out_dir`` (default ``<results_root>/<study>/report``).

    ``params`` go to the files that take them (e.g. ``threshold`` to lucky_tickets.sql);
    a parameter no file takes is refused. Raises LookupError for an unknown study and
    QueryError for SQL that DuckDB refuses.
    """
    results_root = Path(results_root)
    out_dir = Path(out_dir) if out_dir is not None else results_root / study / "report"
    params = params or {}
    with open_results(results_root, study) as con:
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
    report.page.write_text(_page(study, results_root, tables, sections, params))
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
        return _figure_html(path, fig, left_out)

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
    out.append(_table(
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
               f"{_level(variance)} percentile bootstrap interval over trials (whole trials "
               f"resampled, {_resamples(variance)} replicates; none for one trial, too "
               "narrow for a few); red dashed: the best-of-N trial (highest mean over all "
               "lengths); green band: training lengths.",
               ("final_accuracy.sql", "variance.sql")),
        lambda p: plots.accuracy_by_group(_first_groups(final), _first_groups(variance), p),
        n_groups,
    ))
    out.append(_table(
        variance,
        [("group_label", "group"), ("digits", "length"), ("in_distribution", "trained"),
         ("n_trials", "N trials"), ("mean", "mean"), ("mean_boot_low", "low (bootstrap)"),
         ("mean_boot_high", "high (bootstrap)"), ("sd", "sd"), ("min", "min"),
         ("median", "median"), ("max", "max"), ("best_of_n", "best of N")],
        f"Per group and test length (variance.sql). Interval of the mean: {_level(variance)} "
        "percentile bootstrap over the N trials (inside [0, 1]).",
    ))
    out.append(_table(
        final,
        [("group_label", "group"), ("weight_seed", "weight seed"), ("data_seed", "data seed"),
         ("digits", "length"), ("n", "questions"), ("correct", "right"),
         ("accuracy", "accuracy"), ("wilson_low", "low (Wilson)"),
         ("wilson_high", "high (Wilson)")],
        f"Per trial and test length (final_accuracy.sql): accuracy with its {_level(final)} "
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
        what = _measured_words(analysed[0])
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
            lambda p: plots.seed_heatmaps(_first_groups(analysed), p),
            n_analysed,
        ))
        first = analysed[0]
        method = (f"{_level([first])} percentile bootstrap that resamples weight seeds and "
                  f"data seeds at once ({first['resamples']} replicates, boot_seed "
                  f"{first['boot_seed']})")
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
            lambda p: plots.variance_shares(_first_groups(analysed), p),
            n_analysed,
        ))
        out.append(figure(
            Figure("variance_shares_by_length.png", "Variance components per test length",
                   "The same component shares and intervals at each measured test length "
                   "apart and for their mean (001 F.9 shows 30, 50, 70 and 100 digits "
                   "apart), one panel per group, its a × b seeds in the title.",
                   ("lucky_tickets.sql",)),
            lambda p: plots.variance_shares_by_length(_first_groups(analysed), p),
            n_analysed,
        ))
        group_rows = [_with_intervals(r) for r in {r["group_id"]: r for r in analysed}.values()]
        out.append(_table(
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
             ("missing_cells", "missing cells"), ("left_out_seeds", "seeds left out")],
            "Per group, over its largest complete subgrid of a × b seeds (lucky_tickets.sql). "
            f"Variance components by the method of moments, intervals: {method}; 'set to 0': "
            "components whose moment estimate was negative. SS shares: fixed-effects "
            "SS/SS_total. Friedman's χ² = b(a − 1)W with a − 1 degrees of freedom; random "
            "rankings give W ≈ 1/b.",
        ))
        out.append(_table(
            [_with_intervals({"group_label": r["group_label"], **entry})
             for r in group_rows for entry in (r["by_length"] or [])],
            [("group_label", "group"), ("digits", "length"), ("grand_mean", "mean acc."),
             ("component_share_weight_ci", "σ² share weight [interval]"),
             ("component_share_data_ci", "σ² share data [interval]"),
             ("component_share_residual_ci", "σ² share residual [interval]"),
             ("ss_share_weight", "SS share weight"), ("ss_share_data", "SS share data"),
             ("kendall_w", "Kendall's W"), ("friedman_p", "Friedman p")],
            "Per group and test length (lucky_tickets.sql, column by_length; 001 F.9), on "
            "the same seeds and bootstrap replicates.",
            collapsed=True,
        ))
        out.append(_table(
            analysed,
            [("group_label", "group"), ("weight_seed", "weight seed"), ("mean", "mean"),
             ("min", "min"), ("max", "max"), ("lucky", "lucky"), ("threshold", "threshold"),
             ("accuracy_by_data_seed", "by data seed")],
            "Per weight seed, over data orders (lucky_tickets.sql).",
        ))
    if skipped:
        out.append(_table(
            skipped,
            [("group_label", "group"), ("grid_weight_seeds", "weight seeds"),
             ("grid_data_seeds", "data seeds"), ("skipped_reason", "not analysed because"),
             ("missing_cells", "missing cells")],
            "Groups whose trials cross weight and data seeds but that lucky_tickets.sql "
            "could not analyse.",
        ))

    # 3. success probability
    success = tables["success"]
    out.append("<h2 id='success'>3. How likely a seed succeeds, and best of N seeds</h2>")
    threshold = success[0]["threshold"] if success else 0.9
    out.append(figure(
        Figure("success.png", "Success probability",
               f"Share of a group's trials whose accuracy reaches {threshold:g} at each test "
               f"length, with its {_level(success)} Wilson interval (the unit is the trial); "
               "each point is labelled successes/trials.",
               ("success.sql",)),
        lambda p: plots.success_probability(_first_groups(success), p),
        n_groups,
    ))
    out.append(_table(
        [_with_intervals(r) for r in success],
        [("group_label", "group"), ("digits", "length"), ("in_distribution", "trained"),
         ("n_trials", "N trials"), ("n_success", "succeed"),
         ("p_success_ci", f"P(acc. ≥ {threshold:g}) [Wilson]"),
         ("seeds_for_a_success", "seeds for a success"),
         ("expected_best_of_1", "E best of 1"), ("expected_best_of_5", "E best of 5"),
         ("expected_best_of_10", "E best of 10")],
        "Per group and test length (success.sql). Seeds for a success: the fewest seeds "
        f"that give at least one success with probability {_level(success)[:-1]} if the "
        "success rate is the interval's lower end (blank: the trials cannot rule out 0). "
        "E best of N: the exact expected maximum accuracy of N trials drawn with "
        "replacement from the group's N trials.",
    ))

    # 4. comparisons
    compare = tables["compare"]
    out.append("<h2 id='compare'>4. Comparing configurations</h2>")
    family = compare[0]["holm_comparisons"] if compare else 0
    out.append(_table(
        [_with_intervals(r) for r in compare],
        [("label_a", "group a"), ("label_b", "group b"), ("differs_in", "differs in"),
         ("digits", "length"), ("design", "design"), ("n_a", "N a"), ("n_b", "N b"),
         ("accuracy_diff_ci", "acc. a − b [bootstrap]"),
         ("accuracy_p_perm", "p (permutation)"), ("accuracy_p_holm", "p Holm"),
         ("success_diff_ci", "success a − b [Newcombe]"),
         ("success_p_exact", "p (exact)"), ("success_p_holm", "p Holm")],
        "Pairs of groups whose configs differ in one setting, per test length "
        f"(analysis/compare.sql). Paired on the seed pairs both share when they share at least 2 "
        f"(N = seed pairs), else unpaired. Accuracy: {_level(compare)} percentile bootstrap "
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
               "last sampled step. The unit is the trial: line = mean of the trials' "
               "accuracies, error bars = 95 % bootstrap interval over trials (whole trials "
               "resampled; none for a single trial, too narrow for a few), dots = each "
               "trial. The trials answer the same questions, so pooling their answers "
               "would hide seed-to-seed variation; each trial's own question-level "
               "uncertainty is its Wilson 95 % interval, in the table below.",
               ("cascade.sql",)),
        lambda p: error_plots.cascade_breakdown(_first_groups(cascade), p),
        n_groups,
    ))
    out.append(_table(
        cascade,
        [("group_label", "group"), ("digits", "length"), ("cascade", "cascade"),
         ("n_trials", "trials"), ("accuracy", "mean over trials"),
         ("boot95_low", "95 % low (trials)"), ("boot95_high", "95 % high (trials)"),
         ("share_of_questions", "share of questions"), ("trial_accuracies", "each trial")],
        "Per group, test length and cascade length (cascade.sql): mean of the trials' "
        "accuracies with its trial-bootstrap 95 % interval.",
        collapsed=True,
    ))
    out.append(_table(
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
        lambda p: error_plots.error_by_carry(_first_groups(errors), p),
        n_groups,
    ))
    out.append(figure(
        Figure("errors_ending.png", "How wrong answers end",
               "Share of the wrong answers that end on time, end early (premature end) or "
               "run on (late end), mean over trials.", ("errors.sql",)),
        lambda p: error_plots.error_endings(_first_groups(errors), p),
        n_groups,
    ))
    out.append(figure(
        Figure("errors_position.png", "Error positions",
               "Where the wrong digits of wrong answers that end on time are: every wrong "
               "place of each answer (not only the first), as a share of the trial's wrong "
               "places, averaged over trials (001 F.10 left).", ("errors.sql",)),
        lambda p: error_plots.error_distribution(
            _first_groups(errors), "error_position", "answer place (0 = units)", p),
        n_groups,
    ))
    out.append(figure(
        Figure("errors_count.png", "Wrong digits per wrong answer",
               "How many answer digits are wrong in a wrong answer that ends on time, as a "
               "share of those answers, averaged over trials; trials whose accuracy at the "
               f"length is below {min_accuracy:g} are left out (001 F.10 right, F.11: "
               "near-zero accuracy runs excluded).", ("errors.sql",)),
        lambda p: error_plots.error_distribution(
            _first_groups(errors), "wrong_digits", "wrong digits per wrong answer", p),
        n_groups,
    ))
    out.append(figure(
        Figure("errors_checkpoints.png", "Error positions per checkpoint",
               "One row per checkpoint (trial and step: weight seed, data seed, @step): the "
               "share of its wrong digits at each answer place, at the group's longest test "
               "length with wrong answers that end on time (001 F.12).",
               ("error_checkpoints.sql",)),
        lambda p: error_plots.error_checkpoints(_first_groups(checkpoints), p),
        n_groups,
    ))
    out.append(_table(
        [r for r in errors if r["facet"] == "carry"],
        [("group_label", "group"), ("digits", "length"), ("bucket", "kind"),
         ("n_trials", "trials"), ("total", "digits"), ("count", "wrong"),
         ("error_rate", "error rate (mean over trials)")],
        "Answer digits with and without a carry into them (errors.sql, facet carry).",
        collapsed=True,
    ))
    out.append(_table(
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
        lambda p: plots.training_curves(_first_groups(training), p),
        n_groups,
    ))
    per_trial = list({(r["study"], r["trial_id"]): r for r in training}.values())
    out.append(_table(
        per_trial,
        [("group_label", "group"), ("weight_seed", "weight seed"), ("data_seed", "data seed"),
         ("trial_id", "trial"), ("grok_step", f"first step with in-dist. ≥ {threshold:.0%}"),
         ("in_distribution_accuracy", "final in-dist. acc."),
         ("ood_accuracy", "final OOD acc."), ("loss", "final loss")],
        "Grokking step per trial (training.sql); the last three columns at the final step.",
    ))

    # 8. trials that did not finish: a mean over the others can hide them
    out.append("<h2 id='failures'>8. Failed and diverged trials</h2>")
    out.append(_table(
        tables["failures"],
        [("trial_id", "trial"), ("status", "status"), ("task", "task"), ("pe", "pe"),
         ("weight_seed", "weight seed"), ("data_seed", "data seed"), ("error", "error")],
        "Trials whose status is failed or diverged (failures.sql), with their error; "
        "`lg-study trial ID` shows one in full.",
    ))
    return out


# --- HTML -------------------------------------------------------------------------------

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; }
h1 { margin-bottom: 0.2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; max-width: 70em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
th { background: #f4f4f4; }
td.text { text-align: left; }
caption { text-align: left; font-size: 0.9em; color: #444; padding-bottom: 4px; }
code { background: #f4f4f4; padding: 0 3px; }
.empty { color: #666; font-style: italic; }
"""


def _page(study: str, root: Path, tables: dict, sections: list[str], params: dict) -> str:
    counts = ", ".join(f"{r['status']} {r['trials']}" for r in tables["status_counts"])
    n_groups = len({r["group_id"] for r in tables["final_accuracy"]})
    given = ", ".join(f"{k}={v}" for k, v in sorted(params.items())) or "none (defaults)"
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>lg-study report: {html.escape(study)}</title>
<style>{STYLE}</style>
</head>
<body>
<h1>Study <code>{html.escape(study)}</code></h1>
<p>Results: <code>{html.escape(str(Path(root).resolve() / study))}</code>; generated
{generated}.<br>
Trials: {html.escape(counts or "none")}; configuration groups with finished trials:
{n_groups}. Parameters: {html.escape(given)}.</p>
<p>Every number and plot comes from the SQL files in <code>analysis/</code>; run one
yourself with <code>lg-study query --file analysis/variance.sql --study
{html.escape(study)}</code>. Accuracies are exact match at each trial's final evaluation
unless said otherwise; "trained" marks test lengths inside the training range.</p>
<p><a href="#coverage">which trials count</a> · <a href="#variance">seed variance</a> · <a href="#lucky">lucky tickets</a> ·
<a href="#success">success and best of N</a> · <a href="#compare">comparisons</a> ·
<a href="#cascade">carry cascades</a> · <a href="#errors">errors</a> ·
<a href="#training">training</a> · <a href="#failures">failed and diverged trials</a></p>
{"".join(sections)}
</body>
</html>
"""


def _figure_html(path: Path, fig: Figure, note: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    sources = " and ".join(f"<code>analysis/{name}</code>" for name in fig.sql)
    return (
        f"<figure><a href='{html.escape(path.name)}'>"
        f"<img src='data:image/png;base64,{data}' alt='{html.escape(fig.title)}'></a>"
        f"<figcaption><b>{html.escape(fig.title)}.</b> {html.escape(fig.caption)}{note} "
        f"Computed by {sources}.</figcaption></figure>"
    )


def _table(
    rows: list[dict],
    columns: list[tuple[str, str]],
    caption: str,
    collapsed: bool = False,
) -> str:
    if not rows:
        return f"<p class='empty'>{html.escape(caption)} No rows.</p>"
    shown = rows[:MAX_TABLE_ROWS]
    more = (f" First {MAX_TABLE_ROWS} of {len(rows)} rows; the SQL file gives all."
            if len(rows) > MAX_TABLE_ROWS else "")
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in columns)
    body = "".join(
        "<tr>" + "".join(_cell(row.get(key)) for key, _ in columns) + "</tr>" for row in shown
    )
    table = (f"<table><caption>{html.escape(caption + more)}</caption>"
             f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    if collapsed:
        return f"<details><summary>{html.escape(caption)}</summary>{table}</details>"
    return table


def _cell(value: Any) -> str:
    if value is None:
        return "<td></td>"
    if isinstance(value, bool):
        return f"<td class='text'>{'yes' if value else 'no'}</td>"
    if isinstance(value, float):
        return f"<td>{value:.3f}</td>"
    if isinstance(value, int):
        return f"<td>{value}</td>"
    if isinstance(value, (list, tuple)):
        text = ", ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in value)
        return f"<td class='text'>{html.escape(text)}</td>"
    return f"<td class='text'>{html.escape(str(value))}</td>"


def _level(rows: list[dict]) -> str:
    """'95 %': the level the rows' intervals were computed at."""
    level = rows[0]["level"] if rows else 0.95
    return f"{100 * level:g} %"


def _resamples(rows: list[dict]) -> str:
    return f"{rows[0]['resamples']:,}" if rows else "1,000"


INTERVALS = {  # estimate -> (low, high) columns, shown as "estimate [low, high]"
    **{f"{kind}_{part}": (f"{kind}_{part}_boot_low", f"{kind}_{part}_boot_high")
       for kind in ("component_share", "sigma2") for part in ("weight", "data", "residual")},
    "p_success": ("p_success_wilson_low", "p_success_wilson_high"),
    "accuracy_diff": ("accuracy_diff_boot_low", "accuracy_diff_boot_high"),
    "success_diff": ("success_diff_newcombe_low", "success_diff_newcombe_high"),
}


def _with_intervals(row: dict) -> dict:
    """The row plus `<estimate>_ci` text cells, e.g. '0.42 [0.10, 0.80]', and which
    variance components were set to 0."""
    out = dict(row)
    for key, (low, high) in INTERVALS.items():
        if key not in row:
            continue
        value = row[key]
        digits = 4 if key.startswith("sigma2") else 3
        if value is None:
            out[f"{key}_ci"] = "n/a"
        elif row.get(low) is None:
            out[f"{key}_ci"] = f"{value:.{digits}f}"
        else:
            out[f"{key}_ci"] = f"{value:.{digits}f} [{row[low]:.{digits}f}, {row[high]:.{digits}f}]"
    if "sigma2_weight_truncated" in row:
        out["truncated"] = ", ".join(
            name for name in ("weight", "data") if row.get(f"sigma2_{name}_truncated")) or "none"
    return out


def _measured_words(row: dict) -> str:
    """What lucky_tickets.sql measured, e.g. 'out-of-distribution exact match (mean over
    the test lengths 6, 8)'."""
    lengths = ", ".join(str(d) for d in row["measured_digits"] or [])
    kind = {"out-of-distribution": "out-of-distribution exact match",
            "in-distribution": "in-distribution exact match",
            "mixed": "exact match"}[row["measured_kind"]]
    where = {"out-of-distribution": "", "in-distribution": ", inside the training range",
             "mixed": ", inside and outside the training range"}[row["measured_kind"]]
    return f"{kind} (mean over the test lengths {lengths}{where})"


def _first_groups(rows: Iterable[dict], limit: int = MAX_GROUPS) -> list[dict]:
    """The rows of the first ``limit`` groups, in the SQL's order."""
    keep: dict[str, None] = {}
    out = []
    for row in rows:
        gid = row["group_id"]
        if gid not in keep and len(keep) >= limit:
            continue
        keep.setdefault(gid, None)
        out.append(row)
    return out
