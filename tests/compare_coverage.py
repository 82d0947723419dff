"""The coverage simulation of compare.sql (analysis/compare_interval.py, the same formulas):
pairs of configurations A and B on a weight x b data seeds whose trials answer binomial
test questions on top of seed effects correlated ρ between A and B (a seed lucky for
one tends to be lucky for the other), in the middle of [0, 1] and near the bound 1.

A trial (w, d) of configuration X answers QUESTIONS questions, each right with
probability expit(μ_X + u^X_w + v^X_d + e^X_wd), u, v, e normal on the logit scale with
standard deviations 0.6, 0.2, 0.2 (tests/mean_coverage.py's), each effect of A and B
correlated ρ; μ_X solved for the group's true mean. Paired: A and B on the same seeds.
Unpaired: the groups' seed effects as above but each group read alone (Welch), which at
ρ = 0 is two groups on different seeds, and at ρ > 0 what a partly paired design does.

Per cell: the coverage of the 95 % interval of the accuracy difference (true means
0.6 vs 0.5 in the middle, 0.95 vs 0.9 near the bound), the rate its test rejects at
level 0.95 when there is no difference (0.55 vs 0.55; 0.95 vs 0.95), the same two for
the success difference (success: accuracy >= 0.55 in the middle, >= 0.8 near the bound,
where P(success) is 0.995 vs 0.927), the coverage of the probability of improvement's
interval, and the median widths beside the Multi-Bootstrap's (Sellam et al. 2022,
MultiBERTs: weight seeds, data seeds and test questions resampled jointly, paired or
not). Run as a script to print the table of docs/analysis.md:

    .venv/bin/python tests/compare_coverage.py
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

from analysis import compare_interval as ci

DESIGNS = ((2, 2), (4, 2), (3, 5), (8, 8), (24, 20))
CORRELATIONS = (0.0, 0.5, 0.9)
SIGMA_WEIGHT, SIGMA_DATA, SIGMA_RESIDUAL = 0.6, 0.2, 0.2
QUESTIONS = 200
STUDIES = 2000
BOOT_STUDIES, BOOT_REPLICATES = 200, 200
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(200)
_SIGMA = float(np.sqrt(SIGMA_WEIGHT ** 2 + SIGMA_DATA ** 2 + SIGMA_RESIDUAL ** 2))


@dataclass(frozen=True)
class Position:
    """Where on [0, 1] a cell's groups lie: their true means with and without a
    difference, and the success threshold."""

    name: str
    means: tuple[float, float]
    null_mean: float
    threshold: float


POSITIONS = (Position("middle", (0.6, 0.5), 0.55, 0.55), Position("near 1", (0.95, 0.9), 0.95, 0.8))


def logit_centre(mean: float) -> float:
    """μ whose E[expit(μ + σZ)] is `mean`."""
    def mean_at(mu: float) -> float:
        return float(_WEIGHTS @ special.expit(mu + _SIGMA * _NODES) / _WEIGHTS.sum())
    return optimize.brentq(lambda mu: mean_at(mu) - mean, -10, 10, xtol=1e-12)


def success_probability(mean: float, threshold: float) -> float:
    """P(accuracy >= threshold) of one trial: its logit normal, its questions binomial."""
    p = special.expit(logit_centre(mean) + _SIGMA * _NODES)
    needed = np.ceil(threshold * QUESTIONS - 1e-9)
    return float(_WEIGHTS @ stats.binom.sf(needed - 1, QUESTIONS, p) / _WEIGHTS.sum())


def correlated(rng, rho: float, shape) -> tuple[np.ndarray, np.ndarray]:
    first = rng.standard_normal(shape)
    return first, rho * first + np.sqrt(1 - rho ** 2) * rng.standard_normal(shape)


def pair_grids(rng, studies: int, a: int, b: int, means, rho: float) -> list[np.ndarray]:
    """Accuracies of A and B, shape (studies, a, b) each."""
    effects = [correlated(rng, rho, shape) for shape in ((studies, a, 1), (studies, 1, b), (studies, a, b))]
    grids = []
    for side, mean in enumerate(means):
        weight, data, residual = (effect[side] for effect in effects)
        logits = (logit_centre(mean) + SIGMA_WEIGHT * weight + SIGMA_DATA * data
                  + SIGMA_RESIDUAL * residual)
        grids.append(rng.binomial(QUESTIONS, special.expit(logits)) / QUESTIONS)
    return grids


def true_improvement(means, rho: float, paired: bool, draws: int = 2_000_000) -> float:
    """P(A > B) + ½P(A = B) for one seed pair of each: the same seeds (paired) or
    seeds apart (ρ plays no part)."""
    rng = np.random.default_rng(12345)
    y_a, y_b = pair_grids(rng, draws, 1, 1, means, rho if paired else 0.0)
    return float(ci.wins(y_a, y_b).mean())


def multi_bootstrap(y_a: np.ndarray, y_b: np.ndarray, paired: bool, rng,
                    level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The Multi-Bootstrap's percentile interval of the accuracy difference (Sellam et al.
    2022): weight seeds and data seeds drawn with replacement (the same draw for both
    groups when paired), each drawn trial's test questions redrawn (Binomial)."""
    studies, a, b = y_a.shape
    replicates = np.empty((studies, BOOT_REPLICATES))
    for r in range(BOOT_REPLICATES):
        means = []
        rows_a, cols_a = rng.integers(0, a, (studies, a)), rng.integers(0, b, (studies, b))
        rows_b, cols_b = (rows_a, cols_a) if paired else (rng.integers(0, a, (studies, a)),
                                                         rng.integers(0, b, (studies, b)))
        for y, rows, cols in ((y_a, rows_a, cols_a), (y_b, rows_b, cols_b)):
            picked = np.take_along_axis(np.take_along_axis(y, rows[:, :, None], 1), cols[:, None, :], 2)
            means.append(rng.binomial(QUESTIONS, picked).mean(axis=(1, 2)) / QUESTIONS)
        replicates[:, r] = means[0] - means[1]
    return (np.quantile(replicates, (1 - level) / 2, axis=1),
            np.quantile(replicates, (1 + level) / 2, axis=1))


