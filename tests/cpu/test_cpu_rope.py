"""The table-driven rotary embedding used on MLX's CPU backend computes what `nn.RoPE` does."""

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest

from onyx.cpu.rope import TableRoPE, use_table_rope


def reference_rope(x: np.ndarray, dims: int, base: float, scale: float, offset: int) -> np.ndarray:
    """The rotation written out in float64 (non-traditional layout: halves, not pairs)."""
    half = dims // 2
    pos = (offset + np.arange(x.shape[-2])) * scale
    theta = pos[:, None] * base ** (-np.arange(half) * 2.0 / dims)[None]
    x1, x2 = x[..., :half].astype(np.float64), x[..., half:dims].astype(np.float64)
    out = np.concatenate([x1 * np.cos(theta) - x2 * np.sin(theta), x2 * np.cos(theta) + x1 * np.sin(theta)], axis=-1)
    return np.concatenate([out, x[..., dims:]], axis=-1)


@pytest.mark.parametrize("dims,width,base,scale", [(64, 64, 1e5, 1.0), (32, 64, 1e4, 1.0),
                                                   (256, 256, 1e6, 0.125)])
@pytest.mark.parametrize("offset,length", [(0, 7), (79, 1), (4094, 5), (9000, 2)])
def test_table_rope_matches_the_rotation(dims, width, base, scale, offset, length):
    rng = np.random.default_rng(offset + dims)
    x = rng.standard_normal((1, 3, length, width)).astype(np.float32)
    rope = nn.RoPE(dims, traditional=False, base=base, scale=scale)
    table = TableRoPE(rope)
    got = np.array(table(mx.array(x), offset=offset))
    np.testing.assert_allclose(got, reference_rope(x, dims, base, scale, offset), atol=2e-5)
    # MLX's own kernel agrees too, up to its float32 angles (they drift with the position)
    np.testing.assert_allclose(got, np.array(rope(mx.array(x), offset=offset)), atol=1e-3)


def test_array_offsets_keep_mlx_rope():
    rope = nn.RoPE(64, traditional=False, base=1e4)
    x = mx.random.normal((2, 3, 1, 64))
    offsets = mx.array([3, 11])
    np.testing.assert_array_equal(np.array(TableRoPE(rope)(x, offset=offsets)), np.array(rope(x, offset=offsets)))


def test_use_table_rope_swaps_only_plain_non_traditional_ropes():
    class Attention(nn.Module):
        def __init__(self, rope):
            super().__init__()
            self.rope = rope

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [Attention(nn.RoPE(64)), Attention(nn.RoPE(64, traditional=True))]

    model = Model()
    assert use_table_rope(model) == 1
    assert isinstance(model.layers[0].rope, TableRoPE)
    assert type(model.layers[1].rope) is nn.RoPE
