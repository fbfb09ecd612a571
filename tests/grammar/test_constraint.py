"""The one constraint stack: grammars compiled once per pattern (LRU, with counts), masks as wide
as the logits in each framework's form (budget-aware, equal across forms), and one sequence's
walk, which advances on committed tokens, follows rewinds and ends at EOS."""

from __future__ import annotations

import numpy as np
import pytest

import onyx
from onyx.decoding.sampling import mask_to_mlx
from onyx.grammar import constraint
from onyx.grammar.constraint import Compiled, Constraint, GrammarCache, unpack_bitmask
from onyx.options import ConstraintSpec

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def token_id(vocab, spelled: bytes) -> int:
    return next(i for i in range(vocab.size) if vocab.token_bytes(i) == spelled)


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False).ids


def test_bitmask_unpacks_to_the_logits_width():
    words = np.array([0b101, 1 << 31], dtype=np.uint32)
    assert np.flatnonzero(unpack_bitmask(words, 70)).tolist() == [0, 2, 63]
    assert unpack_bitmask(words, 40).sum() == 2
    assert np.flatnonzero(np.array(mask_to_mlx(words, 70))).tolist() == [0, 2, 63]


def test_grammar_cache_compiles_once_and_evicts_the_least_recent(smollm2):
    cache = GrammarCache(smollm2, size=2)
    a, b, c = (ConstraintSpec.parse(regex=r) for r in ("[0-9]+", "[a-z]+", "x|y"))
    ga = cache.get(a).grammar
    stats = cache.get(a).grammar is ga and cache.stats()
    assert stats and (stats["size"], stats["compiles"], stats["hits"], stats["evictions"]) == (1, 1, 1, 0)
    cache.get(b)
    cache.get(a)  # a is now the most recent
    cache.get(c)  # evicts b
    assert cache.get(a).grammar is ga and cache.stats()["compiles"] == 3
    cache.get(b)
    assert cache.stats()["compiles"] == 4
    with pytest.raises(onyx.InvalidRegexError):
        cache.get(ConstraintSpec.parse(regex="("))


def test_a_cached_grammar_that_keeps_growing_is_compiled_afresh(smollm2, monkeypatch):
    # The readings of an array of distinct strings keep what was written: nearly every token
    # is a new state, so such a grammar grows with every output while it stays in the cache.
    monkeypatch.setattr(constraint, "MAX_CACHED_STATES", 20)
    cache = GrammarCache(smollm2)
    spec = ConstraintSpec.parse(json_schema={"type": "array", "items": {"type": "string"}, "uniqueItems": True})
    first = cache.get(spec).grammar
    assert first.is_pushdown and first.restriction is None
    byte = {bytes(smollm2.token_bytes(i)): i for i in range(smollm2.size) if not smollm2.is_special(i)}
    state = first.initial_state
    for c in b'["' + b"ab" * 20 + b'"':
        state = first.advance(state, byte[bytes([c])])
    assert first.num_states > 20
    assert first.is_accepting(first.advance(state, byte[b"]"]))  # its users keep it
    again = cache.get(spec).grammar
    assert again is not first and again.num_states < 20
    assert cache.stats()["compiles"] == 2 and cache.stats()["evictions"] == 1
    assert cache.get(spec).grammar is again
    # A regular grammar has all its states from the start and is kept, however many.
    regular = cache.get(ConstraintSpec.parse(regex="[a-z]{40}")).grammar
    assert regular.num_states > 20 and cache.get(ConstraintSpec.parse(regex="[a-z]{40}")).grammar is regular


