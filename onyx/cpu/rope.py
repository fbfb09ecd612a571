"""Rotary position embedding from a precomputed table, for MLX's CPU backend.

On Metal, `mx.fast.rope` is one fused kernel. On the CPU backend it computes a cosine and a sine
for every element on every call, with scalar transcendental functions, which makes rope a
visible part of a small model's step. Reading the angles from a table that is built once (in
float64, then rounded to float32) is several times cheaper (`docs/benchmarks.md`).

`TableRoPE` computes what `mlx.nn.RoPE(dims, traditional=False, base, scale)` computes: the first
`dims` features of the last axis are split into two halves (x1, x2) and rotated by the angle
scale * position * base^(-2i/dims), position = offset + index along the second-to-last axis:

    out1 = x1 cos - x2 sin,    out2 = x2 cos + x1 sin

Features past `dims` pass through. The table grows (doubling) when a position past its end is
asked for; tables are shared by every layer with the same (dims, base, scale).

`use_table_rope(model)` swaps it in for each attention layer's plain `nn.RoPE`; other rope kinds
(the traditional interleaved layout, Llama 3 / YaRN / NTK scaling) and array offsets (mlx-lm's
batched caches) keep MLX's own implementation. `at_positions` rotates each row by its own
position: the rows of a ragged batch (`onyx.kv.ragged`).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np

_INITIAL_POSITIONS = 4096


class _AngleTable:
    """cos and signed-sin rows per position, both (positions, dims): row p holds
    [cos θ, cos θ] and [-sin θ, sin θ] for the dims/2 angles θ of position p."""

    def __init__(self, dims: int, base: float, scale: float) -> None:
        self.dims, self.base, self.scale = dims, base, scale
        self.cos = self.sin = None
        self.size = 0
        self._grow(_INITIAL_POSITIONS)

    def _grow(self, size: int) -> None:
        half = self.dims // 2
        inv_freq = float(self.base) ** (-np.arange(half, dtype=np.float64) * 2.0 / self.dims)
        angles = (np.arange(size, dtype=np.float64) * self.scale)[:, None] * inv_freq[None]
        cos, sin = np.cos(angles), np.sin(angles)
        self.cos = mx.array(np.concatenate([cos, cos], axis=1).astype(np.float32))
        self.sin = mx.array(np.concatenate([-sin, sin], axis=1).astype(np.float32))
        self.size = size

    def rows(self, start: int, n: int) -> tuple[mx.array, mx.array]:
        if start + n > self.size:
            size = self.size
            while size < start + n:
                size *= 2
            self._grow(size)
        return self.cos[start:start + n], self.sin[start:start + n]


_TABLES: dict[tuple[int, float, float], _AngleTable] = {}


def _table(dims: int, base: float, scale: float) -> _AngleTable:
    key = (dims, float(base), float(scale))
    if key not in _TABLES:
        _TABLES[key] = _AngleTable(dims, base, scale)
    return _TABLES[key]


class TableRoPE(nn.Module):
    """Drop-in for a non-traditional `nn.RoPE`, reading its angles from a shared table."""

    def __init__(self, original: nn.RoPE) -> None:
        super().__init__()
        self._original = original
        self._angles = _table(original.dims, original.base, original.scale)
        self.freeze()

    def __call__(self, x: mx.array, offset: Any = 0) -> mx.array:
        if not isinstance(offset, int):
            return self._original(x, offset=offset)
        dims = self._angles.dims
        half = dims // 2
        cos, sin = self._angles.rows(offset, x.shape[-2])
        rotated = x[..., :dims]
        swapped = mx.concatenate([rotated[..., half:], rotated[..., :half]], axis=-1)
        out = (rotated * cos + swapped * sin).astype(x.dtype)
        if dims < x.shape[-1]:
            out = mx.concatenate([out, x[..., dims:]], axis=-1)
        return out

    def at_positions(self, x: mx.array, positions: mx.array, max_position: int) -> mx.array:
        """Rotates row i of `x` (second-to-last axis) by position `positions[i]`: the rows of a
        ragged batch, each at its own sequence's position (`onyx.kv.ragged`)."""
        dims = self._angles.dims
        half = dims // 2
        self._angles.rows(max_position, 1)  # grows the table when needed
        cos = mx.take(self._angles.cos, positions, axis=0)
        sin = mx.take(self._angles.sin, positions, axis=0)
        rotated = x[..., :dims]
        swapped = mx.concatenate([rotated[..., half:], rotated[..., :half]], axis=-1)
        out = (rotated * cos + swapped * sin).astype(x.dtype)
        if dims < x.shape[-1]:
            out = mx.concatenate([out, x[..., dims:]], axis=-1)
        return out


def use_table_rope(model) -> int:
    """Replaces each attention layer's plain non-traditional `nn.RoPE` by a `TableRoPE`.
    Returns how many were replaced (0 when the model uses another kind of rope)."""
    replaced = 0
    for _, module in list(model.named_modules()):
        rope = getattr(module, "rope", None)
        if type(rope) is nn.RoPE and not rope.traditional and rope.dims % 2 == 0:
            module.rope = TableRoPE(rope)
            replaced += 1
    return replaced
