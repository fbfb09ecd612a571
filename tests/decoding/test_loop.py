"""The decoding loop on the real default model: every mode gives baseline's greedy output token
for token, a model drafting for itself is always accepted, a draft with another vocabulary is
refused, stats are reported however a generation ends, and no KV block leaks."""

from __future__ import annotations

import json

import jsonschema
import pytest

import onyx

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


@pytest.mark.slow
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


def test_drafting_stats_survive_a_stop_string(engine):
    """A stop string closes the loop before its last event: the drafting counts must still be
    in the stats (they were lost when they were filled after the loop). Under a constraint a
    stop string ends the text only where it is complete: here after the first number."""
    ask, numbers = [{"role": "user", "content": "List three order numbers."}], r"ORD-[0-9]{4}(; ORD-[0-9]{4}){0,3}"
    full = engine.chat(ask, regex=numbers, max_tokens=60, speculative="aware", num_draft_tokens=4)
    assert "; " in full.text
    cut = engine.chat(ask, regex=numbers, max_tokens=60, speculative="aware", num_draft_tokens=4, stop=["; "])
    assert cut.text == full.text[:full.text.index("; ")] and cut.finish_reason == "stop"
    assert cut.stats["drafted"] > 0 and "acceptance_rate" in cut.stats and cut.stats["speculative"] == "aware"
    assert cut.stats["drafted_forced"] > 0
