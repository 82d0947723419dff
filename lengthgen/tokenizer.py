"""A character tokenizer for arithmetic strings: one token per character.

Characters: the digits, "+", "=", "*", a space (random-space augmentation, 001 Fig. 7),
"." (the "pad" symbol of the fixed-length format, 003 eq. 3.1), and the 102 ordered
index-hint symbols of 001 App. E.1. Three specials never occur in the text:
padding, start of sequence and end of answer. One vocabulary serves every format,
so every trial of a study has the same embedding table whatever its format.

Choice where 001 is silent (it says only "a pre-defined ordered index set with 102
distinct symbols"): the hints are a..z, A..Z, then the 50 letters U+0100..U+0131
(Latin Extended-A: "Āā...İı"), in that order; hint k is HINTS[k].
"""

from __future__ import annotations

import string

PAD, BOS, EOS = "<pad>", "<s>", "</s>"
SPECIALS = (PAD, BOS, EOS)
N_HINTS = 102
HINTS = string.ascii_lowercase + string.ascii_uppercase + "".join(chr(0x100 + i) for i in range(50))
SPACE = " "
FILL = "."
CHARACTERS = "0123456789+=*" + SPACE + FILL + HINTS

assert len(HINTS) == N_HINTS and len(set(CHARACTERS)) == len(CHARACTERS)


class CharTokenizer:
    def __init__(self, characters: str = CHARACTERS) -> None:
        self.vocabulary: tuple[str, ...] = SPECIALS + tuple(characters)
        self._ids = {symbol: i for i, symbol in enumerate(self.vocabulary)}
        self.pad_id, self.bos_id, self.eos_id = (self._ids[s] for s in SPECIALS)
        #: id of digit d is digit_offset + d, so digit arrays map to ids by one add
        self.digit_offset = self._ids["0"]
        #: id of hint k is hint_offset + k (None when the vocabulary has no hints)
        self.hint_offset = self._ids.get(HINTS[0])

    def __len__(self) -> int:
        return len(self.vocabulary)

    def id(self, symbol: str) -> int:
        return self._ids[symbol]

    def encode(self, text: str, *, bos: bool = False, eos: bool = False) -> list[int]:
        unknown = set(text) - set(self._ids)
        if unknown:
            raise ValueError(f"characters {sorted(unknown)} are not in the vocabulary")
        ids = [self._ids[c] for c in text]
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids: list[int], *, keep_specials: bool = False) -> str:
        symbols = (self.vocabulary[i] for i in ids)
        if keep_specials:
            return "".join(symbols)
        return "".join(s for s in symbols if s not in SPECIALS)
