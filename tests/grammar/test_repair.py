"""Validation and repair (`Grammar.validate`, `Grammar.repair`).

Most properties here are about plain edit distance (`**UNIT`: any edit cost given selects it);
the default intent model is checked on the repair corpus in test_repair_intent.py, and against
an independent brute force in the Rust tests (grammar_engine/src/repair/cost.rs).

Properties checked on random inputs (hypothesis):
  * a repair always fully matches, its edits rebuild it from the original bytes, and its cost is
    the sum of the edit costs (the number of edits at unit costs);
  * a text already in the language comes back unchanged at cost 0;
  * the cost is the true weighted edit distance to the language: an independent brute force
    (Levenshtein rows over a trie of candidate strings, `re.fullmatch` as the membership
    oracle) agrees on small regexes over {a, b};
  * broken UTF-8 never survives into a repair;
  * `max_cost` and the search budgets answer with the right status and sound bounds;
  * `validate` reports the first byte where no completion exists;
  * the default (intent) model answers with valid text and sound bounds under budgets too.
"""

from __future__ import annotations

import json
import math
import random
import re
import string

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import onyx
from bench import repair_corpus

SCHEMAS, _ = repair_corpus.load("test")
UNIT = {"insert_cost": 1, "delete_cost": 1, "substitute_cost": 1}
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def apply_edits(original: bytes, edits) -> bytes:
    """Applies `RepairResult.edits` to the original bytes, checking the documented form: text
    order, offsets into the original, an insertion at k going before byte k, `old` matching the
    original byte."""
    out = bytearray()
    pos = 0  # next original byte not yet copied or consumed
    for kind, offset, old, new in edits:
        assert offset >= pos, f"edits out of order or overlapping: {edits}"
        assert offset <= len(original)
        out += original[pos:offset]
        pos = offset
        if kind == "insert":
            assert old is None and new is not None
            out.append(new)
        elif kind == "delete":
            assert offset < len(original) and old == original[offset] and new is None
            pos = offset + 1
        elif kind == "substitute":
            assert offset < len(original) and old == original[offset]
            assert new is not None and new != old
            out.append(new)
            pos = offset + 1
        else:
            raise AssertionError(f"unknown edit kind {kind!r}")
    out += original[pos:]
    return bytes(out)


