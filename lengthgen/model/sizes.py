"""Model size presets: layer count, width, heads and feed-forward width."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dimensions:
    n_layers: int
    d_model: int
    n_heads: int
    d_ff: int

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


SIZES: dict[str, Dimensions] = {
    # CPU presets: seconds per thousand steps on one core
    "tiny": Dimensions(n_layers=2, d_model=64, n_heads=4, d_ff=256),
    "small": Dimensions(n_layers=4, d_model=128, n_heads=4, d_ff=512),
    # 001 App. E.2 / Table E.1; the names are the parameter counts with ffn: geglu
    "2m": Dimensions(n_layers=2, d_model=256, n_heads=4, d_ff=1024),
    "5m": Dimensions(n_layers=4, d_model=256, n_heads=4, d_ff=1024),
    "25m": Dimensions(n_layers=6, d_model=512, n_heads=8, d_ff=2048),
    "268m": Dimensions(n_layers=16, d_model=1024, n_heads=16, d_ff=4096),
}