def test_grammar_cache_is_bounded_in_bytes_as_its_masks_grow(smollm2):
    specs = [ConstraintSpec.parse(regex=f"[a-z]{{{n}}}") for n in (3, 4, 5)]
    one = GrammarCache(smollm2)
    compiled = one.get(specs[0])
    table = compiled.table("numpy", smollm2.size, unpack_bitmask)
    grammar = compiled.grammar
    for state in range(grammar.num_states):
        table.get(state)
    grown = compiled.memory_bytes()
    # every state's mask is held (one bool per logit), and counted
    assert grown >= grammar.num_states * smollm2.size + grammar.memory_bytes
    cache = GrammarCache(smollm2, max_bytes=grown + grown // 2)
    for spec in specs:
        c = cache.get(spec)
        t = c.table("numpy", smollm2.size, unpack_bitmask)
        for state in range(c.grammar.num_states):
            t.get(state)
    # growth is seen at the next request: the older grammars go, the newest stays
    cache.get(specs[-1])
    stats = cache.stats()
    assert stats["size"] == 1 and stats["evictions"] == 2 and stats["bytes"] <= stats["max_bytes"] * 2
    assert cache.stats()["compiles"] == 3


def test_one_grammar_over_the_cache_bytes_is_a_typed_error(smollm2):
    cache = GrammarCache(smollm2, max_bytes=200_000)
    spec = ConstraintSpec.parse(json_schema={"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 40}, "b": {"type": "integer"}}, "required": ["a", "b"]})
    with pytest.raises(onyx.GrammarTooLargeError):
        compiled = cache.get(spec)
        compiled.grammar.build_all()


def test_a_failed_request_keeps_no_grammar(smollm2):
    cache = GrammarCache(smollm2)
    kept, dropped = ConstraintSpec.parse(regex="[0-9]+"), ConstraintSpec.parse(regex="[a-z]+")
    cache.get(kept)
    with pytest.raises(onyx.RequestError):
        with cache.kept_if_no_error():
            cache.get(dropped)
            cache.get(kept)  # a hit: kept, it was not this request's
            raise onyx.RequestError("max_tokens is too small", param="max_tokens")
    assert len(cache) == 1 and cache.get(kept) and cache.stats()["compiles"] == 2
    with cache.kept_if_no_error():
        cache.get(dropped)
    assert len(cache) == 2


def test_one_cache_serves_several_vocabularies(vocabs):
    cache = GrammarCache(size=4)
    spec = ConstraintSpec.parse(regex="[0-9]+")
    a, b = cache.get(spec, vocabs["smollm2"]), cache.get(spec, vocabs["qwen2"])
    assert a is not b and a.vocab is vocabs["smollm2"] and b.vocab is vocabs["qwen2"]
    assert cache.get(spec, vocabs["smollm2"]) is a and cache.stats()["compiles"] == 2


def test_a_constraint_advances_and_knows_when_it_is_done(smollm2):
    cache = GrammarCache(smollm2)
    compiled = cache.get(ConstraintSpec.parse(regex="ab"))
    con = Constraint(compiled, compiled.table("numpy", smollm2.size, unpack_bitmask))
    start = con.state
    for token in (token_id(smollm2, b"a"), token_id(smollm2, b"b")):
        assert not con.done
        con.advance(token)
    assert con.done and con.accepting and con.state != start
    other = con.fresh()
    assert other.state == start and other.grammar is con.grammar  # fresh state, shared grammar
    assert other.masks is con.masks


def test_walks_stop_at_the_first_refused_token_and_leave_the_committed_state(smollm2):
    con = Constraint.of(smollm2.compile_regex("ab"), smollm2.size)
    a, b, x = (token_id(smollm2, s) for s in (b"a", b"b", b"x"))
    states = con.walk([a, b, x, a])
    assert len(states) == 3 and con.state == states[0] and con.only_eos(states[2])
    masks = con.row_masks(states, remaining=10)
    assert [bool(m[a]) for m in masks] == [True, False, False] and bool(masks[1][b])
    assert con.forced_bytes() == b"ab" and con.forced_bytes(states[1]) == b"b"


def test_walk_follows_rewinds_and_ends_at_eos(hf_tokenizers, smollm2):
    tokenizer = hf_tokenizers["smollm2"]
    g = smollm2.compile_regex(r"[a-z]+@[a-z]+\.com")
    walk = Constraint(Compiled(g))
    ids = encode(tokenizer, "jane@example.com")
    for t in ids:
        walk.advance(t)
    assert g.is_accepting(walk.state) and not walk.ended
    end = walk.state
    walk.sync(ids[:2])  # a rewind
    fresh = walk.fresh()
    fresh.sync(ids[:2])
    assert walk.state == fresh.state and walk.tokens == ids[:2]
    walk.sync(ids + [2, 0, 0])  # EOS, then padding that is not walked
    assert walk.ended and walk.state == end and walk.ended_at == len(ids)
    walk.truncate(len(ids))
    assert not walk.ended
    with pytest.raises(onyx.TokenNotAllowedError):
        walk.advance(encode(tokenizer, "!")[0])


def test_masks_are_the_budget_aware_definition_in_every_form(hf_tokenizers, smollm2):
    tokenizer = hf_tokenizers["smollm2"]
    compiled = Compiled(smollm2.compile_json_schema(PERSON))
    g = compiled.grammar
    width = len(smollm2) + 64  # logits wider than the vocabulary, as in many models
    table = compiled.table("numpy", width, unpack_bitmask)
    engine_table = compiled.table("mlx", width, mask_to_mlx)  # the engine's form
    assert compiled.table("numpy", width, unpack_bitmask) is table
    states = [g.initial_state]
    for t in encode(tokenizer, '{"name":"Ann","age":7}'):
        states.append(g.advance(states[-1], t))
    restricted = 0
    for state in states:
        plain = unpack_bitmask(g.token_bitmask(state), width)
        for budget in [None, *range(0, 16), 1000]:
            ours = table.get(state, budget)
            if budget is None:
                want = plain
            else:
                words = g.token_bitmask_within(state, budget)
                want = unpack_bitmask(words, width) if words.any() else plain
            assert ours.shape == (width,) and np.array_equal(ours, want), (state, budget)
            assert np.array_equal(np.array(engine_table.get(state, budget)), ours), (state, budget)
            restricted += budget is not None and not np.array_equal(ours, plain)
    assert restricted > 0  # some budgets did restrict a mask
    assert table.get(states[0], 1000) is table.get(states[0])  # an unrestricting budget: the shared mask
    eos = table.eos_only()
    assert np.flatnonzero(eos).tolist() == sorted(g.eos_token_ids) and 2 in g.eos_token_ids


def test_concurrent_requests_for_one_pattern_compile_it_once(smollm2):
    import gzip
    import json
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    schema = json.loads(gzip.open(Path(__file__).parents[1] / "data" / "kubernetes_deployment_schema.json.gz").read())
    cache = GrammarCache(smollm2)
    spec = ConstraintSpec.parse(json_schema=schema)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: cache.get(spec), range(4)))
    assert all(c is got[0] for c in got)
    stats = cache.stats()
    assert (stats["compiles"], stats["hits"]) == (1, 3), stats
    # a failing compile fails every waiter with the same typed error, and is not kept
    bad = ConstraintSpec.parse(regex="[a-z")
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(cache.get, bad) for _ in range(3)]
    for f in futures:
        assert isinstance(f.exception(), onyx.InvalidRegexError)
    assert len(cache) == 1
