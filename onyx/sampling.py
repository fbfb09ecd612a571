"""From logits to a token: grammar mask first, then temperature, top-k, top-p and min-p.

The order matters. Masking after top-p can leave no valid token at all (every token in the
nucleus may be invalid), so the grammar mask is applied to the raw logits and the usual
truncations run on what remains. `distribution` returns the final probability vector, so the
speculative verifier can compare a draft's and a target's laws with the same code that samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np

NEG_INF = float("-inf")


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings. `temperature == 0` means greedy (argmax of the masked logits)."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not (0.0 <= self.temperature <= 2.0) or self.temperature != self.temperature:
            raise ValueError(f"temperature must be between 0 and 2, got {self.temperature}")
        if not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not (0.0 <= self.min_p < 1.0):
            raise ValueError(f"min_p must be in [0, 1), got {self.min_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def bitmask_to_bool(words: np.ndarray, width: int) -> mx.array:
    """Unpacks a grammar bitmask (uint32 words, bit t%32 of word t//32) to a bool vector of the
    logits' width. Ids past the vocabulary's end stay False."""
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    if bits.shape[0] < width:
        bits = np.pad(bits, (0, width - bits.shape[0]))
    return mx.array(bits[:width].astype(np.bool_))


class MaskCache:
    """Bool masks per grammar state, made once per state: the per-token cost of constraining is
    then one dictionary lookup and one `where` over the logits."""

    def __init__(self, grammar, width: int) -> None:
        self.grammar = grammar
        self.width = width
        self._masks: dict[int, mx.array] = {}
        self._only_eos: dict[int, bool] = {}

    def get(self, state: int) -> mx.array:
        mask = self._masks.get(state)
        if mask is None:
            mask = bitmask_to_bool(self.grammar.token_bitmask(state), self.width)
            self._masks[state] = mask
        return mask

    def within(self, state: int, budget: int) -> mx.array:
        """The mask of `state` for a token after which at most `budget` tokens remain. When even
        the shortest completion no longer fits, the plain mask (the output will be cut short)."""
        words = self.grammar.token_bitmask_within(state, budget)
        if words is self.grammar.token_bitmask(state) or not words.any():
            return self.get(state)
        return bitmask_to_bool(words, self.width)

    def only_eos(self, state: int) -> bool:
        """True when the output is complete and nothing but EOS may follow."""
        done = self._only_eos.get(state)
        if done is None:
            done = bool(self.grammar.is_accepting(state)) and set(
                self.grammar.allowed_token_ids(state).tolist()) <= set(self.grammar.eos_token_ids)
            self._only_eos[state] = done
        return done


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
    logits = logits.astype(mx.float32) / params.temperature
    if params.top_k and params.top_k < logits.shape[-1]:
        kth = mx.sort(logits, axis=-1)[..., -params.top_k][..., None]
        logits = mx.where(logits < kth, NEG_INF, logits)
    probs = mx.softmax(logits, axis=-1)
    if params.top_p < 1.0:
        order = mx.argsort(-probs, axis=-1)
        sorted_p = mx.take_along_axis(probs, order, axis=-1)
        # Keep a token while the mass before it is below top_p (so the top token always stays).
        keep_sorted = (mx.cumsum(sorted_p, axis=-1) - sorted_p) < params.top_p
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
