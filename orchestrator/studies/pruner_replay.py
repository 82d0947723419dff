"""A pruner replayed over a search's evaluations: the compute it saves and whether it
loses the best point, over resamples of the seeds (`lg-study replay`, docs/search.md).

A point is its seeds' learning curves (the search metric at each evaluation step). The
replay asks an in-memory Optuna study with the pruner for one trial per point, in the
points' order (as a search with parallel_points 1 would), reports what the pruner sees
of the point at each step (`search.pruner.value`: the mean over the seeds, or its upper
bound), and stops at the first step the pruner prunes. Compute is counted
in seed-steps (a seed's training steps up to where it stopped), the cost that grows
with the model; evaluations are not counted.

Resamples: a stored search's seeds drawn again with replacement within each point
(bootstrap), or, for a simulated search with a known best point, its seeds drawn anew.
Draws: simulated searches, each with its own truth (best point, rises, plateaus) and its
own resamples, so that how often the best point is kept is a rate over searches, not
the luck of one.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import optuna
from optuna.trial import TrialState

#: what a pruner sees of a point at a step, from its seeds' values (PrunerSpec.point_value)
See = Callable[[Sequence[float]], float]


@dataclass
class PointCurves:
    """A point's seeds: per seed, evaluation step -> the metric there."""

    number: int
    seeds: list[dict[int, float]]

    @property
    def steps(self) -> list[int]:
        """The steps every seed reached: what a pruner could see of the point."""
        return sorted(set.intersection(*(set(seed) for seed in self.seeds)))

    def value_at(self, step: int, see: See = statistics.fmean) -> float:
        return see([seed[step] for seed in self.seeds])

    @property
    def final(self) -> float:
        """The point's score: the mean over its seeds at the last step, whatever the pruner sees."""
        return self.value_at(self.steps[-1])


@dataclass
class Replay:
    """One replay: which points the pruner stopped at which step, and their compute."""

    #: the point that finishes best without pruning (the known best of a simulation)
    best: int
    #: point number -> the step it was pruned at
    pruned: dict[int, int]
    #: seed-steps without pruning and with it
    full: int
    spent: int

    @property
    def saved(self) -> float:
        """How many times less compute the pruned search spent."""
        return self.full / self.spent

    @property
    def best_kept(self) -> bool:
        return self.best not in self.pruned


