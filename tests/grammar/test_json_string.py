"""`{"json_string": ...}` on real vocabularies: the five real-world Lark grammars of test_lark
(JSON, arithmetic, CSV, apply_patch, SQL), JSON-escaped, walked at random through the
budget-aware masks; every walk is a JSON string (json.loads) whose value lark parses, and the
grammar's own sentences are accepted as json.dumps writes them, raw quotes and newlines refused."""

from __future__ import annotations

import json
import random
import zlib

import pytest

from grammar_walks import finish, random_walk, text_of
from test_lark import GRAMMARS, KNOWN, lark_accepts, lark_parser


@pytest.mark.parametrize("vocab_name", ["smollm2", "gemma3"])
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_escaped_lark_grammars_write_json_strings_of_sentences(vocabs, vocab_name, name):
    vocab = vocabs[vocab_name]
    g = vocab.compile_structure({"json_string": {"lark": GRAMMARS[name]}})
    assert g.is_pushdown == vocab.compile_lark(GRAMMARS[name]).is_pushdown  # calls stay calls
    parser = lark_parser(GRAMMARS[name])
    yes, no = KNOWN[name]
    for text in yes:
        assert g.validate(json.dumps(text, ensure_ascii=False)).valid, text
    for text in no:
        assert not g.validate(json.dumps(text, ensure_ascii=False)).valid, text
    if any('"' in t or "\n" in t for t in yes):
        raw = next(t for t in yes if '"' in t or "\n" in t)
        assert not g.validate(f'"{raw}"').valid
    rng = random.Random(zlib.crc32(f"{name} {vocab_name}".encode()))
    for _ in range(12):
        tokens, state = random_walk(g, vocab, rng, rng.randrange(1, 60))
        more, state = finish(g, vocab, state, rng)
        written = text_of(vocab, tokens + more).decode("utf-8")
        value = json.loads(written)
        assert isinstance(value, str) and lark_accepts(parser, value), written
        assert json.dumps(value, ensure_ascii=False) == written  # one spelling: json.dumps's
