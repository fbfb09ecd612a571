"""One sequence in a paged KV pool, and the per-layer cache objects mlx-lm's attention calls.

A ``PagedSequence`` is a block table and a length in a ``PagedKVPool`` (``onyx.kv.pool``,
which explains the storage and its invariants). It keeps, per layer, the contiguous working view
that attention reads, writes full blocks back to the pool, and does the O(1) ``rollback``,
copy-on-write ``fork`` and ``free``. ``PagedLayerCache`` is the object handed to a model layer as
its cache (``update_and_fetch``, ``make_mask``, ``trim``), in the shape of mlx-lm's ``KVCache``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Optional

import mlx.core as mx
import numpy as np

from onyx.kv.views import SHARED_CAPACITY, STEP, ViewSlots

if TYPE_CHECKING:
    from onyx.kv.pool import PagedKVPool

__all__ = ["PagedSequence", "PagedLayerCache"]


def _causal_mask(n: int, offset: int, window: Optional[int], start: int) -> mx.array:
    """Boolean (n, offset + n - start) mask: query offset+i sees key start+j when causal and, with a
    window w, when the key is among the w most recent positions."""
    q = mx.arange(offset, offset + n)[:, None]
    k = mx.arange(start, offset + n)[None]
    mask = q >= k
    if window is not None:
        mask = mask & (q < k + window)
    return mask


class PagedSequence:
    """One sequence's view of a ``PagedKVPool``: a block table and a length.

    ``layer_caches()`` gives the list to pass as ``model(inputs, cache=...)``. Use ``rollback``,
    ``fork`` and ``free``; a sequence is also a context manager that frees itself."""

    def __init__(self, pool: PagedKVPool):
        self.pool = pool
        self.blocks: list[int] = []
        self._length = 0
        self._closed = False
        self._version = 0  # bumped whenever the block table changes
        self._flushed = 0  # rows [0, _flushed) are in the pool blocks; the rest only in the views
        self._plan_key = None
        self._plan = None
        # this sequence's working view: slot `slot` of `views` (the pool's shared view arrays,
        # or arrays of its own once it is longer than they hold: onyx.kv.views)
        self.views: Optional[ViewSlots] = None
        self.slot: Optional[int] = None
        # the length this sequence is known to reach soon (its whole prompt, while the prompt
        # goes in a chunk at a time): a sequence that will outgrow the shared view arrays gets
        # arrays of its own sized for it, allocated beforehand on another thread (`expect`), and
        # moves to them instead of growing every slot on its way
        self.expected_length = 0
        self._own_views: Optional[tuple[ViewSlots, threading.Event]] = None
        self._caches = [PagedLayerCache(self, l, pool.windows[l]) for l in range(pool.num_layers)]
        pool.live_sequences += 1

    # -- public --------------------------------------------------------------------------------

    @property
    def length(self) -> int:
        """Tokens whose K/V the sequence holds."""
        return self._length

    @property
    def block_table(self) -> list[int]:
        return list(self.blocks)

    @property
    def closed(self) -> bool:
        return self._closed

    def layer_caches(self) -> list["PagedLayerCache"]:
        """The per-layer cache objects for ``model(inputs, cache=...)`` (the same list each call)."""
        self.check_open()
        return self._caches

    def rollback(self, n: int) -> int:
        """Forgets the last ``n`` tokens (clamped to the length): O(1) in the sequence length, no
        array work; trailing whole blocks go back to the pool, a partly used block stays.
        Returns the number of tokens removed."""
        self.check_open()
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
        self.check_open()
        self._flush_all()
        child = PagedSequence(self.pool)
        for b in self.blocks:
            self.pool.retain(b)
        child.adopt(list(self.blocks), self._length)
        return child

    def adopt(self, blocks: list[int], length: int) -> None:
        """A new, empty sequence takes `blocks` (references already held for it) whose first
        `length` rows are in the pool; its working views are rebuilt from them when needed."""
        assert not self.blocks and self._length == 0, "adopt() is for a new sequence"
        self.blocks = blocks
        self._set_length(length)
        self._flushed = length

    def drop_views(self) -> None:
        """Releases the working view's slot (rebuilt from the blocks on the next model call): a
        parked sequence then holds only its blocks (the view arrays are freed with their last
        slot)."""
        if not self._closed:
            self._flush_all()
        self._plan_key = None
        self._release_slot()

    def expect(self, length: int) -> None:
        """This sequence will soon hold `length` tokens (its prompt). When its view goes in
        arrays of its own (`_wants_own`: past what the shared arrays hold, or a long cached
        prefix beside short sequences), they are allocated now on another thread (zero-filling
        a long prompt's arrays takes a noticeable part of a second), so the step that first
        writes it finds them ready; until then `views_ready` is False."""
        self.expected_length = length
        if self.views is not None or self._own_views is not None or not self._wants_own(length):
            return
        views, done = self.pool.private_views(), threading.Event()

        def allocate() -> None:
            try:
                views.reserve(length, paced=True)
            finally:
                done.set()

        self._own_views = (views, done)
        # not a daemon: one that exits (or is frozen) while the interpreter finalizes could stop
        # inside MLX; the allocation ends well within a second, and an exit waits for it
        threading.Thread(target=allocate, name="onyx-kv-views", daemon=False).start()

    @property
    def views_ready(self) -> bool:
        """False while the view arrays `expect` started are being allocated."""
        return self._own_views is None or self._own_views[1].is_set()

    def free(self) -> None:
        """Returns every block to the pool. Idempotent."""
        if self._closed:
            return
        self._closed = True
        pool = self.pool
        for b in self.blocks:
            pool.release(b)
        self.blocks = []
        self._length = self._flushed = 0
        self._plan_key = None
        for c in self._caches:
            c.offset = 0
        self._release_slot()
        self._own_views = None
        pool.live_sequences -= 1

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
        state = "freed" if self._closed else f"length={self._length}, blocks={self.blocks}"
        return f"PagedSequence({state})"

    # -- internals -----------------------------------------------------------------------------

    def check_open(self):
        if self._closed:
            raise RuntimeError("this PagedSequence was freed")

    def _take_slot(self, length: int, fill) -> None:
        """A working view with room for `length` tokens (a slot of the pool's shared arrays, or
        arrays of their own for a sequence longer than they hold or expected to be; beside other
        sequences, such a one starts in a shared slot while its rows fit the slots as they are,
        so its first rows attend with theirs, and moves when it outgrows them: `_reserve`),
        filled by `fill(views, slot)` before it becomes this sequence's: if filling fails, the
        slot goes back."""
        expected = max(length, self.expected_length)
        shared = self.pool.views
        if not self._wants_own(expected, length):
            self._own_views = None  # prepared for a jump the shared arrays no longer need
            views = shared
        elif shared.in_use > 0 and length <= min(shared.capacity, SHARED_CAPACITY) and shared.slot_ready():
            views = shared  # a long prompt's first rows, in a slot as the arrays are
        else:
            views, length = self._take_own_views(expected), expected
        slot = views.acquire(length)
        try:
            fill(views, slot)
        except BaseException:
            views.release(slot)
            raise
        self.views, self.slot = views, slot

    def _wants_own(self, expected: int, now: int | None = None) -> bool:
        """Whether this sequence's view goes in arrays of its own: past what the shared arrays
        hold, or when its first slot would grow them by more than one `STEP` while other
        sequences hold slots (it starts with `now` tokens, its adopted rows when not given: a
        cached prefix). Every slot is as long as the longest view, so such a jump would
        allocate and copy every slot at the new length inside the others' step, where a
        decoding sequence only ever grows them by a step."""
        now = self._length if now is None else now
        shared = self.pool.views
        return expected > SHARED_CAPACITY or (shared.in_use > 0 and now > shared.capacity + STEP)

    def _take_own_views(self, length: int) -> ViewSlots:
        """The arrays `expect` allocated, when they hold `length` tokens; else new ones."""
        own, self._own_views = self._own_views, None
        if own is not None:
            views, done = own
            done.wait()
            if views.capacity >= length:
                return views
        return self.pool.private_views()

    def _release_slot(self) -> None:
        if self.slot is not None:
            self.views.release(self.slot)
            self.views = self.slot = None

    def _reserve(self, o: int, e: int) -> None:
        """Room for `e` tokens in the view; a view outgrowing the shared arrays, or their
        current slots when arrays of its own were prepared for it (`expect`), moves its rows
        [0, o) to arrays of its own (once)."""
        views, old = self.views, self.slot
        if views is not self.pool.views or (e <= SHARED_CAPACITY and (self._own_views is None or e <= views.capacity)):
            views.reserve(e)
            return

        def copy(new: ViewSlots, slot: int) -> None:
            for l in range(len(self._caches)):
                new.k[l][slot, :, :o, :] = views.k[l][old, :, :o, :]
                new.v[l][slot, :, :o, :] = views.v[l][old, :, :o, :]
            mx.eval(new.k, new.v)

        self._take_slot(e, copy)
        views.release(old)

    def discard_failed_write(self, length: int) -> None:
        """A forward that appended to this sequence from `length` on failed: its rows are
        forgotten, and so are the pool writes it planned (they may not have run), so the rows of
        the last partly written block are written from the view again when that block fills."""
        self.truncate(length)
        bs = self.pool.block_size
        self._flushed = min(self._flushed, length // bs * bs)
        self._plan_key = None

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
        assert self.slot is not None, "unflushed rows without views"
        plan = self._rows_plan(f, o)
        pool = self.pool
        views, slot = self.views, self.slot
        for c in self._caches:
            c._write_pool(plan, views.k[c.layer][slot, :, f:o, :], views.v[c.layer][slot, :, f:o, :])
        mx.eval([pool.k[c.layer] for c in self._caches] + [pool.v[c.layer] for c in self._caches])
        self._flushed = o
        self._plan_key = None

    def _rows_plan(self, a: int, b: int):
        """Where rows [a, b) of this sequence live in the pool arrays: (True, (segment, first
        row)) when they are consecutive (one block), else (False, `pool.locate`'s parts) for a
        scatter per segment."""
        bs = self.pool.block_size
        if a // bs == (b - 1) // bs:
            s, r = self.pool.block_row(self.blocks[a // bs])
            return True, (s, r + a % bs)
        pos = np.arange(a, b)
        table = np.asarray(self.blocks, dtype=np.int64)
        return False, self.pool.locate(table[pos // bs] * bs + pos % bs)

    def _release_tail(self) -> None:
        self._plan_key = None
        if self._flushed > self._length:
            self._flushed = self._length
        keep = -(-self._length // self.pool.block_size)
        if len(self.blocks) > keep:
            pool = self.pool
            while len(self.blocks) > keep:
                pool.release(self.blocks.pop())
            self._version += 1

    def _layer_trimmed(self) -> None:
        new = max(c.offset for c in self._caches)
        if new < self._length:
            self._length = new
            self._release_tail()

    def prepare_write(self, o: int, e: int):
        """Makes rows [o, e) writable (allocation, copy-on-write, working views) and returns the
        plan: which pool rows to flush from the views after the write (the blocks that the write
        fills), or None. Computed by the first layer of a step, reused by the others."""
        pool = self.pool
        if self.slot is None:
            self.check_open()
            if o > 0:
                self._rebuild_views(o)
            else:
                self._take_slot(e, lambda views, slot: None)
            self._plan_key = None
        key = (o, e, self._version, pool.epoch)
        if key == self._plan_key:
            return self._plan
        self.check_open()
        self._reserve(o, e)
        bs = pool.block_size
        need = -(-e // bs) - len(self.blocks)
        if need > 0:
            self.blocks.extend(pool.allocate(need))
            self._version += 1
        first = o // bs
        if o % bs and pool.refs[self.blocks[first]] > 1:
            self._copy_on_write(first, o)
        # blocks past `first` hold no kept row; one can only be shared when this layer is behind
        # the first one in the same step (which already made them private): a safety net
        for i in range(first + (1 if o % bs else 0), -(-e // bs)):
            if pool.refs[self.blocks[i]] > 1:
                self._replace_block(i)
        full = e // bs * bs  # rows of the blocks this write completes are written to the pool
        plan = None
        if full > self._flushed:
            plan = (self._flushed, full, self._rows_plan(self._flushed, full))
            self._flushed = full
        self._plan = plan
        self._plan_key = (o, e, self._version, pool.epoch)
        return plan

    def _replace_block(self, i: int) -> None:
        pool = self.pool
        (nb,) = pool.allocate(1)
        pool.release(self.blocks[i])
        self.blocks[i] = nb
        self._version += 1

    def _copy_on_write(self, i: int, o: int) -> None:
        """Block i is shared and holds kept rows [i*bs, o): give this sequence its own copy (the
        rows come from the working views, so the pool arrays are only written, never read into
        themselves, and keep being updated in place)."""
        pool = self.pool
        bs = pool.block_size
        old = self.blocks[i]
        (nb,) = pool.allocate(1)
        seg, row = pool.block_row(nb)
        start = i * bs
        views, slot = self.views, self.slot
        for c in self._caches:
            k = views.k[c.layer][slot, :, start:o, :].transpose(1, 0, 2)
            v = views.v[c.layer][slot, :, start:o, :].transpose(1, 0, 2)
            pool.k[c.layer][seg][row: row + (o - start)] = k
            pool.v[c.layer][seg][row: row + (o - start)] = v
        # evaluate now: the view slices read above must not be pending when the same step writes
        # the views in place (MLX would copy a buffer that is still read)
        mx.eval([pool.k[c.layer] for c in self._caches] + [pool.v[c.layer] for c in self._caches])
        pool.release(old)
        self.blocks[i] = nb
        self._version += 1
        self._flushed = max(self._flushed, o)
        pool.counters["cow_copies"] += 1

    def _rebuild_views(self, o: int) -> None:
        """Takes a view slot and fills its rows [0, o) from the blocks (one gather per layer,
        evaluated at once so that the pool arrays are not read and written in the same graph,
        which would make MLX copy them)."""
        pool = self.pool
        bs = pool.block_size
        nblk = -(-o // bs)
        table = np.asarray(self.blocks[:nblk], dtype=np.int64)
        rows = (table[:, None] * bs + np.arange(bs)[None, :]).reshape(-1)[:o]
        parts = pool.locate(rows)

        def gather(views: ViewSlots, slot: int) -> None:
            for c in self._caches:
                l = c.layer
                k, v = pool.take(l, parts)
                views.k[l][slot, :, :o, :] = k.transpose(1, 0, 2)
                views.v[l][slot, :, :o, :] = v.transpose(1, 0, 2)
            mx.eval(views.k, views.v)

        self._take_slot(o, gather)
        pool.counters["view_rebuilds"] += 1


class PagedLayerCache:
    """The cache object of one layer of one sequence, with the interface mlx-lm's attention
    modules use (``offset``, ``update_and_fetch``, ``make_mask``) and its trimming interface
    (``is_trimmable``, ``trim``), so ``mlx_lm.models.cache.trim_prompt_cache`` works too."""

    def __init__(self, seq: PagedSequence, layer: int, window: Optional[int]):
        self._seq = seq
        self.layer = layer
        self.window = window
        self.offset = 0

    def window_start(self, o: int) -> int:
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
        flush = seq.prepare_write(o, e)

        # the working view (what attention reads): this sequence's slot, updated in place
        slot = seq.slot
        kv, vv = seq.views.k[layer], seq.views.v[layer]
        kv[slot:slot + 1, :, o:e, :] = keys
        vv[slot:slot + 1, :, o:e, :] = values
        self.advance(e)
        s = self.window_start(o)
        k_out, v_out = kv[slot:slot + 1, :, s:e, :], vv[slot:slot + 1, :, s:e, :]
        if flush is not None:
            k_out, v_out = mx.depends([k_out, v_out], self.flush(flush, kv, vv, slot))
        return k_out, v_out

    def advance(self, e: int) -> None:
        """Rows up to `e` are written."""
        self.offset = e
        if e > self._seq._length:
            self._seq._length = e

    def flush(self, flush, kv: mx.array, vv: mx.array, slot: int) -> list[mx.array]:
        """Writes the blocks a write completed from the view into the pool (once per block_size
        tokens in decoding). Attention does not read them: the caller makes its outputs depend
        on the returned arrays, so evaluating the logits performs the writes (and releases the
        step's graph)."""
        a, b, plan = flush
        return list(self._write_pool(plan, kv[slot, :, a:b, :], vv[slot, :, a:b, :]))

    def _write_pool(self, plan, k_rows: mx.array, v_rows: mx.array):
        """Writes (H, n, D) rows into this layer's pool arrays at ``plan`` (see _rows_plan)."""
        pool = self._seq.pool
        kt = k_rows.transpose(1, 0, 2)  # the views are in the pool's dtype
        vt = v_rows.transpose(1, 0, 2)
        contiguous, where = plan
        if contiguous:
            s, r = where
            pk, pv = pool.k[self.layer][s], pool.v[self.layer][s]
            n = kt.shape[0]
            pk[r: r + n] = kt
            pv[r: r + n] = vt
            return pk, pv
        written = []
        for s, local, at in where:
            pk, pv = pool.k[self.layer][s], pool.v[self.layer][s]
            pk[local] = kt if at is None else kt[at]
            pv[local] = vt if at is None else vt[at]
            written += [pk, pv]
        return tuple(written)

    def make_mask(self, N: int, window_size: Optional[int] = None, return_array: bool = False):
        o = self.offset
        s = self.window_start(o)
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
        arrs = [*seq.pool.k[self.layer], *seq.pool.v[self.layer]]
        if seq.slot is not None:
            arrs += [seq.views.k[self.layer], seq.views.v[self.layer]]
        return arrs

    @property
    def nbytes(self) -> int:
        """Bytes of this layer's working view (its slot's share; the blocks are accounted by
        the pool)."""
        views = self._seq.views
        if views is None:
            return 0
        return (views.k[self.layer].nbytes + views.v[self.layer].nbytes) // views.slots
