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
The pool owns, per layer, one K and one V array of shape ``(num_blocks * block_size, kv_heads,
head_dim)``: block ``b`` is the rows ``[b * block_size, (b + 1) * block_size)``. A sequence is a
block table (list of block ids) and a length. Token-major rows make a write one ``slice_update``
(a run inside one block) or one scatter with a single index array (a run across blocks); MLX's
in-place update applies because the pool is the only holder of its arrays.

Each sequence also keeps, per layer, a contiguous *working view* ``(1, kv_heads, capacity,
head_dim)`` of its tokens, updated in place exactly like mlx-lm's ``KVCache``; attention reads the
view. A block's rows are written from the view into the pool when the block fills (one write per
layer every ``block_size`` decode steps), and before the blocks are shared (``fork``) or the views
dropped (``drop_views``); ``_flushed`` marks how far the pool is current. Measured on a
SmolLM2-135M-shaped model (30 layers) on the CPU, per decode step against mlx-lm's KVCache:
gathering the blocks out of the pool each step +9%; a view with every token also written to the
pool +2-4%; this design +0-1%. The view is derived data: rebuilt from the blocks when missing
(after ``fork``/``lookup_prefix``, or ``drop_views()`` to release its memory), and rows past the
length are simply overwritten later, which is what makes ``rollback`` free.

Invariants
----------
* The blocks are the shared truth; a block with refcount > 1 is never written: a write into a
  shared, partly filled block first copies the kept rows into a fresh block (copy-on-write).
* ``rollback(n)`` only changes integers and returns trailing whole blocks to the free list.
* Registered prefixes hold one reference per block; LRU eviction drops them when the pool is
  full (leaves of a chain go before their ancestors).