def as_bytes(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode()


def check_repair(g, text: str | bytes, r, *, ins=1, dele=1, sub=1, edit_model=True) -> None:
    """The invariants every found repair satisfies (its price too, under plain edit costs)."""
    assert r.found and r.text is not None
    assert g.validate(r.text).valid, (text, r)
    repaired = r.text.encode()
    assert apply_edits(as_bytes(text), r.edits) == repaired, (text, r, r.edits)
    price = {"insert": ins, "delete": dele, "substitute": sub}
    if edit_model:
        assert r.cost == sum(price[e[0]] for e in r.edits), (r, r.edits)
    assert r.lower_bound <= r.cost
    if r.status == "optimal":
        assert r.lower_bound == r.cost
    else:
        assert r.status == "anytime"


# Every live prefix of the AB_PATTERNS languages completes within this many characters (checked
# by test_ab_patterns_complete_quickly), which makes prefix viability decidable with `re`.
COMPLETION_BOUND = 3


def _viable(rx: re.Pattern, prefix: str, alphabet: str = "ab", k: int = COMPLETION_BOUND) -> bool:
    """Some string of the language starts with `prefix` (trying completions up to k characters
    over `alphabet`)."""
    frontier = [""]
    for _ in range(k + 1):
        if any(rx.fullmatch(prefix + s) for s in frontier):
            return True
        frontier = [s + c for s in frontier for c in alphabet]
    return False


def brute_force_distance(pattern: str, text: str, alphabet: str, ins=1, dele=1, sub=1) -> int:
    """Weighted edit distance from `text` to the nearest full match of `pattern` whose
    characters are all in `alphabet`, with no automaton: candidate strings are enumerated
    breadth-first as a trie, each carrying its Levenshtein row against `text` (row[i] = distance
    from text[:i] to the candidate). A candidate p is dropped when no string of the language
    starts with it (`_viable`), or once min(row) >= best: any extension p+s costs at least
    min over i of (distance(text[:i], p) + distance(text[i:], s)). Rows grow by at least `ins`
    per character past len(text), so the search ends."""
    rx = re.compile(pattern)
    n = len(text)
    best = math.inf
    frontier = [("", [i * dele for i in range(n + 1)])]
    while frontier:
        for cand, row in frontier:
            if row[n] < best and rx.fullmatch(cand):
                best = row[n]
        nxt = []
        for cand, row in frontier:
            if min(row) >= best or not _viable(rx, cand, alphabet):
                continue
            for ch in alphabet:
                new = [row[0] + ins]
                for i in range(1, n + 1):
                    new.append(min(row[i] + ins, new[i - 1] + dele, row[i - 1] + (0 if text[i - 1] == ch else sub)))
                nxt.append((cand + ch, new))
        frontier = nxt
        assert len(frontier) < 200_000, "brute force blew up: pick a smaller case"
    return best


# Small regexes over {a, b} for the brute force. Python's `re` and the grammar core agree on
# these constructs; every live prefix can be completed within 3 characters (used by the
# validate oracle below).
AB_PATTERNS = [
    "(ab)*",
    "a*b*",
    "(a|bb)+",
    "a(a|b)*b",
    "(aab|b)*a?",
    "[ab]{2,3}",
    "(ab|ba)*a",
    "b*(ab*ab*)*",  # an even number of a's
    "a{3}|b{2}",
    "(a|b)*abb",
]

# Broader regexes for the general properties, including multi-byte characters.
PATTERNS = [
    r"[0-9]{4}-[a-z]+",
    r"(ab|cd)*e",
    r"[a-z]+@[a-z]+\.(com|org)",
    r"(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])){3}",
    r'"([^"\\]|\\["\\n])*"',
    r"(true|false|null)",
    r"[A-Z][a-z]{2,5}( [A-Z][a-z]{2,5})?",
    r"(é|ü)+[a-c]{1,3}",
    r"(日本|中国)語?[0-9]*",
    r"[α-ω]{2,4}!",
]

# Characters for random texts: the patterns' own material, some near misses, multi-byte
# characters of 2 and 3 bytes.
TEXT_CHARS = string.ascii_letters + string.digits + " .-@!\"\\'{}[]:," + "éüαβω日本中国語€"


def is_bmp(s: str) -> bool:
    """ASCII/BMP text without C0 control characters other than whitespace. A grammar is
    compiled against a vocabulary and drops bytes no token contains: SmolLM2 has no token with
    0x04, 0x06, 0x13, 0x14, 0x16, 0x1d, or the lead bytes 0xf1/0xf2 of some 4-byte characters,
    so `re` and the grammar disagree on strings holding them."""
    return all(ord(c) < 0x10000 and (ord(c) >= 0x20 or c in "\t\n\r") for c in s)


@pytest.fixture(scope="module")
def grammars(smollm2):
    return {p: smollm2.compile_regex(p) for p in PATTERNS + AB_PATTERNS}


@pytest.fixture(scope="module")
def json_grammars(smollm2):
    return {(name, ws): smollm2.compile_json_schema(schema, max_whitespace=ws)
            for name, schema in SCHEMAS.items() for ws in (0, 8)}


@st.composite
def near_misses(draw, pattern: str):
    """A member of the language (ASCII/BMP) with a few random byte-level-safe edits."""
    s = draw(st.from_regex(pattern, fullmatch=True).filter(is_bmp))
    chars = list(s)
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["ins", "del", "sub"]))
        i = draw(st.integers(0, len(chars)))
        c = draw(st.sampled_from(TEXT_CHARS))
        if op == "ins":
            chars.insert(i, c)
        elif chars and i < len(chars):
            if op == "del":
                del chars[i]
            else:
                chars[i] = c
    return "".join(chars)


def texts_for(pattern: str):
    return st.one_of(st.text(alphabet=TEXT_CHARS, max_size=20), near_misses(pattern))


# --------------------------------------------------------------------------------------------
# validate
# --------------------------------------------------------------------------------------------


def test_validate_offsets(smollm2):
    g = smollm2.compile_regex("[0-9]{4}-[a-z]+")
    assert g.validate("1234-abc").valid
    assert g.validate("1234-abc")  # truthy
    assert g.validate("1234-abc").error_offset is None
    v = g.validate("12a4-x")
    assert not v and not v.valid and v.error_offset == 2
    assert g.validate("1234-").error_offset == 5  # valid prefix, incomplete
    assert g.validate("").error_offset == 0
    assert g.validate("1234-x9").error_offset == 6
    assert g.validate(b"12\xff4-x").error_offset == 2


