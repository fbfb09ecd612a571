"""The speculative loop on the real default model: every mode gives baseline's greedy output
token for token, a model drafting for itself is always accepted, a draft with another
vocabulary is refused, stats are reported, and no KV block leaks."""

from __future__ import annotations

import json

import jsonschema
import pytest

import onyx
from onyx.decoding.drafts import ForcedTokens

ORDER = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "customer": {"type": "string", "maxLength": 12},
        "items": {"type": "array", "minItems": 1, "maxItems": 2, "items": {
            "type": "object", "properties": {"sku": {"type": "string", "maxLength": 6}, "qty": {"type": "integer"}},
            "required": ["sku", "qty"], "additionalProperties": False}},
    },
    "required": ["id", "customer", "items"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "Write an order as JSON."}]
CASES = [
    {"json_schema": ORDER},
    {"regex": r"[a-z]+@[a-z]+\.com"},
    {"regex": r"[0-9]{4}"},
    {},
]


@pytest.fixture(scope="module")
def self_draft():
    """The default model drafting for itself."""
    return onyx.Engine(draft_model="smollm2")


@pytest.mark.parametrize("case", range(len(CASES)))
def test_every_mode_matches_baseline_greedy(engine, case):
    kwargs = CASES[case]
    base = engine.chat(ASK, max_tokens=40, speculative="baseline", **kwargs)
    assert base.stats["drafted"] == 0 and base.stats["target_forwards"] >= len(base.token_ids)
    for mode, gamma in (("blind", 4), ("aware", 2), ("aware", 6), ("aware", "auto")):
        r = engine.chat(ASK, max_tokens=40, speculative=mode, num_draft_tokens=gamma, **kwargs)
        assert r.token_ids == base.token_ids, (mode, gamma)
        assert r.finish_reason == base.finish_reason and r.valid == base.valid


def test_jump_forward_and_lookup_save_target_forwards(engine):
    base = engine.chat(ASK, json_schema=ORDER, max_tokens=60, speculative="baseline")
    aware = engine.chat(ASK, json_schema=ORDER, max_tokens=60, speculative="aware", num_draft_tokens=4)
    assert aware.token_ids == base.token_ids
    assert aware.stats["target_forwards"] < 0.8 * base.stats["target_forwards"]
    assert aware.stats["drafted_forced"] > 0 and 0 < aware.stats["acceptance_rate_forced"] <= 1
    assert 0 < aware.stats["acceptance_rate"] <= 1


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


def test_self_draft_is_always_accepted_and_refuses_other_vocabularies(self_draft):
    for kwargs in ({"json_schema": ORDER}, {}):
        base = self_draft.chat(ASK, max_tokens=30, speculative="baseline", **kwargs)
        r = self_draft.chat(ASK, max_tokens=30, speculative="aware", num_draft_tokens=4, jump_forward=False, **kwargs)
        assert r.token_ids == base.token_ids
        assert r.stats["drafted_model"] > 0 and r.stats["acceptance_rate_model"] == 1.0
    with pytest.raises(onyx.ModelError, match="vocabulary"):
        onyx.Engine(draft_model="gemma3-270m")


def test_sampling_with_drafts_stays_valid_and_seeded(self_draft):
    for seed in (1, 2):
        a = self_draft.chat(ASK, json_schema=ORDER, max_tokens=60, temperature=0.9, seed=seed, speculative="aware",
                           num_draft_tokens=4)
        jsonschema.validate(json.loads(a.text), ORDER)
        b = self_draft.chat(ASK, json_schema=ORDER, max_tokens=60, temperature=0.9, seed=seed, speculative="aware",
                           num_draft_tokens=4)
        assert a.token_ids == b.token_ids
        blind = self_draft.chat(ASK, json_schema=ORDER, max_tokens=60, temperature=0.9, seed=seed, speculative="blind",
                               num_draft_tokens=3)
        jsonschema.validate(json.loads(blind.text), ORDER)


def test_no_block_leaks_in_either_pool(self_draft):
    pools = [self_draft.runner.pool, self_draft.draft_runner.pool]
    for p in pools:
        p.clear_prefix_cache()
    start = [p.num_used_blocks for p in pools]
    for i in range(4):
        stream = self_draft.chat(ASK, json_schema=ORDER, max_tokens=40, temperature=0.8, seed=i, stream=True,
                                num_draft_tokens=3)
        for n, _ in enumerate(stream):
            if n == i:
                break
        stream.close()
        self_draft.chat(ASK, max_tokens=10, speculative="blind", temperature=0.5, seed=i, num_draft_tokens=2)
    for p, s in zip(pools, start):
        p.clear_prefix_cache()
        assert p.num_used_blocks == s and p.stats()["live_sequences"] == 0


def test_bad_speculative_options(engine):
    with pytest.raises(onyx.RequestError, match="speculative"):
        engine.chat(ASK, speculative="fast")
    with pytest.raises(onyx.RequestError, match="num_draft_tokens"):
        engine.chat(ASK, num_draft_tokens=-1)
    with pytest.raises(onyx.RequestError, match="phi"):
        engine.chat(ASK, phi="magic", regex="[a-z]+")


def test_adaptive_gamma_prices_drafts():
    from onyx.decoding.gamma import GammaController

    free = GammaController("auto")  # model-free drafts on the CPU
    for _ in range(20):
        free.update(4, 4)
    assert free.next() >= 4  # reliable free drafts: speculate far
    for _ in range(40):
        free.update(4, 0)
    picks = [free.next() for _ in range(32)]
    assert picks.count(0) >= 30 and 1 in picks  # useless drafts: plain decoding, with rare probes
    twin = GammaController("auto", draft_cost=1.0)  # a draft model as big as the target
    for _ in range(20):
        twin.update(4, 4)
    assert [twin.next() for _ in range(40)] == [0] * 40  # never pays, never probes
    small = GammaController("auto", draft_cost=0.07)  # e.g. a 0.5B draft for a 7B target
    for _ in range(20):
        small.update(4, 3)
    assert small.next() >= 2
    assert GammaController("auto", device="gpu").width_cost < GammaController("auto").width_cost
    assert GammaController(3).next() == 3 and GammaController(3).forced_limit() is None
    jf = GammaController("auto")  # forced drafts are priced by their own acceptance
    assert 0 < jf.forced_limit() <= jf.cap == 7
    for _ in range(30):
        jf.update(0, 0, 4, 0)  # the target never takes the forced tokenization
    assert jf.forced_limit() == 0
    jf.update(2, -1, 3, 1)  # a forced draft was rejected: the lookup drafts after it taught nothing
    assert jf.acceptance == 0.6
    # Forced spans fail at their first token (another spelling) or not at all: half the spans
    # missing still pays for whole spans; spans taken only for their first token pay for one.
    whole = GammaController("auto")
    for i in range(40):
        whole.update(0, 0, 4, 4 if i % 2 else 0)
    assert whole.forced_limit() == whole.cap
    head = GammaController("auto")
    for _ in range(40):
        head.update(0, 0, 4, 1)
    assert head.forced_limit() == 1
