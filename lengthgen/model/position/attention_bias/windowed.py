"""Windowed attention biasing, 000 §4.1 and App. A.4 (Fig. 10-11).

B_w is 0 on the open cells and -inf elsewhere. Output row t is the query that
predicts answer token t + 1 (the answer least significant digit first, 000 §3.2);
x_p is the input digit (or, with format.interleave, the pair a_p b_p) of place p,
p = 1 the least significant.

- Self-attention of the outputs (000: "the main diagonal and w elements below"):
  row t sees outputs t - w .. t.
- The input window ("one input token at the corresponding position"; for binary
  tasks "the window spans, and also steps over, two positions"): row t sees the
  places c - w .. c + w of its centre place c ("extends to both left and right w
  positions"); since the answer is reversed, these windows run along the
  anti-diagonal. Choice: w counts places, so a binary window covers whole pairs.
- Centre (`model.window_centre`): `previous` puts c = t, the place of the token the
  row reads (the start row reads no digit, so it sees x_1 alone); `produced` puts
  c = t + 1, the place of the digit being written (the start row then sees
  {x_1, x_2}). With NoPE, nothing tells x_1 from x_2 inside a window, and
  `produced` caps Successor near 50 % and Parity near 75 %; `previous` is exact.
- Places beyond the question (the carry row of Successor, a window hanging past
  either end) are dropped; a row whose window holds no place at all gets the
  nearest place, so that no row is fully closed (a softmax over -inf only is NaN).

Per site: `cross` is the input window; `decoder_self` the output window; `lm`
(decoder-only rows "<s> question = answer") gives the output rows, from "=" on,
both windows, and every question token only itself, so that no digit mixes with
its neighbours before an output reads it (000 does not say: its encoder is
unmasked; a decoder-only model has no separate encoder).
"""

from __future__ import annotations

import torch

from lengthgen.model.position.attention_bias.base import Geometry, StructuralBias

#: model.window_centre: the centre place of output row t is t + offset
WINDOW_CENTRES = ("previous", "produced")
_CENTRE_OFFSET = dict(zip(WINDOW_CENTRES, (0, 1)))


class WindowedBias(StructuralBias):
    options = ("window", "window_centre")

    def __init__(self, cfg, layout, n_heads) -> None:
        super().__init__(cfg, layout, n_heads)
        self.window, self.offset, self.place_width = cfg.window, _CENTRE_OFFSET[cfg.window_centre], layout.place_width

    @classmethod
    def check(cls, config, task, architecture) -> None:
        name, fmt = "model.attention_bias windowed", config.format
        if not architecture.bias_sites:
            raise ValueError(f"{name} shapes attention over a question and its answer; model.arch "
                             f"{config.model.arch} has no such attention")
        for flag in ("index_hints", "random_spaces", "reverse_operands"):
            if getattr(fmt, flag):
                raise ValueError(f"{name} aligns each output with one input place (000 App. A.4) and cannot "
                                 f"be combined with format.{flag}: set it to false")
        if not (fmt.reverse and fmt.pad):
            raise ValueError(f"{name} needs format.reverse and format.pad true: zero-padded operands and the "
                             f"answer least significant digit first put the aligned places on an anti-diagonal")
        if task.n_operands > 1 and not fmt.interleave:
            raise ValueError(f"{name} needs the digits of task.name {task.name} aligned place by place: set "
                             f"format.interleave: true (000 App. A.4, input alignment)")

    @property
    def acts(self) -> bool:
        return True

    def lm(self, g: Geometry) -> torch.Tensor:
        rows, keys = g.rows[None, :, None], torch.arange(g.n_keys, device=g.rows.device)[None, None, :]
        start = g.output_start[:, None, None]  # (B, 1, 1)
        outputs = (keys <= rows) & (keys >= rows - self.window) & (keys >= start)
        opened = torch.where(rows >= start, outputs | self._input_window(g), keys == rows)  # (B, Tq, Tk)
        return _additive(opened)

    def decoder_self(self, g: Geometry) -> torch.Tensor:
        rows, keys = g.rows[:, None], torch.arange(g.n_keys, device=g.rows.device)[None, :]
        opened = (keys <= rows) & (keys >= rows - self.window)  # (Tq, Tk)
        return _additive(opened.expand(len(g.key_lengths), -1, -1))

    def cross(self, g: Geometry) -> torch.Tensor:
        return _additive(self._input_window(g))

    def _input_window(self, g: Geometry) -> torch.Tensor:
        """(B, Tq, Tk) True on the key columns of places c - w .. c + w of each output row."""
        t = g.rows[None, :] - g.output_start[:, None]  # (B, Tq) output row
        places = ((g.input_end - g.input_start) // self.place_width)[:, None]  # (B, 1)
        centre = t + self.offset
        low = torch.minimum((centre - self.window).clamp(min=1), places)  # nearest place if none is inside
        high = torch.minimum((centre + self.window).clamp(min=1), places)
        end = g.input_end[:, None]
        first, last = end - self.place_width * high, end - self.place_width * (low - 1) - 1  # (B, Tq)
        keys = torch.arange(g.n_keys, device=g.rows.device)[None, None, :]
        return (keys >= first[..., None]) & (keys <= last[..., None])


def _additive(opened: torch.Tensor) -> torch.Tensor:
    """(B, Tq, Tk) bool -> (B, 1, Tq, Tk) additive mask, 0 open, -inf closed."""
    return torch.zeros(opened.shape, device=opened.device).masked_fill(~opened, float("-inf"))[:, None]