def test_validate_offsets_are_bytes(smollm2):
    g = smollm2.compile_regex("(é|ü)+x")
    assert g.validate("ééy").error_offset == 4
    assert g.validate("éüx").valid
    # A character cut in half is an incomplete prefix, not an error...
    assert g.validate("é".encode()[:1]).error_offset == 1
    # ...until the next byte cannot continue it.
    assert g.validate(b"\xc3x").error_offset == 1


@SETTINGS
@given(pattern=st.sampled_from(AB_PATTERNS), text=st.text(alphabet="abc", max_size=8))
def test_validate_matches_prefix_oracle(grammars, pattern, text):
    rx = re.compile(pattern)
    v = grammars[pattern].validate(text)
    if rx.fullmatch(text):
        assert v.valid and v.error_offset is None
        return
    assert not v.valid
    e = v.error_offset
    assert 0 <= e <= len(text)
    assert _viable(rx, text[:e]), (pattern, text, e)
    if e < len(text):
        assert not _viable(rx, text[: e + 1]), (pattern, text, e)


# --------------------------------------------------------------------------------------------
# repair: general properties
# --------------------------------------------------------------------------------------------


@SETTINGS
@given(data=st.data(), pattern=st.sampled_from(PATTERNS))
def test_repair_is_valid_and_edits_rebuild_it(grammars, data, pattern):
    g = grammars[pattern]
    text = data.draw(texts_for(pattern), label="text")
    r = g.repair(text, **UNIT)
    assert r.status == "optimal"
    check_repair(g, text, r)
    assert r.cost == len(r.edits)
    if g.validate(text).valid:
        assert r.cost == 0
    else:
        assert r.cost >= 1


@SETTINGS
@given(data=st.data(), pattern=st.sampled_from(PATTERNS),
       costs=st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4)))
def test_weighted_cost_is_sum_of_edit_costs(grammars, data, pattern, costs):
    ins, dele, sub = costs
    g = grammars[pattern]
    text = data.draw(texts_for(pattern), label="text")
    r = g.repair(text, insert_cost=ins, delete_cost=dele, substitute_cost=sub)
    check_repair(g, text, r, ins=ins, dele=dele, sub=sub)
    assert r.status == "optimal"


@SETTINGS
@given(data=st.data(), pattern=st.sampled_from(PATTERNS))
def test_text_in_language_is_unchanged(grammars, data, pattern):
    g = grammars[pattern]
    text = data.draw(st.from_regex(pattern, fullmatch=True).filter(is_bmp), label="text")
    assert g.validate(text).valid
    r = g.repair(text)
    assert (r.status, r.text, r.cost, r.lower_bound, r.edits) == ("optimal", text, 0, 0, [])
    r = g.repair(text, **UNIT)
    assert (r.status, r.text, r.cost, r.lower_bound, r.edits) == ("optimal", text, 0, 0, [])
    r = g.repair(text.encode(), insert_cost=3, max_cost=0)
    assert (r.status, r.text, r.cost) == ("optimal", text, 0)


@SETTINGS
@given(pattern=st.sampled_from(AB_PATTERNS), text=st.text(alphabet="abc", max_size=7))
def test_cost_equals_brute_force_edit_distance(grammars, pattern, text):
    r = grammars[pattern].repair(text, **UNIT)
    assert r.status == "optimal"
    check_repair(grammars[pattern], text, r)
    assert r.cost == brute_force_distance(pattern, text, "ab")


@SETTINGS
@given(pattern=st.sampled_from(AB_PATTERNS), text=st.text(alphabet="abc", max_size=6),
       costs=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)))
def test_weighted_cost_equals_brute_force(grammars, pattern, text, costs):
    ins, dele, sub = costs
    r = grammars[pattern].repair(text, insert_cost=ins, delete_cost=dele, substitute_cost=sub)
    check_repair(grammars[pattern], text, r, ins=ins, dele=dele, sub=sub)
    assert r.cost == brute_force_distance(pattern, text, "ab", ins, dele, sub)


def test_ab_patterns_complete_quickly():
    """The premise of `_viable`: a prefix with no completion of up to COMPLETION_BOUND characters
    has none of up to 6 either (all prefixes up to 6 characters)."""
    prefixes = [""]
    for _ in range(6):
        prefixes += [p + c for p in prefixes if len(p) == len(prefixes[-1]) for c in "ab"]
    for pattern in AB_PATTERNS:
        rx = re.compile(pattern)
        for p in prefixes:
            assert _viable(rx, p) == _viable(rx, p, k=6), (pattern, p)


