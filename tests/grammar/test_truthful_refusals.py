"""Refusals that tell the truth: a schema that some value satisfies is never refused as empty.

Checked on external data (every group of the JSON Schema Test Suite, draft 2020-12, with an
instance the suite calls valid) and on satisfiable `oneOf`/`not` schemas whose cases the compiler
approximates: each compiles and accepts its valid instances, or says what it left out
(`Grammar.restriction`), or is refused as unsupported naming the keyword; never "empty"."""

from __future__ import annotations

import json

import jsonschema
import pytest

import onyx
from bench.schema_suite import suite_dir, suite_files, with_dialect

# Satisfiable schemas, each with instances `jsonschema` accepts, written in the order the
# compiler writes members (declared order).
SATISFIABLE = [
    # Branches that differ only by an optional member.
    ({"oneOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a", "b"]}]},
     ['{"a":"x","c":1}']),
    # Overlapping only in values an over-approximation cannot tell apart.
    ({"oneOf": [{"type": "object", "properties": {"kind": {"enum": ["a", "b"]}}, "required": ["kind"]},
                {"type": "object", "properties": {"kind": {"enum": ["b", "c"]}}, "required": ["kind"]}]},
     ['{"kind":"a"}', '{"kind":"c"}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
      "not": {"type": "object", "properties": {"a": {"minimum": 5}}}},
     ['{"a":1}']),
    ({"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "b$"}]}, ['"ax"', '"xb"']),
    # Open array elements are calls of the any-value rule: the difference must not read calls as bytes.
    ({"oneOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "array", "minItems": 2}]}, ['[1]', '["x",2]']),
    ({"if": {"type": "object", "required": ["a"]}, "then": {"required": ["b"]}, "else": {"type": "object"}},
     ['{}', '{"a":1,"b":2}']),
    # Arrays told apart by their elements (only the empty array is in both).
    ({"oneOf": [{"type": "boolean"}, {"type": "array", "items": {"enum": ["top", "left"]}},
                {"type": "array", "items": {"enum": ["vertical"]}}]},
     ['["top","left"]', '["vertical"]', 'true']),
    # A condition on an optional member: the values that fail it hold the member with another value.
    ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"enum": ["abc", "ghi"]}},
      "if": {"properties": {"c": {"const": "ghi"}}}, "then": {"required": ["a", "b", "c"]}, "else": {"required": ["a", "c"]}},
     ['{"a":"x","c":"abc"}', '{"a":"x","b":1,"c":"ghi"}']),
]


@pytest.mark.parametrize("schema,instances", SATISFIABLE, ids=[json.dumps(s)[:60] for s, _ in SATISFIABLE])
def test_satisfiable_schemas_are_not_called_empty(smollm2, schema, instances):
    for text in instances:
        jsonschema.validate(json.loads(text), schema)  # the corpus itself is right
    try:
        grammar = smollm2.compile_json_schema(schema)
    except onyx.EmptyLanguageError as e:
        pytest.fail(f"a satisfiable schema was called empty: {e}")
    except onyx.UnsupportedSchemaError as e:
        assert any(k in str(e) for k in ("oneOf", "not", "if")), e
        return
    if grammar.restriction is None:
        for text in instances:
            assert grammar.validate(text).valid, text
    assert grammar.validate(instances[0]).valid or grammar.restriction is not None


def test_suite_schemas_with_a_valid_instance_are_never_called_empty(smollm2):
    called_empty, groups = [], 0
    for name, path in suite_files(suite_dir()):
        for group in json.loads(path.read_text()):
            if not any(t["valid"] for t in group["tests"]):
                continue
            groups += 1
            schema = with_dialect(group["schema"])
            try:
                smollm2.compile_json_schema(schema)
            except onyx.EmptyLanguageError:
                called_empty.append(f"{name}: {group['description']}")
            except onyx.GrammarError:
                pass  # refused for another reason, saying which
    assert groups > 400, groups
    assert called_empty == [], called_empty
