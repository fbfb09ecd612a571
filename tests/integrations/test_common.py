"""onyx.integrations.common: vocabularies and grammars built once, walks that follow rewinds,
budget-aware masks equal to the engine's, and imports that run one way."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import onyx
from onyx.grammar.constraint import MaskCache
from onyx.integrations import common

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
# Two distinct strings: a keyword form the grammar core refuses (the element language is infinite).
UNIQUE_PAIR = {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 2}


@pytest.fixture(scope="module")
def tokenizer(hf_tokenizers):
    return hf_tokenizers["smollm2"]


@pytest.fixture(scope="module")
def vocab(tokenizer):
    return common.vocabulary_for(tokenizer, [2])


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False).ids


def test_vocabulary_is_built_once_per_tokenizer_and_eos_set(tokenizer, vocab):
    assert common.vocabulary_for(tokenizer, [2]) is vocab
    other = common.vocabulary_for(tokenizer, [0, 2])
    assert other is not vocab and sorted(other.eos_token_ids) == [0, 2]
    assert vocab.eos_token_ids == [2]


def test_grammar_is_compiled_once_per_pattern(vocab):
    a = common.compile_constraint(vocab, common.constraint_spec(json_schema=PERSON))
    b = common.compile_constraint(vocab, common.constraint_spec(json_schema=dict(PERSON)))
    c = common.compile_constraint(vocab, common.constraint_spec(json_schema=PERSON, max_whitespace=2))
    assert a is b and a is not c
    assert common.compile_constraint(vocab, common.constraint_spec(regex="[0-9]+")).grammar.regex == "[0-9]+"


def test_a_constraint_is_required_and_bad_patterns_raise(vocab):
    with pytest.raises(onyx.RequestError):
        common.constraint_spec()
    with pytest.raises(onyx.RequestError):
        common.constraint_spec(regex="a", json_schema={})
    with pytest.raises(onyx.InvalidRegexError):
        common.compile_constraint(vocab, common.constraint_spec(regex="[a-"))
    with pytest.raises(onyx.UnsupportedSchemaError):
        common.compile_constraint(vocab, common.constraint_spec(json_schema=UNIQUE_PAIR))


def test_eos_ids_of_both_tokenizer_kinds():
    class Wrapper:
        eos_token_ids = {7, 2}

    class HF:
        eos_token_id = 5

    assert common.eos_ids_of(Wrapper()) == [2, 7]
    assert common.eos_ids_of(HF()) == [5]
    assert common.eos_ids_of(object()) is None


def test_walk_follows_rewinds_and_ends_at_eos(tokenizer, vocab):
    g = common.compile_constraint(vocab, common.constraint_spec(regex=r"[a-z]+@[a-z]+\.com")).grammar
    walk = common.Walk(g, frozenset(g.eos_token_ids))
    ids = encode(tokenizer, "jane@example.com")
    for t in ids:
        walk.push(t)
    assert g.is_accepting(walk.state) and not walk.ended
    end = walk.state
    walk.sync(ids[:2])  # a rewind
    fresh = common.Walk(g, frozenset(g.eos_token_ids))
    fresh.sync(ids[:2])
    assert walk.state == fresh.state and walk.tokens == ids[:2]
    walk.sync(ids + [2, 0, 0])  # EOS, then padding that is not walked
    assert walk.ended and walk.state == end and walk.ended_at == len(ids)
    walk.truncate(len(ids))
    assert not walk.ended
    with pytest.raises(onyx.TokenNotAllowedError):
        walk.push(encode(tokenizer, "!")[0])


def test_masks_match_the_engine_with_and_without_a_budget(tokenizer, vocab):
    compiled = common.compile_constraint(vocab, common.constraint_spec(json_schema=PERSON))
    g = compiled.grammar
    width = len(vocab) + 64  # logits wider than the vocabulary, as in many models
    table = common.MaskTable(g, width, common.unpack_bitmask)
    engine_masks = MaskCache(g, width)
    states = [g.initial_state]
    for t in encode(tokenizer, '{"name":"Ann","age":7}'):
        states.append(g.advance(states[-1], t))
    restricted = 0
    for state in states:
        for budget in [None, *range(0, 16), 1000]:
            ours = table.get(state, budget)
            theirs = np.array(engine_masks.get(state) if budget is None else engine_masks.within(state, budget))
            assert ours.shape == (width,) and np.array_equal(ours, theirs), (state, budget)
            restricted += budget is not None and not np.array_equal(ours, table.get(state))
    assert restricted > 0  # some budgets did restrict a mask
    assert table.get(states[0], 1000) is table.get(states[0])  # an unrestricting budget: the shared mask
    eos = table.eos_only()
    assert np.flatnonzero(eos).tolist() == [2]


IMPORT_CHECK = """
import sys
import {module}
bad = [m for m in {forbidden!r} if m in sys.modules]
assert not bad, bad
"""


def _imports_cleanly(module: str, forbidden: list[str]) -> None:
    code = IMPORT_CHECK.format(module=module, forbidden=forbidden)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_library_does_not_import_the_integrations():
    _imports_cleanly("onyx.engine, onyx.server.app, onyx.cli", ["onyx.integrations", "torch"])


def test_the_mlx_lm_integration_does_not_import_torch():
    _imports_cleanly("onyx.integrations.mlx_lm", ["torch"])


def test_the_transformers_integration_does_not_import_mlx():
    _imports_cleanly("onyx.integrations.transformers", ["mlx", "mlx.core", "mlx_lm"])
