"""A character tokenizer for arithmetic strings.

One token per character of "0123456789+=*", plus three specials that never occur
in the text: padding, start of sequence and end of answer.
"""

from __future__ import annotations

PAD, BOS, EOS = "<pad>", "<s>", "</s>"
SPECIALS = (PAD, BOS, EOS)
CHARACTERS = "0123456789+=*"


class CharTokenizer:
    def __init__(self, characters: str = CHARACTERS) -> None:
        self.vocabulary: tuple[str, ...] = SPECIALS + tuple(characters)
        self._ids = {symbol: i for i, symbol in enumerate(self.vocabulary)}
        self.pad_id, self.bos_id, self.eos_id = (self._ids[s] for s in SPECIALS)
        #: id of digit d is digit_offset + d, so digit arrays map to ids by one add
        self.digit_offset = self._ids["0"]

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
