"""Every text an Onyx JSON Schema grammar accepts parses as JSON and validates against its schema.

The claim is checked on real schemas: a deterministic sample of JSONSchemaBench (`PER_SET`
schemas of each set, the ones whose file names hash lowest), compiled with Onyx on SmolLM2's
vocabulary, three random walks through each grammar (`bench/schema_walks.py`), each text judged
by Python `jsonschema` with format checking on. The data lives outside the repository
(`bench.corpus.JSONSCHEMABENCH_DIR`); without it those tests are skipped and say why. Compiles
and walks run in a worker process with timeouts (`SchemaWorker`), so a schema the compiler
takes long to refuse costs `COMPILE_TIMEOUT` at most.

The judge and the walkers are tested first on hand-written cases, so the sample test can fail:
an invalid text is caught, and the walks really write what the grammar allows.
"""

from __future__ import annotations

import random

import pytest

from bench import peers
from bench.corpus import JSONSCHEMABENCH_DIR, JSONSCHEMABENCH_SETS, person_schema
from bench.schema_walks import (
    Judge,
    SchemaWorker,
    WalkVocab,
    check_walks,
    load_set,
    matcher_walk,
    onyx_walk,
    parse_strict,
    sample_by_hash,
)

PER_SET = 20
WALKS = 3
COMPILE_TIMEOUT = 5.0
WALK_TIMEOUT = 120.0

needs_data = pytest.mark.skipif(not JSONSCHEMABENCH_DIR.is_dir(),
                                reason=f"JSONSchemaBench is not at {JSONSCHEMABENCH_DIR} (kept outside the repository; "
                                       "set ONYX_JSONSCHEMABENCH)")


@pytest.fixture(scope="module")
def walk_vocab(smollm2) -> WalkVocab:
    return WalkVocab([b"" if smollm2.is_special(i) else smollm2.token_bytes(i) for i in range(smollm2.size)],
                     smollm2.eos_token_ids)


# --------------------------------------------------------------------------------------------
# The judge catches what it must
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, why", [
    (b'{"a":1,"a":2}', "duplicate key"),
    (b"NaN", "NaN is not JSON"),
    (b'{"a":Infinity}', "Infinity is not JSON"),
    (b'"\xff"', "not UTF-8"),
    (b'{"a":1}x', "not JSON"),
])
def test_strict_json_refuses(text, why):
    verdict = Judge({}).check(text)
    assert verdict.status == "invalid" and why in verdict.error


@pytest.mark.parametrize("schema, bad, good", [
    ({"type": "string", "format": "date-time"}, '"2024-13-01T00:00:00Z"', '"2024-12-01T00:00:00Z"'),
    ({"type": "string", "format": "email"}, '"no at sign"', '"a@b.co"'),
    ({"type": "string", "format": "uri"}, '"not a uri"', '"https://example.com/x"'),  # rfc3987
    ({"type": "string", "format": "idn-hostname"}, '"-bad-.com"', '"example.com"'),  # idna
    ({"type": "string", "format": "duration"}, '"P1X"', '"P1D"'),  # isoduration
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "integer"}, "1.5", "1.0"),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}, "1.0", "1"),
    ({"type": "object", "required": ["a"]}, '{"b":1}', '{"a":null}'),
])
def test_judge_validates_with_format_checking(schema, bad, good):
    judge = Judge(schema)
    assert judge.check(bad.encode()).status == "invalid", (schema, bad)
    assert judge.check(good.encode()).status == "valid", (schema, good)


def test_judge_picks_the_draft_as_the_compiler_reads_the_schema():
    assert Judge({"$schema": "http://json-schema.org/draft-04/schema", "type": "string"}).draft == "draft-04"
    assert Judge({"type": "string"}).draft == "2020-12"
    # Draft 4's boolean exclusiveMinimum fails the 2020-12 metaschema: the newest draft that
    # accepts it judges, and 1.0 is no draft-4 integer.
    judge = Judge({"type": "integer", "minimum": 0, "exclusiveMinimum": True})
    assert judge.draft == "draft-04" and judge.how == "newest metaschema that accepts it"
    assert judge.check(b"0").status == "invalid" and judge.check(b"1").status == "valid"
    # Without $schema, the other drafts whose metaschema accepts it are checked too.
    assert {type(v).__name__ for v in Judge({"type": "integer"}).others} >= {"Draft7Validator", "Draft4Validator"}
    # ... from the oldest draft that defines every keyword it uses: `const` is not draft 4's
    # (a property named "const" is not the keyword).
    others = {type(v).__name__ for v in Judge({"oneOf": [{"const": 0}, {"const": 1}]}).others}
    assert "Draft6Validator" in others and "Draft4Validator" not in others
    assert "Draft4Validator" in {type(v).__name__ for v in Judge({"properties": {"const": {}}}).others}


def test_a_schema_without_draft_is_read_as_its_keywords_need(smollm2):
    # Under draft 4's reading `const` is an annotation and these branches overlap everywhere,
    # so reading every draft left nothing (JSONSchemaBench Github_trivial o26951).
    grammar = smollm2.compile_json_schema({"oneOf": [{"const": 0}, {"const": 1}], "type": "number"})
    for text, ok in [("0", True), ("1", True), ("1.0", True), ("2", False), ("-1", False)]:
        assert grammar.validate(text).valid is ok, text


