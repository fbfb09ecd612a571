"""The default repair (the intent cost model) on the test corpus of broken LLM JSON
(bench/data/repair_test.json, never used to fit the model's weights): every repair is strict JSON
that validates against its schema, and on a handful of named cases it is the value the writer
meant. Plain edit distance stays available by passing any edit cost."""

from __future__ import annotations

import json

import jsonschema
import pytest

from bench import repair_corpus

SCHEMAS, CASES = repair_corpus.load("test")
BY_NAME = {c.name: c for c in CASES}
FORMAT_CHECKER = jsonschema.FormatChecker()

# One case per kind of mistake the model is meant to read like a person (see the corpus for the
# texts); what it still gets wrong is counted by bench/repair_bench.py, not hidden here.
NAMED = [
    "prose_before/person0/3",
    "prose_after/event0/0",
    "code_fence_prose/order0/1",
    "two_values/ticket1/9",
    "single_quotes/review0/5",
    "python_literals/person1/2",
    "trailing_comma/order0/2",
    "truncated/event0/4",
    "enum_case/ticket1/5",
    "number_as_string/person0/3",
    "unquoted_keys/person0/2",
    "missing_comma/ticket0/6",
]


def _strict_loads(text: str):
    def no_constants(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=no_constants)


@pytest.fixture(scope="module")
def grammars(smollm2):
    return {name: smollm2.compile_json_schema(schema) for name, schema in SCHEMAS.items()}


def test_named_cases_exist():
    assert set(NAMED) <= set(BY_NAME), set(NAMED) - set(BY_NAME)
    assert len({BY_NAME[n].family for n in NAMED}) == len(NAMED)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_default_repair_is_valid_and_schema_valid(grammars, case):
    g = grammars[case.schema]
    assert not g.validate(case.text).valid, "the case is not broken"
    r = g.repair(case.text)
    assert r.status == "optimal"
    assert g.validate(r.text).valid
    value = _strict_loads(r.text)
    jsonschema.validate(value, SCHEMAS[case.schema], format_checker=FORMAT_CHECKER)


@pytest.mark.parametrize("name", NAMED)
def test_default_repair_finds_what_was_meant(grammars, name):
    case = BY_NAME[name]
    r = grammars[case.schema].repair(case.text)
    assert _strict_loads(r.text) == case.intended, (case.text, r.text)


def test_edit_costs_select_plain_edit_distance(grammars):
    """Prose before the value: plain edit distance absorbs it into a string, the default deletes
    it; with any edit cost given, the cost is the number of edits."""
    case = BY_NAME["prose_before/person0/3"]
    g = grammars[case.schema]
    unit = g.repair(case.text, insert_cost=1)
    assert unit.cost == len(unit.edits)
    default = g.repair(case.text)
    assert _strict_loads(default.text) == case.intended
    assert all(kind == "delete" for kind, *_ in default.edits)
    assert default.text != unit.text


def test_weights_are_exposed_and_overridable(grammars):
    weights = grammars["person"].repair_weights()
    assert set(weights) >= {"delete_before", "insert_quote", "substitute_quote", "keep_quote"}
    assert all(isinstance(v, int) and v >= 0 for v in weights.values())
    case = BY_NAME["prose_before/person0/3"]
    g = grammars[case.schema]
    # Making deletions before the value dear enough brings back absorbing the prose.
    dear = g.repair(case.text, weights={"delete_before": 1000, "delete_structure": 1000})
    assert g.validate(dear.text).valid
    assert _strict_loads(dear.text) != case.intended
    assert g.repair(case.text, weights=weights).text == g.repair(case.text).text
