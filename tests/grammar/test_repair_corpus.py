"""The repair corpora (bench/repair_corpus.py, bench/data/repair_{test,train}.json) are what they
claim: enough cases of each family, intended values that satisfy their schemas, broken texts, and
a training corpus that shares neither schemas nor texts with the test corpus."""

from __future__ import annotations

import json
from collections import Counter

import jsonschema
import pytest

from bench import repair_corpus

FAMILIES = {"prose_before", "prose_after", "prose_both", "code_fence", "code_fence_prose", "two_values",
            "python_repr", "python_literals", "single_quotes", "comment", "trailing_comma", "truncated",
            "enum_case", "number_as_string", "missing_field"}


@pytest.fixture(scope="module", params=["test", "train"])
def corpus(request):
    return request.param, *repair_corpus.load(request.param)


def test_sizes_and_families(corpus):
    name, schemas, cases = corpus
    assert len(cases) >= 150
    assert len({c.name for c in cases}) == len(cases)
    families = Counter(c.family for c in cases)
    assert FAMILIES <= set(families), FAMILIES - set(families)
    assert families["truncated"] >= 20
    assert {c.schema for c in cases} == set(schemas)


def test_intended_values_fit_and_texts_are_broken(corpus):
    _, schemas, cases = corpus
    checker = jsonschema.FormatChecker()
    for c in cases:
        jsonschema.Draft202012Validator(schemas[c.schema], format_checker=checker).validate(c.intended)
        try:
            value = json.loads(c.text)
        except ValueError:
            continue
        assert not jsonschema.Draft202012Validator(schemas[c.schema]).is_valid(value), c.name


def test_train_and_test_are_apart():
    test_schemas, test_cases = repair_corpus.load("test")
    train_schemas, train_cases = repair_corpus.load("train")
    assert not set(test_schemas) & set(train_schemas)
    assert not {c.text for c in test_cases} & {c.text for c in train_cases}


def test_truncation_closes_like_a_reader():
    assert json.loads(repair_corpus.close('{"a":"xy')) == {"a": "xy"}
    assert json.loads(repair_corpus.close('{"a":[1,2')) == {"a": [1, 2]}
    assert json.loads(repair_corpus.close('{"a":1,"b":tr')) == {"a": 1, "b": True}
    assert json.loads(repair_corpus.close('{"a":1,"bc')) == {"a": 1}
    assert json.loads(repair_corpus.close('{"a":1,"b":')) == {"a": 1}
    assert repair_corpus.close('{"a":"') is None