def test_parse_strict_reads_json():
    assert parse_strict('{"a":[1,2.5,"é"]}'.encode()) == {"a": [1, 2.5, "é"]}


# --------------------------------------------------------------------------------------------
# The walkers write what the grammar allows
# --------------------------------------------------------------------------------------------


def test_onyx_walks_end_accepting_within_budget_and_validate(smollm2, walk_vocab):
    schema = person_schema()
    g = smollm2.compile_json_schema(schema)
    judge = Judge(schema)
    for seed in range(5):
        walk = onyx_walk(g, walk_vocab, random.Random(seed), budget=40)
        assert walk.finished and len(walk.tokens) <= 40
        s = g.initial_state
        for t in walk.tokens:
            s = g.advance(s, t)
        assert g.is_accepting(s)
        assert g.validate(walk.text).valid
        assert judge.check(walk.text).status == "valid", walk.text
    # A budget below what the grammar needs is raised to exactly that.
    need = g.min_tokens_to_accept(g.initial_state)
    walk = onyx_walk(g, walk_vocab, random.Random(0), budget=1)
    assert walk.finished and len(walk.tokens) == need


def test_check_walks_counts_an_invalid_text(smollm2, walk_vocab):
    """A grammar looser than its schema: the walks' texts are judged against the stricter
    schema, and the failures are counted and kept."""
    g = smollm2.compile_json_schema({"type": "integer"})
    judge = Judge({"type": "integer", "maximum": -1})  # the grammar writes non-negative ones too
    out = check_walks(lambda rng: onyx_walk(g, walk_vocab, rng, budget=8, p_stop=0.5), judge, 20, seed=1)
    assert out["walks"] == 20 and out["valid"] + out["invalid"] == 20
    assert out["invalid"] > 0 and out["failures"][0]["error"].startswith("at /: maximum -1")


def test_matcher_walk_finishes_through_a_peer_matcher(walk_vocab):
    adapter, _info = peers.open_adapter("onyx", "smollm2")
    schema = person_schema()
    g = adapter.compile("schema", schema)
    judge = Judge(schema)
    for seed in range(3):
        walk = matcher_walk(adapter.matcher(g), walk_vocab, random.Random(seed), budget=30)
        assert walk.finished and g.validate(walk.text).valid
        assert judge.check(walk.text).status == "valid", walk.text


# --------------------------------------------------------------------------------------------
# Real schemas
# --------------------------------------------------------------------------------------------


def test_sample_is_deterministic_and_spread_over_files():
    cases = [(f"f{i}.json", {"i": i}) for i in range(100)]
    a = sample_by_hash(cases, 10, "x")
    assert a == sample_by_hash(list(reversed(cases)), 10, "x") and len(a) == 10
    assert a != cases[:10] and sample_by_hash(cases, 10, "y") != a


@pytest.fixture(scope="module")
def sample_results():
    """(set, file, compile record, walk record or None) for the sample, compiled and walked in
    a worker process."""
    out, sw = [], SchemaWorker("onyx", "smollm2")
    try:
        for set_name in JSONSCHEMABENCH_SETS:
            for i, (file, schema) in enumerate(sample_by_hash(load_set(set_name), PER_SET, "validity")):
                res = sw.compile(schema, COMPILE_TIMEOUT)
                assert res.get("error_class") != "EngineUnavailable", res["error"]
                walks = sw.walk(schema, WALKS, 96, i, WALK_TIMEOUT) if res["ok"] else None
                sw.finish()
                out.append((set_name, file, res, walks))
    finally:
        sw.close()
    return out


@needs_data
@pytest.mark.slow
def test_every_walk_through_a_real_schema_validates(sample_results):
    walked = [(s, f, w) for s, f, _res, w in sample_results if w is not None]
    # Not vacuous: most sets have compiled schemas, and the walks wrote texts.
    assert len({s for s, _f, _w in walked}) >= len(JSONSCHEMABENCH_SETS) // 2, sample_results
    assert sum(w["valid"] for _s, _f, w in walked) >= WALKS * len(walked) // 2
    invalid = [(s, f, x) for s, f, w in walked for x in w["failures"] if x["status"] == "invalid"]
    assert not invalid, f"{sum(w['invalid'] for _s, _f, w in walked)} invalid texts, e.g.\n" + "\n".join(
        f"{s}/{f}: {x['error']}\n    {x['text'][:300]}" for s, f, x in invalid[:6])


@needs_data
@pytest.mark.slow
def test_every_walk_finishes_and_is_judged(sample_results):
    """A walk that breaks (a budget-aware mask that strands it, an advance the mask allowed but
    the grammar refuses) is a bug too; a grammar whose token index is over its size limit is
    not (it compiled, but cannot be used on this vocabulary: said so)."""
    broken = [(s, f, w["walk_error"]) for s, f, _res, w in sample_results if w and w.get("walk_errors")
              and not w.get("build_error", "").startswith("GrammarTooLargeError")]
    assert not broken, broken[:5]
    unjudged = [(s, f, w["failures"]) for s, f, _res, w in sample_results if w and w["unjudged"]]
    assert not unjudged, unjudged[:5]
