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
prompt going in a chunk at a time) takes its own arrays from the start, allocated on another
thread beforehand (``PagedSequence.expect``), and arrays of one
sequence grow by a quarter at least, so a long sequence copies its rows a few times, not once
per ``STEP`` tokens. Slots are handed out lowest first and the
arrays are dropped when no slot is in use. Growing either axis copies the arrays (rare: once per
``STEP`` tokens of the longest view, and when more sequences hold views at once than ever
before).
"""

from __future__ import annotations

from typing import Optional

import mlx.core as mx

STEP = 256  # capacity grows in steps of this many tokens (as mlx-lm's KVCache)
# Most tokens the pool's shared arrays hold per slot. A sequence that outgrows them gets arrays
# of its own (one slot) and attends alone: one long context must not make every slot as long.
SHARED_CAPACITY = 2048


class ViewSlots:
    """Per layer, one K and one V array ``(slots, kv_heads[l], capacity, head_dim[l])``."""

    def __init__(self, kv_heads: list[int], head_dims: list[int], v_head_dims: list[int], dtype: mx.Dtype,
                 *, headroom: float = 0.0) -> None:
        self.kv_heads = kv_heads
        self.headroom = headroom  # growing the capacity adds at least this share of it
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
        if all(self._owned):
            self._grow(2 * self.slots, self.capacity)
        slot = self._owned.index(False)
        self._owned[slot] = True
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

    def make_room(self, slots: int) -> None:
        """At least `slots` slots (at least doubling when it grows): a burst of sequences
        arriving together grows the arrays once, not once per doubling."""
        if slots > self.slots:
            self._grow(max(slots, 2 * self.slots), self.capacity)

    def reserve(self, length: int) -> None:
        """Makes every slot hold at least `length` tokens."""
        if length > self.capacity:
            length = max(length, int(self.capacity * (1 + self.headroom)))
            self._grow(self.slots, -(-length // STEP) * STEP)

    def _grow(self, slots: int, capacity: int) -> None:
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
                layers.append(new)
            grown.append(layers)
        mx.eval(grown)
        self.k, self.v = grown
        self._owned += [False] * (slots - len(self._owned))
        self.slots, self.capacity = slots, capacity

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.k + self.v if a is not None)

    def arrays(self) -> list[mx.array]:
        return [a for a in self.k + self.v if a is not None]
