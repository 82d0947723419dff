"""Where the digits of a question sit in its token row, for the model.

A plain dataclass with no imports of its own, shared by the data side (which
builds it: lengthgen.formats.input_layout) and the model (which reads it:
structural biases, UPE, coupled positions, Abacus embeddings), so that neither
side has to import the other. It is the one piece of position code outside
lengthgen.model.position: the data side reads it without loading torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InputLayout:
    """Where the digits of a question sit, for the parts of a model that need it
    (windowed attention bias, UPE); lengthgen.formats.input_layout builds it."""

    #: tokens per place of the question: 1, or 2 with format.interleave ("a_i b_i")
    place_width: int = 1
    #: question tokens before the first digit: the operator leading an interleaved question
    lead: int = 0
    #: aligned layout: the columns of the fixed operand's digits (the multiplier), each
    #: with its own uniform key vector under `pe: upe` (003 eq. 3.3)
    uniform_columns: tuple[int, ...] = ()
    #: the operands are written least significant digit first (format.reverse_operands),
    #: and the answer (format.reverse): where a digit's place counts from (lengthgen.model.position.places)
    operands_lsd_first: bool = False
    answer_lsd_first: bool = True
    #: tokens per answer place: 2 with format.index_hints (a hint and its digit), else 1
    answer_place_width: int = 1
