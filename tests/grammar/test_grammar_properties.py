"""Soundness and completeness of the token index, property-based, on all three real tokenizers.

Regexes are generated in the syntax Python's `re` and Rust's `regex` agree on, so Python's
`re.fullmatch` is an independent oracle for what the grammar core must accept.
"""

from __future__ import annotations

import random
import re

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grammar_walks import finish, ordinary_allowed, text_of

LITERALS = ["a", "b", "x", "0", "7", " ", "-", r"\.", ",", "é", "日", "😀", "ß"]
CLASSES = ["[a-c]", "[0-9]", "[a-zé]", "[xyz0-2]", "[^a-z\\n]", "."]


def _quantify(inner: str, q: str) -> str:
    return f"(?:{inner}){q}"


regexes = st.recursive(
    st.sampled_from(LITERALS + CLASSES),
    lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map("".join),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: "(?:" + "|".join(xs) + ")"),
        st.tuples(inner, st.sampled_from(["?", "*", "+", "{1,3}", "{2}"])).map(lambda t: _quantify(*t)),
    ),
    max_leaves=6,
)


def _utf8(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def check_walk(vocab, g, pattern: str, rng: random.Random, steps: int = 6) -> None:
    """Random walk checking, at every state: EOS allowed exactly on a full match (per Python's
    re), and every allowed token leading to a state from which acceptance is reachable. Then
    finish the walk and check the output fully matches."""
    eos = set(vocab.eos_token_ids)
    state, out = g.initial_state, b""
    for _ in range(steps):
        allowed = g.allowed_token_ids(state)
        text = _utf8(out)
        full = text is not None and re.fullmatch(pattern, text) is not None
        assert bool(eos & set(allowed.tolist())) == full, f"EOS rule broken after {out!r} for {pattern!r}"
        assert g.is_accepting(state) == full
        toks, nexts = g.transitions(state)
        for n in np.unique(nexts).tolist():
            assert g.is_accepting(n) or len(ordinary_allowed(g, vocab, n)) > 0, f"dead state {n} after {out!r}"
        if len(toks) == 0:
            break
        t = int(toks[rng.randrange(len(toks))])
        state = g.advance(state, t)
        out += vocab.token_bytes(t)
    rest, state = finish(g, vocab, state, rng)
    out += text_of(vocab, rest)
    text = _utf8(out)
    assert text is not None and re.fullmatch(pattern, text), f"{out!r} does not fully match {pattern!r}"


# Python's `re` backtracks: on a nested repeat of overlapping branches, say
# `(?:(?:[a-c]|a)+)*x`, its time grows four-fold per two more characters of text (0.14 s at
# 22), and a test run here sat 20 minutes in this test, most likely on such a draw. So the
# examples are the same in every run (`derandomize`): ones the oracle answers promptly, nested
# repeats included.
@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=regexes, seed=st.integers(0, 2**32 - 1))
def test_soundness_on_generated_regexes(vocabs, pattern, seed):
    for vocab in vocabs.values():
        g = vocab.compile_regex(pattern)
        check_walk(vocab, g, pattern, random.Random(seed))


_PRODUCIBLE: dict[int, set[int]] = {}


def producible_bytes(vocab) -> set[int]:
    key = id(vocab)
    if key not in _PRODUCIBLE:
        _PRODUCIBLE[key] = {b for t in range(vocab.size) if not vocab.is_special(t) for b in vocab.token_bytes(t)}
    return _PRODUCIBLE[key]


def _is_clean(s: str) -> bool:
    """No surrogates, and no U+2581 (SentencePiece's own space mark: Gemma's tokenizer turns
    spaces into it and back, so a text holding one does not round-trip through it)."""
    return not any(0xD800 <= ord(c) <= 0xDFFF or c == "\u2581" for c in s)


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data(), pattern=regexes)
def test_completeness_own_tokenization(hf_tokenizers, vocabs, data, pattern):
    """A string in the language, tokenized by the model's own tokenizer, is allowed token by
    token and ends in an accepting state."""
    s = data.draw(st.from_regex(re.compile(pattern), fullmatch=True).filter(_is_clean))
    for name, tok in hf_tokenizers.items():
        vocab = vocabs[name]
        g = vocab.compile_regex(pattern)
        ids = tok.encode(s, add_special_tokens=False).ids
        if text_of(vocab, ids) != s.encode():
            # Only a string with a byte no token contains may be unspellable (SmolLM2 has no
            # token with byte 0xF1, so its tokenizer drops it); the grammar excludes those.
            missing = set(s.encode()) - producible_bytes(vocab)
            assert missing, f"{name} tokenization does not spell {s!r}"
            continue
        state = g.initial_state
        for t in ids:
            assert g.token_bitmask(state)[t >> 5] >> (t & 31) & 1, f"{name}: token {t} refused in {s!r}"
            state = g.advance(state, t)
        assert g.is_accepting(state)
        assert set(vocab.eos_token_ids) <= set(g.allowed_token_ids(state).tolist())


UNICODE_CASES = [
    ("😀+", "😀😀"),
    ("[é日]{2}x", "日éx"),
    ("(?:👩\u200d💻|ok)", "👩\u200d💻"),
    ("e\u0301{1,2}", "e\u0301\u0301"),
    ("[А-Яа-я]+ [0-9]", "Привет 5"),
]


def test_unicode_split_across_tokens(vocabs, hf_tokenizers):
    """Multi-byte characters split across tokens: partial UTF-8 is never accepting, and the
    byte-by-byte path (byte tokens / byte-fallback tokens) is allowed."""
    for pattern, sample in UNICODE_CASES:
        for name, vocab in vocabs.items():
            g = vocab.compile_regex(pattern)
            # Spell the sample one byte at a time with single-byte tokens.
            byte_token = {}
            for t in range(vocab.size):
                b = vocab.token_bytes(t)
                if len(b) == 1 and not vocab.is_special(t):
                    byte_token.setdefault(b, t)
            state, out = g.initial_state, b""
            for byte in sample.encode():
                t = byte_token[bytes([byte])]
                state = g.advance(state, t)
                out += bytes([byte])
                if _utf8(out) is None:
                    assert not g.is_accepting(state)
            assert g.is_accepting(state), f"{name}: {sample!r} byte by byte"
            # And the tokenizer's own tokenization too.
            ids = hf_tokenizers[name].encode(sample, add_special_tokens=False).ids
            state = g.initial_state
            for t in ids:
                state = g.advance(state, t)
            assert g.is_accepting(state)
