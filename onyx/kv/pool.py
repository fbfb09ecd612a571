"""A paged KV cache for mlx-lm models: shared block pool, O(1) rollback, copy-on-write forks and
a prefix cache.

    pool = PagedKVPool.for_model(model)                # or PagedKVPool(layers, kv_heads, head_dim)
    seq = pool.sequence()
    logits = model(prompt[None], cache=seq.layer_caches())
    ...
    seq.rollback(3)                                    # O(1): no array work, trailing blocks freed
    child = seq.fork()                                 # shares every block (copy-on-write)
    pool.register_prefix(prompt_ids, seq)              # full blocks of the prompt become reusable
    seq2, n = pool.lookup_prefix(other_prompt_ids)     # reuse the longest cached block prefix
    logits = model(mx.array(other_prompt_ids[n:])[None], cache=seq2.layer_caches())
    seq.free(); child.free(); seq2.free()

Storage
-------
The pool owns, per layer, K and V arrays of shape ``(segment_blocks * block_size, kv_heads,
head_dim)``, one pair per *segment*: block ``b`` is the rows ``[r, r + block_size)`` of segment
``b // segment_blocks``, ``r = (b % segment_blocks) * block_size``. The pool grows by adding
segments, so growing copies nothing (one array of every block, grown by doubling, would copy
every block each time: a pause of every stream that lengthens with the pool). A sequence is a
block table (list of block ids) and a length. Token-major rows make a write one
``slice_update`` (a run inside one block) or one scatter per segment it touches (a run across
blocks); MLX's in-place update applies because the pool is the only holder of its arrays.

Each sequence also keeps, per layer, a contiguous *working view* ``(1, kv_heads, capacity,
head_dim)`` of its tokens, updated in place exactly like mlx-lm's ``KVCache``; attention reads the
view. The views are slots of one ``(slots, kv_heads, capacity, head_dim)`` array per layer
shared by the pool's sequences (``pool.views``, ``onyx.kv.views``; a sequence longer than
those arrays hold has arrays of its own), so a ragged forward writes and attends for the
sequences in them at once. A block's rows are written from the view into the pool when the
block fills (one write per layer every ``block_size`` decode steps), and before the blocks are
shared (``fork``) or the views dropped (``drop_views``); the sequence tracks how far the pool
is current. Gathering the blocks out of the pool at every step, or writing every token to the
pool as well as the view, would cost a decode step measurably more than mlx-lm's KVCache; this
design costs about the same (`bench/cache_bench.py`). The view is derived data: rebuilt from the blocks when missing
(after ``fork``/``lookup_prefix``, or ``drop_views()`` to release its slot), and rows past the
length are simply overwritten later, which is what makes ``rollback`` free.

Invariants
----------
* The blocks are the shared truth; a block with refcount > 1 is never written: a write into a
  shared, partly filled block first copies the kept rows into a fresh block (copy-on-write).
* ``rollback(n)`` only changes integers and returns trailing whole blocks to the free list.
* Registered prefixes hold one reference per block; LRU eviction drops them when the pool is
  full (leaves of a chain go before their ancestors).

The sequence and its per-layer caches are in ``onyx.kv.sequence``.

Not thread-safe: one thread drives a pool (a server serialises model calls anyway).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, Optional, Sequence

import mlx.core as mx
import numpy as np

from onyx.errors import CacheFullError
from onyx.kv.sequence import PagedLayerCache, PagedSequence
from onyx.kv.views import ViewSlots

__all__ = ["CacheFullError", "PagedKVPool", "PagedSequence", "PagedLayerCache"]



def _per_layer(value, n: int, name: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name}: expected {n} per-layer values, got {len(value)}")
        return list(value)
    return [value] * n


class PagedKVPool:
    """A pool of fixed-size KV blocks shared by sequences of one model.

    Args:
        num_layers: attention layers of the model (one cache object per layer).
        num_kv_heads, head_dim: an int, or one value per layer. ``v_head_dim`` defaults to
            ``head_dim``.
        block_size: tokens per block.
        num_blocks: blocks allocated up front; also the size of each segment the pool grows by.
        max_blocks: when the free blocks run out, the pool grows (a segment at a time) up to
            this many blocks, unless the prefix cache alone holds more blocks than the live sequences:
            then its least-recently-used entries are evicted first. At the cap, eviction, then
            ``CacheFullError``. ``None``: ``max(num_blocks, 4096)``.
        windows: per-layer sliding-window size (``None`` = full attention). Layers with a window
            store every token (rollback and sharing need them) but give attention only the
            window. ``for_model`` reads them from the model's own ``make_cache()``.
        dtype: storage dtype (use the model's activation dtype).
    """

    def __init__(self, num_layers: int, num_kv_heads, head_dim, *, block_size: int = 16,
                 num_blocks: int = 64, max_blocks: Optional[int] = None, v_head_dim=None,
                 windows: Optional[Sequence[Optional[int]]] = None, dtype=mx.float32):
        if num_layers <= 0:
            raise ValueError("num_layers must be positive")
        if block_size <= 0 or num_blocks <= 0:
            raise ValueError("block_size and num_blocks must be positive")
        self.num_layers = num_layers
        self.block_size = block_size
        self.kv_heads = [int(h) for h in _per_layer(num_kv_heads, num_layers, "num_kv_heads")]
        self.head_dims = [int(d) for d in _per_layer(head_dim, num_layers, "head_dim")]
        vdims = head_dim if v_head_dim is None else v_head_dim
        self.v_head_dims = [int(d) for d in _per_layer(vdims, num_layers, "v_head_dim")]
        self.windows = list(windows) if windows is not None else [None] * num_layers
        if len(self.windows) != num_layers:
            raise ValueError(f"windows: expected {num_layers} values, got {len(self.windows)}")
        self.dtype = dtype
        self.max_blocks = max(num_blocks, 4096) if max_blocks is None else int(max_blocks)
        if self.max_blocks < num_blocks:
            raise ValueError("max_blocks must be >= num_blocks")
        self.num_blocks = num_blocks
        self.segment_blocks = num_blocks
        rows = num_blocks * block_size
        # per layer, the segments' arrays (see Storage)
        self.k = [[mx.zeros((rows, h, d), dtype)] for h, d in zip(self.kv_heads, self.head_dims)]
        self.v = [[mx.zeros((rows, h, d), dtype)] for h, d in zip(self.kv_heads, self.v_head_dims)]
        # every sequence's working view, as one slot of these arrays (onyx.kv.views)
        self.views = ViewSlots(self.kv_heads, self.head_dims, self.v_head_dims, dtype, spare=True)
        self.materialize()
        self.refs = [0] * num_blocks
        self._free = list(range(num_blocks - 1, -1, -1))  # a stack: low ids are handed out first
        self.epoch = 0  # bumped by every refcount increase (invalidates cached write plans)
        # prefix cache: chain hash of full blocks -> block id, oldest first
        self._prefix: OrderedDict[bytes, int] = OrderedDict()
        self.live_sequences = 0
        self.counters = dict(prefix_lookups=0, prefix_hits=0, prefix_hit_tokens=0,
                              prefix_evictions=0, cow_copies=0, grows=0, view_rebuilds=0)

    # -- construction helpers ------------------------------------------------------------------

    @classmethod
    def for_model(cls, model, **kwargs) -> "PagedKVPool":
        """A pool shaped for an mlx-lm model: layer count, KV heads and head dims read from each
        layer's attention module, sliding windows from ``model.make_cache()`` (``RotatingKVCache``
        layers), dtype from the attention weights. ``kwargs`` go to the constructor."""
        from mlx_lm.models.cache import KVCache, RotatingKVCache

        layers = list(model.layers)
        heads, dims = [], []
        for i, layer in enumerate(layers):
            attn = _attention_of(layer)
            if attn is None or not hasattr(attn, "n_kv_heads"):
                raise TypeError(f"layer {i} has no attention module with n_kv_heads: not supported")
            h = int(attn.n_kv_heads)
            d = getattr(attn, "head_dim", None)
            if d is None:
                d = attn.k_proj.weight.shape[0] // h  # (also right for QuantizedLinear)
            heads.append(h)
            dims.append(int(d))
        windows = [None] * len(layers)
        if hasattr(model, "make_cache"):
            caches = model.make_cache()
            for i, c in enumerate(caches):
                if type(c) is RotatingKVCache:
                    if c.keep:
                        raise TypeError("RotatingKVCache with keep > 0 (attention sinks) is not supported")
                    windows[i] = int(c.max_size)
                elif type(c) is not KVCache:
                    raise TypeError(f"layer {i} uses {type(c).__name__}: only attention layers "
                                    f"(KVCache/RotatingKVCache) can be paged")
        if "dtype" not in kwargs:
            kwargs["dtype"] = _attention_dtype(layers[0])
        kwargs.setdefault("windows", windows)
        return cls(len(layers), heads, dims, **kwargs)

    def private_views(self) -> ViewSlots:
        """View arrays for one sequence longer than the shared ones hold (grown by a quarter at
        least, so a long sequence copies its rows a few times, not once per `STEP` tokens)."""
        return ViewSlots(self.kv_heads, self.head_dims, self.v_head_dims, self.dtype, headroom=0.25)

    def sequence(self, prefix: Optional["PagedSequence"] = None) -> "PagedSequence":
        """A new empty sequence, or (``prefix=seq``) a copy-on-write fork of ``seq``."""
        if prefix is not None:
            return prefix.fork()
        return PagedSequence(self)

    # -- accounting ----------------------------------------------------------------------------

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - len(self._free)

    @property
    def block_nbytes(self) -> int:
        """Bytes of one block over all layers (K and V)."""
        item = self.dtype.size
        return sum(self.block_size * h * (dk + dv) * item
                   for h, dk, dv in zip(self.kv_heads, self.head_dims, self.v_head_dims))

    def materialize(self) -> None:
        """Evaluates the pool's arrays now. MLX streams are per thread: a lazy array made in one
        thread cannot be evaluated in another, so the pool is kept evaluated at creation and at
        the end of each generation, and any thread may run the next one."""
        mx.eval(self.k, self.v, self.views.arrays())

    def stats(self) -> dict:
        """Counters for leak checks and health endpoints (plain ints)."""
        return dict(
            block_size=self.block_size,
            num_blocks=self.num_blocks,
            max_blocks=self.max_blocks,
            free_blocks=self.num_free_blocks,
            used_blocks=self.num_used_blocks,
            shared_blocks=sum(1 for r in self.refs if r > 1),
            prefix_cached_blocks=len(self._prefix),
            live_sequences=self.live_sequences,
            pool_bytes=self.num_blocks * self.block_nbytes,
            view_slots=self.views.in_use,  # in the shared view arrays (long sequences have their own)
            view_bytes=self.views.nbytes,
            **self.counters,
        )

    def check(self) -> None:
        """Internal consistency (for tests): free list and refcounts agree. Raises AssertionError."""
        free = set(self._free)
        assert len(free) == len(self._free), "block on the free list twice"
        for b, r in enumerate(self.refs):
            assert r >= 0, f"negative refcount on block {b}"
            assert (r == 0) == (b in free), f"block {b}: refcount {r} but free={b in free}"
        for b in self._prefix.values():
            assert self.refs[b] >= 1, f"prefix-cache block {b} has refcount {self.refs[b]}"

    # -- block management (for the sequences, `onyx.kv.sequence`) -------------------------------
    # `refs[b]` is block b's reference count; `k[l]` / `v[l]` are layer l's pool arrays, which a
    # sequence writes in place; `epoch` changes with every reference taken (it invalidates the
    # sequences' cached write plans); `counters` feed `stats()`.

    def retain(self, b: int) -> None:
        self.refs[b] += 1
        self.epoch += 1

    def release(self, b: int) -> None:
        r = self.refs[b] - 1
        self.refs[b] = r
        if r == 0:
            self._free.append(b)
        elif r < 0:
            raise AssertionError(f"block {b} released twice")

    def allocate(self, n: int) -> list[int]:
        if n > len(self._free):
            self._make_room(n)
        out = [self._free.pop() for _ in range(n)]
        for b in out:
            self.refs[b] = 1
        return out

    def _make_room(self, n: int) -> None:
        """Gets the free list to at least ``n`` blocks: grow (up to max_blocks), then evict LRU
        prefix-cache entries, then give up. When the cache alone holds more blocks than the
        live sequences, its LRU entries go before the pool grows: a cache filling with distinct
        prompts would otherwise grow the pool (a segment's allocation each time, a pause of every
        stream) again and again, up to max_blocks."""
        cached_only = sum(1 for b in self._prefix.values() if self.refs[b] == 1)
        if cached_only > self.num_used_blocks - cached_only:
            self._evict(n - len(self._free))
        if len(self._free) < n and self.num_blocks < self.max_blocks:
            self._grow(min(self.max_blocks, self.num_blocks + n - len(self._free)))
        if len(self._free) < n:
            self._evict(n - len(self._free))
        if len(self._free) < n:
            raise CacheFullError(
                f"KV pool full: need {n - len(self._free)} more block(s) of {self.block_size} "
                f"tokens; all {self.num_blocks} blocks (max_blocks={self.max_blocks}) are held "
                f"by live sequences: free sequences or raise max_blocks")

    def _grow(self, new_num: int) -> None:
        """Adds segments until the pool has at least `new_num` blocks (at most max_blocks; the
        last segment may be shorter, and it is the last one)."""
        if new_num <= self.num_blocks:
            return
        old = self.num_blocks
        while self.num_blocks < new_num:
            n = min(self.segment_blocks, self.max_blocks - self.num_blocks)
            rows = n * self.block_size
            for arrays, dims in ((self.k, self.head_dims), (self.v, self.v_head_dims)):
                for segments, h, d in zip(arrays, self.kv_heads, dims):
                    segments.append(mx.zeros((rows, h, d), self.dtype))
            self.num_blocks += n
        mx.eval([segments[-1] for segments in self.k + self.v])
        self.refs.extend([0] * (self.num_blocks - old))
        self._free[:0] = range(self.num_blocks - 1, old - 1, -1)  # keep handing out the lowest ids first
        self.counters["grows"] += 1

    def block_row(self, b: int) -> tuple[int, int]:
        """(segment, first row within it) of block `b`."""
        s, i = divmod(b, self.segment_blocks)
        return s, i * self.block_size

    def locate(self, rows: np.ndarray) -> list[tuple[int, mx.array, Optional[mx.array]]]:
        """Pool rows (``block * block_size + offset``) by segment: (segment, the rows within it,
        their places in `rows`, or None when every row is in that one segment)."""
        per = self.segment_blocks * self.block_size
        seg = rows // per
        if seg.size and seg.min() == seg.max():
            s = int(seg[0])
            return [(s, mx.array((rows - s * per).astype(np.int32)), None)]
        out = []
        for s in np.unique(seg):
            at = np.flatnonzero(seg == s)
            out.append((int(s), mx.array((rows[at] - s * per).astype(np.int32)), mx.array(at.astype(np.int32))))
        return out

    def take(self, layer: int, parts: list[tuple[int, mx.array, Optional[mx.array]]]) -> tuple[mx.array, mx.array]:
        """The (n, kv_heads, head_dim) K and V rows of one layer at `parts` (from `locate`), in
        the order of the rows given to `locate`."""
        ks = [mx.take(self.k[layer][s], local, axis=0) for s, local, _ in parts]
        vs = [mx.take(self.v[layer][s], local, axis=0) for s, local, _ in parts]
        if len(parts) == 1 and parts[0][2] is None:
            return ks[0], vs[0]
        order = mx.argsort(mx.concatenate([at for _, _, at in parts]))
        return mx.concatenate(ks)[order], mx.concatenate(vs)[order]

    def _evict(self, want: int) -> int:
        """Drops least-recently-used prefix entries whose block nobody else uses, until ``want``
        blocks are free (or none is left to drop). Returns the blocks freed."""
        freed = 0
        for key in list(self._prefix.keys()):
            if freed >= want:
                break
            b = self._prefix[key]
            if self.refs[b] == 1:
                del self._prefix[key]
                self.release(b)
                freed += 1
                self.counters["prefix_evictions"] += 1
        return freed

    # -- prefix cache --------------------------------------------------------------------------

    def _block_hashes(self, token_ids: Sequence[int], n_blocks: int) -> list[bytes]:
        bs = self.block_size
        toks = np.asarray(token_ids[: n_blocks * bs], dtype=np.int64)
        out, prev = [], b""
        for i in range(n_blocks):
            h = hashlib.blake2b(prev, digest_size=16)
            h.update(toks[i * bs:(i + 1) * bs].tobytes())
            prev = h.digest()
            out.append(prev)
        return out

    def _touch(self, keys: list[bytes]) -> None:
        # deepest first, so a chain's root ends up most recent: LRU eviction takes leaves first
        for key in reversed(keys):
            self._prefix.move_to_end(key)

    def register_prefix(self, token_ids: Sequence[int], seq: "PagedSequence") -> int:
        """Makes the full blocks of ``seq`` that hold ``token_ids`` reusable by ``lookup_prefix``.
        ``seq`` must hold the KV of exactly these tokens (it usually just ran them). Each newly
        cached block gets one reference held by the cache. Returns the number of tokens now
        cached for this prefix (a multiple of ``block_size``)."""
        seq.check_open()
        token_ids = list(token_ids)
        n = min(len(token_ids), seq.length) // self.block_size
        keys = self._block_hashes(token_ids, n)
        for key, b in zip(keys, seq.blocks[:n]):
            if key not in self._prefix:
                self._prefix[key] = b
                self.retain(b)
        self._touch(keys)
        return n * self.block_size

    def lookup_prefix(self, token_ids: Sequence[int], *, leave_last: bool = True
                      ) -> tuple["PagedSequence", int]:
        """A new sequence holding the longest cached block prefix of ``token_ids`` and its length
        ``n_cached``: run the model on ``token_ids[n_cached:]`` only. With ``leave_last`` (the
        default) at least one token is left to run, so the caller gets logits. On a miss: an
        empty sequence and 0. The caller frees the sequence."""
        token_ids = list(token_ids)
        self.counters["prefix_lookups"] += 1
        n_full = len(token_ids) // self.block_size
        blocks, hit_keys = [], []
        prev = b""
        toks = np.asarray(token_ids[: n_full * self.block_size], dtype=np.int64)
        bs = self.block_size
        for i in range(n_full):
            h = hashlib.blake2b(prev, digest_size=16)
            h.update(toks[i * bs:(i + 1) * bs].tobytes())
            prev = h.digest()
            b = self._prefix.get(prev)
            if b is None:
                break
            blocks.append(b)
            hit_keys.append(prev)
        n_cached = len(blocks) * bs
        if leave_last and n_cached >= len(token_ids):
            n_cached = len(token_ids) - 1
        seq = PagedSequence(self)
        if n_cached <= 0:
            return seq, 0
        self._touch(hit_keys)
        keep = -(-n_cached // bs)
        for b in blocks[:keep]:
            self.retain(b)
        seq.adopt(blocks[:keep], n_cached)
        self.counters["prefix_hits"] += 1
        self.counters["prefix_hit_tokens"] += n_cached
        return seq, n_cached

    def clear_prefix_cache(self) -> int:
        """Drops every prefix-cache entry. Returns how many were dropped."""
        n = len(self._prefix)
        for b in self._prefix.values():
            self.release(b)
        self._prefix.clear()
        return n

    def evict_prefixes(self, num_blocks: int) -> int:
        """Frees up to ``num_blocks`` blocks by dropping LRU prefix entries. Returns blocks freed."""
        return self._evict(num_blocks)


def _attention_of(layer):
    # (explicit None checks: an nn.Module is a dict, and an empty one is falsy)
    for name in ("self_attn", "attention"):
        attn = getattr(layer, name, None)
        if attn is not None:
            return attn
    return None


def _attention_dtype(layer) -> Any:
    from onyx.cpu.quant import is_shim_quantized

    proj = getattr(_attention_of(layer), "k_proj", None)
    if is_shim_quantized(proj):
        return mx.float32  # the shim's products are float32 (its scales' dtype is storage only)
    for name in ("weight", "scales"):
        w = getattr(proj, name, None) if proj is not None else None
        if w is not None and mx.issubdtype(w.dtype, mx.floating):
            return w.dtype
    return mx.float32
