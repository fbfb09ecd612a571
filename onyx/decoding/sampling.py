"""From logits to a token: grammar mask first, then temperature, top-k, top-p and min-p.

The order matters. Masking after top-p can leave no valid token at all (every token in the
nucleus may be invalid), so the grammar mask is applied to the raw logits and the usual
truncations run on what remains. `distribution` returns the final probability vector, so the
speculative verifier can compare a draft's and a target's laws with the same code that samples.

`RowSampling` is one sequence's sampling state: parameters, random stream, constraint, and the
ordered logits processors its rows go through (`onyx.decoding.processors`). In a batched step
every sequence has its own, and the verifier reads everything it applies to a sequence's logits
from it. `mask_to_mlx` is the MLX form of a grammar mask (`onyx.grammar.constraint.MaskTable`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import numpy as np

from onyx.grammar.constraint import unpack_bitmask
from onyx.options import SamplingParams

NEG_INF = float("-inf")


def mask_to_mlx(words: np.ndarray, width: int) -> mx.array:
    """A grammar bitmask (uint32 words) as an MLX bool vector of the logits' width."""
    return mx.array(unpack_bitmask(words, width))


def apply_mask(logits: mx.array, mask: mx.array | None) -> mx.array:
    """Sets the logits of disallowed tokens to -inf (works on (V,) and (n, V) logits)."""
    if mask is None:
        return logits
    return mx.where(mask, logits, NEG_INF)


def distribution(logits: mx.array, params: SamplingParams) -> mx.array:
    """The probability vector a sampler draws from, after temperature, top-k, top-p and min-p,
    for already-masked float32 logits of shape (..., V). Greedy is a point mass on the argmax."""
    if params.greedy:
        return (mx.arange(logits.shape[-1]) == mx.argmax(logits, axis=-1, keepdims=True)).astype(mx.float32)
    # Shifted so the largest allowed logit is 0 before dividing: no temperature can overflow it
    # to inf (and inf - inf to NaN) in the softmax.
    logits = logits.astype(mx.float32)
    logits = (logits - mx.max(logits, axis=-1, keepdims=True)) / params.temperature
    if params.top_k and params.top_k < logits.shape[-1]:
        kth = mx.sort(logits, axis=-1)[..., -params.top_k][..., None]
        logits = mx.where(logits < kth, NEG_INF, logits)
    probs = mx.softmax(logits, axis=-1)
    if params.top_p < 1.0:
        order = mx.argsort(-probs, axis=-1)
        sorted_p = mx.take_along_axis(probs, order, axis=-1)
        # Keep a token while the mass before it is below top_p, and the top token always (a
        # top_p below float32's smallest number would otherwise keep none).
        first = mx.arange(sorted_p.shape[-1]) == 0
        keep_sorted = ((mx.cumsum(sorted_p, axis=-1) - sorted_p) < params.top_p) | first
        keep = mx.put_along_axis(mx.zeros_like(keep_sorted), order, keep_sorted, axis=-1)
        probs = mx.where(keep, probs, 0.0)
    if params.min_p > 0.0:
        floor = params.min_p * mx.max(probs, axis=-1, keepdims=True)
        probs = mx.where(probs < floor, 0.0, probs)
    return probs / mx.sum(probs, axis=-1, keepdims=True)


class Sampler:
    """Draws tokens reproducibly: one PRNG key per request, split once per draw."""

    def __init__(self, params: SamplingParams) -> None:
        self.params = params
        self._key = mx.random.key(params.seed if params.seed is not None else int(np.random.randint(0, 2**31)))

    def next_key(self) -> mx.array:
        self._key, sub = mx.random.split(self._key)
        return sub

    def sample(self, logits: mx.array, mask: mx.array | None = None) -> mx.array:
        """Samples a token id (an mx scalar, not yet evaluated) from (V,) logits."""
        logits = apply_mask(logits, mask)
        if self.params.greedy:
            return mx.argmax(logits, axis=-1)
        return self.draw(distribution(logits, self.params))

    def draw(self, probs: mx.array) -> mx.array:
        """Samples from a probability vector."""
        return mx.random.categorical(mx.log(probs), key=self.next_key())

    def uniform(self) -> mx.array:
        return mx.random.uniform(key=self.next_key())


@dataclass
class RowSampling:
    """What turns one sequence's logits into its tokens: the sampling parameters, the sequence's
    own random stream, its constraint (None when unconstrained), the logits processors its rows
    go through in order (`onyx.decoding.processors`: bias and penalties, the grammar mask, Φ),
    its Φ provider (None without reweighting; prepared when decoding starts), its reasoning
    budget (`gate`, restricting the row masks while a thinking block is open), how many
    alternatives its logprob entries list (`logprobs`, None: no logprobs) and the token
    spelling those entries use (`token_bytes`)."""

    params: SamplingParams
    sampler: Sampler
    constraint: Any = None
    processors: list = field(default_factory=list)
    phi: Any = None
    gate: Any = None
    logprobs: int | None = None
    token_bytes: Any = None
