"""Ragged batches: one model forward over the rows of several sequences, each attending to its
own paged KV.

A batched step gives the model every active sequence's rows (its pending token plus drafts, or a
chunk of its prompt) laid end to end as one row of tokens, shape (1, N). Everything but
attention is position-wise, so the weight products, which are what a decode step costs on this
CPU (every weight is read once per forward, whatever the number of rows), run once over all N
rows. Attention reads each sequence's own working view, a slot of the pool's view arrays
(`onyx.kv.views`), with its own causal (or sliding-window) mask, and the rotary embedding uses
each row's own position.

This needs no change to the model's code. During a ragged forward every layer gets a
`RaggedLayerCache`:
- its `offset` is a `RaggedOffset` (per-row positions), which the wrapped rotary embedding
  (`RaggedRoPE`, installed by `install`) reads;
- its `update_and_fetch` writes every row's keys and values into its sequence's slot with one
  scatter (block allocation, copy-on-write and the write plans were settled once for the
  forward, by `RaggedStep`, with the code a lone sequence runs) and keeps what attention reads;
- the attention function the model module calls (`scaled_dot_product_attention`, which mlx-lm
  models import from `mlx_lm.models.base` and call with `cache=`) is replaced, in the model's
  module, by one that runs the ragged attention when the cache is ragged and calls the
  original otherwise.

The ragged attention is one batched attention over the view slots for the segments of a few
rows (decode rows and drafts: the queries padded to the longest such segment), and one
attention per segment for longer ones (prompt chunks), which would make every slot pay their
rows. Attention and view writes run once per layer for all the short segments, not once per
sequence per layer, which at several sequences of one row would be a large part of the step. A
padded batch of the whole forward (B, L_max) would also make the weight products pay for the
padding, which the rows laid end to end avoid (`bench/batch_attention_bench.py` compares them).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from onyx.cpu.exp import masked_softmax, shim_softmax
from onyx.kv.pool import PagedLayerCache, PagedSequence


# A segment of at most this many rows attends in the batched attention over the view slots;
# a longer one (a prompt chunk) attends alone: padding every slot to its rows would cost more.
BATCHED_ROWS = 16
# An attention of its own costs about as much as this many padded key rows in the batch.
ALONE_COST_KEYS = 4096


@dataclass
class RaggedOffset:
    """What `cache.offset` is during a ragged forward: per-row positions, and the segments
    (first row, row count, the sequence's length before this forward)."""

    positions: mx.array  # (N,) int32
    segments: list[tuple[int, int, int]]
    max_position: int


def _batched(candidates: list[int], ends: list[int]) -> list[int]:
    """The short segments that attend together: every slot of the batch reads keys up to the
    longest segment's end, so a segment far longer than the others (a prompt going in a few
    tokens a step beside short decodes) attends alone when that padding would cost more than an
    attention of its own."""
    group = sorted(candidates, key=lambda i: ends[i])
    while len(group) > 1 and (len(group) - 1) * (ends[group[-1]] - ends[group[-2]]) > ALONE_COST_KEYS:
        group.pop()
    kept = set(group)
    return [i for i in candidates if i in kept]


class RaggedStep:
    """What every layer of one ragged forward shares: the sequences, their write plans (made
    once, before the forward), and the index arrays of the one scatter per layer and of the
    batched attention.

    Rows are laid end to end, segment after segment. Segments of at most `BATCHED_ROWS` rows
    ("short") whose views are in the pool's shared arrays attend together: their queries are
    placed in a (slots, heads, n_max, D) batch, slot by slot, against the view slots [0, highest
    such slot] up to the longest length, with a mask per row (its own slot, causal, the layer's
    window; padding rows see key 0 of their slot and are dropped). Other segments attend alone
    on their view: prompt chunks, and sequences with view arrays of their own (long ones)."""

    def __init__(self, seqs: list[PagedSequence], lengths: list[int]) -> None:
        self.views = seqs[0].pool.views
        self.seqs = seqs
        self.cpu = mx.default_device() == mx.cpu  # batched attention as grouped products there
        segments, positions, a = [], [], 0
        for seq, n in zip(seqs, lengths):
            o = seq.length
            segments.append((a, n, o))
            positions.extend(range(o, o + n))
            a += n
        self.rows = a
        self.offset = RaggedOffset(mx.array(positions, dtype=mx.int32), segments, max(positions))
        # slots, blocks and capacity for every write, before any layer runs
        self.flushes = [seq.prepare_write(o, o + n) for seq, (_, n, o) in zip(seqs, segments)]
        self.slots = [seq.slot for seq in seqs]
        shared = [seq.views is self.views for seq in seqs]
        self.private = [i for i, s in enumerate(shared) if not s]  # written one by one
        in_shared = np.repeat(np.array(shared), lengths)
        self.shared_rows = None if in_shared.all() else mx.array(np.flatnonzero(in_shared).astype(np.int32))
        self._slot_of_row = np.repeat(np.array(self.slots, dtype=np.int64), lengths)[in_shared]
        self._pos = np.array(positions, dtype=np.int64)[in_shared]
        self._scatter: dict[int, tuple[mx.array, mx.array, mx.array]] = {}
        self._masks: dict[object, mx.array] = {}
        short = _batched([i for i, (_, n, _) in enumerate(segments) if n <= BATCHED_ROWS and shared[i]],
                         [o + n for _, n, o in segments])
        self.short = short if len(short) > 1 else []  # one segment alone is cheaper on its slot
        self.long = [i for i in range(len(segments)) if i not in self.short]
        if self.short:
            self.n_max = max(segments[i][1] for i in self.short)
            self.num_slots = max(self.slots[i] for i in self.short) + 1
            self.keys = max(segments[i][2] + segments[i][1] for i in self.short)
            q_index = np.full(self.num_slots * self.n_max, a, dtype=np.int32)  # row a: zeros
            out_index = []
            for i in self.short:
                r0, n, _ = segments[i]
                at = self.slots[i] * self.n_max
                q_index[at:at + n] = np.arange(r0, r0 + n)
                out_index.extend(range(at, at + n))
            self.q_index = mx.array(q_index)
            self.out_index = mx.array(np.array(out_index, dtype=np.int32))
        # the attention's outputs come as [short segments' rows, then each long segment's]
        order = [r for i in self.short + self.long
                 for r in range(segments[i][0], segments[i][0] + segments[i][1])]
        self.unpermute = None if order == list(range(a)) else mx.array(np.argsort(order).astype(np.int32))

    def scatter_index(self, heads: int) -> tuple[mx.array, mx.array, mx.array]:
        """(slot, head, position) of every written (head, row), head-major: the order of a
        layer's keys (1, heads, N, D) read as (heads * N, D)."""
        idx = self._scatter.get(heads)
        if idx is None:
            idx = (mx.array(np.tile(self._slot_of_row, heads).astype(np.int32)),
                   mx.array(np.repeat(np.arange(heads), len(self._pos)).astype(np.int32)),
                   mx.array(np.tile(self._pos, heads).astype(np.int32)))
            self._scatter[heads] = idx
        return idx

    def mask(self, window: int | None) -> mx.array:
        """(num_slots, 1, n_max, keys) boolean mask of the short segments' padded queries."""
        m = self._masks.get(window)
        if m is None:
            t = np.arange(self.keys)[None, :]
            mask = np.zeros((self.num_slots, self.n_max, self.keys), dtype=bool)
            mask[:, :, 0] = True  # padding rows: one visible key, so no row is all -inf
            for i in self.short:
                _, n, o = self.offset.segments[i]
                p = (o + np.arange(n))[:, None]
                rows = t <= p
                if window is not None:
                    rows &= t > p - window
                mask[self.slots[i], :n] = rows
            m = self._masks[window] = mx.array(mask[:, None])
        return m


class RaggedLayerCache:
    """One layer's cache for a ragged forward over several sequences (see the module docstring).
    Not a general cache: it exists for the duration of one forward."""

    def __init__(self, step: RaggedStep, caches: list[PagedLayerCache]) -> None:
        self.step = step
        self.caches = caches
        self.offset = step.offset
        # (short: (keys, values, mask) or None, alone: [(keys, values, mask)] per long segment)
        self.fetched: tuple = ()

    def update_and_fetch(self, keys: mx.array, values: mx.array):
        """Writes every row's keys and values into its sequence's view slot (one scatter for K,
        one for V over the shared arrays) and keeps what attention reads."""
        step = self.step
        layer = self.caches[0].layer
        if len(step._pos):
            k_rows, v_rows = keys[0], values[0]
            if step.shared_rows is not None:
                k_rows, v_rows = k_rows[:, step.shared_rows], v_rows[:, step.shared_rows]
            where = step.scatter_index(keys.shape[1])
            step.views.k[layer][where] = k_rows.reshape(-1, keys.shape[3])
            step.views.v[layer][where] = v_rows.reshape(-1, values.shape[3])
        for i in step.private:
            a, n, o = step.offset.segments[i]
            views, slot = step.seqs[i].views, step.slots[i]
            views.k[layer][slot:slot + 1, :, o:o + n, :] = keys[:, :, a:a + n, :]
            views.v[layer][slot:slot + 1, :, o:o + n, :] = values[:, :, a:a + n, :]
        # a long segment's mask is its sequence's own, taken before the offsets move
        masks = [self.caches[i].make_mask(step.offset.segments[i][1], window_size=self.caches[i].window)
                 for i in step.long]
        deps = []
        for c, seq, flush, slot, (_, n, o) in zip(self.caches, step.seqs, step.flushes, step.slots,
                                                  step.offset.segments):
            c.advance(o + n)
            if flush is not None:
                deps.extend(c.flush(flush, seq.views.k[layer], seq.views.v[layer], slot))

        def after_flushes(k, v):  # the first reader carries the pool writes (see _flush)
            nonlocal deps
            if deps:
                k, v = mx.depends([k, v], deps)
                deps = []
            return k, v

        short = None
        if step.short:
            kv, vv = step.views.k[layer], step.views.v[layer]
            k, v = after_flushes(kv[:step.num_slots, :, :step.keys, :],
                                 vv[:step.num_slots, :, :step.keys, :])
            short = (k, v, step.mask(self.caches[0].window))
        alone = []
        for i, mask in zip(step.long, masks):
            c, slot = self.caches[i], step.slots[i]
            kv, vv = step.seqs[i].views.k[layer], step.seqs[i].views.v[layer]
            _, n, o = step.offset.segments[i]
            s = c.window_start(o)
            k, v = after_flushes(kv[slot:slot + 1, :, s:o + n, :], vv[slot:slot + 1, :, s:o + n, :])
            alone.append((k, v, mask))
        self.fetched = (short, alone)
        return keys, values  # (unused: the attention below reads `fetched`)

    def make_mask(self, N: int, window_size=None, return_array: bool = False):
        return None  # masks are per segment (see update_and_fetch)


PROMPT_QUERIES = 32  # queries of one sequence in one call from which it is a prompt chunk


def grouped_attention(q: mx.array, k: mx.array, v: mx.array, mask: mx.array | None, scale: float) -> mx.array:
    """Attention of (B, Hq, n, D) queries on (B, Hk, T, D) keys and values under a boolean
    (B, 1, n, T) mask (None: every key visible), the Hq / Hk query heads that share a key head
    taken as the rows of one product with it (grouped-query attention without broadcasting the
    keys), with the softmax's exp from `onyx.cpu.exp` (a prompt chunk's softmax from the shim). On MLX's CPU path
    `mx.fast.scaled_dot_product_attention` takes MLX's scalar exp, which at a few thousand keys
    costs more than the rest of the attention; on Metal the fused kernel is used instead."""
    b, heads, n, dim = q.shape
    groups = k.shape[1]
    q = (q * scale).reshape(b, groups, heads // groups * n, dim)
    scores = (q @ k.swapaxes(-1, -2)).reshape(b, groups, heads // groups, n, -1)
    mask = None if mask is None else mask[:, :, None]
    # prompt chunks (many queries) through the shim's C softmax; decode and verification rows
    # (a few queries) stay on one path, so a row's bits do not depend on the step it is in
    p = shim_softmax(scores, mask) if n >= PROMPT_QUERIES else None
    p = masked_softmax(scores, mask) if p is None else p
    p = p.reshape(b, groups, heads // groups * n, -1)
    return (p @ v).reshape(b, heads, n, -1)


def cpu_attention(q: mx.array, k: mx.array, v: mx.array, scale: float, mask) -> mx.array | None:
    """`grouped_attention` for an attention that mlx-lm's modules would give the fused kernel:
    `mask` as mlx-lm passes it (None, "causal", or a boolean (n, T) or (B, 1, n, T) array; the
    queries are the last n positions of the T keys). None when the call is not one it computes
    the same (another mask kind, or not float32), for the caller to run the kernel."""
    if q.dtype != mx.float32 or k.dtype != mx.float32 or q.shape[1] % k.shape[1]:
        return None
    n, t = q.shape[2], k.shape[2]
    if isinstance(mask, str):
        if mask != "causal":
            return None
        mask = None if n == 1 else mx.arange(t - n, t)[:, None] >= mx.arange(t)[None]
    elif mask is not None and (mask.dtype != mx.bool_ or mask.ndim not in (2, 4)):
        return None
    if mask is not None and mask.ndim == 2:
        mask = mask[None, None]
    return grouped_attention(q, k, v, mask, scale)


def ragged_attention(queries: mx.array, cache: RaggedLayerCache, scale: float, sinks=None) -> mx.array:
    """The short segments' queries in one batched attention over the view slots, each long
    segment's alone; the outputs back in row order, as one row of outputs."""
    step = cache.step
    short, alone = cache.fetched
    cache.fetched = ()
    kwargs = {} if sinks is None else {"sinks": sinks}
    heads, dim = queries.shape[1], queries.shape[3]
    outs = []
    if short is not None:
        k, v, mask = short
        q = mx.concatenate([queries[0], mx.zeros((heads, 1, dim), queries.dtype)], axis=1)
        q = q[:, step.q_index].reshape(heads, step.num_slots, step.n_max, dim).transpose(1, 0, 2, 3)
        if sinks is None and step.cpu:
            o = grouped_attention(q, k, v, mask, scale)
        else:
            o = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask, **kwargs)
        o = o.transpose(1, 0, 2, 3).reshape(heads, step.num_slots * step.n_max, -1)
        outs.append(o[:, step.out_index][None])
    for i, (k, v, mask) in zip(step.long, alone):
        a, n, _ = step.offset.segments[i]
        q = queries[:, :, a:a + n, :]
        o = cpu_attention(q, k, v, scale, mask) if sinks is None and step.cpu else None
        outs.append(o if o is not None else
                    mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask, **kwargs))
    out = outs[0] if len(outs) == 1 else mx.concatenate(outs, axis=2)
    return out if step.unpermute is None else out[:, :, step.unpermute]


class RaggedRoPE(nn.Module):
    """Wraps a layer's rotary embedding: a `RaggedOffset` rotates each row by its own position
    (through the table of `onyx.cpu.rope.TableRoPE` in one gather, otherwise per segment);
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
        if isinstance(cache, PagedLayerCache) and not kwargs and mx.default_device() == mx.cpu:
            out = cpu_attention(queries, keys, values, scale, mask)
            if out is not None:
                return out
        return original(queries, keys, values, cache=cache, scale=scale, mask=mask, **kwargs)

    scaled_dot_product_attention._onyx_ragged = True
    return scaled_dot_product_attention


def layer_caches(seqs: list[PagedSequence], lengths: list[int]) -> list[RaggedLayerCache]:
    """The per-layer caches of one ragged forward over `seqs`, which get `lengths[i]` rows each
    (laid end to end in that order)."""
    step = RaggedStep(seqs, lengths)
    per_seq = [s.layer_caches() for s in seqs]
    return [RaggedLayerCache(step, [caches[l] for caches in per_seq]) for l in range(len(per_seq[0]))]
