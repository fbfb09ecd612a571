"""What the framework integrations share: vocabularies built once per tokenizer, and their
grammar caches.

- `vocabulary_for(tokenizer)`: the grammar core's vocabulary for a tokenizer object, built
  once per tokenizer (and checked once by the tokenizer self-test).
- `compile_constraint(vocab, spec)`: the `Compiled` grammar for a spec, compiled once per
  pattern and vocabulary (one `onyx.grammar.constraint.GrammarCache` for every vocabulary).

Each integration then follows its sequences with `onyx.grammar.constraint.Constraint` (rewinds
included: the state is a function of the tokens, not of the order of calls) and takes its masks
from a `MaskTable` in its framework's form, as the engine does. No framework is imported here
(numpy only), so each integration pulls in only its own.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from onyx.errors import RequestError
from onyx.grammar.constraint import Compiled, GrammarCache
from onyx.grammar.self_test import self_test
from onyx.grammar.vocabulary import Vocabulary
from onyx.options import ConstraintSpec

_lock = threading.Lock()
_vocabularies: dict[tuple, tuple[Any, Vocabulary, Any]] = {}
_grammars = GrammarCache()  # every vocabulary's grammars, within one bound


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
    used evicted past `onyx.grammar.constraint.GRAMMAR_CACHE_SIZE`). Raises a subclass of
    `onyx.GrammarError`."""
    return _grammars.get(spec, vocab)


def clear_caches() -> None:
    """Forgets every cached vocabulary and compiled grammar (processors already made keep theirs)."""
    with _lock:
        _vocabularies.clear()
    _grammars.clear()


def cache_stats() -> dict:
    """How many vocabularies and compiled grammars the integrations hold."""
    with _lock:
        return {"vocabularies": len(_vocabularies), "grammars": len(_grammars)}