Not thread-safe: one thread drives a pool (a server serialises model calls anyway).
"""

from __future__ import annotations

from onyx.platform import ensure_fast_blas

ensure_fast_blas()  # before mlx.core is first imported (no-op when too late / not Linux)

import hashlib  # noqa: E402
from collections import OrderedDict  # noqa: E402
from typing import Any, Optional, Sequence  # noqa: E402

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

from onyx.errors import CacheFullError  # noqa: E402

__all__ = ["CacheFullError", "PagedKVPool", "PagedSequence", "PagedLayerCache"]

_VIEW_STEP = 256  # working-view capacity grows in steps of this many tokens (as mlx-lm's KVCache)


def _per_layer(value, n: int, name: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name}: expected {n} per-layer values, got {len(value)}")
        return list(value)
    return [value] * n


def _causal_mask(n: int, offset: int, window: Optional[int], start: int) -> mx.array:
    """Boolean (n, offset + n - start) mask: query offset+i sees key start+j when causal and, with a
    window w, when the key is among the w most recent positions."""
    q = mx.arange(offset, offset + n)[:, None]
    k = mx.arange(start, offset + n)[None]
    mask = q >= k
    if window is not None:
        mask = mask & (q < k + window)
    return mask


class PagedKVPool:
    """A pool of fixed-size KV blocks shared by sequences of one model.

    Args:
        num_layers: attention layers of the model (one cache object per layer).
        num_kv_heads, head_dim: an int, or one value per layer. ``v_head_dim`` defaults to
            ``head_dim``.
        block_size: tokens per block.
        num_blocks: blocks allocated up front.
        max_blocks: the pool grows (doubling) up to this many blocks when it runs out; at the
            cap, least-recently-used prefix-cache entries are evicted, then ``CacheFullError``.
            ``None``: ``max(num_blocks, 4096)``.
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
        rows = num_blocks * block_size
        self._k = [mx.zeros((rows, h, d), dtype) for h, d in zip(self.kv_heads, self.head_dims)]
        self._v = [mx.zeros((rows, h, d), dtype) for h, d in zip(self.kv_heads, self.v_head_dims)]
        self.materialize()
        self._ref = [0] * num_blocks
        self._free = list(range(num_blocks - 1, -1, -1))  # a stack: low ids are handed out first
        self._epoch = 0  # bumped by every refcount increase (invalidates cached write plans)
        # prefix cache: chain hash of full blocks -> block id, oldest first
        self._prefix: OrderedDict[bytes, int] = OrderedDict()
        self._live_sequences = 0
        self._counters = dict(prefix_lookups=0, prefix_hits=0, prefix_hit_tokens=0,
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
        mx.eval(self._k, self._v)

    def stats(self) -> dict:
        """Counters for leak checks and health endpoints (plain ints)."""
        return dict(
            block_size=self.block_size,
            num_blocks=self.num_blocks,
            max_blocks=self.max_blocks,
            free_blocks=self.num_free_blocks,
            used_blocks=self.num_used_blocks,
            shared_blocks=sum(1 for r in self._ref if r > 1),
            prefix_cached_blocks=len(self._prefix),
            live_sequences=self._live_sequences,
            pool_bytes=self.num_blocks * self.block_nbytes,
            **self._counters,
        )

    def check(self) -> None:
        """Internal consistency (for tests): free list and refcounts agree. Raises AssertionError."""
        free = set(self._free)
        assert len(free) == len(self._free), "block on the free list twice"
        for b, r in enumerate(self._ref):
            assert r >= 0, f"negative refcount on block {b}"
            assert (r == 0) == (b in free), f"block {b}: refcount {r} but free={b in free}"
        for b in self._prefix.values():
            assert self._ref[b] >= 1, f"prefix-cache block {b} has refcount {self._ref[b]}"

    # -- block management ----------------------------------------------------------------------

    def _incref(self, b: int) -> None:
        self._ref[b] += 1
        self._epoch += 1

    def _decref(self, b: int) -> None:
        r = self._ref[b] - 1
        self._ref[b] = r
        if r == 0:
            self._free.append(b)
        elif r < 0:
            raise AssertionError(f"block {b} released twice")

    def _allocate(self, n: int) -> list[int]:
        if n > len(self._free):
            self._make_room(n)
        out = [self._free.pop() for _ in range(n)]
        for b in out:
            self._ref[b] = 1
        return out

    def _make_room(self, n: int) -> None:
        """Gets the free list to at least ``n`` blocks: grow (up to max_blocks), then evict LRU
        prefix-cache entries, then give up."""
        if self.num_blocks < self.max_blocks:
            short = n - len(self._free)
            self._grow(min(self.max_blocks, max(self.num_blocks * 2, self.num_blocks + short)))
        if len(self._free) < n:
            self._evict(n - len(self._free))
        if len(self._free) < n:
            raise CacheFullError(
                f"KV pool full: need {n - len(self._free)} more block(s) of {self.block_size} "
                f"tokens; all {self.num_blocks} blocks (max_blocks={self.max_blocks}) are held "
                f"by live sequences: free sequences or raise max_blocks")

    def _grow(self, new_num: int) -> None:
        extra = (new_num - self.num_blocks) * self.block_size
        if extra <= 0:
            return
        for l in range(self.num_layers):
            k, v = self._k[l], self._v[l]
            self._k[l] = mx.concatenate([k, mx.zeros((extra,) + k.shape[1:], k.dtype)])
            self._v[l] = mx.concatenate([v, mx.zeros((extra,) + v.shape[1:], v.dtype)])
        del k, v
        mx.eval(self._k, self._v)
        old = self.num_blocks
        self._ref.extend([0] * (new_num - old))
        self._free[:0] = range(new_num - 1, old - 1, -1)  # keep handing out the lowest ids first
        self.num_blocks = new_num
        self._counters["grows"] += 1

    def _evict(self, want: int) -> int:
        """Drops least-recently-used prefix entries whose block nobody else uses, until ``want``
        blocks are free (or none is left to drop). Returns the blocks freed."""
        freed = 0
        for key in list(self._prefix.keys()):
            if freed >= want:
                break
            b = self._prefix[key]
            if self._ref[b] == 1:
                del self._prefix[key]
                self._decref(b)
                freed += 1
                self._counters["prefix_evictions"] += 1
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
        seq._check_open()
        token_ids = list(token_ids)
        n = min(len(token_ids), seq.length) // self.block_size
        keys = self._block_hashes(token_ids, n)
        for key, b in zip(keys, seq._blocks[:n]):
            if key not in self._prefix:
                self._prefix[key] = b
                self._incref(b)
        self._touch(keys)
        return n * self.block_size

    def lookup_prefix(self, token_ids: Sequence[int], *, leave_last: bool = True
                      ) -> tuple["PagedSequence", int]:
        """A new sequence holding the longest cached block prefix of ``token_ids`` and its length
        ``n_cached``: run the model on ``token_ids[n_cached:]`` only. With ``leave_last`` (the
        default) at least one token is left to run, so the caller gets logits. On a miss: an
        empty sequence and 0. The caller frees the sequence."""
        token_ids = list(token_ids)
        self._counters["prefix_lookups"] += 1
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
            self._incref(b)
        seq._blocks = blocks[:keep]
        seq._set_length(n_cached)
        seq._flushed = n_cached
        self._counters["prefix_hits"] += 1
        self._counters["prefix_hit_tokens"] += n_cached
        return seq, n_cached

    def clear_prefix_cache(self) -> int:
        """Drops every prefix-cache entry. Returns how many were dropped."""
        n = len(self._prefix)
        for b in self._prefix.values():
            self._decref(b)
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
    proj = getattr(_attention_of(layer), "k_proj", None)
    for name in ("weight", "scales"):
        w = getattr(proj, name, None) if proj is not None else None
        if w is not None and mx.issubdtype(w.dtype, mx.floating):
            return w.dtype
    return mx.float32


class PagedSequence:
    """One sequence's view of a ``PagedKVPool``: a block table and a length.

    ``layer_caches()`` gives the list to pass as ``model(inputs, cache=...)``. Use ``rollback``,
    ``fork`` and ``free``; a sequence is also a context manager that frees itself."""

    def __init__(self, pool: PagedKVPool):
        self.pool = pool
        self._blocks: list[int] = []
        self._length = 0
        self._closed = False
        self._version = 0  # bumped whenever the block table changes
        self._flushed = 0  # rows [0, _flushed) are in the pool blocks; the rest only in the views
        self._plan_key = None
        self._plan = None
        self._caches = [PagedLayerCache(self, l, pool.windows[l]) for l in range(pool.num_layers)]
        pool._live_sequences += 1

    # -- public --------------------------------------------------------------------------------

    @property
    def length(self) -> int:
        """Tokens whose K/V the sequence holds."""
        return self._length

    @property
    def block_table(self) -> list[int]:
        return list(self._blocks)

    @property
    def closed(self) -> bool:
        return self._closed

    def layer_caches(self) -> list["PagedLayerCache"]:
        """The per-layer cache objects for ``model(inputs, cache=...)`` (the same list each call)."""
        self._check_open()
        return self._caches

    def rollback(self, n: int) -> int:
        """Forgets the last ``n`` tokens (clamped to the length): O(1) in the sequence length, no
        array work; trailing whole blocks go back to the pool, a partly used block stays.
        Returns the number of tokens removed."""
        self._check_open()
        if n < 0:
            raise ValueError("rollback(n) needs n >= 0")
        n = min(n, self._length)
        if n:
            self._set_length(self._length - n)
        return n

    def truncate(self, length: int) -> int:
        """Rolls back to ``length`` tokens. Returns the number of tokens removed."""
        return self.rollback(max(0, self._length - length))

    def fork(self) -> "PagedSequence":
        """A new sequence sharing every block of this one (refcounts up); either side copies a
        shared block before writing into it."""
        self._check_open()
        self._flush_all()
        child = PagedSequence(self.pool)
        for b in self._blocks:
            self.pool._incref(b)
        child._blocks = list(self._blocks)
        child._set_length(self._length)
        child._flushed = self._length  # the child's views are rebuilt from the blocks
        return child

    def drop_views(self) -> None:
        """Releases the contiguous working copies (they are rebuilt from the blocks on the next
        model call): a parked sequence then costs only its blocks."""
        if not self._closed:
            self._flush_all()
        self._plan_key = None
        for c in self._caches:
            c._kv = c._vv = None

    def free(self) -> None:
        """Returns every block to the pool. Idempotent."""
        if self._closed:
            return
        self._closed = True
        pool = self.pool
        for b in self._blocks:
            pool._decref(b)
        self._blocks = []
        self._length = self._flushed = 0
        self._plan_key = None
        for c in self._caches:
            c.offset = 0
            c._kv = c._vv = None
        pool._live_sequences -= 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass

    def __repr__(self):
        state = "freed" if self._closed else f"length={self._length}, blocks={self._blocks}"
        return f"PagedSequence({state})"

    # -- internals -----------------------------------------------------------------------------

    def _check_open(self):
        if self._closed:
            raise RuntimeError("this PagedSequence was freed")

    def _set_length(self, length: int) -> None:
        """Sets the length of the sequence and of every layer; releases blocks past it."""
        self._length = length
        for c in self._caches:
            c.offset = length
        self._release_tail()

    def _flush_all(self) -> None:
        """Writes the rows only the working views hold into the blocks (before the blocks are
        shared or the views dropped); evaluated at once, so no pool write is left pending."""
        o, f = self._length, self._flushed
        if f >= o:
            return
        assert all(c._kv is not None for c in self._caches), "unflushed rows without views"
        plan = self._rows_plan(f, o)
        pool = self.pool
        for c in self._caches:
            c._write_pool(plan, c._kv[0, :, f:o, :], c._vv[0, :, f:o, :])
        mx.eval([pool._k[c.layer] for c in self._caches] + [pool._v[c.layer] for c in self._caches])
        self._flushed = o
        self._plan_key = None

    def _rows_plan(self, a: int, b: int):
        """Where rows [a, b) of this sequence live in the pool arrays: (True, first row) when they
        are consecutive (one block), else (False, index array) for a scatter."""
        bs = self.pool.block_size
        if a // bs == (b - 1) // bs:
            return True, self._blocks[a // bs] * bs + a % bs
        pos = np.arange(a, b)
        table = np.asarray(self._blocks, dtype=np.int64)
        return False, mx.array((table[pos // bs] * bs + pos % bs).astype(np.int32))

    def _release_tail(self) -> None:
        self._plan_key = None
        if self._flushed > self._length:
            self._flushed = self._length
        keep = -(-self._length // self.pool.block_size)
        if len(self._blocks) > keep:
            pool = self.pool
            while len(self._blocks) > keep:
                pool._decref(self._blocks.pop())
            self._version += 1

    def _layer_trimmed(self) -> None:
        new = max(c.offset for c in self._caches)
        if new < self._length:
            self._length = new
            self._release_tail()

    def _prepare_write(self, o: int, e: int):
        """Makes rows [o, e) writable (allocation, copy-on-write, working views) and returns the
        plan: which pool rows to flush from the views after the write (the blocks that the write
        fills), or None. Computed by the first layer of a step, reused by the others."""
        pool = self.pool
        key = (o, e, self._version, pool._epoch)
        if key == self._plan_key:
            return self._plan
        self._check_open()
        bs = pool.block_size
        if o > 0 and any(c._kv is None for c in self._caches):
            self._rebuild_views(o)
        need = -(-e // bs) - len(self._blocks)
        if need > 0:
            self._blocks.extend(pool._allocate(need))
            self._version += 1
        first = o // bs
        if o % bs and pool._ref[self._blocks[first]] > 1:
            self._copy_on_write(first, o)
        # blocks past `first` hold no kept row; one can only be shared when this layer is behind
        # the first one in the same step (which already made them private): a safety net
        for i in range(first + (1 if o % bs else 0), -(-e // bs)):
            if pool._ref[self._blocks[i]] > 1:
                self._replace_block(i)
        full = e // bs * bs  # rows of the blocks this write completes are written to the pool
        plan = None
        if full > self._flushed:
            plan = (self._flushed, full, self._rows_plan(self._flushed, full))
            self._flushed = full
        self._plan = plan
        self._plan_key = (o, e, self._version, pool._epoch)
        return plan

    def _replace_block(self, i: int) -> None:
        pool = self.pool
        (nb,) = pool._allocate(1)
        pool._decref(self._blocks[i])
        self._blocks[i] = nb
        self._version += 1

    def _copy_on_write(self, i: int, o: int) -> None:
        """Block i is shared and holds kept rows [i*bs, o): give this sequence its own copy (the
        rows come from the working views, so the pool arrays are only written, never read into
        themselves, and keep being updated in place)."""
        pool = self.pool
        bs = pool.block_size
        old = self._blocks[i]
        (nb,) = pool._allocate(1)
        start = i * bs
        for c in self._caches:
            k = c._kv[0, :, start:o, :].transpose(1, 0, 2)
            v = c._vv[0, :, start:o, :].transpose(1, 0, 2)
            pool._k[c.layer][nb * bs: nb * bs + (o - start)] = k.astype(pool.dtype)
            pool._v[c.layer][nb * bs: nb * bs + (o - start)] = v.astype(pool.dtype)
        # evaluate now: the view slices read above must not be pending when the same step writes
        # the views in place (MLX would copy a buffer that is still read)
        mx.eval([pool._k[c.layer] for c in self._caches] + [pool._v[c.layer] for c in self._caches])
        pool._decref(old)
        self._blocks[i] = nb
        self._version += 1
        self._flushed = max(self._flushed, o)
        pool._counters["cow_copies"] += 1

    def _rebuild_views(self, o: int) -> None:
        """Rebuilds every layer's working view for rows [0, o) from the blocks (one gather per
        layer, evaluated at once so that the pool arrays are not read and written in the same
        graph, which would make MLX copy them)."""
        pool = self.pool
        bs = pool.block_size
        nblk = -(-o // bs)
        table = np.asarray(self._blocks[:nblk], dtype=np.int64)
        rows = (table[:, None] * bs + np.arange(bs)[None, :]).reshape(-1)[:o]
        idx = mx.array(rows.astype(np.int32))
        cap = -(-o // _VIEW_STEP) * _VIEW_STEP
        out = []
        for c in self._caches:
            l = c.layer
            for name, arr in (("_kv", pool._k[l]), ("_vv", pool._v[l])):
                g = mx.take(arr, idx, axis=0).transpose(1, 0, 2)[None]  # (1, H, o, D)
                if cap > o:
                    g = mx.concatenate([g, mx.zeros(g.shape[:2] + (cap - o, g.shape[3]), g.dtype)], axis=2)
                setattr(c, name, g)
                out.append(g)
        mx.eval(out)
        pool._counters["view_rebuilds"] += 1


class PagedLayerCache:
    """The cache object of one layer of one sequence, with the interface mlx-lm's attention
    modules use (``offset``, ``update_and_fetch``, ``make_mask``) and its trimming interface
    (``is_trimmable``, ``trim``), so ``mlx_lm.models.cache.trim_prompt_cache`` works too."""

    def __init__(self, seq: PagedSequence, layer: int, window: Optional[int]):
        self._seq = seq
        self.layer = layer
        self.window = window
        self.offset = 0
        self._kv = None  # working view (1, H, capacity, D)
        self._vv = None

    def _start(self, o: int) -> int:
        """First position attention needs when queries start at position o."""
        w = self.window
        return 0 if w is None or o < w else o - w + 1

    def update_and_fetch(self, keys: mx.array, values: mx.array):
        B, H, n, _ = keys.shape
        if B != 1:
            raise ValueError(f"PagedLayerCache holds one sequence: batch size must be 1, got {B}")
        seq = self._seq
        pool = seq.pool
        layer = self.layer
        if H != pool.kv_heads[layer] or keys.shape[3] != pool.head_dims[layer] \
                or values.shape[3] != pool.v_head_dims[layer]:
            raise ValueError(f"layer {layer}: got K {keys.shape} / V {values.shape}, pool expects "
                             f"{pool.kv_heads[layer]} heads of {pool.head_dims[layer]}/"
                             f"{pool.v_head_dims[layer]}")
        o = self.offset
        e = o + n
        flush = seq._prepare_write(o, e)

        # the working view (what attention reads), updated in place
        kv, vv = self._kv, self._vv
        if kv is None or e > kv.shape[2]:
            cap = -(-e // _VIEW_STEP) * _VIEW_STEP
            if kv is None:
                kv = mx.zeros((1, H, cap, keys.shape[3]), keys.dtype)
                vv = mx.zeros((1, H, cap, values.shape[3]), values.dtype)
            else:
                kv = mx.concatenate([kv[..., :o, :], mx.zeros((1, H, cap - o, kv.shape[3]), kv.dtype)], axis=2)
                vv = mx.concatenate([vv[..., :o, :], mx.zeros((1, H, cap - o, vv.shape[3]), vv.dtype)], axis=2)
            self._kv, self._vv = kv, vv
        kv[..., o:e, :] = keys
        vv[..., o:e, :] = values
        self.offset = e
        if e > seq._length:
            seq._length = e

        s = self._start(o)
        if s == 0 and e == kv.shape[2]:
            k_out, v_out = kv, vv
        else:
            k_out, v_out = kv[..., s:e, :], vv[..., s:e, :]
        if flush is not None:
            # the blocks this write completed go to the pool (once per block_size tokens in
            # decoding). Attention does not read them: make the outputs depend on the writes so
            # evaluating the logits performs them (and releases this step's graph).
            a, b, plan = flush
            pk, pv = self._write_pool(plan, kv[0, :, a:b, :], vv[0, :, a:b, :])
            k_out, v_out = mx.depends([k_out, v_out], [pk, pv])
        return k_out, v_out

    def _write_pool(self, plan, k_rows: mx.array, v_rows: mx.array):
        """Writes (H, n, D) rows into this layer's pool arrays at ``plan`` (see _rows_plan)."""
        pool = self._seq.pool
        kt = k_rows.transpose(1, 0, 2)
        vt = v_rows.transpose(1, 0, 2)
        if kt.dtype != pool.dtype:
            kt, vt = kt.astype(pool.dtype), vt.astype(pool.dtype)
        pk, pv = pool._k[self.layer], pool._v[self.layer]
        contiguous, where = plan
        if contiguous:
            n = kt.shape[0]
            pk[where: where + n] = kt
            pv[where: where + n] = vt
        else:
            pk[where] = kt
            pv[where] = vt
        return pk, pv

    def make_mask(self, N: int, window_size: Optional[int] = None, return_array: bool = False):
        o = self.offset
        s = self._start(o)
        if window_size is not None and self.window is not None and window_size > self.window:
            raise ValueError(f"mask window {window_size} is larger than this layer's cache "
                             f"window {self.window}")
        if window_size is None:
            if s == 0:
                if N == 1:
                    return None
                return _causal_mask(N, o, None, 0) if return_array else "causal"
            window_size = self.window  # this layer's own window
        if o + N - s <= window_size:  # every kept key is inside every query's window
            if N == 1:
                return None
            if not return_array:
                return "causal"
        return _causal_mask(N, o, window_size, s)

    # -- mlx-lm cache protocol -----------------------------------------------------------------

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        n = max(0, min(self.offset, n))
        self.offset -= n
        self._seq._layer_trimmed()
        return n

    def size(self) -> int:
        return self.offset

    def empty(self) -> bool:
        return self.offset == 0

    @property
    def state(self):
        seq = self._seq
        arrs = [seq.pool._k[self.layer], seq.pool._v[self.layer]]
        if self._kv is not None:
            arrs += [self._kv, self._vv]
        return arrs

    @property
    def nbytes(self) -> int:
        """Bytes of this layer's working view (the blocks are accounted by the pool)."""
        return 0 if self._kv is None else self._kv.nbytes + self._vv.nbytes
