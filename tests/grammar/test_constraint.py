"""A request's constraint: compiled once per pattern (LRU, with counts), masks as wide as the
logits, and a state that advances on committed tokens only."""

from __future__ import annotations

import numpy as np
import pytest

import onyx
from onyx.grammar.constraint import GrammarCache, bitmask_to_bool
from onyx.options import ConstraintSpec


def token_id(vocab, spelled: bytes) -> int:
    return next(i for i in range(vocab.size) if vocab.token_bytes(i) == spelled)


def test_bitmask_unpacks_to_the_logits_width():
    words = np.array([0b101, 1 << 31], dtype=np.uint32)
    assert np.flatnonzero(np.array(bitmask_to_bool(words, 70))).tolist() == [0, 2, 63]
    assert np.array(bitmask_to_bool(words, 40)).sum() == 2


def test_grammar_cache_compiles_once_and_evicts_the_least_recent(smollm2):
    cache = GrammarCache(smollm2, smollm2.size, size=2)
    a, b, c = (ConstraintSpec.parse(regex=r) for r in ("[0-9]+", "[a-z]+", "x|y"))
    ga, _ = cache.get(a)
    assert cache.get(a)[0] is ga and cache.stats() == {"size": 1, "compiles": 1, "hits": 1}
    cache.get(b)
    cache.get(a)  # a is now the most recent
    cache.get(c)  # evicts b
    assert cache.get(a)[0] is ga and cache.stats()["compiles"] == 3
    cache.get(b)
    assert cache.stats()["compiles"] == 4
    with pytest.raises(onyx.InvalidRegexError):
        cache.get(ConstraintSpec.parse(regex="("))
    assert cache.constraint(None) is None


def test_a_constraint_advances_and_knows_when_it_is_done(smollm2):
    cache = GrammarCache(smollm2, smollm2.size)
    con = cache.constraint(ConstraintSpec.parse(regex="ab"))
    start = con.state
    for token in (token_id(smollm2, b"a"), token_id(smollm2, b"b")):
        assert not con.done
        con.advance(token)
    assert con.done and con.accepting and con.state != start
    other = cache.constraint(ConstraintSpec.parse(regex="ab"))
    assert other.state == start and other.grammar is con.grammar  # fresh state, shared grammar
