"""A request's constraint: a compiled grammar, its masks as MLX arrays, and the request's state.

- `GrammarCache` compiles a `ConstraintSpec` (regex, JSON Schema or structure) against the
  model's vocabulary once per pattern (LRU) and counts compiles and hits.
- `MaskCache` turns the grammar's per-state bitmasks into bool vectors of the logits' width,
  once per state, so constraining a step costs one dictionary lookup and one `where`. It is
  shared by every request with the same pattern.
- `Constraint` is one request's view: the grammar, the shared masks, and the state the
  committed tokens have reached. Drafts and verification walk throw-away int states through
  the same grammar.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from typing import Any

import mlx.core as mx
import numpy as np

from onyx.options import ConstraintSpec

log = logging.getLogger("onyx.grammar.constraint")


def bitmask_to_bool(words: np.ndarray, width: int) -> mx.array:
    """Unpacks a grammar bitmask (uint32 words, bit t%32 of word t//32) to a bool vector of the
    logits' width. Ids past the vocabulary's end stay False."""
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    if bits.shape[0] < width:
        bits = np.pad(bits, (0, width - bits.shape[0]))
    return mx.array(bits[:width].astype(np.bool_))


class MaskCache:
    """Bool masks per grammar state, made once per state."""

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


class Constraint:
    """One request's grammar: `grammar`, the shared `masks`, and `state`, which advances on
    committed tokens only."""

    def __init__(self, grammar, masks: MaskCache) -> None:
        self.grammar = grammar
        self.masks = masks
        self.state: int = grammar.initial_state

    @classmethod
    def of(cls, grammar, width: int) -> "Constraint":
        """A constraint with a mask cache of its own (for a grammar compiled outside the engine)."""
        return cls(grammar, MaskCache(grammar, width))

    def advance(self, token: int) -> None:
        self.state = self.grammar.advance(self.state, token)

    @property
    def done(self) -> bool:
        """The output is complete: nothing but EOS may follow."""
        return self.masks.only_eos(self.state)

    @property
    def accepting(self) -> bool:
        return bool(self.grammar.is_accepting(self.state))


class GrammarCache:
    """Compiled grammars (with their mask caches) by pattern, least recently used evicted."""

    def __init__(self, vocab, width: int, size: int = 128) -> None:
        self.vocab = vocab
        self.width = width
        self.size = size
        self._entries: OrderedDict[tuple, tuple[Any, MaskCache]] = OrderedDict()
        self._lock = threading.Lock()
        self.compiles = 0
        self.hits = 0

    def get(self, spec: ConstraintSpec) -> tuple[Any, MaskCache]:
        """The grammar and mask cache for `spec`. Raises a subclass of `onyx.GrammarError`."""
        key = spec.key
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return hit
        if spec.regex is not None:
            grammar = self.vocab.compile_regex(spec.regex)
        elif spec.structure is not None:
            grammar = self.vocab.compile_structure(json.loads(spec.structure))
        else:
            grammar = self.vocab.compile_json_schema(spec.json_schema, max_whitespace=spec.max_whitespace)
            if grammar.restriction:
                # Still valid output, but fewer texts than the schema allows: say so once.
                log.warning("JSON Schema compiled under a restriction: %s", grammar.restriction)
        entry = (grammar, MaskCache(grammar, self.width))
        with self._lock:
            self.compiles += 1
            self._entries[key] = entry
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return entry

    def constraint(self, spec: ConstraintSpec | None) -> Constraint | None:
        """A fresh request constraint for `spec` (None when unconstrained)."""
        if spec is None:
            return None
        return Constraint(*self.get(spec))

    def stats(self) -> dict:
        with self._lock:
            return {"size": len(self._entries), "compiles": self.compiles, "hits": self.hits}
