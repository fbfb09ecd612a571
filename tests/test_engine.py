"""onyx.Engine on the real default model: answers, constraints, budgets, sampling, streaming,
errors and KV blocks. No mocks: every output comes from SmolLM2-135M-Instruct."""

from __future__ import annotations

import json
import os
import re
import sys
import threading

import jsonschema
import pytest

import onyx
from onyx.options import COMPILE_NICE

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 16}, "age": {"type": "integer"}, "city": {"enum": ["Paris", "Rome", "Oslo"]}},
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_capital_of_france(engine):
    r = engine.chat(ask("What is the capital of France?"), max_tokens=24)
    assert "Paris" in r.text
    assert r.finish_reason == "stop" and r.valid is None
    assert r.token_ids and r.stats["completion_tokens"] == len(r.token_ids)


@pytest.mark.parametrize("pattern", [r"[A-Z]{3}-[0-9]{4}", r"[0-9]{4}", r"[a-z]+@[a-z]+\.com", r"(yes|no)", r"[a-z ]{1,20}\."])
@pytest.mark.parametrize("temperature,seed", [(0.0, None), (0.8, 1), (1.3, 7)])
def test_regex_outputs_fully_match(engine, pattern, temperature, seed):
    r = engine.chat(ask("Answer in the required format."), regex=pattern, max_tokens=24, temperature=temperature, seed=seed, top_p=0.95)
    assert re.fullmatch(pattern, r.text), r.text
    assert r.valid is True


@pytest.mark.parametrize("temperature,seed", [(0.0, None), (0.7, 3), (1.0, 11)])
def test_schema_outputs_validate(engine, temperature, seed):
    r = engine.chat(ask("Describe a person as JSON."), json_schema=PERSON, max_tokens=48, temperature=temperature, seed=seed)
    jsonschema.validate(json.loads(r.text), PERSON)
    assert r.valid is True and r.finish_reason == "stop"


def test_budget_guarantee_at_small_max_tokens(engine):
    grammar = engine.compile(json_schema=PERSON)
    shortest = grammar.min_tokens_to_accept(grammar.initial_state)
    for max_tokens in range(shortest, shortest + 4):
        for seed in (1, 2):
            r = engine.chat(ask("Describe a person as JSON."), json_schema=PERSON, max_tokens=max_tokens, temperature=1.0, seed=seed)
            assert len(r.token_ids) <= max_tokens
            jsonschema.validate(json.loads(r.text), PERSON)
            assert r.valid
    r = engine.chat(ask("Describe a person as JSON."), json_schema=PERSON, max_tokens=shortest - 1)
    assert r.finish_reason == "length" and r.valid is False


def test_mask_comes_before_top_p(engine):
    # The nucleus after "The capital of France is" holds no digit; masking first still works.
    r = engine.generate("The capital of France is", regex=r" [0-9]{2}", temperature=1.0, top_p=0.05, seed=3, max_tokens=8)
    assert re.fullmatch(r" [0-9]{2}", r.text) and r.valid


def test_greedy_is_deterministic_and_sampling_is_seeded(engine):
    a = engine.chat(ask("Name three colors."), max_tokens=20)
    b = engine.chat(ask("Name three colors."), max_tokens=20)
    assert a.token_ids == b.token_ids
    c = engine.chat(ask("Name three colors."), max_tokens=20, temperature=1.0, seed=42)
    d = engine.chat(ask("Name three colors."), max_tokens=20, temperature=1.0, seed=42)
    assert c.token_ids == d.token_ids
    outs = {tuple(engine.chat(ask("Name three colors."), max_tokens=12, temperature=1.2, seed=s).token_ids) for s in range(4)}
    assert len(outs) > 1, "different seeds should give different samples"


def test_streaming_equals_non_streaming(engine):
    for kwargs in ({}, {"regex": r"[A-Za-z ,.!]{1,60}"}, {"json_schema": PERSON}):
        full = engine.chat(ask("Say hello."), max_tokens=30, temperature=0.9, seed=5, **kwargs)
        chunks = list(engine.chat(ask("Say hello."), max_tokens=30, temperature=0.9, seed=5, stream=True, **kwargs))
        assert "".join(c.text for c in chunks) == full.text
        assert chunks[-1].finish_reason == full.finish_reason and chunks[-1].result.token_ids == full.token_ids


def test_stop_strings(engine):
    r = engine.chat(ask("Count from 1 to 10, separated by commas."), max_tokens=40, stop=["5"])
    assert "5" not in r.text and r.finish_reason == "stop"
    streamed = "".join(c.text for c in engine.chat(ask("Count from 1 to 10, separated by commas."), max_tokens=40, stop=["5"], stream=True))
    assert streamed == r.text


