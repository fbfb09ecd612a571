"""What the framework integrations share: vocabularies, compiled grammars, walks and masks.

- `vocabulary_for(tokenizer)`: the grammar core's vocabulary for a tokenizer object, built
  once per tokenizer (and checked once by the tokenizer self-test).
- `compile_constraint(vocab, regex=..., json_schema=...)`: a `Compiled` grammar, compiled once
  per pattern and vocabulary (an LRU keyed by `onyx.options.ConstraintSpec.key`).
- `Walk`: one sequence's path through a grammar, kept in step with the token ids a framework
  hands its processor (rewinds included: the state is a function of the tokens, not of the
  order of calls).
- `MaskTable`: a grammar's masks at one logits width in one framework's form (an MLX bool
  array, a torch bool tensor), converted once per state. With a token budget the mask is the
  engine's budget-aware one (`grammar.token_bitmask_within`); the masks a budget restricts
  (the last steps before the limit) are converted once per state and budget.

No framework is imported here (numpy only), so each integration pulls in only its own.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from onyx.errors import RequestError
from onyx.options import ConstraintSpec
from onyx.grammar.self_test import self_test
from onyx.grammar.vocabulary import Vocabulary

GRAMMAR_CACHE_SIZE = 128
# Budget-restricted masks kept per table (they only occur in the last steps before max_tokens).
MAX_BUDGET_MASKS = 1024

_lock = threading.Lock()
_vocabularies: dict[tuple, tuple[Any, Vocabulary, Any]] = {}
_grammars: OrderedDict[tuple, "Compiled"] = OrderedDict()


# --- vocabularies -----------------------------------------------------------------------------


def eos_ids_of(tokenizer: Any) -> list[int] | None:
    """The EOS ids a tokenizer declares: `eos_token_ids` (mlx-lm's wrapper: a set, possibly of
    several), else `eos_token_id`. None when it declares none."""
    for attr in ("eos_token_ids", "eos_token_id"):
        value = getattr(tokenizer, attr, None)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            return [value]
        try:
            ids = sorted({int(i) for i in value})
        except (TypeError, ValueError):
            continue
        if ids:
            return ids
    return None


def vocabulary_for(tokenizer: Any, eos_token_ids: list[int] | None = None, *, strict: bool = False,
                   stacklevel: int = 2) -> Vocabulary:
    """The grammar core's vocabulary for `tokenizer` (a transformers fast tokenizer, mlx-lm's
    `TokenizerWrapper` or a `tokenizers.Tokenizer`), built once per tokenizer object and EOS
    set. The tokenizer self-test runs when it is built: a mismatch warns (pointing at the line
    `stacklevel` frames up), or raises `onyx.TokenizerMismatchError` with `strict=True`."""
    eos = sorted({int(i) for i in eos_token_ids}) if eos_token_ids else eos_ids_of(tokenizer)
    key = (id(tokenizer), tuple(eos) if eos else None)
    with _lock:
        hit = _vocabularies.get(key)
    if hit is not None and _referent(hit[0]) is tokenizer:
        vocab, report = hit[1], hit[2]
        if strict and not report.ok:
            self_test(vocab, tokenizer, strict=True)  # raises, with the full report
        return vocab
    vocab = Vocabulary.from_hf(tokenizer, eos_token_ids=eos, self_test=False)
    report = self_test(vocab, tokenizer, strict=strict, stacklevel=stacklevel + 1)
    with _lock:
        _vocabularies[key] = (_reference(tokenizer, key), vocab, report)
    return vocab


def _reference(tokenizer: Any, key: tuple) -> Any:
    """A weak reference that drops the cache entry with the tokenizer (a strong one for the few
    objects that take no weak references)."""

    def drop(_ref, key=key):
        with _lock:
            _vocabularies.pop(key, None)

    try:
        return weakref.ref(tokenizer, drop)
    except TypeError:
        return tokenizer


def _referent(ref: Any) -> Any:
    return ref() if isinstance(ref, weakref.ref) else ref


# --- grammars ---------------------------------------------------------------------------------


class Compiled:
    """A grammar compiled for one vocabulary, and its mask tables (one per framework and logits
    width), shared by every processor built for the same pattern."""

    def __init__(self, vocab: Vocabulary, spec: ConstraintSpec, grammar: Any) -> None:
        self.vocab = vocab  # held: the cache's key is its id
        self.spec = spec
        self.grammar = grammar
        self.eos_ids = frozenset(int(t) for t in grammar.eos_token_ids)
        self._tables: dict[tuple, MaskTable] = {}
        self._lock = threading.Lock()

    def table(self, kind: str, width: int, convert: Callable[[np.ndarray, int], Any]) -> "MaskTable":
        """The mask table for framework `kind` at logits width `width` (made on first use)."""
        key = (kind, width)
        table = self._tables.get(key)
        if table is None:
            with self._lock:
                table = self._tables.get(key)
                if table is None:
                    table = self._tables[key] = MaskTable(self.grammar, width, convert)
        return table


def check_budget(value: Any, name: str) -> int | None:
    """A token budget argument: None, or a positive integer (ValueError naming `name`)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def constraint_spec(regex: Any = None, json_schema: Any = None, max_whitespace: Any = None) -> ConstraintSpec:
    """The constraint for these arguments; exactly one of `regex` and `json_schema` is needed."""
    spec = ConstraintSpec.parse(regex, json_schema, max_whitespace)
    if spec is None:
        raise RequestError("give a regex= or a json_schema= to constrain to", param="regex")
    return spec


