"""onyx.integrations.common: vocabularies and grammars built once, and imports that run one way
(walks and masks are the engine's own: tests/grammar/test_constraint.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import onyx
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
