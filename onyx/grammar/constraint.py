"""The one constraint stack: compiled grammars, their masks, and one sequence's walk.

- `GrammarCache` compiles a `ConstraintSpec` (regex, JSON Schema or structure) for one
  vocabulary, once per pattern (requests for a pattern being compiled wait for that compile),
  and counts compiles and hits. It is bounded in bytes (the grammars' automata and token
  indexes, and the masks made from them, which grow as sequences visit states): least recently
  used grammars are dropped past the bound. Within one grammar, its token index and each mask
  table keep at most `MAX_INDEX_BYTES` (or the cache's bound, when smaller), dropping the rows
  and masks not used lately; one whose automaton alone passes the cache's bound is a
  `GrammarTooLargeError`. The engine holds one; the framework integrations hold one for
  every tokenizer.
- `Compiled` is a grammar with what every sequence under it shares: its mask tables (one per
  framework and logits width) and which states admit nothing but EOS.
- `MaskTable` turns the grammar's per-state bitmasks into one framework's mask, once per state,
  with a converter (`unpack_bitmask` for numpy; the MLX one is
  `onyx.decoding.sampling.mask_to_mlx`, torch's lives in its integration). With a token budget
  the mask is budget-aware: a token is allowed only if a valid completion still fits after it.
- `Constraint` is one sequence's walk through a grammar: the states after each committed token,
  the masks of the rows a step verifies, the walk along drafts, forced bytes, whether the output
  is complete, and rewinds (a framework that rolls tokens back). Drafts, verification, the
  batch and both integrations use it.

No framework is imported here (numpy only), so each integration pulls in only its own.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import threading
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

import onyx._grammar as _g
from onyx.options import GRAMMAR_CACHE_BYTES, MAX_INDEX_BYTES, ConstraintSpec

log = logging.getLogger("onyx.grammar")

GRAMMAR_CACHE_SIZE = 128
# States a cached grammar may have met before the next request compiles it afresh (a pushdown
# grammar's reading ids stop at 4,194,304).
MAX_CACHED_STATES = 1 << 20
# Budget-restricted masks kept per table (they only occur in the last steps before max_tokens).
MAX_BUDGET_MASKS = 1024

Converter = Callable[[np.ndarray, int], Any]


def unpack_bitmask(words: np.ndarray, width: int) -> np.ndarray:
    """A grammar bitmask (uint32 words, bit t%32 of word t//32) as a bool vector `width` long
    (ids past the vocabulary's end are False; ids past `width` are cut)."""
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    if bits.shape[0] < width:
        bits = np.pad(bits, (0, width - bits.shape[0]))
    return bits[:width].astype(np.bool_)


class MaskTable:
    """A grammar's masks at one logits width, converted once per mask into one framework's
    form by `convert(words, width)` (words: the grammar's uint32 bitmask). A regular grammar's
    masks are one per state; a pushdown grammar meets new states as text is read, and its states
    that allow the same tokens share a mask (`grammar.mask_id`), so its table keys on that."""

    def __init__(self, grammar: Any, width: int, convert: Converter, max_bytes: int = MAX_INDEX_BYTES) -> None:
        self.grammar = grammar
        self.width = width
        self.convert = convert
        self.max_bytes = max_bytes  # past it, the least recently used masks are dropped
        self._by_mask = bool(getattr(grammar, "is_pushdown", False))
        self._masks: OrderedDict[int, Any] = OrderedDict()
        self._budget_masks: dict[tuple[int, int], Any] = {}
        self._eos_only: Any = None
        self._mask_bytes = 0  # the converted masks held in `_masks`
        self._one_mask = width  # bytes of one converted mask (known from the first)

    def memory_bytes(self) -> int:
        """Bytes of the converted masks held (budget masks included, at most MAX_BUDGET_MASKS)."""
        return self._mask_bytes + len(self._budget_masks) * self._one_mask

    def get(self, state: int, budget: int | None = None) -> Any:
        """The mask of `state`, restricted (when `budget` is given) to the tokens after which a
        valid completion fits in `budget` more tokens; the plain mask when even the shortest
        completion no longer fits (the output will be cut short). Whether a budget restricts a
        state's mask is an O(1) check in the grammar core."""
        if budget is not None:
            mask = self._budget_masks.get((state, budget))
            if mask is not None:
                return mask
            words = self.grammar.token_bitmask_within(state, budget)
            if words is not self.grammar.token_bitmask(state) and words.any():
                if len(self._budget_masks) >= MAX_BUDGET_MASKS:
                    self._budget_masks.clear()
                mask = self._budget_masks[(state, budget)] = self.convert(words, self.width)
                return mask
        key = self.grammar.mask_id(state) if self._by_mask else state
        mask = self._masks.get(key)
        if mask is not None:
            with contextlib.suppress(KeyError):  # another thread's drop
                self._masks.move_to_end(key)
            return mask
        mask = self._masks[key] = self.convert(self.grammar.token_bitmask(state), self.width)
        self._one_mask = _nbytes(mask, self.width)
        self._mask_bytes += self._one_mask
        while self._mask_bytes > self.max_bytes and len(self._masks) > 1:
            self._masks.popitem(last=False)
            self._mask_bytes -= self._one_mask
        return mask

    def eos_only(self) -> Any:
        """The mask that allows EOS and nothing else (a sequence that is over)."""
        if self._eos_only is None:
            words = np.zeros((self.grammar.vocab_size + 31) // 32, dtype=np.uint32)
            for t in self.grammar.eos_token_ids:
                words[t // 32] |= np.uint32(1 << (t % 32))
            self._eos_only = self.convert(words, self.width)
        return self._eos_only


def _nbytes(mask: Any, width: int) -> int:
    """The bytes of one framework mask (mlx and numpy say `nbytes`; torch counts elements)."""
    n = getattr(mask, "nbytes", None)
    if isinstance(n, int):
        return n
    numel = getattr(mask, "numel", None)
    return int(numel() * mask.element_size()) if callable(numel) else width


class Compiled:
    """A grammar compiled for one vocabulary (`vocab` and `spec` are None for a grammar built
    elsewhere), with its mask tables and the states after which only EOS may follow, shared by
    every sequence under the same pattern."""

    def __init__(self, grammar: Any, vocab: Any = None, spec: ConstraintSpec | None = None,
                 max_table_bytes: int = MAX_INDEX_BYTES) -> None:
        self.grammar = grammar
        self.max_table_bytes = max_table_bytes
        self.vocab = vocab  # held: a cache keyed by the vocabulary's id must keep it alive
        self.spec = spec
        self.eos_ids = frozenset(int(t) for t in grammar.eos_token_ids)
        self._tables: dict[tuple, MaskTable] = {}
        self._only_eos: dict[int, bool] = {}
        self._lock = threading.Lock()

    def table(self, kind: str, width: int, convert: Converter) -> MaskTable:
        """The mask table for framework `kind` at logits width `width` (made on first use)."""
        key = (kind, width)
        table = self._tables.get(key)
        if table is None:
            with self._lock:
                table = self._tables.get(key)
                if table is None:
                    table = self._tables[key] = MaskTable(self.grammar, width, convert, self.max_table_bytes)
        return table

    def memory_bytes(self) -> int:
        """Bytes held: the grammar (automata, token index built so far) and its mask tables."""
        return int(self.grammar.memory_bytes) + sum(t.memory_bytes() for t in list(self._tables.values()))

    def only_eos(self, state: int) -> bool:
        """True when the output is complete at `state` and nothing but EOS may follow."""
        done = self._only_eos.get(state)
        if done is None:
            g = self.grammar
            done = bool(g.is_accepting(state)) and set(g.allowed_token_ids(state).tolist()) <= self.eos_ids
            self._only_eos[state] = done
        return done


def compile_spec(vocab: Any, spec: ConstraintSpec, max_index_bytes: int | None = None) -> Any:
    """The grammar of `spec` over `vocab`, its token index bounded by `max_index_bytes` (None:
    the core's default). Raises a subclass of `onyx.GrammarError`."""
    limit = {"max_index_bytes": max_index_bytes} if max_index_bytes is not None else {}
    if spec.regex is not None:
        return vocab.compile_regex(spec.regex, **limit)
    if spec.structure is not None:
        return vocab.compile_structure(spec.structure, **limit)
    if spec.gbnf is not None:
        return vocab.compile_gbnf(spec.gbnf, **limit)
    if spec.lark is not None:
        return vocab.compile_lark(spec.lark, **limit)
    grammar = vocab.compile_json_schema(spec.json_schema, max_whitespace=spec.max_whitespace, **limit)
    if grammar.restriction:
        # Still valid output, but fewer texts than the schema allows: say so once per compile.
        log.warning("JSON Schema compiled under a restriction: %s", grammar.restriction)
    return grammar


class _Pending:
    """A compile in progress, which requests for the same pattern wait for."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.compiled: Compiled | None = None
        self.error: BaseException | None = None


class GrammarCache:
    """Compiled grammars by pattern: at most `size` of them and `max_bytes` bytes, least recently
    used dropped first (a grammar in use stays alive with its users, outside the count). The
    engine's cache has one vocabulary (`vocab`); the integrations' one serves every tokenizer's
    vocabulary (`get`'s `vocab`), within one bound."""

    def __init__(self, vocab: Any = None, size: int = GRAMMAR_CACHE_SIZE, max_bytes: int = GRAMMAR_CACHE_BYTES) -> None:
        if max_bytes < 1 or size < 1:
            raise ValueError("a grammar cache needs room for at least one grammar")
        self.vocab = vocab
        self.size = size
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple, Compiled] = OrderedDict()
        self._lock = threading.Lock()
        self.compiles = 0
        self.hits = 0
        self.evictions = 0
        self._recording = threading.local()  # grammars compiled inside `kept_if_no_error`
        self._compiling: dict[tuple, _Pending] = {}  # patterns being compiled now, by key

    def get(self, spec: ConstraintSpec, vocab: Any = None) -> Compiled:
        """The compiled grammar for `spec` over `vocab` (default: the cache's own). Raises a
        subclass of `onyx.GrammarError`."""
        vocab = self.vocab if vocab is None else vocab
        key = (id(vocab), spec.key)  # a cached entry holds its vocabulary, so the id stays its own
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit.vocab is vocab and self._worn(hit):
                # Its users keep it; the next request starts from a fresh compile.
                del self._entries[key]
                self.evictions += 1
            elif hit is not None and hit.vocab is vocab:
                self._entries.move_to_end(key)
                self.hits += 1
                self._trim()
                return hit
            # Single flight: requests for a pattern already compiling wait for that compile.
            pending = self._compiling.get(key)
            owner = pending is None
            if owner:
                pending = self._compiling[key] = _Pending()
        if not owner:
            pending.done.wait()
            if pending.error is not None:
                raise copy.copy(pending.error)
            with self._lock:
                self.hits += 1
            return pending.compiled
        try:
            per_grammar = min(self.max_bytes, MAX_INDEX_BYTES)
            compiled = Compiled(compile_spec(vocab, spec, per_grammar), vocab, spec, per_grammar)
            size = compiled.memory_bytes()
            if size > self.max_bytes:
                raise _g.GrammarTooLargeError(f"the compiled grammar takes {size} bytes, more than the "
                                              f"{self.max_bytes} bytes all cached grammars may hold")
            pending.compiled = compiled
        except BaseException as e:
            pending.error = e
            with self._lock:
                self._compiling.pop(key, None)
            pending.done.set()
            raise
        with self._lock:
            self.compiles += 1
            self._entries[key] = compiled
            self._compiling.pop(key, None)
            self._trim()
        pending.done.set()
        recording = getattr(self._recording, "compiled", None)
        if recording is not None:
            recording.append(compiled)
        return compiled

    @contextlib.contextmanager
    def kept_if_no_error(self):
        """Grammars compiled in this thread inside the block are dropped again if the block
        raises: a request that fails (a too-small `max_tokens`, a bad field) keeps nothing."""
        outer = getattr(self._recording, "compiled", None)
        self._recording.compiled = compiled = []
        try:
            yield
        except BaseException:
            with self._lock:
                for key, entry in list(self._entries.items()):
                    if any(entry is c for c in compiled):
                        del self._entries[key]
            raise
        finally:
            self._recording.compiled = outer
            if outer is not None:
                outer.extend(compiled)

    def _worn(self, compiled: Compiled) -> bool:
        """Whether a cached grammar has grown past what one grammar may hold: a pushdown grammar
        whose readings keep what was written (arrays of distinct strings) meets a new state with
        almost every token, so it grows with every output, where other grammars level off."""
        return compiled.grammar.is_pushdown and compiled.grammar.num_states > MAX_CACHED_STATES

    def _bytes(self) -> int:
        """Bytes held by the cached grammars (they grow as sequences visit new states); under
        the lock."""
        return sum(c.memory_bytes() for c in self._entries.values())

    def trim(self) -> None:
        """Drops least recently used grammars until the cache is within its bounds (lookups do
        this too; grammars in use grow between them)."""
        with self._lock:
            self._trim()

    def _trim(self) -> None:
        """Drops least recently used grammars until the cache is within its bounds; under the
        lock."""
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
            self.evictions += 1
        total = self._bytes()
        while total > self.max_bytes and len(self._entries) > 1:
            _, dropped = self._entries.popitem(last=False)  # the newest one (in use now) stays
            total -= dropped.memory_bytes()
            self.evictions += 1

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def stats(self) -> dict:
        with self._lock:
            return {"size": len(self._entries), "compiles": self.compiles, "hits": self.hits,
                    "evictions": self.evictions, "bytes": self._bytes(),
                    "max_bytes": self.max_bytes}


class Constraint:
    """One sequence's walk through a compiled grammar, and its masks in one framework's form.

    `states[i]` is the state after the first `i` committed tokens (`state` is the last). After an
    EOS the sequence is over (`ended`): later tokens (padding, or what a framework that does not
    stop on EOS samples) are recorded but not walked. Draft walks (`walk`) and row masks
    (`row_masks`) use throw-away states and never change the committed ones."""

    def __init__(self, compiled: Compiled, masks: MaskTable | None = None) -> None:
        self.compiled = compiled
        self.grammar = compiled.grammar
        self.masks = masks
        self.tokens: list[int] = []
        self.states: list[int] = [compiled.grammar.initial_state]
        self.ended_at: int | None = None  # index in `tokens` of the first EOS

    @classmethod
    def of(cls, grammar: Any, width: int, convert: Converter = unpack_bitmask, kind: str = "numpy") -> "Constraint":
        """A constraint over a grammar compiled outside a cache, with masks `width` wide."""
        compiled = Compiled(grammar)
        return cls(compiled, compiled.table(kind, width, convert))

    def fresh(self) -> "Constraint":
        """Another walk from the start through the same grammar and masks."""
        return Constraint(self.compiled, self.masks)

    # -- the committed walk ------------------------------------------------------------------

    @property
    def state(self) -> int:
        return self.states[-1]

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    @property
    def done(self) -> bool:
        """The output is complete: nothing but EOS may follow."""
        return self.compiled.only_eos(self.states[-1])

    @property
    def accepting(self) -> bool:
        return bool(self.grammar.is_accepting(self.states[-1]))

    def advance(self, token: int, state: int | None = None) -> None:
        """Commits one token; `state`, when known from a draft walk, is the state it leads to.
        Raises `onyx.TokenNotAllowedError` for a token the grammar forbids."""
        current = self.states[-1]
        if self.ended_at is None:
            nxt = self.grammar.advance(current, token) if state is None else state
            if token in self.compiled.eos_ids:
                self.ended_at = len(self.tokens)
            current = nxt
        self.tokens.append(token)
        self.states.append(current)

    def truncate(self, n: int) -> None:
        """Forgets every committed token after the first `n`."""
        del self.tokens[n:]
        del self.states[n + 1:]
        if self.ended_at is not None and self.ended_at >= n:
            self.ended_at = None

    def sync(self, generated: list[int]) -> None:
        """Brings the walk to `generated` (all the sequence's tokens after its prompt), keeping
        the part it already walked that still agrees."""
        same = 0
        limit = min(len(generated), len(self.tokens))
        while same < limit and generated[same] == self.tokens[same]:
            same += 1
        self.truncate(same)
        for token in generated[same:]:
            self.advance(token)

    def budget(self, max_tokens: int | None) -> int | None:
        """Tokens that may still follow the next one (None: no limit)."""
        return None if max_tokens is None else max_tokens - len(self.tokens) - 1

    def next_mask(self, max_tokens: int | None = None) -> Any:
        """The mask for the token after the committed ones (EOS only once the sequence ended)."""
        if self.ended_at is not None:
            return self.masks.eos_only()
        return self.masks.get(self.states[-1], self.budget(max_tokens))

    # -- throw-away walks --------------------------------------------------------------------

    def walk(self, tokens: list[int], state: int | None = None) -> list[int]:
        """The states along `tokens` from `state` (default: the committed one), the start
        included, stopping before the first token the grammar refuses: `len(result) - 1` of the
        tokens are allowed."""
        states = [self.states[-1] if state is None else state]
        advance = self.grammar.advance
        for t in tokens:
            try:
                states.append(advance(states[-1], t))
            except _g.GrammarError:
                break
        return states

    def mask(self, state: int, budget: int | None = None) -> Any:
        """The mask at `state` for a token after which at most `budget` tokens remain."""
        return self.masks.get(state, budget)

    def row_masks(self, states: list[int], remaining: int) -> list[Any]:
        """The masks of a round's rows: row i at `states[i]`, with `remaining - i - 1` tokens
        left after its token."""
        get = self.masks.get
        return [get(s, remaining - i - 1) for i, s in enumerate(states)]

    def only_eos(self, state: int) -> bool:
        return self.compiled.only_eos(state)

    def forced_bytes(self, state: int | None = None) -> bytes:
        """The bytes every valid continuation from `state` starts with."""
        return self.grammar.forced_bytes(self.states[-1] if state is None else state)
