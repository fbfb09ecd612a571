"""Options are parsed and checked once: every bad value is a RequestError naming its field."""

from __future__ import annotations

import json

import pytest

from onyx.errors import InvalidSchemaError, RequestError
from onyx.options import ConstraintSpec, GenerateOptions, SamplingParams, Speculation


def test_defaults_and_typed_fields():
    o = GenerateOptions.parse()
    assert o.max_tokens == 256 and o.sampling.greedy and o.constraint is None and o.stop == ()
    assert o.speculation == Speculation("aware", "auto", True) and o.phi == "none"
    o = GenerateOptions.parse(max_tokens=8, temperature=0.7, top_p=0.9, top_k=5, min_p=0.1, seed=3, stop="END",
                              regex="[a-z]+", speculative="blind", num_draft_tokens=4, jump_forward=False, phi="onestep")
    assert (o.max_tokens, o.sampling, o.stop) == (8, SamplingParams(0.7, 0.9, 5, 0.1, 3), ("END",))
    assert o.constraint == ConstraintSpec(regex="[a-z]+") and o.constraint.param == "regex"
    assert o.speculation == Speculation("blind", 4, False) and o.phi == "onestep"


def test_none_means_the_default():
    assert GenerateOptions.parse(temperature=None, top_p=None, seed=None, stop=None) == GenerateOptions.parse()


@pytest.mark.parametrize("kwargs, param", [
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": 2.5}, "max_tokens"),
    ({"temperature": 3}, "temperature"),
    ({"temperature": "0.5"}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"top_k": -1}, "top_k"),
    ({"min_p": 1.0}, "min_p"),
    ({"seed": -1}, "seed"),
    ({"seed": True}, "seed"),
    ({"stop": ["ok", ""]}, "stop"),
    ({"stop": 5}, "stop"),
    ({"regex": "a", "json_schema": {}}, "regex"),
    ({"regex": 5}, "regex"),
    ({"max_whitespace": 65, "json_schema": {}}, "max_whitespace"),
    ({"speculative": "fast"}, "speculative"),
    ({"num_draft_tokens": 33}, "num_draft_tokens"),
    ({"num_draft_tokens": "4"}, "num_draft_tokens"),
    ({"phi": "magic", "regex": "a"}, "phi"),
    ({"phi": "exact"}, "phi"),
    ({"regexp": "a"}, "regexp"),
])
def test_bad_values_name_their_field(kwargs, param):
    with pytest.raises(RequestError) as e:
        GenerateOptions.parse(**kwargs)
    assert e.value.param == param
    assert param in str(e.value)


def test_jump_forward_is_a_boolean_not_a_truthy_string():
    # "false" used to be read as true (bool("false")).
    with pytest.raises(RequestError, match="jump_forward must be true or false") as e:
        GenerateOptions.parse(jump_forward="false")
    assert e.value.param == "jump_forward"
    assert GenerateOptions.parse(jump_forward=False).speculation.jump_forward is False


def test_schemas_are_one_cache_key_whether_dict_or_text():
    schema = {"type": "object", "properties": {"b": {}, "a": {}}}
    as_dict = ConstraintSpec.parse(json_schema=schema)
    as_text = ConstraintSpec.parse(json_schema=json.dumps(schema))
    assert as_dict.key == as_text.key and as_dict.param == "json_schema"
    assert ConstraintSpec.parse(json_schema=schema, max_whitespace=2).key != as_dict.key
    with pytest.raises(InvalidSchemaError, match="not JSON-serialisable"):
        ConstraintSpec.parse(json_schema={"x": object()})
    assert ConstraintSpec.parse() is None


def test_json_requests_allow_one_whitespace_character_by_default(smollm2):
    from onyx.grammar.constraint import compile_spec

    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}, "required": ["a"]}
    spec = ConstraintSpec.parse(json_schema=schema)
    assert spec.max_whitespace == 1
    assert ConstraintSpec.parse(json_schema=schema, max_whitespace=0).max_whitespace == 0
    grammar = compile_spec(smollm2, spec)
    for text in ['{"a":[1,2]}', json.dumps({"a": [1, 2]})]:
        assert grammar.validate(text).valid, text
    assert not grammar.validate('{"a":  [1, 2]}').valid  # two spaces: past the bound
    assert not grammar.validate(json.dumps({"a": [1, 2]}, indent=2)).valid  # pretty-printing is opt-in
