"""Attention Bias Calibration (ABC), 000 §5 and App. B (Algorithm 1); the dropoff
factors kappa of 002 §5.

From Ā, the average over S_gen of one site's last-layer attention logits (H, m, n):

1. average along lines (2.1) in the directions (1, 0) (verticals: column j), (1, 1)
   (diagonals: j - i) and (1, -1) (anti-diagonals: i + j, with Ā placed at the
   top-right of the extended matrix, App. B footnote 9: "translate A_in N - n + 1
   elements to the right so that the top-right corners ... align");
2. extend (2.2) to any size; subtract d_max, the largest line mean of the head, and
   drop every line whose mean is at or below mu + kappa sigma, mu and sigma the mean
   and (population) standard deviation of "all the d_l's" (002 §5) of the head, its
   lines of the three directions pooled (kappa = 4.5 cross, 0.87 self, 002 §5);
3. a cell on a kept line gets d_l - d_max, any other cell -inf (eq. 1); merge the
   directions by max (2.4); a head with no kept line in any direction is
   "transparent": 0 everywhere. The kept lines extend to any other size.

The decision depends on the line means alone: adding a constant to the logits
(which the softmax ignores) or scaling them, or changing the test size, keeps the
same lines. Pooled over the three directions a strong line can clear kappa = 4.5:
one outlier among L values is at most sqrt(L - 1) sigma above their mean, and a
clean anti-diagonal of the 9 x 7 Successor cross-attention at 000's training width
(7 digits) stands 4.59 sigma above the 25 line means of its head (7 verticals, 9
diagonals, 9 anti-diagonals); among its 9 anti-diagonals alone it could not (at most
sqrt(8) = 2.8). The margin is thin: the same line one column to the left (6 cells)
stands 4.48 sigma above, and is dropped.

Choices, where 000 is silent or ambiguous:

- d_max is the largest line mean of the head over every direction ("the maximum
  value of d_l's among all the lines of A", 002 eq. 1), so that a weaker kept line
  stays below a stronger one of another direction after the merge by max;
- a head whose line means agree to float precision (spread at most
  FLAT_RESOLUTION of their magnitude) has no pattern: it keeps nothing;
- the logits are those the softmax sees before any mask or bias is added,
  q.k / sqrt(d_head) after RoPE (the content term x W_Q W_K^T x^T of 000 §5, scaled
  as the layer scales it); cells a mask closes are left out of the line averages;
- a line of Ā exists only if it crosses at least half as many open cells as the
  longest line of its direction (and two): the lines near Ā's corners average one
  or two logits; a clean anti-diagonal through Ā's top-right corner makes that corner
  a one-cell diagonal as strong as the anti-diagonal itself, and the two-cell column
  in the corner of a causal matrix is as strong as its subdiagonal, and either would
  open a spurious line in the extension;
- a row that the extended bias closes everywhere the other masks leave open (an
  anti-diagonal ends before the bottom rows) becomes transparent (0), as a fully
  closed head does: a softmax over -inf alone would be NaN.
"""

from __future__ import annotations

import torch
from torch import nn

from lengthgen.model.position.attention_bias.base import (
    SITE_CAUSAL,
    SITE_KINDS,
    Geometry,
    StructuralBias,
)

DIRECTIONS = ("vertical", "diagonal", "anti_diagonal")
#: a line of Ā exists if it crosses at least this share of the open cells of the
#: longest line of its direction (and two cells): the lines near Ā's corners average
#: one or two logits, as extreme as single cells
MIN_LINE_SHARE = 0.5
#: a head whose line means spread by at most this share of their magnitude is flat
#: (float rounding of a constant Ā): no line of it stands out
FLAT_RESOLUTION = 1e-5


def _line_index(direction: str, rows: torch.Tensor, columns: torch.Tensor, m: int, n: int) -> torch.Tensor:
    """Index of the line through each (row, column) of Ā's coordinates; columns of the
    anti-diagonals are already shifted into Ā's frame. Valid indices: 0 .. n - 1
    (vertical), 0 .. m + n - 2 (the others)."""
    if direction == "vertical":
        return columns.expand(torch.broadcast_shapes(rows.shape, columns.shape))
    if direction == "diagonal":
        return columns - rows + m - 1
    return rows + columns


