"""The working views of every sequence of a pool, as slots of one padded array per layer.

Attention reads a sequence's keys and values from a contiguous *working view* (see
``onyx.kv.pool``). All of a pool's views live together: per layer one K and one V array of
shape ``(slots, kv_heads, capacity, head_dim)``, and a sequence that holds a view owns one slot
(the same index in every layer). A lone sequence's attention reads its slot as a
``(1, kv_heads, length, head_dim)`` slice, as it read its own array before; a ragged forward
over several sequences (``onyx.kv.ragged``) writes all their new rows with one scatter per
layer and runs one attention over the slots, masked per row, instead of one write and one
attention per sequence. That is what the layout is for: per-sequence writes and attentions
would be a large part of a step of several one-row sequences.

The price is padding: every slot has the capacity of the longest view (grown in steps of
``STEP`` tokens). So the shared arrays hold at most ``SHARED_CAPACITY`` tokens a slot, and a
sequence that outgrows them moves to arrays of its own (its rows copied once) and attends alone:
one long prompt does not make every slot as long. A sequence known to outgrow them (a long
prompt going in a chunk at a time) gets its own arrays allocated on another thread beforehand
(``PagedSequence.expect``) and moves to them instead of growing the shared ones, and arrays of one
sequence grow by a quarter at least, so a long sequence copies its rows a few times, not once
per ``STEP`` tokens. Slots are handed out lowest first and the
arrays are dropped when no slot is in use. Growing either axis copies the arrays (rare: once per
``STEP`` tokens of the longest view, and when more sequences hold views at once than ever
before). The pool's shared arrays (``spare=True``) prepare the next size in slots on another
thread as soon as every slot is taken, while they are small enough (``SPARE_MAX_BYTES``): the
sequence that then needs one more slot finds zeroed arrays twice as large ready, and the step
that takes them only copies the old slots in, instead of allocating and zero-filling them too.
"""

from __future__ import annotations

import threading
import time
from typing import NamedTuple, Optional

import mlx.core as mx

STEP = 256  # capacity grows in steps of this many tokens (as mlx-lm's KVCache)
# Most tokens the pool's shared arrays hold per slot. A sequence that outgrows them gets arrays
# of its own (one slot) and attends alone: one long context must not make every slot as long.
SHARED_CAPACITY = 2048
# Largest arrays (bytes, K and V of every layer) prepared ahead as spares for more slots.
SPARE_MAX_BYTES = 256 << 20
# Arrays filled on another thread (a long prompt's own, spares) are evaluated one at a time with
# this pause between them: zero-filling a hundred megabytes at once beside a decoding step takes
# the memory bandwidth the step needs and slows it several-fold; spread out, it slows a few
# steps a little.
PACE_S = 0.004


class _Spare(NamedTuple):
    """Arrays of `slots` x `capacity` being zero-filled on another thread (`done` once ready)."""

    views: "ViewSlots"
    slots: int
    capacity: int
    done: threading.Event