def replay(points: list[PointCurves], make_pruner: Callable[[], optuna.pruners.BasePruner],
           best: int | None = None, see: See = statistics.fmean) -> Replay:
    """``make_pruner``'s decisions over ``points``, seeing ``see`` of each at each step (see
    the module's docstring); ``best`` defaults to the point with the highest final mean
    (the lowest number on a tie)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=make_pruner(),
                                sampler=optuna.samplers.RandomSampler(seed=0))
    pruned: dict[int, int] = {}
    full = spent = 0
    for point in points:
        trial = study.ask()
        steps = point.steps
        stopped = steps[-1]
        for step in steps:
            trial.report(point.value_at(step, see), step)
            if step < steps[-1] and trial.should_prune():
                pruned[point.number], stopped = step, step
                break
        if point.number in pruned:
            study.tell(trial, state=TrialState.PRUNED)
        else:
            study.tell(trial, point.final)
        full += steps[-1] * len(point.seeds)
        spent += stopped * len(point.seeds)
    if best is None:
        best = max(points, key=lambda p: (p.final, -p.number)).number
    return Replay(best=best, pruned=pruned, full=full, spent=spent)


def bootstrap(points: list[PointCurves], rng: random.Random) -> list[PointCurves]:
    """The points with their seeds drawn again with replacement, as many as each has."""
    return [PointCurves(p.number, rng.choices(p.seeds, k=len(p.seeds))) for p in points]


@dataclass
class ReplaySummary:
    """Replays over resamples: the compute saved and how often the best point survived."""

    replays: list[Replay] = field(default_factory=list)

    @property
    def saved(self) -> float:
        """The compute saved over all resamples together: full seed-steps / spent."""
        return sum(r.full for r in self.replays) / sum(r.spent for r in self.replays)

    @property
    def kept(self) -> int:
        return sum(r.best_kept for r in self.replays)

    def kept_interval(self, z: float = 1.96) -> tuple[float, float]:
        """Wilson's 95 % interval of the share of resamples that kept the best point."""
        n, share = len(self.replays), self.kept / len(self.replays)
        centre = (share + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return max(0.0, centre - half), min(1.0, centre + half)


def replay_over(resamples: Iterable[tuple[list[PointCurves], int | None]],
                make_pruner: Callable[[], optuna.pruners.BasePruner], see: See = statistics.fmean) -> ReplaySummary:
    """One replay per resample (its points and its best point, None: the best final mean)."""
    return ReplaySummary([replay(points, make_pruner, best, see) for points, best in resamples])


@dataclass
class DrawsSummary:
    """Replays over several simulated searches (draws), each over its own resamples: the
    distribution over searches of the compute saved and of the share that kept the best."""

    draws: list[ReplaySummary]

    @property
    def kept_shares(self) -> list[float]:
        return sorted(d.kept / len(d.replays) for d in self.draws)

    @property
    def saved(self) -> list[float]:
        return sorted(d.saved for d in self.draws)

    def kept_at_least(self, share: float) -> int:
        """The draws whose resamples kept the best point at least ``share`` of the time."""
        return sum(kept >= share for kept in self.kept_shares)


@dataclass(frozen=True)
class SimulatedSearch:
    """Learning curves of a search with a known best point: each point's accuracy is a
    logistic curve in the training step, rising at a point's own step to its own
    plateau, and each seed shifts the plateau and the rise (seed luck) and each
    evaluation adds its own noise. The best point's plateau is above every other's, and
    its rise is drawn like theirs, so it is not always the early riser."""

    points: int = 100
    seeds: int = 3
    #: the points' plateaus are uniform on this range; the best one's is `best_plateau`
    plateau: tuple[float, float] = (0.05, 0.85)
    best_plateau: float = 0.95
    #: the rise's midpoint, as a share of the training steps, uniform on this range
    rise: tuple[float, float] = (0.1, 0.6)
    #: seed luck: the sd of a seed's plateau shift and of its midpoint shift (share of steps)
    seed_plateau_sd: float = 0.1
    seed_rise_sd: float = 0.05
    #: the sd of one evaluation's noise (a test set of a few hundred questions)
    eval_sd: float = 0.02

    def truth(self, rng: random.Random) -> tuple[list[tuple[float, float]], int]:
        """Each point's (plateau, rise midpoint) and the number of the best point."""
        best = rng.randrange(self.points)
        truth = [(self.best_plateau if n == best else rng.uniform(*self.plateau), rng.uniform(*self.rise))
                 for n in range(self.points)]
        return truth, best

    def draw_seeds(self, truth: list[tuple[float, float]], steps: list[int],
                   rng: random.Random) -> list[PointCurves]:
        """The points' seeds drawn anew: one resample of a search with this truth."""
        last = steps[-1]
        points = []
        for number, (plateau, rise) in enumerate(truth):
            seeds = []
            for _ in range(self.seeds):
                top = plateau + rng.gauss(0, self.seed_plateau_sd)
                middle = (rise + rng.gauss(0, self.seed_rise_sd)) * last
                seeds.append({s: min(1.0, max(0.0, top / (1 + math.exp(-(s - middle) / (0.05 * last)))
                                              + rng.gauss(0, self.eval_sd))) for s in steps})
            points.append(PointCurves(number, seeds))
        return points


def simulated_resamples(search: SimulatedSearch, steps: list[int], resamples: int,
                        seed: int) -> Iterable[tuple[list[PointCurves], int]]:
    """``resamples`` draws of the seeds of one simulated search, each with its known best."""
    rng = random.Random(seed)
    truth, best = search.truth(rng)
    for _ in range(resamples):
        yield search.draw_seeds(truth, steps, rng), best


def replay_draws(search: SimulatedSearch, steps: list[int], draws: int, resamples: int, seed: int,
                 make_pruner: Callable[[], optuna.pruners.BasePruner], see: See = statistics.fmean) -> DrawsSummary:
    """Replays over ``draws`` simulated searches, those of seeds ``seed``, ``seed + 1``, ...
    (so draw k is the search `--seed seed+k` replays alone), ``resamples`` each."""
    return DrawsSummary([replay_over(simulated_resamples(search, steps, resamples, seed + k), make_pruner, see)
                         for k in range(draws)])


def stored_resamples(points: list[PointCurves], resamples: int,
                     seed: int) -> Iterable[tuple[list[PointCurves], None]]:
    """The stored seeds as they are, then ``resamples - 1`` bootstraps of them."""
    rng = random.Random(seed)
    yield points, None
    for _ in range(resamples - 1):
        yield bootstrap(points, rng), None
