"""Every error case raises a subclass of onyx.GrammarError with a useful message, never a crash
or a hang."""

from __future__ import annotations

import json

import pytest

import onyx


def test_error_hierarchy():
    for cls in (onyx.InvalidRegexError, onyx.UnsupportedRegexError, onyx.GrammarTooLargeError,
                onyx.EmptyLanguageError, onyx.NotCompletableError, onyx.UnsupportedSchemaError,
                onyx.InvalidSchemaError, onyx.VocabularyError, onyx.TokenNotAllowedError,
                onyx.InvalidStateError):
        assert issubclass(cls, onyx.GrammarError)
    assert issubclass(onyx.GrammarError, ValueError)


def test_invalid_regex_says_where(smollm2):
    with pytest.raises(onyx.InvalidRegexError) as e:
        smollm2.compile_regex("[0-9]{4}(ab")
    assert e.value.offset == 8
    assert "byte 8" in str(e.value) and "unclosed group" in str(e.value)
    with pytest.raises(onyx.InvalidRegexError) as e:
        smollm2.compile_regex("a{3,1}")
    assert "invalid repetition" in str(e.value) or "repetition" in str(e.value)


@pytest.mark.parametrize("pattern,construct", [
    (r"(a)\1", "backreference"),
    (r"foo(?=bar)", "look-around"),
    (r"(?<!x)y", "look-around"),
    (r"\bword\b", "word boundary"),
])
def test_unsupported_constructs(smollm2, pattern, construct):
    with pytest.raises(onyx.UnsupportedRegexError) as e:
        smollm2.compile_regex(pattern)
    assert construct in str(e.value)


def test_size_limits(smollm2):
    with pytest.raises(onyx.GrammarTooLargeError) as e:
        smollm2.compile_regex("[a-z]{200}", max_states=50)
    assert "limit" in str(e.value)
    g = smollm2.compile_regex("[a-z ]+", max_index_bytes=1000)
    with pytest.raises(onyx.GrammarTooLargeError):
        g.token_bitmask(g.initial_state)


def test_pathological_regex_fails_fast_not_hangs(smollm2):
    # A classic DFA blow-up: the n-th symbol from the end. Must hit the limit quickly.
    with pytest.raises(onyx.GrammarTooLargeError):
        smollm2.compile_regex("[ab]*a[ab]{20}", max_states=10_000)


def test_empty_language(smollm2):
    with pytest.raises(onyx.EmptyLanguageError):
        smollm2.compile_regex(r"[^\s\S]")
    with pytest.raises(onyx.EmptyLanguageError):
        smollm2.compile_regex(r"a\z b")


def tiny_vocab(tokens: list[str]) -> onyx.Vocabulary:
    """A real tokenizer.json with a byte-level BPE model over just these tokens."""
    vocab = {t: i for i, t in enumerate(tokens)}
    eos = len(tokens)
    doc = {
        "version": "1.0",
        "added_tokens": [{"id": eos, "content": "<|endoftext|>", "special": True}],
        "decoder": {"type": "ByteLevel"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    }
    return onyx.Vocabulary.from_tokenizer_json_str(json.dumps(doc))


def test_grammar_no_token_sequence_can_complete():
    v = tiny_vocab(["a", "b", "ab"])
    with pytest.raises(onyx.NotCompletableError) as e:
        v.compile_regex("a+c")
    assert "vocabulary" in str(e.value)
    # Completable through a multi-byte token only: allowed, and only that way.
    v = tiny_vocab(["a", "xyz"])
    g = v.compile_regex("a(xyz)?")
    assert [v.token_bytes(t) for t in g.allowed_token_ids(0).tolist()] == [b"a"]


def test_step_errors(smollm2):
    g = smollm2.compile_regex("[0-9]+")
    letter = next(t for t in range(1000) if smollm2.token_bytes(t) == b"a")
    with pytest.raises(onyx.TokenNotAllowedError) as e:
        g.advance(g.initial_state, letter)
    assert "leave the grammar" in str(e.value)
    for bad_state in (-1, 10**6, 2**40):
        with pytest.raises(onyx.InvalidStateError):
            g.advance(bad_state, letter)
        with pytest.raises(onyx.InvalidStateError):
            g.token_bitmask(bad_state)
        with pytest.raises(onyx.InvalidStateError):
            g.is_accepting(bad_state)
    with pytest.raises(onyx.TokenNotAllowedError):
        g.advance(g.initial_state, 10**9)
    with pytest.raises(onyx.TokenNotAllowedError):
        g.advance(g.initial_state, -5)


def test_bad_vocabulary_inputs(tmp_path):
    with pytest.raises(onyx.VocabularyError):
        onyx.Vocabulary.from_tokenizer_json(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(onyx.VocabularyError):
        onyx.Vocabulary.from_tokenizer_json(tmp_path / "bad.json")
    (tmp_path / "fake.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 30)
    with pytest.raises(onyx.VocabularyError):
        onyx.Vocabulary.from_gguf(tmp_path / "fake.gguf")
    with pytest.raises(onyx.VocabularyError):
        onyx.Vocabulary.from_hf(object())
    with pytest.raises(onyx.VocabularyError):
        tiny_vocab(["a"]).token_bytes(99)


@pytest.mark.parametrize("schema,keyword,path", [
    ({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}, "$ref", "#/properties/a"),
    ({"type": "string", "pattern": "(?=a)b"}, "pattern", "#"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 2}, "uniqueItems", "#"),
])
def test_unsupported_schema_keyword_is_named(smollm2, schema, keyword, path):
    with pytest.raises(onyx.UnsupportedSchemaError) as e:
        smollm2.compile_json_schema(schema)
    assert e.value.keyword == keyword
    assert keyword in str(e.value) and path in str(e.value)


@pytest.mark.parametrize("schema", [
    {"type": "string", "contentEncoding": "base64", "x-kubernetes-int-or-string": True, "readonly": True},
    {"type": "string", "format": "hostname-ish"},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "patternProperties": {"^x": {"type": "string"}}},
])
def test_annotations_and_unknown_keywords_are_ignored(smollm2, schema):
    assert smollm2.compile_json_schema(schema).num_states > 1


@pytest.mark.parametrize("schema", [
    "{not json",
    {"type": "strin"},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
    {"type": "array", "minItems": -1},
    {"type": "object", "properties": 3},
    {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["y"], "additionalProperties": False},
])
def test_invalid_schema(smollm2, schema):
    with pytest.raises((onyx.InvalidSchemaError, onyx.EmptyLanguageError)):
        smollm2.compile_json_schema(schema)


def test_non_serialisable_schema(smollm2):
    with pytest.raises(onyx.InvalidSchemaError):
        smollm2.compile_json_schema({"type": object()})


def test_bytes_no_token_contains_are_pruned(smollm2):
    # SmolLM2 has no token containing byte 0xF1 (the lead byte of U+40000..U+7FFFF).
    g = smollm2.compile_regex("[\U00040000-\U00040010]|x")
    allowed = [smollm2.token_bytes(t) for t in g.allowed_token_ids(g.initial_state).tolist()]
    assert allowed and all(b.startswith(b"x") for b in allowed)
    with pytest.raises(onyx.NotCompletableError) as e:
        smollm2.compile_regex("[\U00040000-\U00040010]+")
    assert "0xF1" in str(e.value)
