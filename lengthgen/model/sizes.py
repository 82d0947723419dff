"""Model size presets: layer count, width, heads and feed-forward width.

How a preset maps onto each architecture (lengthgen.model.ARCHITECTURES):
`n_layers` is the depth of the stack that produces the outputs: the decoder of
`decoder` and of `encoder_decoder`, the encoder of `encoder`. The encoder of
`encoder_decoder` has `encoder_layers` more layers (1 unless the preset says,
000 §3.3's "1 encoder layer and 6 decoder layers"); the other architectures
ignore `encoder_layers`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dimensions:
    n_layers: int
    d_model: int
    n_heads: int
    d_ff: int
    #: encoder depth of the encoder-decoder architecture (000 §3.3: 1)
    encoder_layers: int = 1

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


SIZES: dict[str, Dimensions] = {
    # CPU presets: seconds per thousand steps on one core
    "tiny": Dimensions(n_layers=2, d_model=64, n_heads=4, d_ff=256),
    "mini": Dimensions(n_layers=3, d_model=64, n_heads=4, d_ff=256),
    "small": Dimensions(n_layers=4, d_model=128, n_heads=4, d_ff=512),
    # 001 App. E.2 / Table E.1; the names are the parameter counts with ffn: geglu
    "2m": Dimensions(n_layers=2, d_model=256, n_heads=4, d_ff=1024),
    "5m": Dimensions(n_layers=4, d_model=256, n_heads=4, d_ff=1024),
    "25m": Dimensions(n_layers=6, d_model=512, n_heads=8, d_ff=2048),
    "268m": Dimensions(n_layers=16, d_model=1024, n_heads=16, d_ff=4096),
    # 000 §3.3: encoder-decoder, 1 encoder + 6 decoder layers, 8 heads, d 128, ff 512;
    # App. A.2: RoPE on addition "must use an embedding size of 512" (ff 4d, not given)
    "ed_128": Dimensions(n_layers=6, d_model=128, n_heads=8, d_ff=512, encoder_layers=1),
    "ed_512": Dimensions(n_layers=6, d_model=512, n_heads=8, d_ff=2048, encoder_layers=1),
    # 003 App. B: BERT encoder, 6 layers, 8 heads, d 768 (ff 3072, BERT's default);
    # 9 layers for the 3-digit multipliers
    "bert_6l": Dimensions(n_layers=6, d_model=768, n_heads=8, d_ff=3072),
    "bert_9l": Dimensions(n_layers=9, d_model=768, n_heads=8, d_ff=3072),
    # Cho et al. 2024 (position coupling, arXiv 2405.20671): the authors' addition runs use
    # 1 layer, 4 heads of 128 dimensions, feed-forward 2048
    "1l_512": Dimensions(n_layers=1, d_model=512, n_heads=4, d_ff=2048),
    # the released position-coupling code's addition runs (scripts/addition/run_coupling.sh):
    # d_model 1024, 1 layer of 4 heads of 256 dimensions (d_kv = d_model / heads), ff 2048
    "1l_1024_4h": Dimensions(n_layers=1, d_model=1024, n_heads=4, d_ff=2048),
    # McLeish et al. 2024 (Abacus, arXiv 2405.17399), Fig. 1: depth-16 decoders; the width
    # here is the 25m preset's (d 512, 8 heads), not taken from that paper
    "16l_512": Dimensions(n_layers=16, d_model=512, n_heads=8, d_ff=2048),
    # McLeish et al. 2024's own width (released code, shells/addition_ff.sh, addition_lt.sh,
    # multiplication.sh: hidden_size 1024, 16 heads, intermed_size 2048 with the GELU-GLU
    # nonlinearity of cramming/config/arch/crammed-depthrecurrent.yaml). Their GLU splits
    # the 2048 outputs of its input projection into value and gate of 1024 each, so with
    # `ffn: geglu` (d_ff = the width of each) d_ff 1024 gives their feed-forward weights
    # exactly. Layers per block: 16 (16 x 1 loop, Fig. 1's depth-16 models, with and
    # without input injection), 8 (x 2 loops, §3.2's best looped addition model), 4 (x 4
    # loops, multiplication), 1 (x 16 loops, addition_lt.sh); loops are model.loops
    "16l_1024": Dimensions(n_layers=16, d_model=1024, n_heads=16, d_ff=1024),
    "8l_1024": Dimensions(n_layers=8, d_model=1024, n_heads=16, d_ff=1024),
    "4l_1024": Dimensions(n_layers=4, d_model=1024, n_heads=16, d_ff=1024),
    "1l_1024": Dimensions(n_layers=1, d_model=1024, n_heads=16, d_ff=1024),
    # one-layer CPU preset (a 1-layer model suffices for addition under coupling, Cho et al.)
    "tiny_1l": Dimensions(n_layers=1, d_model=64, n_heads=4, d_ff=256),
}