def compile_constraint(vocab: Vocabulary, spec: ConstraintSpec) -> Compiled:
    """The compiled grammar for `spec` over `vocab`, compiled once per pattern (least recently
    used evicted past `GRAMMAR_CACHE_SIZE`). Raises a subclass of `onyx.GrammarError`."""
    key = (id(vocab), spec.key)
    with _lock:
        hit = _grammars.get(key)
        if hit is not None and hit.vocab is vocab:
            _grammars.move_to_end(key)
            return hit
    if spec.regex is not None:
        grammar = vocab.compile_regex(spec.regex)
    else:
        grammar = vocab.compile_json_schema(spec.json_schema, max_whitespace=spec.max_whitespace)
    compiled = Compiled(vocab, spec, grammar)
    with _lock:
        _grammars[key] = compiled
        while len(_grammars) > GRAMMAR_CACHE_SIZE:
            _grammars.popitem(last=False)
    return compiled


def clear_caches() -> None:
    """Forgets every cached vocabulary and compiled grammar (processors already made keep theirs)."""
    with _lock:
        _vocabularies.clear()
        _grammars.clear()


def cache_stats() -> dict:
    """How many vocabularies and compiled grammars the integrations hold."""
    with _lock:
        return {"vocabularies": len(_vocabularies), "grammars": len(_grammars)}


# --- one sequence's walk ----------------------------------------------------------------------


class Walk:
    """One sequence's path through a grammar: `states[i]` is the state after the first `i`
    generated tokens. After an EOS the sequence is over (`ended`) and later tokens (padding,
    or what a generator that does not stop on EOS samples) are recorded but not walked."""

    def __init__(self, grammar: Any, eos_ids: frozenset[int]) -> None:
        self.grammar = grammar
        self.eos_ids = eos_ids
        self.tokens: list[int] = []
        self.states: list[int] = [grammar.initial_state]
        self.ended_at: int | None = None  # index in `tokens` of the first EOS

    @property
    def state(self) -> int:
        return self.states[-1]

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def push(self, token: int) -> None:
        """Advances over one generated token. Raises `onyx.TokenNotAllowedError` for a token
        the grammar forbids (something after this processor changed the logits or the choice)."""
        state = self.states[-1]
        if self.ended_at is None:
            nxt = self.grammar.advance(state, token)
            if token in self.eos_ids:
                self.ended_at = len(self.tokens)
            state = nxt
        self.tokens.append(token)
        self.states.append(state)

    def truncate(self, n: int) -> None:
        """Forgets every generated token after the first `n`."""
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
            self.push(token)

    def budget(self, max_tokens: int | None) -> int | None:
        """Tokens that may still follow the next one (None: no limit)."""
        return None if max_tokens is None else max_tokens - len(self.tokens) - 1


# --- masks ------------------------------------------------------------------------------------


def unpack_bitmask(words: np.ndarray, width: int) -> np.ndarray:
    """A grammar bitmask (uint32 words, bit t%32 of word t//32) as a bool vector `width` long
    (ids past the vocabulary's end are False; ids past `width` are cut)."""
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    if bits.shape[0] < width:
        bits = np.pad(bits, (0, width - bits.shape[0]))
    return bits[:width].astype(np.bool_)


class MaskTable:
    """A grammar's masks at one logits width, converted once per state into one framework's
    form by `convert(words, width)` (words: the grammar's uint32 bitmask)."""

    def __init__(self, grammar: Any, width: int, convert: Callable[[np.ndarray, int], Any]) -> None:
        self.grammar = grammar
        self.width = width
        self.convert = convert
        self._masks: dict[int, Any] = {}
        self._budget_masks: dict[tuple[int, int], Any] = {}
        self._eos_only: Any = None

    def get(self, state: int, budget: int | None = None) -> Any:
        """The mask of `state`, restricted (when `budget` is given) to the tokens after which a
        valid completion fits in `budget` more tokens; the plain mask when even the shortest
        completion no longer fits (the output will be cut short), as the engine does. Whether
        a budget restricts a state's mask is an O(1) check in the grammar core."""
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
        mask = self._masks.get(state)
        if mask is None:
            mask = self._masks[state] = self.convert(self.grammar.token_bitmask(state), self.width)
        return mask

    def eos_only(self) -> Any:
        """The mask that allows EOS and nothing else (a sequence that is over)."""
        if self._eos_only is None:
            words = np.zeros((self.grammar.vocab_size + 31) // 32, dtype=np.uint32)
            for t in self.grammar.eos_token_ids:
                words[t // 32] |= np.uint32(1 << (t % 32))
            self._eos_only = self.convert(words, self.width)
        return self._eos_only

    def for_walk(self, walk: Walk, max_tokens: int | None) -> Any:
        """The mask for the token after `walk`."""
        if walk.ended:
            return self.eos_only()
        return self.get(walk.state, walk.budget(max_tokens))
