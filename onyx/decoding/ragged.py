"""Ragged batches: one model forward over the rows of several sequences, each attending to its
own paged KV.

A batched step gives the model every active sequence's rows (its pending token plus drafts, or a
chunk of its prompt) laid end to end as one row of tokens, shape (1, N). Everything but
attention is position-wise, so the weight products, which are what a decode step costs on this
CPU (every weight is read once per forward, whatever the number of rows), run once over all N
rows. Attention alone is per sequence: each segment's queries attend to its own sequence's
working view (`onyx.paged_cache`), with its own causal (or sliding-window) mask, and the rotary
embedding uses each row's own position.

This needs no change to the model's code. During a ragged forward every layer gets a
`RaggedLayerCache`:
- its `offset` is a `RaggedOffset` (per-row positions), which the wrapped rotary embedding
  (`RaggedRoPE`, installed by `install`) reads;
- its `update_and_fetch` writes each segment's keys and values into its sequence's layer cache
  (the same code a lone sequence runs: block allocation, copy-on-write, pool flushes) and keeps
  what each sequence's attention must read;
- the attention function the model module calls (`scaled_dot_product_attention`, which mlx-lm
  models import from `mlx_lm.models.base` and call with `cache=`) is replaced, in the model's
  module, by one that runs one fused attention per segment when the cache is ragged and calls
  the original otherwise.

Why this layout and not padding (measured by `bench/batch_attention_bench.py`; numbers in the
README): a padded batch (B, L_max) makes every sequence pay the longest draft row, and its
attention reads a (B, H, T_max, D) key tensor that must either be kept as one persistent
padded cache (rebuilt when a sequence joins or leaves) or gathered from the blocks each step,
and the gather costs more than per-segment attention on the views already kept.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn

from onyx.paged_cache import PagedLayerCache, PagedSequence


@dataclass
class RaggedOffset:
    """What `cache.offset` is during a ragged forward: per-row positions, and the segments
    (first row, row count, the sequence's length before this forward)."""

    positions: mx.array  # (N,) int32
    segments: list[tuple[int, int, int]]
    max_position: int
    cuts: list[int]  # where each segment after the first begins (for `mx.split`)


class RaggedLayerCache:
    """One layer's cache for a ragged forward over several sequences (see the module docstring).
    Not a general cache: it exists for the duration of one forward."""

    def __init__(self, caches: list[PagedLayerCache], offset: RaggedOffset) -> None:
        self.caches = caches
        self.offset = offset
        self.fetched: list[tuple[mx.array, mx.array, object]] = []

    def update_and_fetch(self, keys: mx.array, values: mx.array):
        fetched = []
        cuts = self.offset.cuts  # one split per layer, not a slice per segment
        pairs = zip(mx.split(keys, cuts, axis=2), mx.split(values, cuts, axis=2))
        for c, (_, n, _), (ks, vs) in zip(self.caches, self.offset.segments, pairs):
            mask = c.make_mask(n, window_size=c.window)  # before the write moves the offset
            k, v = c.update_and_fetch(ks, vs)
            fetched.append((k, v, mask))
        self.fetched = fetched
        return keys, values  # (unused: the attention below reads `fetched`)

    def make_mask(self, N: int, window_size=None, return_array: bool = False):
        return None  # masks are per segment (see update_and_fetch)


def ragged_attention(queries: mx.array, cache: RaggedLayerCache, scale: float, sinks=None) -> mx.array:
    """Each segment's queries against its own sequence's keys and values, concatenated back
    into one row of outputs."""
    outs = []
    kwargs = {} if sinks is None else {"sinks": sinks}
    for (k, v, mask), q in zip(cache.fetched, mx.split(queries, cache.offset.cuts, axis=2)):
        outs.append(mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask, **kwargs))
    cache.fetched = []
    return outs[0] if len(outs) == 1 else mx.concatenate(outs, axis=2)


class RaggedRoPE(nn.Module):
    """Wraps a layer's rotary embedding: a `RaggedOffset` rotates each row by its own position
    (through the table of `onyx.cpu_rope.TableRoPE` in one gather, otherwise per segment);
    an int or array offset goes to the wrapped module unchanged."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self._inner = inner
        self.freeze()

    def __call__(self, x: mx.array, offset=0) -> mx.array:
        if not isinstance(offset, RaggedOffset):
            return self._inner(x, offset=offset)
        at_positions = getattr(self._inner, "at_positions", None)
        if at_positions is not None:
            return at_positions(x, offset.positions, offset.max_position)
        parts = [self._inner(x[..., a:a + n, :], offset=o) for a, n, o in offset.segments]
        return mx.concatenate(parts, axis=-2)


def _attention_modules(model) -> list[nn.Module]:
    out = []
    for layer in getattr(model, "layers", []):
        for name in ("self_attn", "attention"):
            attn = getattr(layer, name, None)
            if attn is not None:
                out.append(attn)
                break
    return out


def install(model) -> bool:
    """Makes `model` (an mlx-lm model) able to run ragged forwards: wraps every attention
    layer's `rope` and routes its module's `scaled_dot_product_attention` through a dispatcher
    (transparent for every other cache). Returns False, changing nothing, when the architecture
    does not have that shape (the caller then runs the sequences one by one)."""
    attns = _attention_modules(model)
    if not attns or len(attns) != len(getattr(model, "layers", [])):
        return False
    modules = {type(a).__module__ for a in attns}
    for name in modules:
        mod = sys.modules.get(name)
        if mod is None or not callable(getattr(mod, "scaled_dot_product_attention", None)):
            return False
    if not all(isinstance(getattr(a, "rope", None), nn.Module) for a in attns):
        return False
    for name in modules:
        mod = sys.modules[name]
        if not getattr(mod.scaled_dot_product_attention, "_onyx_ragged", False):
            mod.scaled_dot_product_attention = _dispatcher(mod.scaled_dot_product_attention)
    for a in attns:
        if not isinstance(a.rope, RaggedRoPE):
            a.rope = RaggedRoPE(a.rope)
    return True


def _dispatcher(original):
    def scaled_dot_product_attention(queries, keys, values, cache=None, scale=1.0, mask=None, **kwargs):
        if isinstance(cache, RaggedLayerCache):
            return ragged_attention(queries, cache, scale, kwargs.get("sinks"))
        return original(queries, keys, values, cache=cache, scale=scale, mask=mask, **kwargs)

    scaled_dot_product_attention._onyx_ragged = True
    return scaled_dot_product_attention


def layer_caches(seqs: list[PagedSequence], lengths: list[int]) -> list[RaggedLayerCache]:
    """The per-layer caches of one ragged forward over `seqs`, which get `lengths[i]` rows each
    (laid end to end in that order)."""
    segments, positions, a = [], [], 0
    for seq, n in zip(seqs, lengths):
        o = seq.length
        segments.append((a, n, o))
        positions.extend(range(o, o + n))
        a += n
    offset = RaggedOffset(mx.array(positions, dtype=mx.int32), segments, max(positions),
                          [a for a, _, _ in segments[1:]])
    per_seq = [s.layer_caches() for s in seqs]
    return [RaggedLayerCache([caches[l] for caches in per_seq], offset) for l in range(len(per_seq[0]))]
