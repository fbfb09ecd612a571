"""String schemas: string values in every JSON spelling, judged by their decoded characters; ECMA-262 `pattern` semantics (search,
anchors, class escapes, lookaround at the edges), length bounds in code points, and formats
whose outputs pass jsonschema's format checker."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

import onyx
from grammar_walks import finish, random_walk, text_of


def compile_schema(vocab: onyx.Vocabulary, schema: dict) -> onyx.Grammar:
    return vocab.compile_json_schema({"type": "string", **schema})


def spelled(value: str) -> str:
    """The canonical JSON text of a string."""
    return json.dumps(value, ensure_ascii=False)


def test_every_spelling_of_a_value_is_accepted(smollm2):
    g = compile_schema(smollm2, {})
    for value in ["", "a\"b", "back\\slash", "\n\t\b\f\r", "\x01\x1f", "/", "\x7f", "é😀", "\u2028"]:
        assert g.validate(spelled(value)), value
        assert g.validate(json.dumps(value, ensure_ascii=True)), value
    for text in ['"\\u003c"', '"\\/"', '"\\u000A"', '"\\u000a"', '"\\u00e9"', '"\\uD83D\\ude00"']:
        assert g.validate(text), text
    # Not JSON: a raw control character, an unknown escape, a lone or reversed surrogate.
    for text in ['"\n"', '"\\x41"', '"\\ud800"', '"\\ude00\\ud83d"', '"\\u00e"']:
        assert not g.validate(text), text
    # JSON, but no writer escapes an ASCII letter or digit: that spelling is not generated.
    for text in ['"\\u0041"', '"\\u0030"']:
        assert not g.validate(text), text


def test_escapes_are_judged_by_the_character_they_stand_for(smollm2):
    g = compile_schema(smollm2, {"pattern": "^[a-zé]+$", "maxLength": 3})
    for text in ['"abc"', '"\\u00e9bc"', '"\\u00E9\\u00e9a"']:
        assert g.validate(text), text
    # `\u00c9` is "É" (the pattern refuses it); four characters are one too many.
    for text in ['"\\u00c9bc"', '"ab\\u00e9d"', '"\\\\"']:
        assert not g.validate(text), text
    e = smollm2.compile_json_schema({"enum": ["é/<x>"]})
    for text in ['"é/<x>"', '"\\u00e9\\/\\u003cx\\u003E"', json.dumps("é/<x>")]:
        assert e.validate(text), text
    assert not e.validate('"\\u00e9/<y>"')


# (pattern, values it must accept, values it must refuse). Patterns search the decoded string.
PATTERNS = [
    ("a+", ["a", "xxaayy"], ["", "bbb"]),
    ("^abc$", ["abc"], ["abc\n", "xabc", "abcx"]),
    ("^a|b$", ["ab", "xb", "axx"], ["ba", "xbx"]),
    ("(^|,)x(,|$)", ["x", "a,x", "x,b"], ["ax", "xa"]),
    ('^a"b\\\\$', ['a"b\\'], ["ab"]),
    ("^\\t$", ["\t"], ["\\t", "t"]),
    ("^\\cC$", ["\x03"], ["\\cC"]),
    ("^\\d+$", ["42"], ["\u0967\u0968", "4a"]),
    ("^\\w+$", ["a_9"], ["é"]),
    ("^\\s$", [" ", "\t", "\u00a0", "\u2003", "\n", "\u2029"], ["\x01", "\ufeff", "a"]),
    ("^\\S$", ["\x01", "\u2013"], [" ", "\ufeff", "\u2003"]),
    ("^\\D$", ["a"], ["0", "\u07c0"]),
    ("^.$", ["é", "\x00"], ["\n", "\r", "\u2028"]),
    ("^[^]$", ["\n", "x"], ["", "xy"]),
    ("^🐲*$", ["", "🐲🐲"], ["🐉", "D"]),
    ("\\p{Letter}cole", ["école", "ecole"], ["ÉCOLE", "1cole"]),
    ("^(?<year>\\d{4})-\\d{2}$", ["2024-05"], ["24-05"]),
    ("^x{2,3}?$", ["xx", "xxx"], ["x", "xxxx"]),
    ("a{}", ["a{}"], ["a"]),
    ("^(?=.*[A-Z])(?=.*\\d).{6,}$", ["abcD12", "X1yyyy"], ["abcdef", "ABCDEF", "A1"]),
    ("^(?!.*\\.\\.)[a-z.]+$", ["a.b.c"], ["a..b"]),
    ("^.*(?<!\\.)$", ["abc", ""], ["abc."]),
    ("\\bcat\\b", ["cat", "a cat."], ["cats", "concat"]),
]


@pytest.mark.parametrize("pattern,yes,no", PATTERNS, ids=[p for p, _, _ in PATTERNS])
def test_pattern_semantics(smollm2, pattern, yes, no):
    g = compile_schema(smollm2, {"pattern": pattern})
    for value in yes:
        assert g.validate(spelled(value)), (pattern, value)
    for value in no:
        assert not g.validate(spelled(value)), (pattern, value)


@pytest.mark.parametrize("pattern", ["(a)\\1", "a(?=b)c", "(?i:a)"])
def test_unsupported_pattern_constructs_are_named(smollm2, pattern):
    with pytest.raises(onyx.GrammarError, match="pattern"):
        compile_schema(smollm2, {"pattern": pattern})


@pytest.mark.parametrize("pattern", ["(a", "[z-a]", "\\a", "a**", "a{,5}"])
def test_invalid_patterns_are_refused(smollm2, pattern):
    with pytest.raises(onyx.GrammarError):
        compile_schema(smollm2, {"pattern": pattern})


def test_lengths_count_code_points_and_intersect_patterns(smollm2):
    g = compile_schema(smollm2, {"minLength": 2, "maxLength": 3, "pattern": "x"})
    for value in ["x\n", "é😀x", '"x"']:
        assert g.validate(spelled(value)), value
    for value in ["x", "abcx", "ab"]:
        assert not g.validate(spelled(value)), value


WALKED = [
    {"format": "date-time"},
    {"format": "email", "maxLength": 40},
    {"format": "email", "maxLength": 1024},
    {"format": "ipv6"},
    {"format": "uri"},
    {"format": "uuid"},
    {"format": "duration"},
    {"format": "json-pointer"},
    {"pattern": "^[A-Z]{2}-\\d{3}$"},
    {"pattern": "\\S", "minLength": 1, "maxLength": 8},
]


@pytest.mark.parametrize("schema", WALKED, ids=[json.dumps(s) for s in WALKED])
def test_walks_parse_and_validate(smollm2, schema):
    full = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "string", **schema}
    validator = jsonschema.Draft202012Validator(full, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    g = smollm2.compile_json_schema(full)
    rng = random.Random(1234)
    for _ in range(30):
        tokens, state = random_walk(g, smollm2, rng, rng.randrange(30))
        rest, state = finish(g, smollm2, state, rng)
        text = text_of(smollm2, tokens + rest).decode("utf-8")
        value = json.loads(text)
        validator.validate(value)


def _near_miss(fmt: str, rng: random.Random) -> str:
    """A random string close to format `fmt`'s form: most are invalid, some valid."""
    if fmt == "ipv4":
        parts = ["0", "1", "00", "01", "255", "256", "99", "199", "249", "250", " 1", "+1", ""]
        return ".".join(rng.choice(parts) for _ in range(rng.randint(3, 5)))
    if fmt == "ipv6":
        parts = ["", "0", "1", "ff", "FFFF", "abcd", "00000", "1.2.3.4", "255.255.255.255", "01.2.3.4", "g"]
        groups = [rng.choice(parts) for _ in range(rng.randint(1, 9))]
        return ":".join(groups) if rng.random() < 0.7 else ":".join(groups[:2]) + "::" + ":".join(groups[2:])
    year = rng.choice(["2020", "0000", "0001", "1900", "2000", "9999", "2024", "10000", "123", "２020"])
    return f"{year}-{rng.choice(['01', '02', '1', '13', '00', '12'])}-{rng.choice(['01', '28', '29', '30', '31', '32', '00'])}"


@pytest.mark.parametrize("fmt", ["ipv4", "ipv6", "date"])
def test_formats_taken_as_exact_accept_everything_their_checker_accepts(smollm2, fmt):
    # `oneOf` subtracts these formats' languages from the other branches as if they were the
    # checker's own: a string the checker accepts and the grammar does not would be written
    # by another branch and then match two.
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    g = compile_schema(smollm2, {"format": fmt})
    rng = random.Random(0)
    samples = {_near_miss(fmt, rng) for _ in range(4000)}
    accepted = [s for s in samples if checker.conforms(s, fmt)]
    assert len(accepted) >= 20  # the samples reach the valid side
    missed = [s for s in accepted if not g.validate(spelled(s))]
    assert missed == []
    assert any(not checker.conforms(s, fmt) and not g.validate(spelled(s)) for s in samples)