def test_bad_arguments_raise_clear_errors(engine):
    with pytest.raises(onyx.RequestError, match="either regex or json_schema"):
        engine.generate("x", regex="a", json_schema={"type": "integer"})
    with pytest.raises(onyx.RequestError, match="max_tokens"):
        engine.generate("x", max_tokens=-1)
    with pytest.raises(onyx.RequestError, match="temperature"):
        engine.generate("x", temperature=3.5)
    with pytest.raises(onyx.RequestError, match="top_p"):
        engine.generate("x", top_p=0)
    with pytest.raises(onyx.RequestError, match="unknown option"):
        engine.generate("x", tempreature=1.0)
    with pytest.raises(onyx.InvalidRegexError):
        engine.generate("x", regex="[a-")
    with pytest.raises(onyx.UnsupportedSchemaError):
        engine.generate("x", json_schema={"type": "string", "pattern": "(a)\\1"})  # a backreference
    with pytest.raises(onyx.RequestError):
        engine.chat([{"role": "user"}])
    with pytest.raises(onyx.ModelError, match="not found"):
        onyx.Engine(model="/no/such/model.gguf")


def test_grammars_are_cached_by_pattern(engine):
    assert engine.compile(regex=r"[0-9]{3}") is engine.compile(regex=r"[0-9]{3}")
    assert engine.compile(json_schema=PERSON) is engine.compile(json_schema=json.dumps(PERSON))


def test_no_block_leaks_after_generate_cancel_cycles(engine):
    pool = engine.runner.pool
    pool.clear_prefix_cache()
    start = pool.num_used_blocks
    for i in range(6):
        stream = engine.chat(ask(f"Write a long poem about the number {i}."), max_tokens=40, stream=True)
        for n, _ in enumerate(stream):
            if n == 2 + i:
                break
        stream.close()  # a client that goes away
        engine.chat(ask("Hi"), max_tokens=3 + i, regex=r"[a-z]+" if i % 2 else None)
    pool.clear_prefix_cache()
    assert pool.num_used_blocks == start
    assert pool.stats()["live_sequences"] == 0


def test_prefix_blocks_are_reused(engine):
    system = {"role": "system", "content": "You are a terse assistant. " * 8}
    engine.chat([system, {"role": "user", "content": "One."}], max_tokens=2)
    r = engine.chat([system, {"role": "user", "content": "Two."}], max_tokens=2)
    assert r.stats["cached_prompt_tokens"] >= 48


@pytest.mark.slow
def test_gemma3_loads_and_answers_under_a_regex():
    gemma = onyx.Engine(model="gemma3-270m")
    r = gemma.generate("The year the first person walked on the moon was", regex=r" [0-9]{4}", max_tokens=8)
    assert re.fullmatch(r" [0-9]{4}", r.text) and r.valid
    r = gemma.generate("Question: Is water wet? Answer (yes or no):", regex=r" (yes|no)", max_tokens=4)
    assert r.text in (" yes", " no")


def test_generations_may_run_on_any_thread(engine):
    """MLX streams are per thread; the engine keeps its KV pool evaluated so a server worker
    thread can run a generation after the main thread did, and the other way round."""
    import threading

    out = {}

    def run(key):
        out[key] = engine.chat(ask("Say hi."), max_tokens=4, regex=r"[a-z ]+").text

    first = engine.chat(ask("Say hi."), max_tokens=4, regex=r"[a-z ]+").text
    for key in ("a", "b"):
        t = threading.Thread(target=run, args=(key,))
        t.start()
        t.join()
    assert out == {"a": first, "b": first}
    assert engine.chat(ask("Say hi."), max_tokens=4, regex=r"[a-z ]+").text == first


def _threads() -> dict[int, tuple[str, int, int]]:
    """This process's threads: id -> (name, nice value, user CPU ticks), from /proc."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(tid)] = (name, int(fields[16]), int(fields[11]))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_grammars_compile_below_the_decoding_priority(engine):
    """The engine lowers compilations to COMPILE_NICE: they run on the core's compile threads at
    that nice value, not on the caller's thread, which keeps its own priority."""
    before = {t: v for t, v in _threads().items() if v[0].startswith("onyx-compile")}
    engine.vocab.compile_json_schema({"type": "string", "maxLength": 3000, "description": str(os.getpid())})
    after = {t: v for t, v in _threads().items() if v[0].startswith("onyx-compile")}
    assert after, "no compile threads: the grammar compiled on the caller's thread"
    assert {nice for _, nice, _ in after.values()} == {COMPILE_NICE}
    worked = sum(ticks for _, _, ticks in after.values()) - sum(ticks for _, _, ticks in before.values())
    assert worked > 0, "the compile threads did not run the compilation"
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == 0
    with pytest.raises(ValueError, match="compile_nice"):
        onyx.Engine(compile_nice=20)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the lowered compile threads are Linux's")
def test_a_held_compilation_waits_until_the_hold_ends(engine):
    """While the decoder holds compilations (its steps), an index build on the compile threads
    stops at its next row and goes on once the hold is released; holds are counted."""
    from onyx._grammar import compiles_running, hold_compiles, release_compiles

    grammar = engine.vocab.compile_regex(r"[a-z]{1,40}-%d" % os.getpid())
    done = threading.Event()

    def build():
        grammar.build_all()
        done.set()

    hold_compiles()
    hold_compiles()
    builder = threading.Thread(target=build)
    try:
        builder.start()
        assert not done.wait(0.4), "the build went on while compilations were held"
        assert compiles_running() == 1
        release_compiles()
        assert not done.wait(0.2), "one release of two ended the hold"
    finally:
        release_compiles()
        release_compiles()  # one too many: does nothing
    assert done.wait(60)
    builder.join()
    assert compiles_running() == 0
