"""The compiled RMS norm of MLX's CPU path (`onyx.cpu.norm`) against `mx.fast.rms_norm`."""

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from onyx.cpu.norm import rms_norm, takes_compiled_norm, use_compiled_norms


def test_rms_norm_matches_mlx_over_shapes_and_widths_in_any_order():
    # one compiled trace serves every leading shape; the width and eps are constants of it, so a
    # second width (a draft model's) must not reuse the first one's 1 / width
    for shape, eps in (((1, 576), 1e-5), ((3, 7, 576), 1e-5), ((2, 960), 1e-6), ((1, 1, 576), 1e-6), ((5, 64), 1e-5)):
        rng = np.random.default_rng(shape[-1] + len(shape))
        x = mx.array((rng.standard_normal(shape) * 3).astype(np.float32))
        w = mx.array(rng.standard_normal(shape[-1]).astype(np.float32))
        got, want = rms_norm(x, w, eps), mx.fast.rms_norm(x, w, eps)
        assert got.shape == want.shape and got.dtype == mx.float32
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=3e-6, atol=1e-6)


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(32)
        self.half = nn.RMSNorm(32)
        self.half.weight = self.half.weight.astype(mx.float16)
        self.scaled = _OnePlus(32)


class _OnePlus(nn.RMSNorm):  # Gemma's kind: (1 + weight), another computation
    def __call__(self, x):
        return mx.fast.rms_norm(x, 1.0 + self.weight, self.eps)


def test_only_float32_rmsnorms_of_mlxs_own_class_are_switched_and_they_compute_the_same():
    block = _Block()
    block.norm.weight = mx.arange(32, dtype=mx.float32) / 7.0
    x = mx.random.normal((2, 32), key=mx.random.key(3))
    want = block.norm(x)
    assert use_compiled_norms(block) == 1
    assert takes_compiled_norm(block.norm) and not takes_compiled_norm(block.half)
    assert not takes_compiled_norm(block.scaled)
    np.testing.assert_allclose(np.array(block.norm(x)), np.array(want), rtol=3e-6, atol=1e-6)
    assert use_compiled_norms(block) == 1  # switching again changes nothing
    # a half-precision input goes to MLX's own norm (and its type promotion)
    xh = x.astype(mx.float16)
    assert mx.array_equal(block.norm(xh), mx.fast.rms_norm(xh, block.norm.weight, block.norm.eps))