def test_brute_force_itself():
    """The oracle on hand-checked values (so a broken oracle cannot agree with a broken core)."""
    assert brute_force_distance("(ab)*", "", "ab") == 0
    assert brute_force_distance("(ab)*", "aab", "ab") == 1
    assert brute_force_distance("(ab)*", "ba", "ab") == 2
    assert brute_force_distance("a{3}|b{2}", "c", "ab") == 2
    assert brute_force_distance("a{3}|b{2}", "c", "ab", ins=5) == 6  # substitute + insert
    assert brute_force_distance("(a|b)*abb", "abc", "ab") == 1
    # 2 insertions and 5 deletions beat 3 deletions and 2 substitutions at 3 each.
    assert brute_force_distance("[ab]{2,3}", "ccccc", "ab", dele=1, sub=3) == 2 + 5


# --------------------------------------------------------------------------------------------
# repair: UTF-8
# --------------------------------------------------------------------------------------------

UTF8_PATTERNS = [r"(é|ü)+[a-c]{1,3}", r"(日本|中国)語?[0-9]*", r'"([^"\\]|\\["\\n])*"', r"[α-ω]{2,4}!"]


@st.composite
def broken_utf8(draw, pattern: str) -> bytes:
    """A member of the language, encoded, with multi-byte characters cut and stray bytes
    (continuation bytes, lead bytes, 0xff) spliced in."""
    b = bytearray(draw(st.from_regex(pattern, fullmatch=True).filter(is_bmp)).encode())
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["cut", "stray", "sub"]))
        i = draw(st.integers(0, len(b)))
        stray = draw(st.sampled_from([0x80, 0xA9, 0xBF, 0xC3, 0xE6, 0xF0, 0xFF, 0x41]))
        if op == "stray":
            b.insert(i, stray)
        elif i < len(b):
            if op == "cut":
                del b[i]
            else:
                b[i] = stray
    return bytes(b)


@SETTINGS
@given(data=st.data(), pattern=st.sampled_from(UTF8_PATTERNS))
def test_repair_of_broken_utf8_is_valid_utf8(grammars, data, pattern):
    g = grammars[pattern]
    raw = data.draw(broken_utf8(pattern), label="raw")
    r = g.repair(raw, **UNIT)
    assert r.status == "optimal"
    # The repaired bytes are exactly the edited input: no lossy decoding stood in for a fix.
    repaired = apply_edits(raw, r.edits)
    assert repaired.decode("utf-8") == r.text  # strict decode: raises on invalid UTF-8
    assert g.validate(r.text.encode()).valid
    check_repair(g, raw, r)


def test_broken_utf8_examples(smollm2):
    g = smollm2.compile_regex(r"(é|ü)+x")
    r = g.repair(b"\xc3x", **UNIT)  # é cut in half
    assert (r.text, r.cost) == ("éx", 1)
    r = g.repair(b"\xc3\xa9\xffx", **UNIT)
    assert (r.text, r.cost) == ("éx", 1)
    g = smollm2.compile_json_schema({"type": "string", "maxLength": 8})
    # A lead byte cut from its continuation inside a string: one edit, either dropping it or
    # completing it (with some continuation byte: any 2-byte character is as cheap).
    r = g.repair(b'"caf\xc3"', **UNIT)
    assert r.cost == 1 and g.validate(r.text.encode())
    value = json.loads(r.text)
    assert value == "caf" or (len(value) == 4 and value.encode()[:4] == b"caf\xc3")


# --------------------------------------------------------------------------------------------
# repair: max_cost and budgets
# --------------------------------------------------------------------------------------------


def test_max_cost_too_small(smollm2):
    g = smollm2.compile_regex("[0-9]{4}-[a-z]+")
    text = "12a4-xZZ"  # optimal cost 3
    assert g.repair(text, **UNIT).cost == 3
    for mc in range(3):
        r = g.repair(text, max_cost=mc, **UNIT)
        assert r.status == "no_repair_within_max_cost"
        assert (r.text, r.cost, r.edits, r.found) == (None, None, [], False)
        assert mc < r.lower_bound <= 3
    r = g.repair(text, max_cost=3, **UNIT)
    assert (r.status, r.cost, r.text) == ("optimal", 3, "1204-x")


