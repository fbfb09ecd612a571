"""Draft sources: grammar-forced spans follow the target's own spelling, and prompt lookup
continues the latest n-gram's earlier occurrence."""

from __future__ import annotations

import random

from onyx.decoding.drafts import ForcedTokens, Proposal, lookup


def test_forced_tokens_follow_the_models_own_spelling(engine):
    tok = engine.loaded.tokenizer
    one = {c: tok.encode(c, add_special_tokens=False) for c in '{"ab'}
    assert all(len(ids) == 1 for ids in one.values())
    g = engine.compile(regex=r'\{"ab":"[a-z]+"\}')
    forced = ForcedTokens(g, tok, engine.vocab)
    s0 = g.initial_state
    text = lambda ids: b"".join(engine.vocab.token_bytes(t) for t in ids)  # noqa: E731
    # The tokenizer's spelling of the forced `{"ab":"` (no longer token starts with its last one).
    canonical = forced.at(s0)
    assert text(canonical) == b'{"ab":"'
    # The target spells `{"ab` one byte at a time: the next proposal follows it, then the rest.
    s = s0
    for c in '{"ab':
        forced.observe(s, one[c][0])
        s = g.advance(s, one[c][0])
    learned = forced.at(s0)
    assert learned[:4] == [one[c][0] for c in '{"ab'] and learned[4:] == forced.at(s)
    assert g.forced_bytes(s0).startswith(text(learned))
    # A state with nothing forced (inside `[a-z]+`) learns nothing.
    for c in '":"a':
        s = g.advance(s, tok.encode(c, add_special_tokens=False)[0])
    assert g.forced_bytes(s) == b""
    forced.observe(s, one["b"][0])
    assert forced.at(s) == []
    # A span that ends the grammar keeps its last token: nothing can merge with it. One that a
    # longer allowed token extends (`ab` + `[a-z]+`: `abc`, `about`, ...) drops it.
    whole = engine.compile(regex=r'\{"ab":"c"\}')
    assert text(ForcedTokens(whole, tok, engine.vocab).at(whole.initial_state)) == b'{"ab":"c"}'
    open_end = engine.compile(regex=r"ab[a-z]+")
    assert ForcedTokens(open_end, tok, engine.vocab).at(open_end.initial_state) == []


def test_forced_spans_emit_special_tokens_as_their_ids(engine):
    """A structure's forced bytes hold a marker byte where a special token goes: the span is the
    text's tokens, then that token's id (never the tokens of its text), then the rest."""
    tok = engine.loaded.tokenizer
    vocab = engine.vocab
    start = int(vocab.find_tokens("<|im_start|>")[0])
    g = vocab.compile_structure(["Done: ", {"token": "<|im_start|>"}, "tool\n", {"regex": "[0-9]+"}])
    assert start in g.special_tokens
    forced = ForcedTokens(g, tok, vocab)
    spelled = forced.spell(g.initial_state)
    head = tok.encode("Done: ", add_special_tokens=False)
    assert spelled[:len(head)] == head and spelled[len(head)] == start
    assert spelled.count(start) == 1
    s = g.initial_state
    for t in spelled:  # every proposed token is one the grammar takes
        s = g.advance(s, t)
    assert b"".join(vocab.token_bytes(t) for t in spelled).startswith(b"Done: <|im_start|>tool")


def test_lookup_continues_the_longest_earlier_ngram():
    ctx = [1, 2, 3, 9, 9, 1, 2, 3]
    assert lookup(ctx, 3) == (3, [9, 9, 1])  # the trigram 1 2 3 occurred before: what followed it
    assert lookup([5, 6, 7], 2) == (0, [])  # nothing repeats
    assert lookup([4, 4, 4, 4], 2) == (3, [4])  # the latest earlier occurrence wins
    assert lookup(ctx, 1) == (3, [9])
    assert lookup([7, 1, 2, 8, 2], 2) == (1, [8, 2])  # only the last token repeats: a unigram match


def _lookup_by_scanning(context, k, max_ngram, min_ngram):
    """The definition, slowly: for n from longest to shortest, the latest earlier start of the
    suffix n-gram with something after it."""
    for n in range(min(max_ngram, len(context) - 1), min_ngram - 1, -1):
        tail = context[len(context) - n:]
        for start in range(len(context) - n - 1, -1, -1):
            if context[start:start + n] == tail and context[start + n:start + n + k]:
                return n, context[start + n:start + n + k]
    return 0, []


def test_vectorised_lookup_finds_what_scanning_finds():
    rng = random.Random(7)
    for _ in range(5000):
        vocab = rng.randint(1, 5)  # small vocabularies: many partial matches of every length
        context = [rng.randrange(vocab) for _ in range(rng.randint(0, 30))]
        k, max_ngram = rng.randint(0, 5), rng.randint(1, 4)
        min_ngram = rng.randint(1, max_ngram)
        assert lookup(context, k, max_ngram=max_ngram, min_ngram=min_ngram) == \
            _lookup_by_scanning(context, k, max_ngram, min_ngram), (context, k, max_ngram, min_ngram)


class _Counting:
    """A constraint whose grammar takes every token (its state counts them), masks that never
    force the end, and forced spans given per state: enough for `Drafter.propose`'s bookkeeping."""

    def __init__(self, spans: dict[int, list[int]] | None = None) -> None:
        self.spans = spans or {}
        self.state = 0
        self.grammar = self

    def advance(self, state, token):
        return state + 1

    def only_eos(self, state):
        return False

    def at(self, state):
        return self.spans.get(state, [])


def _propose(gamma, context, spans=None, room=10):
    from onyx.decoding.drafts import Drafter

    g = _Counting(spans)
    out = Proposal()
    Drafter(gamma, aware=True, forced=g if spans else None).propose(out, context, g, room, remaining=room + 1)
    return out


def test_a_round_takes_forced_tokens_then_lookup_drafts_priced_by_their_match():
    from onyx.decoding.gamma import GammaController

    context = [1, 2, 3, 7, 8, 9, 1, 2, 3]  # the trigram 1 2 3 was followed by 7 8 9
    # forced tokens 2 3 first; the lookup then continues context + forced tokens
    fixed = _propose(GammaController(3), context[:-2], spans={0: [2, 3]})
    assert fixed.tokens == [2, 3, 7] and fixed.sources == ["forced", "forced", "lookup"]  # γ counts both
    assert fixed.match == 3
    used_up = _propose(GammaController(2), context[:-2], spans={0: [2, 3]})
    assert used_up.tokens == [2, 3] and used_up.match is None  # γ taken by the forced ones
    auto = GammaController("auto")
    for _ in range(20):
        auto.update(2, 0, match=3)  # trigram drafts never taken
    assert _propose(auto, context).tokens == []
    assert _propose(auto, context).match is None  # no lookup draft: no match to learn from
    assert _propose(GammaController("auto"), context).tokens[:3] == [7, 8, 9]


def test_a_proposal_keeps_tokens_probabilities_and_sources_aligned():
    p = Proposal()
    p.add(3, None, "forced")
    p.add(5, None, "lookup")
    assert p.tokens == [3, 5] and p.probs == [None, None] and p.sources == ["forced", "lookup"]