def line_means(mean_logits: torch.Tensor) -> dict[str, torch.Tensor]:
    """{direction: (H, lines)} the average of Ā along each line (2.1), NaN for a line
    that is too short (MIN_LINE_SHARE). mean_logits: (H, m, n), NaN where a mask closed
    the cell."""
    heads, m, n = mean_logits.shape
    rows, columns = torch.arange(m)[:, None], torch.arange(n)[None, :]
    present = ~torch.isnan(mean_logits)
    values = torch.nan_to_num(mean_logits.float(), nan=0.0).flatten(1)  # (H, m n)
    means = {}
    for direction in DIRECTIONS:
        index = _line_index(direction, rows, columns, m, n).flatten()
        lines = n if direction == "vertical" else m + n - 1
        sums = torch.zeros(heads, lines).index_add_(1, index, values)
        counts = torch.zeros(heads, lines).index_add_(1, index, present.flatten(1).float())
        enough = counts >= (MIN_LINE_SHARE * counts.max(1, keepdim=True).values).ceil().clamp(min=2)
        means[direction] = torch.where(enough, sums / counts.clamp(min=1), torch.nan)
    return means


def _pooled(means: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([means[d] for d in DIRECTIONS], dim=1).double()  # (H, all lines)


def _by_direction(pooled: torch.Tensor, means: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return dict(zip(DIRECTIONS, pooled.split([means[d].shape[1] for d in DIRECTIONS], dim=1)))


def _pooled_scores(pooled: torch.Tensor) -> torch.Tensor:
    """(H, all lines) line means, NaN where no line -> (d_l - mu) / sigma, NaN where
    no line and on every line of a flat head (no pattern)."""
    present = ~torch.isnan(pooled)
    count = present.sum(1, keepdim=True).clamp(min=1)
    filled = torch.nan_to_num(pooled, nan=0.0)
    mu = filled.sum(1, keepdim=True) / count
    sigma = ((filled - mu).square() * present).sum(1, keepdim=True).div(count).sqrt()
    d_max = torch.where(present, pooled, -torch.inf).max(1, keepdim=True).values
    d_min = torch.where(present, pooled, torch.inf).min(1, keepdim=True).values
    magnitude = torch.where(present, pooled.abs(), 0.0).max(1, keepdim=True).values
    patterned = d_max - d_min > FLAT_RESOLUTION * magnitude  # (H, 1)
    return torch.where(present & patterned, (pooled - mu) / sigma, torch.nan)


def line_scores(means: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """{direction: (H, lines)} line means (NaN: no line) -> (d_l - mu) / sigma, the
    score the dropoff compares with kappa (NaN: no line; a flat head has no pattern
    and scores NaN on every line); mu and sigma (population) are taken over all the
    lines of the head, every direction pooled."""
    return _by_direction(_pooled_scores(_pooled(means)), means)


def dropoff(means: dict[str, torch.Tensor], kappa: float) -> dict[str, torch.Tensor]:
    """{direction: (H, lines)} line means (NaN: no line) -> the same shapes holding
    d_l - d_max for the lines scoring above kappa (line_scores: d_l > mu + kappa
    sigma), else -inf; d_max is the largest line mean of the head, every direction."""
    pooled = _pooled(means)
    d_max = torch.where(torch.isnan(pooled), -torch.inf, pooled).max(1, keepdim=True).values
    keep = _pooled_scores(pooled) > kappa  # NaN (no line, flat head) is never kept
    return _by_direction(torch.where(keep, pooled - d_max, -torch.inf).float(), means)


def _extended_index(direction: str, rows: torch.Tensor, n_keys: int, key_lengths: torch.Tensor, m: int, n: int):
    """(B|1, Tq, Tk) index of Ā's line through each cell of the extended matrix."""
    i = rows[None, :, None]  # (1, Tq, 1)
    j = torch.arange(n_keys, device=rows.device)[None, None, :]  # (1, 1, Tk)
    if direction == "anti_diagonal":
        j = j - (key_lengths - n)[:, None, None]  # Ā's top-right corner at the right edge
    return _line_index(direction, i, j, m, n)


class Lines(nn.Module):
    """One site's calibrated lines: per head and direction, the kept values d_l - d_max
    (-inf for a dropped or absent line), and Ā's size m x n."""

    def __init__(self, m: int, n: int, values: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.m, self.n = m, n
        for direction in DIRECTIONS:
            self.register_buffer(direction, values[direction].float(), persistent=False)

    @classmethod
    def calibrate(cls, mean_logits: torch.Tensor, kappa: float) -> Lines:
        """The lines of Ā (H, m, n) kept by the dropoff."""
        _, m, n = mean_logits.shape
        return cls(m, n, dropoff(line_means(mean_logits.cpu()), kappa))

    @property
    def transparent(self) -> torch.Tensor:
        """(H,) heads with no kept line in any direction."""
        return ~torch.stack([torch.isfinite(getattr(self, d)).any(1) for d in DIRECTIONS]).any(0)

    def extend(self, rows: torch.Tensor, n_keys: int, key_lengths: torch.Tensor) -> torch.Tensor:
        """(B, H, Tq, Tk): the bias at queries `rows` and keys 0 .. n_keys - 1 of matrices
        whose right edge is at key_lengths (B,) (2.2 and 2.4)."""
        merged = None
        for direction in DIRECTIONS:
            table = getattr(self, direction)  # (H, lines)
            index = _extended_index(direction, rows, n_keys, key_lengths, self.m, self.n)
            inside = (index >= 0) & (index < table.shape[1])
            values = table[:, index.clamp(0, table.shape[1] - 1)].masked_fill(~inside, -torch.inf)  # (H, B|1, Tq, Tk)
            values = values.transpose(0, 1)  # (B|1, H, Tq, Tk)
            merged = values if merged is None else torch.maximum(merged, values)
        return merged.masked_fill(self.transparent.to(rows.device)[None, :, None, None], 0.0)


class CalibratedBias(StructuralBias):
    """`abc`: no bias until `calibrate` (the first training phase); then the calibrated
    bias at each site, in every layer (000 §5, step 3)."""

    calibrated = True
    options = ("abc_kappa_cross", "abc_kappa_self", "abc_samples")

    def __init__(self, cfg, layout, n_heads) -> None:
        super().__init__(cfg, layout, n_heads)
        self.kappa = {"self": cfg.abc_kappa_self, "cross": cfg.abc_kappa_cross}
        self.sites = nn.ModuleDict()

    @classmethod
    def check(cls, config, task, architecture) -> None:
        if not architecture.bias_sites:
            raise ValueError(f"model.attention_bias abc calibrates the attention of a decoder; model.arch "
                             f"{config.model.arch} has none")
        if not config.format.pad:
            raise ValueError("model.attention_bias abc averages the attention of equal-length questions: "
                             "it needs format.pad: true")

    @property
    def acts(self) -> bool:
        return len(self.sites) > 0

    def calibrate(self, mean_logits: dict[str, torch.Tensor]) -> None:
        """Set the bias from {site: Ā (H, m, n)}, the averaged last-layer logits."""
        self.sites = nn.ModuleDict({
            site: Lines.calibrate(a, self.kappa[SITE_KINDS[site]]) for site, a in mean_logits.items()
        })

    def matrix(self, site: str, rows: int, columns: int) -> torch.Tensor:
        """(H, rows, columns): the bias of one site for a rows x columns attention."""
        length = torch.tensor([columns])
        geometry = Geometry(torch.arange(rows), columns, length, torch.zeros(1, dtype=torch.long))
        return self._bias(site, geometry, SITE_CAUSAL[site])[0]

    def lm(self, g):
        return self._bias("lm", g, SITE_CAUSAL["lm"])

    def decoder_self(self, g):
        return self._bias("decoder_self", g, SITE_CAUSAL["decoder_self"])

    def cross(self, g):
        return self._bias("cross", g, SITE_CAUSAL["cross"])

    def _bias(self, site: str, g: Geometry, causal: bool) -> torch.Tensor | None:
        if site not in self.sites:
            return None
        bias = self.sites[site].extend(g.rows, g.n_keys, g.key_lengths)  # (B|1, H, Tq, Tk)
        usable = torch.isfinite(bias) & g.open_keys(causal)
        return bias.masked_fill(~usable.any(-1, keepdim=True), 0.0)
