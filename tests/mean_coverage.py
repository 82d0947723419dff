"""The coverage simulation of the mean's interval (analysis/mean_interval.py, the same
formulas as variance.sql's mean_low/high): studies of a weight x b data seeds whose
trials answer binomial test questions on top of the seed effects, at true means near
0.05, 0.5 and 0.95, with and without a data-order effect.

A trial (w, d) answers QUESTIONS questions, each right with probability
p_wd = expit(μ + u_w + v_d + e_wd), u, v, e normal on the logit scale with standard
deviations SIGMA_WEIGHT, σ_data (0 or SIGMA_DATA) and SIGMA_RESIDUAL; the true mean is
E[p] (Gauss–Hermite), μ solved for it. At p = 0.5 these give the accuracy-scale spreads
0.15, 0.05, 0.05 of the earlier coverage tables; near 0.05 and 0.95 the accuracies are
skewed away from the bound, as real seeds are.

Each cell prints the coverage and the median width beside two references: the z
interval with the true variance of the mean (its standard deviation over the simulated
studies: the floor no interval that estimates its variance reaches) and t over the
weight-seed means (t on a − 1 degrees of freedom, clipped to [0, 1]). Run as a script
to print the table of docs/analysis.md:

    .venv/bin/python tests/mean_coverage.py
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

from analysis.mean_interval import grid_bounds

DESIGNS = ((2, 2), (4, 2), (2, 4), (3, 5), (4, 4), (8, 8), (24, 20))
MEANS = (0.05, 0.5, 0.95)
SIGMA_WEIGHT, SIGMA_DATA, SIGMA_RESIDUAL = 0.6, 0.2, 0.2
QUESTIONS = 200
STUDIES = 2000
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(120)


@dataclass(frozen=True)
class Cell:
    a: int
    b: int
    mean: float
    data_effect: bool

    @property
    def sigma_total(self) -> float:
        data = SIGMA_DATA if self.data_effect else 0.0
        return float(np.sqrt(SIGMA_WEIGHT ** 2 + data ** 2 + SIGMA_RESIDUAL ** 2))

    def logit_centre(self) -> float:
        """μ whose E[expit(μ + σZ)] is the cell's mean."""
        def mean_at(mu: float) -> float:
            return float(_WEIGHTS @ special.expit(mu + self.sigma_total * _NODES) / _WEIGHTS.sum())
        return optimize.brentq(lambda mu: mean_at(mu) - self.mean, -10, 10, xtol=1e-12)

    def grids(self, studies: int) -> np.ndarray:
        rng = np.random.default_rng([self.a, self.b, round(100 * self.mean), int(self.data_effect)])
        data = SIGMA_DATA if self.data_effect else 0.0
        logits = (self.logit_centre() + SIGMA_WEIGHT * rng.standard_normal((studies, self.a, 1))
                  + data * rng.standard_normal((studies, 1, self.b))
                  + SIGMA_RESIDUAL * rng.standard_normal((studies, self.a, self.b)))
        return rng.binomial(QUESTIONS, special.expit(logits)) / QUESTIONS


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    coverage: float
    width: float
    z_floor: float
    t_weight_means: float
    full_range: float

    @property
    def ratio(self) -> float:
        return self.width / max(self.z_floor, self.t_weight_means)


def weight_mean_widths(y: np.ndarray, level: float = 0.95) -> np.ndarray:
    a = y.shape[1]
    weight_means = y.mean(axis=2)
    half = stats.t.ppf((1 + level) / 2, a - 1) * weight_means.std(axis=1, ddof=1) / np.sqrt(a)
    m = weight_means.mean(axis=1)
    return np.minimum(1, m + half) - np.maximum(0, m - half)


def measure(cell: Cell, studies: int = STUDIES) -> CellResult:
    y = cell.grids(studies)
    low, high = grid_bounds(y)
    spans = y.max(axis=(1, 2)) - y.min(axis=(1, 2))
    return CellResult(
        cell,
        coverage=float(np.mean((low <= cell.mean) & (cell.mean <= high))),
        width=float(np.median(high - low)),
        z_floor=float(2 * 1.959963984540054 * y.mean(axis=(1, 2)).std()),
        t_weight_means=float(np.median(weight_mean_widths(y))),
        full_range=float(np.mean((low <= 0) & (high >= 1) & (spans < 0.75))),
    )


def cells() -> list[Cell]:
    return [Cell(a, b, mean, data) for a, b in DESIGNS for mean in MEANS for data in (False, True)]


def table(results: list[CellResult]) -> str:
    lines = ["| seeds a × b | true mean | σ_data | coverage | median width | z floor | t over weight means | ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.cell.a} × {r.cell.b} | {r.cell.mean:g} | {SIGMA_DATA if r.cell.data_effect else 0:g} | "
                     f"{r.coverage:.3f} | {r.width:.3f} | {r.z_floor:.3f} | {r.t_weight_means:.3f} | {r.ratio:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table([measure(cell) for cell in cells()]))
