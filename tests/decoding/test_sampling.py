"""From masked logits to a token: temperature, top-k, top-p and min-p on what the mask left, and
seeded draws."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import onyx.cpu  # noqa: F401  (OpenBLAS before mlx.core)
import mlx.core as mx

from onyx.decoding.sampling import Sampler, apply_mask, distribution
from onyx.options import SamplingParams

LOGITS = mx.array(np.log(np.array([0.5, 0.2, 0.15, 0.1, 0.05], dtype=np.float32)))


def probs(**kw) -> np.ndarray:
    return np.array(distribution(LOGITS, SamplingParams(**kw)))


def test_temperature_one_is_the_softmax():
    np.testing.assert_allclose(probs(temperature=1.0), [0.5, 0.2, 0.15, 0.1, 0.05], rtol=1e-5)


def test_greedy_is_a_point_mass_on_the_argmax():
    assert probs(temperature=0.0).tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]


def test_truncations():
    np.testing.assert_allclose(probs(temperature=1.0, top_k=2), [0.5 / 0.7, 0.2 / 0.7, 0, 0, 0], rtol=1e-5)
    # top-p keeps a token while the mass before it is below p: 0.5, then 0.5+0.2 < 0.8 keeps the third.
    np.testing.assert_allclose(probs(temperature=1.0, top_p=0.8), [0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0], rtol=1e-5)
    # min-p drops tokens under min_p times the top probability.
    np.testing.assert_allclose(probs(temperature=1.0, min_p=0.3), [0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0], rtol=1e-5)


def test_the_mask_comes_first():
    # Masking the two most likely tokens, then top-p: the nucleus is taken from what is left.
    mask = mx.array([False, False, True, True, True])
    p = np.array(distribution(apply_mask(LOGITS, mask), SamplingParams(temperature=1.0, top_p=0.5)))
    assert p[0] == p[1] == 0 and p[2] == pytest.approx(1.0)


def test_seeded_draws_repeat():
    p = distribution(LOGITS, SamplingParams(temperature=1.0))
    draws = lambda seed: [int(Sampler(SamplingParams(temperature=1.0, seed=seed)).draw(p).item()) for _ in range(1)]  # noqa: E731
    a = Sampler(SamplingParams(temperature=1.0, seed=7))
    b = Sampler(SamplingParams(temperature=1.0, seed=7))
    assert [int(a.draw(p).item()) for _ in range(20)] == [int(b.draw(p).item()) for _ in range(20)]
    assert draws(1) == draws(1)
    counts = np.bincount([int(a.draw(p).item()) for _ in range(2000)], minlength=5) / 2000
    np.testing.assert_allclose(counts, [0.5, 0.2, 0.15, 0.1, 0.05], atol=0.04)


# Settings that are valid but extreme: subnormal and tiny temperatures and top_p, top_k past
# the vocabulary, min_p near 1. A valid request must never draw a token its mask forbids.
_tiny = st.sampled_from([5e-324, 1e-320, 1.4e-45, 1e-40, 1e-38, 1e-30, 1e-7, 1e-6, 1e-3])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    logits=st.lists(st.floats(-1e4, 1e4, width=32), min_size=2, max_size=12),
    allowed=st.lists(st.booleans(), min_size=12, max_size=12),
    temperature=st.one_of(_tiny, st.floats(0.0, 2.0)),
    top_p=st.one_of(_tiny, st.floats(1e-300, 1.0)),
    top_k=st.integers(0, 20),
    min_p=st.one_of(st.just(0.0), st.floats(0.0, 0.999999)),
    seed=st.integers(0, 2**32),
)
def test_no_setting_draws_a_masked_token(logits, allowed, temperature, top_p, top_k, min_p, seed):
    width = len(logits)
    allowed = allowed[:width]
    if not any(allowed):
        allowed[seed % width] = True
    mask = mx.array(allowed)
    params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, seed=seed)
    masked = apply_mask(mx.array(logits, dtype=mx.float32), mask)
    p = np.array(distribution(masked, params))
    assert np.all(np.isfinite(p)) and abs(p.sum() - 1.0) < 1e-4, (p, params)
    assert np.all(p[~np.array(allowed)] == 0.0), (p, params)
    sampler = Sampler(params)
    for _ in range(3):
        token = int(sampler.sample(mx.array(logits, dtype=mx.float32), mask).item())
        assert allowed[token], (token, params)
