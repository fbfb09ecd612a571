"""A JSON Schema whose exact single automaton is past the size limit: exact as rules, or, when
an automaton of its own rules is past a small `max_states`, compiled under a sound restriction.

Deep optional members are left out: the grammar says which restriction it took
(`Grammar.restriction`), still enforces everything it keeps, and every text it accepts
validates. Checked on a hand-made schema against a small `max_states`, and on a real one at the
default limits: Kubernetes' `apps/v1` Deployment (`tests/data/`, from the
kubernetesjsonschema.dev definitions as JSONSchemaBench ships them), whose exact single
automaton has more than 200,000 states.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest

import onyx
from bench.schema_walks import Judge, WalkVocab, onyx_walk
from grammar_walks import finish, text_of

DEPLOYMENT = Path(__file__).resolve().parents[1] / "data" / "kubernetes_deployment_schema.json.gz"


@pytest.fixture(scope="module")
def walk_vocab(smollm2) -> WalkVocab:
    return WalkVocab([b"" if smollm2.is_special(i) else smollm2.token_bytes(i) for i in range(smollm2.size)],
                     smollm2.eos_token_ids)


def nested_schema(inline: bool = True) -> dict:
    """Four levels of objects, each with one required and three optional members of the next
    level's type; the last level a patterned string. Written inline, or (`inline=False`) each
    level a definition the level above refers to."""
    node = {"type": "string", "pattern": "^[a-z]{1,6}$"}
    defs = {"l4": node}
    for level in reversed(range(4)):
        ref = {"$ref": f"#/$defs/l{level + 1}"}
        defs[f"l{level}"] = {"type": "object", "properties": {n: ref for n in "pqrs"}, "required": ["p"]}
        node = {"type": "object", "properties": {n: node for n in "pqrs"}, "required": ["p"]}
    return node if inline else {"$ref": "#/$defs/l0", "$defs": defs}


def assert_walks_valid(grammar, schema: dict, vocab: WalkVocab, n: int = 4) -> None:
    judge = Judge(schema)
    for k in range(n):
        walk = onyx_walk(grammar, vocab, random.Random(k), budget=160)
        assert walk.finished, f"walk {k} did not finish: {walk.text[:200]!r}"
        verdict = judge.check(walk.text)
        assert verdict.status == "valid", f"{walk.text[:300]!r}: {verdict.error}"


def test_exact_when_it_fits_restricted_when_it_does_not(smollm2, walk_vocab):
    schema = nested_schema()
    exact = smollm2.compile_json_schema(schema)
    assert exact.restriction is None
    limit = 300  # states of one automaton: the exact language needs more
    small = smollm2.compile_json_schema(schema, max_states=limit)
    assert small.restriction is not None and "required members" in small.restriction
    assert not small.is_pushdown and small.num_states <= limit

    required_only = '{"p":{"p":{"p":{"p":"ab"}}}}'
    shallow_optional = '{"p":{"p":{"p":{"p":"ab"}}},"q":{"p":{"p":{"p":"z"}}}}'
    deep_optional = '{"p":{"p":{"p":{"p":"ab","s":"cd"}}}}'
    for text in (required_only, shallow_optional, deep_optional):
        assert exact.validate(text).valid, text
    assert small.validate(required_only).valid
    assert small.validate(shallow_optional).valid
    assert not small.validate(deep_optional).valid  # left out: the restriction
    assert not small.validate('{"p":{"p":{"p":{"p":"AB"}}}}').valid  # the pattern still holds
    assert not small.validate('{"q":{"p":{"p":{"p":"z"}}}}').valid  # so does `required`
    assert_walks_valid(small, schema, walk_vocab)
    # Exact or nothing, when asked.
    with pytest.raises(onyx.GrammarTooLargeError):
        smollm2.compile_json_schema(schema, max_states=limit, allow_restriction=False)
    assert smollm2.compile_json_schema(schema, allow_restriction=False).restriction is None
    # The same levels as definitions: each referred-to level is an automaton of its own, called
    # where it is used, so the same limit keeps the exact language.
    by_reference = smollm2.compile_json_schema(nested_schema(inline=False), max_states=limit, allow_restriction=False)
    assert by_reference.restriction is None and by_reference.is_pushdown
    for text in (required_only, shallow_optional, deep_optional):
        assert by_reference.validate(text).valid, text
    assert not by_reference.validate('{"p":{"p":{"p":{"p":"AB"}}}}').valid


def test_a_kubernetes_deployment_compiles_exactly_as_rules(smollm2, walk_vocab):
    """The Deployment's exact single automaton would have more than 200,000 states; as rules (one
    per shared definition) it is exact, deep optional members included."""
    with gzip.open(DEPLOYMENT, "rt", encoding="utf-8") as f:
        schema = json.load(f)
    grammar = smollm2.compile_json_schema(schema)
    assert grammar.restriction is None and grammar.is_pushdown
    assert_walks_valid(grammar, schema, walk_vocab)

    judge = Judge(schema)
    minimal = '{"spec":{"selector":{},"template":{"spec":{"containers":[]}}}}'
    # A probe's handler sits 7 levels down: what the single automaton had to leave out.
    probe = ('{"spec":{"selector":{},"template":{"spec":{"containers":[{"livenessProbe":'
             '{"httpGet":{"port":80}},"name":"web"}]}}}}')
    typical = ('{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":'
               '{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":'
               '{"labels":{"app":"web"}},"spec":{"containers":[{"image":"nginx:1.25","name":"web"}]}}}}')
    for text in (minimal, probe, typical):
        assert judge.check(text.encode()).status == "valid"
        assert grammar.validate(text).valid, text
    missing_name = probe.replace(',"name":"web"', "")  # a container's name is required
    assert judge.check(missing_name.encode()).status != "valid"
    assert not grammar.validate(missing_name).valid


def test_distinct_strings_are_exact_and_a_repeat_is_never_written(smollm2, walk_vocab):
    """`uniqueItems` over every string: no restriction, elements compared as they are written.
    Walks drawn to a few short tokens, so most elements would repeat an earlier one, end valid
    within their budget; the same walks without `uniqueItems` would have repeated."""
    tags = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    schema = {"type": "object", "properties": {"tags": tags}, "required": ["tags"], "additionalProperties": False}
    g = smollm2.compile_json_schema(schema)
    assert g.restriction is None and g.is_pushdown
    assert g.validate('{"tags":["a","b","ab"]}').valid
    for repeat in ('{"tags":["a","b","a"]}', '{"tags":["\\n","\\u000a"]}', '{"tags":["é","\\u00e9"]}'):
        assert not g.validate(repeat).valid, repeat
    assert_walks_valid(g, schema, walk_vocab, n=6)

    free = smollm2.compile_json_schema({**schema, "properties": {"tags": {**tags, "uniqueItems": False}}})
    ids = {bytes(smollm2.token_bytes(i)): i for i in range(smollm2.size) if not smollm2.is_special(i)}
    few = [ids[t] for t in (b'{"', b"tags", b'":', b'["', b"a", b"b", b'"', b'",', b'"]', b',"', b"}") if t in ids]
    judge = Judge(schema)
    rng = random.Random(0)
    refused = 0
    for _ in range(30):
        state, kept, text, steps = g.initial_state, free.initial_state, b"", 0
        budget = rng.randrange(12, 40)
        for i in range(budget):
            within = np.unpackbits(np.asarray(g.token_bitmask_within(state, budget - i - 1)).view(np.uint8), bitorder="little")
            free_mask = np.unpackbits(np.asarray(free.token_bitmask(kept)).view(np.uint8), bitorder="little")
            refused += sum(1 for t in few if free_mask[t] and not g.token_bitmask(state)[t >> 5] >> (t & 31) & 1)
            choices = [t for t in few if within[t]]
            if not choices or (g.is_accepting(state) and rng.random() < 0.1):
                break
            t = rng.choice(choices)
            state, kept, text = g.advance(state, t), free.advance(kept, t), text + smollm2.token_bytes(t)
            steps += 1
        rest, state = finish(g, smollm2, state, rng)
        text += text_of(smollm2, rest)
        assert g.is_accepting(state) and steps + len(rest) <= budget, (text, budget)
        assert judge.check(text).status == "valid", text
    assert refused > 20, "the walks met too few repeats to test anything"