@dataclass(frozen=True)
class Cell:
    a: int
    b: int
    rho: float
    paired: bool
    position: Position

    def rng(self, purpose: int) -> np.random.Generator:
        return np.random.default_rng([self.a, self.b, round(10 * self.rho), int(self.paired),
                                      POSITIONS.index(self.position), purpose])


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    accuracy_coverage: float
    accuracy_rejects: float
    accuracy_width: float
    bootstrap_coverage: float
    bootstrap_width: float
    success_coverage: float
    success_rejects: float
    improvement_coverage: float


def covered(difference: ci.Difference, truth: float) -> float:
    return float(np.mean((difference.low <= truth + 1e-12) & (truth - 1e-12 <= difference.high)))


def measure(cell: Cell, studies: int = STUDIES) -> CellResult:
    pos, (a, b) = cell.position, (cell.a, cell.b)
    truth = pos.means[0] - pos.means[1]
    y_a, y_b = pair_grids(cell.rng(0), studies, a, b, pos.means, cell.rho)
    n_a, n_b = pair_grids(cell.rng(1), studies, a, b, (pos.null_mean, pos.null_mean), cell.rho)
    accuracy = ci.accuracy_difference(y_a, y_b, cell.paired)
    null_accuracy = ci.accuracy_difference(n_a, n_b, cell.paired)
    success = ci.success_difference(y_a, y_b, pos.threshold, cell.paired, with_p=False)
    null_success = ci.success_difference(n_a, n_b, pos.threshold, cell.paired, with_p=False)
    success_truth = (success_probability(pos.means[0], pos.threshold)
                     - success_probability(pos.means[1], pos.threshold))
    shown = min(studies, 400 if a * b > 100 else studies)
    improvement = ci.improvement(y_a[:shown], y_b[:shown], cell.paired)
    boot_low, boot_high = multi_bootstrap(y_a[:BOOT_STUDIES], y_b[:BOOT_STUDIES], cell.paired, cell.rng(2))
    return CellResult(
        cell,
        accuracy_coverage=covered(accuracy, truth),
        accuracy_rejects=float(np.mean(null_accuracy.p < 0.05)),
        accuracy_width=float(np.median(accuracy.high - accuracy.low)),
        bootstrap_coverage=float(np.mean((boot_low <= truth) & (truth <= boot_high))),
        bootstrap_width=float(np.median(boot_high - boot_low)),
        success_coverage=covered(success, success_truth),
        success_rejects=float(np.mean(null_success.p < 0.05)),
        improvement_coverage=covered(improvement, true_improvement(pos.means, cell.rho, cell.paired)),
    )


def cells() -> list[Cell]:
    return [Cell(a, b, rho, paired, position) for a, b in DESIGNS for paired in (True, False)
            for position in POSITIONS for rho in CORRELATIONS]


HEADER = ("| seeds a × b | design | where | ρ | accuracy covered | rejects at Δ = 0 | width "
          "| Multi-Bootstrap covered | its width | success covered | rejects at Δ = 0 "
          "| P(A > B) covered | below 0.93: why |")


def why_below(r: CellResult) -> str:
    """The reason docs/analysis.md gives for a cell below 0.93, in the table itself."""
    reasons = []
    if r.accuracy_coverage < 0.93:
        reasons.append("accuracy: small, skewed differences near 1 with shared luck; the dropped "
                       "data component is part of their variance")
    if r.success_coverage < 0.93:
        reasons.append("success: about 2 failures in 480 seed pairs, clustered by seed; "
                       "the rate near 1 is estimated too narrowly")
    return "; ".join(reasons)


def table(results: list[CellResult]) -> str:
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    for r in results:
        c = r.cell
        lines.append(
            f"| {c.a} × {c.b} | {'paired' if c.paired else 'unpaired'} | {c.position.name} | {c.rho:g} "
            f"| {r.accuracy_coverage:.3f} | {r.accuracy_rejects:.3f} | {r.accuracy_width:.3f} "
            f"| {r.bootstrap_coverage:.2f} | {r.bootstrap_width:.3f} | {r.success_coverage:.3f} "
            f"| {r.success_rejects:.3f} | {r.improvement_coverage:.3f} | {why_below(r)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    chosen = [c for c in cells() if len(sys.argv) < 2 or f"{c.a}x{c.b}" in sys.argv[1:]]
    results = []
    for cell in chosen:
        results.append(measure(cell))
        print(table(results[-1:]).splitlines()[-1], flush=True)
    print(table(results))