class ViewSlots:
    """Per layer, one K and one V array ``(slots, kv_heads[l], capacity, head_dim[l])``."""

    def __init__(self, kv_heads: list[int], head_dims: list[int], v_head_dims: list[int], dtype: mx.Dtype,
                 *, headroom: float = 0.0, spare: bool = False) -> None:
        self.kv_heads = kv_heads
        self.headroom = headroom  # growing the capacity adds at least this share of it
        self.spare = spare  # prepare larger arrays ahead once every slot is taken (module docstring)
        self._spare: Optional[_Spare] = None
        self.head_dims = head_dims
        self.v_head_dims = v_head_dims
        self.dtype = dtype
        self.k: list[Optional[mx.array]] = [None] * len(kv_heads)
        self.v: list[Optional[mx.array]] = [None] * len(kv_heads)
        self.slots = 0  # allocated along axis 0
        self.capacity = 0  # allocated along axis 2
        self._owned: list[bool] = []

    @property
    def in_use(self) -> int:
        return sum(self._owned)

    def acquire(self, length: int) -> int:
        """A free slot (the lowest) with room for `length` tokens; grows the arrays if needed.
        Its rows are whatever an earlier owner left: the caller writes before it reads."""
        self.reserve(length)
        if all(self._owned) and not self._take_spare(self.slots + 1):
            self._grow(2 * self.slots, self.capacity)
        slot = self._owned.index(False)
        self._owned[slot] = True
        if self.spare and all(self._owned):
            self._prepare_spare(2 * self.slots)
        return slot

    def release(self, slot: int) -> None:
        self._owned[slot] = False
        self.drop_if_unused()

    def drop_if_unused(self) -> None:
        """Drops the arrays when no slot is in use (also ones `make_room` grew for sequences
        that ended before taking a slot)."""
        if not any(self._owned):
            self.k = [None] * len(self.k)
            self.v = [None] * len(self.v)
            self.slots = self.capacity = 0
            self._owned = []
            self._spare = None

    def make_room(self, slots: int) -> None:
        """At least `slots` slots (at least doubling when it grows): a burst of sequences
        arriving together grows the arrays once, not once per doubling."""
        if slots > self.slots and not self._take_spare(slots):
            self._grow(max(slots, 2 * self.slots), self.capacity)

    def reserve(self, length: int, *, paced: bool = False) -> None:
        """Makes every slot hold at least `length` tokens (`paced`: on a thread beside the
        decoding steps, see `PACE_S`)."""
        if length > self.capacity:
            length = max(length, int(self.capacity * (1 + self.headroom)))
            self._grow(self.slots, -(-length // STEP) * STEP, paced=paced)

    def _grow(self, slots: int, capacity: int, *, paced: bool = False) -> None:
        """New arrays of `slots` x `capacity` holding the old ones; they replace the old ones
        only once all are built and evaluated."""
        slots = max(slots, 1)
        capacity = max(capacity, STEP)
        grown = []
        for arrays, dims in ((self.k, self.head_dims), (self.v, self.v_head_dims)):
            layers = []
            for old, h, d in zip(arrays, self.kv_heads, dims):
                new = mx.zeros((slots, h, capacity, d), self.dtype)
                if old is not None:
                    new[: old.shape[0], :, : old.shape[2], :] = old
                if paced:
                    mx.eval(new)
                    time.sleep(PACE_S)
                layers.append(new)
            grown.append(layers)
        mx.eval(grown)
        self.k, self.v = grown
        self._owned += [False] * (slots - len(self._owned))
        self.slots, self.capacity = slots, capacity
        self._spare = None  # prepared for the old capacity, or no larger than these

    def _prepare_spare(self, slots: int) -> None:
        """Starts zero-filling arrays of `slots` slots at the current capacity on another
        thread (`_grow` of arrays of their own, paced), unless some are already prepared or
        they would be too large."""
        if self._spare is not None and self._spare.capacity == self.capacity and self._spare.slots >= slots:
            return
        per_slot = sum(h * self.capacity * (d + dv) for h, d, dv in zip(self.kv_heads, self.head_dims, self.v_head_dims))
        if slots * per_slot * self.dtype.size > SPARE_MAX_BYTES:
            return
        spare, capacity, done = ViewSlots(self.kv_heads, self.head_dims, self.v_head_dims, self.dtype), self.capacity, \
            threading.Event()
        self._spare = _Spare(spare, slots, capacity, done)

        def fill() -> None:
            try:
                spare._grow(slots, capacity, paced=True)
            finally:
                done.set()

        # not a daemon, as `PagedSequence.expect`'s allocation: an exit waits for it
        threading.Thread(target=fill, name="onyx-kv-views", daemon=False).start()

    def _take_spare(self, slots: int) -> bool:
        """Moves to the prepared arrays when they are ready and hold at least `slots` slots at
        the current capacity: the old slots are copied in. False (nothing changes) otherwise."""
        if not self._spare_ready(slots):
            return False
        spare, n, _, _ = self._spare
        self._spare = None
        for new, old in zip(spare.k + spare.v, self.k + self.v):
            if old is not None:
                new[: old.shape[0]] = old
        mx.eval(spare.k, spare.v)
        self.k, self.v = spare.k, spare.v
        self._owned += [False] * (n - len(self._owned))
        self.slots = n
        return True

    def slot_ready(self) -> bool:
        """Whether `acquire` can hand out a slot without allocating: one is free, or prepared
        arrays with more slots are ready."""
        return self.in_use < self.slots or self._spare_ready(self.slots + 1)

    def _spare_ready(self, slots: int) -> bool:
        """Whether prepared arrays are filled and hold at least `slots` slots at the current
        capacity (what `_take_spare` moves to)."""
        if self._spare is None:
            return False
        spare, n, capacity, done = self._spare
        return done.is_set() and spare.slots == n and capacity == self.capacity and n >= slots

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.k + self.v if a is not None)

    def arrays(self) -> list[mx.array]:
        return [a for a in self.k + self.v if a is not None]
