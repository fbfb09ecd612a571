"""Structures on real vocabularies: their languages, triggers, special tokens, budgets across
segments, and errors located in the spec."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import jsonschema
import numpy as np
import pytest

import onyx
from grammar_walks import finish, ordinary_allowed, text_of
from onyx.grammar import structure as st

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                           "days": {"enum": [1, 2, 3]}},
          "required": ["city", "days"], "additionalProperties": False}


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def allowed_set(g, state) -> set[int]:
    return set(g.allowed_token_ids(state).tolist())


def steer(g, vocab, state, target: bytes) -> tuple[list[int], int]:
    """Writes `target` through the grammar, each step the longest allowed token that is a
    prefix of what is left."""
    tokens = []
    while target:
        best = None
        for t in ordinary_allowed(g, vocab, state).tolist():
            b = vocab.token_bytes(t)
            if target.startswith(b) and (best is None or len(b) > len(vocab.token_bytes(best))):
                best = t
        assert best is not None, f"cannot write {target!r} from state {state}"
        state = g.advance(state, best)
        tokens.append(best)
        target = target[len(vocab.token_bytes(best)):]
    return tokens, state


def walk_and_finish(g, vocab, rng, steps) -> tuple[list[int], int]:
    state, tokens = g.initial_state, []
    for _ in range(steps):
        allowed = ordinary_allowed(g, vocab, state)
        if len(allowed) == 0:
            break
        t = int(allowed[rng.randrange(len(allowed))])
        state = g.advance(state, t)
        tokens.append(t)
    more, state = finish(g, vocab, state, rng)
    return tokens + more, state


@pytest.mark.parametrize("name", ["qwen2", "smollm2"])
def test_reasoning_then_schema_language(vocabs, name):
    """Every completed walk is: thinking without the closing tag, the tag, whitespace, then
    JSON valid under the schema."""
    vocab = vocabs[name]
    g = vocab.compile_structure([st.until("</think>"), st.regex(r"\n{0,2}"), st.json_schema(SCHEMA)])
    rng = random.Random(7)
    for i in range(12):
        tokens, state = walk_and_finish(g, vocab, rng, steps=rng.randrange(0, 30))
        assert g.is_accepting(state)
        text = text_of(vocab, tokens).decode("utf-8")
        thinking, sep, answer = text.partition("</think>")
        assert sep, text
        jsonschema.validate(json.loads(answer.lstrip("\n")), SCHEMA)
        assert g.validate(text).valid


def test_triggers_cannot_appear_inside_free_text(vocabs):
    vocab = vocabs["qwen2"]
    g = vocab.compile_structure([st.until("<tool_call>"), st.regex("[0-9]{1,3}")])
    trigger = vocab.find_tokens("<tool_call>")
    assert trigger == [151657]  # an ordinary token in this vocabulary, not a special one
    # Almost there by pieces: every allowed token either stays in free text or completes the
    # trigger exactly once, at the end of what is written.
    tokens, state = steer(g, vocab, g.initial_state, b"a <tool_cal")
    for t in ordinary_allowed(g, vocab, state).tolist():
        text = (text_of(vocab, tokens) + vocab.token_bytes(t))
        assert text.count(b"<tool_call>") <= 1
        if b"<tool_call>" in text:
            assert text.split(b"<tool_call>")[1] == b"" or text.split(b"<tool_call>")[1].isdigit()
    # After the trigger, only digits: the trigger token is no longer allowed.
    after = g.advance(g.initial_state, trigger[0])
    assert trigger[0] not in allowed_set(g, after)
    assert all(vocab.token_bytes(t).isdigit() for t in ordinary_allowed(g, vocab, after).tolist())
    # Random walks never write the trigger twice.
    rng = random.Random(3)
    for _ in range(6):
        tokens, state = walk_and_finish(g, vocab, rng, steps=20)
        text = text_of(vocab, tokens)
        assert text.count(b"<tool_call>") == 1 and text.split(b"<tool_call>")[1].isdigit()


def test_special_tokens_are_allowed_exactly_where_the_structure_names_them(vocabs):
    vocab = vocabs["qwen2"]
    quad = vocab.find_tokens("<|quad_start|>")[0]
    assert vocab.is_special(quad)
    plain = vocab.compile_regex("(?s:.)*")
    assert quad not in allowed_set(plain, plain.initial_state)
    g = vocab.compile_structure([st.free_text(), st.token("<|quad_start|>"), st.regex("[a-z]{1,4}")])
    assert list(g.special_tokens) == [quad] and g.special_tokens[quad][0] >= 0xF5
    specials = {t for t in range(vocab.size) if vocab.is_special(t)} - set(vocab.eos_token_ids)
    rng = random.Random(11)
    for _ in range(6):
        state, in_free_text, text = g.initial_state, True, b""
        for _ in range(rng.randrange(1, 15)):
            allowed = allowed_set(g, state)
            # In free text, at a character boundary (a byte-level token may end mid-character).
            assert (quad in allowed) == (in_free_text and _is_utf8(text))
            assert allowed & specials <= {quad}
            t = rng.choice(sorted(allowed - set(vocab.eos_token_ids)))
            state = g.advance(state, t)
            in_free_text = in_free_text and t != quad
            text += b"" if t == quad else vocab.token_bytes(t)
        if in_free_text:
            state = g.advance(g.initial_state, quad)
        tail, state = finish(g, vocab, state, rng)
        assert g.is_accepting(state)
    with pytest.raises(onyx.TokenNotAllowedError):
        g.advance(g.advance(g.initial_state, quad), quad)
    # The grammar's spelling shows the token as its marker byte; `pieces` turns it back.
    marker = g.special_tokens[quad]
    assert g.spell([vocab.find_tokens("hi")[0], quad]) == b"hi" + marker
    assert st.pieces(g, b"hi" + marker + b"ab") == [b"hi", quad, b"ab"]
    assert g.forced_bytes(g.advance(g.initial_state, vocab.find_tokens("hi")[0])) == b""
    only = vocab.compile_structure([st.token("<|quad_start|>"), "ab"])
    assert only.forced_bytes(only.initial_state) == marker + b"ab"
    assert only.validate(only.spell([quad]) + b"ab").valid


def test_budget_aware_masking_reaches_across_segments(vocabs):
    """With a token budget, a walk that spends it on free text still ends with a whole call."""
    vocab = vocabs["smollm2"]
    spec = [st.free_text("<tool_call>"), st.optional(["<tool_call>\n", st.json_schema(SCHEMA), "\n</tool_call>"])]
    g = vocab.compile_structure(spec)
    eos = set(vocab.eos_token_ids)
    rng = random.Random(5)
    for max_tokens in (26, 32, 48):
        # Enter the call early, then spend the budget at random.
        tokens, state = steer(g, vocab, g.initial_state, b"Checking.<tool_call>\n")
        assert len(tokens) + g.min_tokens_to_accept(state) <= max_tokens
        while len(tokens) < max_tokens:
            words = g.token_bitmask_within(state, max_tokens - len(tokens) - 1)
            ids = [t for t in np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")).tolist()
                   if t < vocab.size]
            if set(ids) <= eos:
                break
            t = rng.choice([t for t in ids if t not in eos])
            state = g.advance(state, t)
            tokens.append(t)
        assert g.is_accepting(state), (max_tokens, text_of(vocab, tokens))
        body = text_of(vocab, tokens).decode().split("<tool_call>\n")[1].removesuffix("\n</tool_call>")
        jsonschema.validate(json.loads(body), SCHEMA)


def test_errors_say_where_in_the_spec(vocabs):
    vocab = vocabs["smollm2"]
    with pytest.raises(onyx.InvalidStructureError) as e:
        vocab.compile_structure(["a", {"repeat": "b", "mim": 1}])
    assert e.value.structure_path == "#/1/mim"
    with pytest.raises(onyx.InvalidRegexError) as e:
        vocab.compile_structure({"any_of": ["a", {"regex": "ab("}]})
    assert e.value.structure_path == "#/any_of/1/regex" and e.value.offset == 2
    with pytest.raises(onyx.UnsupportedSchemaError) as e:
        vocab.compile_structure([st.until("x"), st.json_schema({"type": "array", "uniqueItems": True, "minItems": 2})])
    assert e.value.structure_path == "#/1/json_schema" and e.value.keyword == "uniqueItems"
    with pytest.raises(onyx.InvalidStructureError, match="no token of this vocabulary"):
        vocab.compile_structure(st.token("<|not_a_token|>"))
    with pytest.raises(onyx.InvalidStructureError, match="EOS"):
        vocab.compile_structure(st.token(vocab.eos_token_ids[0]))
    with pytest.raises(onyx.InvalidStructureError, match="JSON-serialisable"):
        vocab.compile_structure([object()])


def test_marked_names_tokens_only_where_the_vocabulary_has_them(vocabs):
    qwen, smol = vocabs["qwen2"], vocabs["smollm2"]
    assert st.marked(qwen, "x<tool_call>y", ("<tool_call>",)) == ["x", {"token": "<tool_call>"}, "y"]
    assert st.marked(smol, "x<tool_call>y", ("<tool_call>",)) == "x<tool_call>y"


def test_the_documented_structure_examples_run(smollm2):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", doc, flags=re.S) if "compile_structure(" in b]
    scope = {"vocab": smollm2}
    exec(block, scope)
    assert list(scope["g"].special_tokens) == [1]


def test_a_spec_given_as_json_text_is_the_same_grammar(vocabs):
    vocab = vocabs["smollm2"]
    spec = [st.until("</think>"), st.regex(r"\n{0,2}"), st.json_schema(SCHEMA)]
    as_data, as_text = vocab.compile_structure(spec), vocab.compile_structure(json.dumps(spec))
    assert as_text.num_states == as_data.num_states
    for text in ("a</think>\n{\"city\":\"Oslo\"}", "</think>{}", "nothing closed"):
        assert bool(as_text.validate(text)) == bool(as_data.validate(text))
    literal = vocab.compile_structure(json.dumps("abc"))  # one literal text, as JSON
    assert literal.validate("abc") and not literal.validate('"abc"')
    with pytest.raises(onyx.InvalidStructureError):
        vocab.compile_structure("[not json")
