"""Where positions are made, and every part of a model that reads them.

Two steps, each in its own place:

1. **Which position each token gets** (`samplers.py`, `model.positions`): a
   PositionSampler turns a batch of rows into explicit position indices, plain
   (0 .. T-1), randomized, cyclic (i mod T) or coupled (digits of one place share
   an ID). Coupled positions and Abacus embeddings index by the place of every digit
   in its number, read from the token rows by `places.py`. Every encoding below
   consumes whatever indices the sampler made, so no encoding has a randomized twin.
2. **How a model reads them** (`pe/`, `model.pe`), grouped by where each encoding acts:

   - input embedding, added to the token embeddings: `pe/embeddings.py` (sinusoidal,
     learned); `abacus.py` adds one more on the digits (`model.abacus`);
   - attention bias, bias(q_pos, k_pos) added to the scores: `pe/biases.py` (ALiBi,
     KerpleLog, FIRE, T5); the structural masks of `attention_bias/`
     (`model.attention_bias`: windowed, ABC) are added the same way, from where the
     digits sit rather than from position indices;
   - q/k transform, applied to queries and keys in every layer: `pe/rotary.py` (RoPE);
   - relative keys, a key-side term of each attention layer: `pe/relative_keys.py`
     (Shaw, UPE);
   - NoPE is none of them.

   `stack.py` holds one attention stack's parts and applies them before its layers run.

Where the digits sit in a row (`lengthgen.layout.InputLayout`, read by UPE, the
structural biases, coupled positions and Abacus) lives outside this package: the data
side builds it without loading torch, and everything here needs torch.

This `__init__` imports nothing: the attention layer imports RoPE's rotation from
`pe/` and `stack.py` imports the attention layer, so an `__init__` that imported
`stack.py` would close an import cycle (tests/test_imports.py).
"""
