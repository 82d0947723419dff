"""Seeds for a comparison: how many weight x data seeds two groups need for the paired
test of their mean accuracies to detect a difference δ with a given power (Colas,
Sigaud & Oudeyer 2018, "How Many Random Seeds? Statistical Power Analysis in Deep RL
Experiments", arXiv 1806.08295), from a pilot study that ran both groups.

The test (compare.sql's paired accuracy test): groups A and B run on the same a weight
x b data seeds; per seed pair d_wd = y^A_wd − y^B_wd; t = d̄/√V with V and ν those of
the grand mean of a crossed grid (analysis/mean_interval.py: crossed_variance_df on
d's two-way mean squares; a one-way grid, b = 1, V = s²/a on a − 1 degrees of
freedom); two-sided p = 2(1 − T_ν(|t|)); significant when p < 1 − level. V = 0 (every
difference ties) is significant exactly when d̄ ≠ 0.

The fit: d's components on the pilot's shared grid by the method of moments, as
lucky_tickets.sql fits one group's: σ²_w = max(0, (MS_w − MS_e)/b), σ²_d = max(0,
(MS_d − MS_e)/a), σ²_e = MS_e. Pairing is what makes seeds cheap: a seed's luck that
both groups share cancels in d, so d's components are the ones that count.

A design's power is the share of `studies` simulated studies the test finds
significant, d = δ + α_w + β_d + ε_wd normal with the fitted components. The planner
draws each study's sufficient statistics rather than its a·b cells: in a balanced
normal two-way layout d̄, MS_w, MS_d and MS_e are independent, d̄ normal and each mean
square a scaled χ², so the draws have exactly the grid's distribution at a cost that
does not grow with a·b (tests/test_comparison_planning.py checks the plans against
simulated grids). The plan is the design with the fewest trials a·b reaching the
power; at each data seed count the weight seeds are searched by doubling then
bisection (seed_planning.fewest_seeds; a design's draws are seeded by (a, b), so a
search repeats exactly). Accuracies are bounded and d is not normal near 0 or 1: the
plan is then a guide, not a promise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis import compare_interval, mean_interval
from analysis.query import open_results, run_sql_file, sql_file
from analysis.seed_planning import PilotFit, fewest_seeds
from results_contract.groups import short_labels

#: simulated studies per design: a power of 0.8 is known to ± 0.009 (its standard error)
STUDIES = 2000
#: data seed counts a plan tries when the caller does not fix them (with the pilot's)
DATA_SEED_CHOICES = (2, 3, 5, 8, 10, 16, 20, 32)


@dataclass(frozen=True)
class DifferenceFit(PilotFit):
    """The paired difference's two-way model fitted on a pilot's shared grid: a pilot
    group's fit (seed_planning.PilotFit) whose mean is the pilot's own mean difference d̄,
    which the plan does not use (δ is the caller's)."""

    @classmethod
    def from_differences(cls, d: np.ndarray) -> DifferenceFit:
        """By the method of moments from a complete a x b grid of differences (a, b >= 2)."""
        a, b = d.shape
        if a < 2 or b < 2:
            raise ValueError(f"a pilot needs a shared grid of at least 2 weight x 2 data seeds; it has {a} x {b}")
        m, ms_w, ms_d, ms_e = (float(x[0]) for x in mean_interval.grid_mean_squares(np.asarray(d, float)[None]))
        return cls(m, max(0.0, (ms_w - ms_e) / b), max(0.0, (ms_d - ms_e) / a), ms_e, a, b)


@dataclass(frozen=True)
class ComparisonPlan:
    difference: float
    power: float
    level: float
    data_seeds: int
    #: the fewest weight seeds whose simulated power reaches `power` at data_seeds;
    #: None when not even max_weight_seeds do
    weight_seeds: int | None
    #: the simulated power at the planned design (or at max_weight_seeds)
    achieved: float
    #: the simulated power at the pilot's own design
    pilot_power: float


def check_comparison(difference: float, power: float, level: float) -> None:
    """Refuse a target no plan can mean, naming the value."""
    if not 0 < difference <= 1:
        raise ValueError(f"difference {difference} is outside (0, 1]: accuracies differ by at most 1")
    if not 0 < power < 1:
        raise ValueError(f"power {power} is outside (0, 1)")
    if not 0 < level < 1:
        raise ValueError(f"level {level} is outside (0, 1)")


def significant(mean, variance, df, level: float) -> np.ndarray:
    """The paired test's verdict from d̄, V and ν (arrays over studies): compare.sql's t
    test (compare_interval.t_difference); with no spread, whether d̄ is not 0."""
    p = compare_interval.t_difference(np.asarray(mean, float), np.asarray(variance, float), df, level).p
    return np.where(np.asarray(variance) > 0, p < 1 - level, np.asarray(mean) != 0)


def grid_significant(d: np.ndarray, level: float) -> np.ndarray:
    """The test on grids of differences of shape (studies, a, b); b = 1 is one-way."""
    return significant(*mean_interval.grid_variance(d), level)


def simulated_power(fit: DifferenceFit, difference: float, a: int, b: int, level: float,
                    studies: int = STUDIES) -> float:
    """The share of `studies` a x b studies (a, b >= 2) of true difference δ the test
    finds significant, each drawn as its sufficient statistics (see the module's doc)."""
    rng = np.random.default_rng([a, b, studies])
    s_w, s_d, s_e = fit.sigma2_weight, fit.sigma2_data, fit.sigma2_residual
    k_w, k_d, k_e = a - 1, b - 1, (a - 1) * (b - 1)
    mean = difference + np.sqrt(s_w / a + s_d / b + s_e / (a * b)) * rng.standard_normal(studies)
    ms_w = (b * s_w + s_e) * rng.chisquare(k_w, studies) / k_w
    ms_d = (a * s_d + s_e) * rng.chisquare(k_d, studies) / k_d
    ms_e = s_e * rng.chisquare(k_e, studies) / k_e
    variance, df = mean_interval.crossed_variance_df(ms_w, ms_d, ms_e, a, b)
    return float(np.mean(significant(mean, variance, df, level)))


def plan_comparison(fit: DifferenceFit, difference: float, power: float = 0.8, data_seeds: int | None = None,
                    level: float = 0.95, max_weight_seeds: int = 512, studies: int = STUDIES) -> ComparisonPlan:
    """The design with the fewest trials whose simulated power to detect ``difference``
    reaches ``power``: at ``data_seeds`` when given, else over the pilot's data seeds
    and DATA_SEED_CHOICES (ties: the fewer weight seeds)."""
    check_comparison(difference, power, level)
    if data_seeds is not None and data_seeds < 2:
        raise ValueError(f"a plan needs at least 2 data seeds, not {data_seeds}")
    pilot = simulated_power(fit, difference, fit.weight_seeds, fit.data_seeds, level, studies)
    best: ComparisonPlan | None = None
    for b in [data_seeds] if data_seeds else sorted({fit.data_seeds, *DATA_SEED_CHOICES}):
        reached = best is not None and best.weight_seeds is not None
        cap = min(max_weight_seeds, best.weight_seeds * best.data_seeds // b) if reached else max_weight_seeds
        if cap < 2:
            break  # more data seeds cannot give fewer trials
        a, miss = fewest_seeds(lambda n, b=b: 1 - simulated_power(fit, difference, n, b, level, studies), 1 - power, cap)
        found = ComparisonPlan(difference, power, level, b, a, 1 - miss, pilot)
        best = found if best is None or _fewer_trials(found, best) else best
    return best


def _fewer_trials(found: ComparisonPlan, best: ComparisonPlan) -> bool:
    """Whether ``found`` beats ``best``: a reached design with fewer trials (on ties, fewer
    weight seeds), or, while none reaches the power, a higher power."""
    if best.weight_seeds is None:
        return found.weight_seeds is not None or found.achieved > best.achieved
    return found.weight_seeds is not None and ((found.weight_seeds * found.data_seeds, found.weight_seeds)
                                               < (best.weight_seeds * best.data_seeds, best.weight_seeds))


# --- a study's two groups as the pilot -------------------------------------------------------

def group_ids(con, names: list[str]) -> dict[str, str]:
    """Each name -> its group id; a name is a group id, a group's label or its short label
    (the run table's and the report's)."""
    rows = con.sql("select distinct group_id, group_label from groups").fetchall()
    short = short_labels(label for _, label in rows)
    known: dict[str, set[str]] = {}
    for gid, label in rows:
        for name in (gid, label, short[label]):
            known.setdefault(name, set()).add(gid)
    found = {}
    for name in names:
        if name not in known:
            listed = "; ".join(f"{gid} ({short[label]})" for gid, label in sorted(rows))
            raise ValueError(f"unknown group {name!r}; the study's groups: {listed or 'none'}")
        if len(known[name]) > 1:
            raise ValueError(f"group {name!r} names {len(known[name])} groups: give a group id "
                             f"({', '.join(sorted(known[name]))})")
        found[name] = next(iter(known[name]))
    return found


def shared_grid(rows: list[dict]) -> np.ndarray:
    """The differences as a complete weight x data grid: the shared seed pairs less the
    seeds dropped one at a time, each the one missing the largest share of its cells
    (greedy: not always the largest complete grid, always a complete one)."""
    cells = {(r["weight_seed"], r["data_seed"]): r["difference"] for r in rows}
    weights, data = sorted({w for w, _ in cells}), sorted({d for _, d in cells})
    while weights and data:
        missing_w = {w: sum((w, d) not in cells for d in data) / len(data) for w in weights}
        missing_d = {d: sum((w, d) not in cells for w in weights) / len(weights) for d in data}
        worst_w, worst_d = max(weights, key=missing_w.get), max(data, key=missing_d.get)
        if missing_w[worst_w] == missing_d[worst_d] == 0:
            break
        # the seed missing the larger share of its cells goes; on ties, one of the longer side
        if (missing_w[worst_w], len(weights)) >= (missing_d[worst_d], len(data)):
            weights.remove(worst_w)
        else:
            data.remove(worst_d)
    return np.array([[cells[w, d] for d in data] for w in weights], dtype=float).reshape(len(weights), len(data))


def fit_pair(results_root, study: str, pair: list[str], digits: int | None = None) -> tuple[DifferenceFit, list[int]]:
    """The difference's fit from a stored study's two groups (names as group_ids reads
    them), and the lengths it is read at."""
    if len(pair) != 2 or pair[0] == pair[1]:
        raise ValueError(f"a comparison names two different groups, GROUP_A,GROUP_B; got {','.join(pair)!r}")
    with open_results(results_root, study) as con:
        ids = group_ids(con, pair)
        params = {"group_a": ids[pair[0]], "group_b": ids[pair[1]]}
        if digits is not None:
            params["digits"] = str(digits)
        rows = run_sql_file(con, sql_file("paired_differences.sql"), params).to_pylist()
    if not rows:
        where = f"at {digits} digits" if digits is not None else "at a length both test out of distribution"
        raise ValueError(f"groups {pair[0]!r} and {pair[1]!r} share no measured seed pair {where}")
    grid = shared_grid(rows)
    if min(grid.shape) < 2:
        raise ValueError(f"groups {pair[0]!r} and {pair[1]!r} share no complete grid of 2 weight x 2 data "
                         f"seeds ({len(rows)} shared seed pairs)")
    return DifferenceFit.from_differences(grid), rows[0]["lengths"]


def comparison_words(pair: list[str], lengths: list[int], fit: DifferenceFit, found: ComparisonPlan) -> dict:
    """A plan as table cells: the pilot, its fit, its power and the design."""
    if found.weight_seeds is None:
        design = (f"not reached at {found.data_seeds} data seeds: the most weight seeds tried "
                  f"give power {found.achieved:.3f}")
    else:
        design = (f"{found.weight_seeds} weight x {found.data_seeds} data seeds "
                  f"({found.weight_seeds * found.data_seeds} trials): power {found.achieved:.3f}")
    return {"groups": f"{pair[0]} − {pair[1]}", "digits": ", ".join(map(str, lengths)),
            "pilot": f"{fit.weight_seeds} x {fit.data_seeds}", "pilot difference": round(fit.mean, 4),
            "σ_weight, σ_data, σ_residual": ", ".join(f"{np.sqrt(v):.4f}" for v in (
                fit.sigma2_weight, fit.sigma2_data, fit.sigma2_residual)),
            "difference": found.difference, "power asked": found.power,
            "pilot power": round(found.pilot_power, 3), "plan": design}


def plan_study_comparison(results_root, study: str, pair: list[str], difference: float, power: float = 0.8,
                          digits: int | None = None, data_seeds: int | None = None,
                          level: float = 0.95) -> dict:
    """`lg-study plan --compare`: the plan for two groups of a stored pilot study, as table cells."""
    check_comparison(difference, power, level)
    fit, lengths = fit_pair(results_root, study, pair, digits)
    return comparison_words(pair, lengths, fit, plan_comparison(fit, difference, power, data_seeds, level))
