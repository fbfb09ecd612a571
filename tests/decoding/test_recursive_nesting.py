"""A recursive schema nests as deep as `max_tokens` allows, and budget-aware masks still close
every output in time. Through the engine and the real default model: a `logit_bias` on the
tokens that open a child makes the model keep nesting, so only the grammar's budget decides
when the tree closes."""

from __future__ import annotations

import json

import jsonschema
import pytest

TREE = {
    "$defs": {"node": {"type": "object",
                       "properties": {"name": {"type": "string", "maxLength": 20},
                                      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                       "required": ["name", "children"], "additionalProperties": False}},
    "$ref": "#/$defs/node",
}


def depth(node: dict) -> int:
    return 1 + max((depth(c) for c in node["children"]), default=0)


@pytest.fixture(scope="module")
def nesting_bias(engine) -> dict[int, float]:
    v = engine.vocab
    opening = [i for i in range(v.size) if not v.is_special(i) and v.token_bytes(i) in (b'{"', b'""')]
    assert opening, "the vocabulary has no token that opens a child"
    return {i: 30.0 for i in opening}


@pytest.mark.parametrize("max_tokens, at_least", [(420, 32), (120, 2)])
def test_a_tree_nests_until_the_budget_and_closes_in_time(engine, nesting_bias, max_tokens, at_least):
    # Compact: the depth a budget reaches is counted in the tokens of `{"name":"","children":[`.
    r = engine.generate("A deeply nested tree as JSON:", json_schema=TREE, max_tokens=max_tokens,
                        logit_bias=nesting_bias, max_whitespace=0)
    assert r.finish_reason == "stop", r.text[-200:]
    assert len(r.token_ids) <= max_tokens
    tree = json.loads(r.text)
    jsonschema.validate(tree, TREE)
    assert depth(tree) >= at_least, r.text
