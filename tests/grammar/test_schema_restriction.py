"""A JSON Schema whose exact automaton is past the size limit compiles under a sound restriction.

Deep optional members are left out (README, "JSON Schema", Limits): the grammar says which
restriction it took (`Grammar.restriction`), still enforces everything it keeps, and every text
it accepts validates. Checked on a hand-made schema against a small `max_states`, and on a real
one at the default limits: Kubernetes' `apps/v1` Deployment (`tests/data/`, from the
kubernetesjsonschema.dev definitions as JSONSchemaBench ships them), whose exact automaton has
more than 200,000 states.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

import onyx
from bench.schema_walks import Judge, WalkVocab, onyx_walk

DEPLOYMENT = Path(__file__).resolve().parents[1] / "data" / "kubernetes_deployment_schema.json.gz"


@pytest.fixture(scope="module")
def walk_vocab(smollm2) -> WalkVocab:
    return WalkVocab([b"" if smollm2.is_special(i) else smollm2.token_bytes(i) for i in range(smollm2.size)],
                     smollm2.eos_token_ids)


def nested_schema() -> dict:
    """Four levels of objects, each with one required and three optional members of the next
    level's type; the last level a patterned string."""
    defs = {"l4": {"type": "string", "pattern": "^[a-z]{1,6}$"}}
    for level in reversed(range(4)):
        ref = {"$ref": f"#/$defs/l{level + 1}"}
        defs[f"l{level}"] = {"type": "object", "properties": {n: ref for n in "pqrs"}, "required": ["p"]}
    return {"$ref": "#/$defs/l0", "$defs": defs}


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
    small = smollm2.compile_json_schema(schema, max_states=exact.num_states // 3)
    assert small.restriction is not None and "required members" in small.restriction
    assert small.num_states <= exact.num_states // 3

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
        smollm2.compile_json_schema(schema, max_states=exact.num_states // 3, allow_restriction=False)
    assert smollm2.compile_json_schema(schema, allow_restriction=False).num_states == exact.num_states


def test_a_kubernetes_deployment_compiles_and_what_it_writes_validates(smollm2, walk_vocab):
    with gzip.open(DEPLOYMENT, "rt", encoding="utf-8") as f:
        schema = json.load(f)
    grammar = smollm2.compile_json_schema(schema)
    assert grammar.restriction is not None, "the exact Deployment automaton is expected not to fit"
    assert_walks_valid(grammar, schema, walk_vocab)

    # What every restriction keeps: the required members (`containers` may be empty).
    minimal = '{"spec":{"selector":{},"template":{"spec":{"containers":[]}}}}'
    assert Judge(schema).check(minimal.encode()).status == "valid"
    assert grammar.validate(minimal).valid
    # A probe's handler sits 7 levels down: left out by every restriction (6 levels or fewer).
    probe = ('{"spec":{"selector":{},"template":{"spec":{"containers":[{"livenessProbe":'
             '{"httpGet":{"port":80}},"name":"web"}]}}}}')
    assert Judge(schema).check(probe.encode()).status == "valid"
    assert not grammar.validate(probe).valid
    if "objects 6 or more" in grammar.restriction:
        # The usual case on an idle machine: a container's own members are kept.
        typical = ('{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":'
                   '{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":'
                   '{"labels":{"app":"web"}},"spec":{"containers":[{"image":"nginx:1.25","name":"web"}]}}}}')
        assert grammar.validate(typical).valid
