"""The vectorised exp of MLX's CPU path, the softmax and SwiGLU built on it, and the check that
decides which MLPs take it."""

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest

from onyx.cpu import blas
from onyx.cpu.exp import SHIM_SOFTMAX_MIN, exp, masked_softmax, shim_softmax, swiglu, takes_fast_swiglu, use_fast_swiglu


def test_exp_is_within_two_ulp_and_clamps_instead_of_overflowing():
    x = np.linspace(-87, 88, 400_001, dtype=np.float32)
    got = np.array(exp(mx.array(x)))
    want = np.exp(x.astype(np.float64))
    assert np.max(np.abs(got - want) / want) < 2.4e-7  # float32's epsilon is 1.19e-7
    ends = np.array(exp(mx.array([-np.inf, -1e30, -200.0, 200.0, 1e30, np.inf], dtype=mx.float32)))
    assert np.all(np.isfinite(ends)) and np.all(ends > 0)
    assert np.all(ends[:3] < 1.2e-38) and np.all(ends[3:] > 1e38)


@pytest.mark.parametrize("shape", [(8, 3, 3, 1, 150), (4, 3, 3, 2, 77), (1, 1, 1, 5, 2049)])
def test_masked_softmax_matches_mlx_softmax_and_zeroes_the_masked(shape):
    rng = np.random.default_rng(sum(shape))
    scores = (rng.standard_normal(shape) * 8).astype(np.float32)
    mask = rng.random(shape[:1] + (1, 1) + shape[3:]) < 0.6
    mask[..., 0] = True  # every row sees one key
    s, m = mx.array(scores), mx.array(mask)
    got = np.array(masked_softmax(s, m))
    want = np.array(mx.softmax(mx.where(m, s, -mx.inf), axis=-1, precise=True))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    assert np.all(got[~np.broadcast_to(mask, shape)] == 0.0)


def test_masked_softmax_broadcasts_whatever_shape_came_first():
    # one key, then five: a compiled trace of the first call must not fix the broadcasts
    for keys in (1, 5, 1, 3):
        rng = np.random.default_rng(keys)
        s = mx.array(rng.standard_normal((2, 3, 3, 1, keys)).astype(np.float32))
        m = mx.array(np.ones((2, 1, 1, 1, keys), bool))
        np.testing.assert_allclose(np.array(masked_softmax(s, m)), np.array(mx.softmax(s, axis=-1, precise=True)),
                                   rtol=2e-6, atol=1e-7)


@pytest.mark.skipif(not blas.shim_library(), reason="the BLAS shim is built on Linux with OpenBLAS and a C compiler only")
def test_the_shims_softmax_matches_mlx_and_a_row_keeps_its_bits():
    # A prompt chunk's scores (a causal mask, keys past a vector's multiple), masked entries of
    # -inf and large spreads; every row as alone; too few scores is not its work.
    rng = np.random.default_rng(7)
    n, t = 64, 1203
    shape = (1, 3, 3, n, t)
    scores = (rng.standard_normal(shape) * rng.choice([0.1, 4.0, 60.0], size=shape[:-1] + (1,))).astype(np.float32)
    mask = (np.arange(t - n, t)[:, None] >= np.arange(t)[None])[None, None, None]
    s, m = mx.array(scores), mx.array(mask)
    got = np.array(shim_softmax(s, m))
    x = np.where(np.broadcast_to(mask, shape), scores.astype(np.float64), -np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=3e-6, atol=1e-9)  # (MLX's: 7e-6)
    assert np.all(got[~np.broadcast_to(mask, shape)] == 0.0)
    np.testing.assert_allclose(got.sum(-1), 1.0, rtol=1e-5)
    rows = scores.reshape(-1, t)[::37]  # fewer rows, the same values: the same bits
    some = np.where(np.broadcast_to(mask, shape).reshape(-1, t)[::37], rows, -np.inf)
    pad = np.full((SHIM_SOFTMAX_MIN // t + 1, t), -1.0, np.float32)  # (to reach the shim's minimum)
    again = np.array(shim_softmax(mx.array(np.concatenate([some, pad])), None))[:some.shape[0]]
    assert np.array_equal(again, got.reshape(-1, t)[::37])
    assert shim_softmax(mx.array(scores[0, 0, 0, :2, :100]), None) is None
    assert shim_softmax(s.astype(mx.float16), None) is None


def test_swiglu_matches_silu_times_the_up_projection():
    rng = np.random.default_rng(0)
    gate = (rng.standard_normal((3, 700)) * 12).astype(np.float32)
    up = rng.standard_normal((3, 700)).astype(np.float32)
    g64 = gate.astype(np.float64)
    want = g64 / (1 + np.exp(-g64)) * up
    np.testing.assert_allclose(np.array(swiglu(mx.array(gate), mx.array(up))), want, rtol=1e-6, atol=1e-6)


class _MLP(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = nn.Linear(8, 16), nn.Linear(8, 16), nn.Linear(16, 8)
        self.act = act

    def __call__(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


def test_only_mlps_that_compute_swiglu_are_switched():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [_MLP(nn.silu), _MLP(nn.gelu_approx), _MLP(nn.silu)]

    model = Model()
    x = mx.random.normal((2, 8))
    before = [np.array(layer(x)) for layer in model.layers]
    keys = sorted(k for k, _ in nn.utils.tree_flatten(model.parameters()))
    assert use_fast_swiglu(model) == 2
    assert [takes_fast_swiglu(layer) for layer in model.layers] == [True, False, True]
    assert all(isinstance(layer, _MLP) for layer in model.layers)
    assert sorted(k for k, _ in nn.utils.tree_flatten(model.parameters())) == keys  # same parameters
    for layer, b in zip(model.layers, before):
        np.testing.assert_allclose(np.array(layer(x)), b, rtol=1e-5, atol=1e-6)
    assert use_fast_swiglu(model) == 2  # a second call changes nothing