@SETTINGS
@given(data=st.data(), pattern=st.sampled_from(PATTERNS))
def test_max_cost_boundary(grammars, data, pattern):
    g = grammars[pattern]
    text = data.draw(texts_for(pattern), label="text")
    best = g.repair(text, **UNIT)
    assume(best.cost > 0)
    below = g.repair(text, max_cost=best.cost - 1, **UNIT)
    assert below.status == "no_repair_within_max_cost" and below.text is None and below.edits == []
    at = g.repair(text, max_cost=best.cost, **UNIT)
    assert at.status == "optimal" and at.cost == best.cost
    check_repair(g, text, at)
    # The same boundary under the default model, in its own units.
    best = g.repair(text)
    below = g.repair(text, max_cost=best.cost - 1)
    assert below.status == "no_repair_within_max_cost" and below.text is None
    at = g.repair(text, max_cost=best.cost)
    assert at.status == "optimal" and at.cost == best.cost and at.text == best.text


def _garbage(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(string.printable[:94]) for _ in range(n))


def test_deadline_zero_gives_anytime_answer(json_grammars):
    g = json_grammars["order", 0]
    text = _garbage(2000, 1)
    for costs in (UNIT, {}):
        r = g.repair(text, deadline_ms=0, **costs)
        assert r.status == "anytime"
        check_repair(g, text, r, edit_model=bool(costs))
        assert r.lower_bound <= r.cost
        r = g.repair(text, max_expansions=10, **costs)
        assert r.status == "anytime" and r.expansions <= 10
        check_repair(g, text, r, edit_model=bool(costs))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(40, 160), budget=st.integers(0, 3000),
       schema=st.sampled_from(sorted(SCHEMAS)), unit=st.booleans())
def test_anytime_bounds_bracket_the_optimum(json_grammars, seed, n, budget, schema, unit):
    g = json_grammars[schema, 0]
    text = _garbage(n, seed)
    costs = UNIT if unit else {}
    full = g.repair(text, **costs)
    assert full.status == "optimal"
    r = g.repair(text, max_expansions=budget, **costs)
    check_repair(g, text, r, edit_model=unit)
    assert r.lower_bound <= full.cost <= r.cost
    if r.status == "optimal":
        assert r.cost == full.cost


def test_bad_arguments(smollm2):
    g = smollm2.compile_regex("a+")
    with pytest.raises(ValueError):
        g.repair("b", insert_cost=0)
    with pytest.raises(ValueError):
        g.repair("b", deadline_ms=-1)
    with pytest.raises(ValueError):
        g.repair("b", weights={"no_such_weight": 3})
    with pytest.raises(ValueError):
        g.repair("b", insert_cost=2, weights={"substitute": 3})
    with pytest.raises(TypeError):
        g.repair(123)
    with pytest.raises(TypeError):
        g.validate(None)


def test_pushdown_json_schemas_are_repaired_into_their_regular_form(smollm2):
    """A schema compiled as a pushdown grammar (distinct strings, recursion) is repaired into the
    same schema compiled as one automaton (a subset: the answer is valid, not proven cheapest);
    a valid text, however deep or long, is left as it is."""
    tags = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
            "required": ["tags"], "additionalProperties": False}
    tree = {"$defs": {"n": {"type": "object", "properties": {"c": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
                            "required": ["c"], "additionalProperties": False}}, "$ref": "#/$defs/n"}
    for schema, valid, broken in [
        (tags, '{"tags":["a","b","c"]}', '{"tags":["a","b",]}'),
        (tree, '{"c":[{"c":[{"c":[{"c":[{"c":[]}]}]}]}]}', '{"c":[{"c":[}]}'),
    ]:
        g = smollm2.compile_json_schema(schema)
        assert g.is_pushdown and g.validate(valid).valid
        same = g.repair(valid, **UNIT)
        assert (same.status, same.cost, same.text) == ("optimal", 0, valid)
        fixed = g.repair(broken, **UNIT)
        assert fixed.text is not None and g.validate(fixed.text).valid, fixed
        assert fixed.status == "anytime" and fixed.lower_bound == 1 <= fixed.cost
        jsonschema.validate(json.loads(fixed.text), schema)
    # Exact or nothing for the grammar; its regular form may still take a restriction.
    exact = smollm2.compile_json_schema(tags, allow_restriction=False)
    assert exact.restriction is None and exact.repair('{"tags":["a","b",]}', **UNIT).text is not None
    # A grammar with recursive rules and no schema to compile again still says why it cannot.
    gbnf = smollm2.compile_gbnf('root ::= "(" root ")" | "x"')
    with pytest.raises(onyx.GrammarError, match="single DFA"):
        gbnf.repair("((x)", **UNIT)
