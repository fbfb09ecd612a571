"""JSON Schema grammars: every output the grammar allows parses with json.loads and validates
with the `jsonschema` package; oneOf never admits a value valid for two branches."""

from __future__ import annotations

import json
import random
import re
import zlib

import jsonschema
import pytest

import onyx
from grammar_walks import finish, random_walk, text_of

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 20},
        "age": {"type": "integer"},
        "email": {"type": "string", "format": "email"},
    },
    "required": ["name", "age", "email"],
    "additionalProperties": False,
}

ORDER = {
    "type": "object",
    "$defs": {
        "item": {
            "type": "object",
            "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"}, "qty": {"type": "integer"}, "price": {"type": "number"}},
            "required": ["sku", "qty", "price"],
            "additionalProperties": False,
        }
    },
    "properties": {
        "id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "customer": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "vip": {"type": "boolean"}}, "required": ["name"]},
        "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1, "maxItems": 3},
        "status": {"enum": ["new", "paid", "shipped"]},
        "note": {"type": ["string", "null"], "maxLength": 10},
    },
    "required": ["id", "items", "status"],
    "additionalProperties": False,
}

SCHEMAS = {
    "person": PERSON,
    "order": ORDER,
    "scalars": {"type": "array", "items": {"anyOf": [{"type": "boolean"}, {"type": "null"}, {"type": "number"}, {"const": "x\"y"}]}, "maxItems": 4},
    "optional_only": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 3}, "c": {"type": "boolean"}}},
    "formats": {
        "type": "object",
        "properties": {f: {"type": "string", "format": f} for f in ["date", "time", "date-time", "uuid", "email"]},
        "required": ["date", "time", "date-time", "uuid", "email"],
        "additionalProperties": False,
    },
    "one_of_tagged": {
        "oneOf": [
            {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"], "additionalProperties": False},
            {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number"}}, "required": ["kind", "side"], "additionalProperties": False},
        ]
    },
    "one_of_types": {"oneOf": [{"type": "string", "maxLength": 5}, {"type": "integer"}, {"type": "boolean"}]},
    "pattern_search": {"type": "string", "pattern": "a\"b"},
    "string_lengths": {"type": "string", "minLength": 2, "maxLength": 4},
}


def validator(schema):
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def walk_outputs(vocab, g, n: int, seed: int, steps: int = 25):
    rng = random.Random(seed)
    for _ in range(n):
        toks, state = random_walk(g, vocab, rng, rng.randrange(steps))
        rest, state = finish(g, vocab, state, rng)
        yield text_of(vocab, toks + rest).decode("utf-8")


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_walks_parse_and_validate(vocabs, name):
    schema = SCHEMAS[name]
    v = validator(schema)
    for vname in ("smollm2", "gemma3"):
        vocab = vocabs[vname]
        g = vocab.compile_json_schema(schema)
        for text in walk_outputs(vocab, g, 25, seed=zlib.crc32(f"{name}/{vname}".encode())):
            value = json.loads(text)
            v.validate(value)


def test_compact_output_has_no_structural_whitespace(smollm2):
    g = smollm2.compile_json_schema({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}, "required": ["a"]})
    for text in walk_outputs(smollm2, g, 30, seed=1):
        assert not any(c in text for c in " \n\t\r"), text


def test_whitespace_bound(smollm2):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}, "required": ["a", "b"]}
    g = smollm2.compile_json_schema(schema, max_whitespace=2)
    seen_ws = False
    for text in walk_outputs(smollm2, g, 60, seed=2):
        json.loads(text)
        runs = re.findall(r"[ \t\n\r]+", text)
        assert all(len(r) <= 2 for r in runs), text
        seen_ws |= bool(runs)
    assert seen_ws, "with max_whitespace=2 some walk should use whitespace"


def test_one_of_never_matches_two_branches(smollm2):
    schema = SCHEMAS["one_of_tagged"]
    branches = [validator(b) for b in schema["oneOf"]]
    g = smollm2.compile_json_schema(schema)
    for text in walk_outputs(smollm2, g, 40, seed=3):
        value = json.loads(text)
        assert sum(b.is_valid(value) for b in branches) == 1, text


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"type": "integer"}, {"type": "number"}]},
    {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]},
    {"oneOf": [{"type": "integer", "maximum": 10}, {"type": "integer", "minimum": 5}]},
    {"type": "object", "properties": {"t": {"type": "string"}, "n": {"type": "string"}, "u": {"type": "string"}},
     "additionalProperties": False, "oneOf": [{"required": ["t", "n"]}, {"required": ["t", "u"]}]},
])
def test_overlapping_one_of_keeps_only_values_valid_for_one_branch(smollm2, schema):
    branches = [validator({**{k: v for k, v in schema.items() if k != "oneOf"}, **b}) for b in schema["oneOf"]]
    g = smollm2.compile_json_schema(schema)
    for text in walk_outputs(smollm2, g, 40, seed=4):
        value = json.loads(text)
        assert sum(b.is_valid(value) for b in branches) == 1, text


def test_one_of_with_no_value_it_can_write_is_refused(smollm2):
    # Every object this compiler writes for one branch (declared properties only) is valid for
    # the other too: a typed error, not an invalid grammar.
    schema = {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                        {"type": "object", "properties": {"b": {"type": "integer"}}}]}
    with pytest.raises(onyx.GrammarError):
        smollm2.compile_json_schema(schema)


def test_schema_as_string_and_tokenized_examples(smollm2, hf_tokenizers):
    g = smollm2.compile_json_schema(json.dumps(PERSON))
    tok = hf_tokenizers["smollm2"]
    for value in [{"name": "Ann", "age": 31, "email": "ann@example.com"}, {"name": "Zoë \"Z\"", "age": -4, "email": "z.z@mail.example.org"}]:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        state = g.initial_state
        for t in tok.encode(text, add_special_tokens=False).ids:
            state = g.advance(state, t)
        assert g.is_accepting(state), text
    # A key out of order or a missing required key is refused somewhere along the way.
    bad = json.dumps({"age": 31, "name": "Ann", "email": "a@b.co"}, separators=(",", ":"))
    state = g.initial_state
    with pytest.raises(onyx.TokenNotAllowedError):
        for t in tok.encode(bad, add_special_tokens=False).ids:
            state = g.advance(state, t)


def test_jump_forward_literals(smollm2):
    g = smollm2.compile_json_schema(PERSON)
    assert g.forced_bytes(g.initial_state) == b'{"name":"'
