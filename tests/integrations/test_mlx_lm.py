"""onyx.integrations.mlx_lm on the real default model: mlx-lm's own `generate`,
`stream_generate` and `BatchGenerator` with Onyx's processor give valid outputs, and greedy
output equals the engine's in baseline mode token for token (budget-aware masks included)."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import jsonschema
import mlx.core as mx
import numpy as np
import pytest
from mlx_lm import generate, stream_generate
from mlx_lm.generate import BatchGenerator

from onyx.chat.setup import chat_ids
import onyx
from onyx.integrations.mlx_lm import GrammarLogitsProcessor

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
                   "city": {"enum": ["Paris", "Rome", "Oslo"]}},
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def loaded(engine):
    """The default model as `onyx.models.loader.load()` gives it: an mlx-lm model and its
    `TokenizerWrapper` (the engine's own, loaded once per session)."""
    return engine.loaded


def chat(loaded, text: str) -> list[int]:
    return chat_ids(loaded, [{"role": "user", "content": text}])


def without_eos(loaded, ids: list[int]) -> list[int]:
    eos = set(loaded.eos_token_ids)
    return ids[:next((i for i, t in enumerate(ids) if t in eos), len(ids))]


def mlx_lm_greedy(loaded, prompt: list[int], processor, max_tokens: int) -> list[int]:
    ids = [r.token for r in stream_generate(loaded.model, loaded.tokenizer, prompt, max_tokens=max_tokens,
                                            logits_processors=[processor])]
    return without_eos(loaded, ids)


CASES = [
    ("Generate an order ID", {"regex": r"[A-Z]{3}-[0-9]{4}"}, 16),
    ("Give an email address", {"regex": r"[a-z]+@[a-z]+\.com"}, 24),
    ("Describe a person as JSON.", {"json_schema": PERSON}, 48),
    # A budget that binds: greedy takes 20 tokens when it may, and the budget-aware mask
    # shortens it to fit 16 (the shortest valid person is 12 tokens).
    ("Describe a person as JSON.", {"json_schema": PERSON}, 16),
]


@pytest.mark.slow
@pytest.mark.parametrize("text,constraint,max_tokens", CASES)
def test_greedy_generate_equals_the_engine_in_baseline_mode(engine, loaded, text, constraint, max_tokens):
    prompt = chat(loaded, text)
    processor = GrammarLogitsProcessor(loaded.tokenizer, max_tokens=max_tokens, **constraint)
    ours = mlx_lm_greedy(loaded, prompt, processor, max_tokens)
    r = engine.start(prompt, onyx.GenerateOptions.parse(speculative="baseline", temperature=0, max_tokens=max_tokens,
                                                        **constraint))
    assert ours == r.token_ids
    text_out = loaded.tokenizer.decode(ours)
    assert r.valid and processor.matches(text_out), text_out
    if "json_schema" in constraint:
        jsonschema.validate(json.loads(text_out), PERSON)


@pytest.mark.slow
def test_the_budget_is_what_keeps_a_short_output_valid(loaded):
    prompt = chat(loaded, "Describe a person as JSON.")
    aware = GrammarLogitsProcessor(loaded.tokenizer, json_schema=PERSON, max_tokens=16)
    blind = GrammarLogitsProcessor(loaded.tokenizer, json_schema=PERSON)
    text = loaded.tokenizer.decode(mlx_lm_greedy(loaded, prompt, aware, 16))
    cut = loaded.tokenizer.decode(mlx_lm_greedy(loaded, prompt, blind, 16))
    assert aware.matches(text) and not blind.matches(cut), (text, cut)


@pytest.mark.slow
def test_generate_returns_valid_text_and_stops_at_eos(loaded):
    processor = GrammarLogitsProcessor(loaded.tokenizer, regex=r"(yes|no)", max_tokens=8)
    text = generate(loaded.model, loaded.tokenizer, chat(loaded, "Is the sky blue? Answer yes or no."),
                    max_tokens=8, logits_processors=[processor])
    assert text in ("yes", "no")
    assert processor.walk.ended  # the mask left EOS alone once the answer was complete


@pytest.mark.slow
def test_batch_generator_with_four_constraints(loaded):
    constraints = [
        ("Generate an order ID", {"regex": r"[A-Z]{3}-[0-9]{4}"}),
        ("Give an email address", {"regex": r"[a-z]+@[a-z]+\.com"}),
        ("Describe a person as JSON.", {"json_schema": PERSON}),
        ("Is the sky blue? Answer yes or no.", {"regex": r"(yes|no)"}),
    ]
    max_tokens = 48
    processors = [GrammarLogitsProcessor(loaded.tokenizer, max_tokens=max_tokens, **c) for _, c in constraints]
    gen = BatchGenerator(loaded.model, stop_tokens=[[t] for t in loaded.eos_token_ids], max_tokens=max_tokens)
    try:
        uids = gen.insert([chat(loaded, text) for text, _ in constraints], max_tokens=[max_tokens] * 4,
                          logits_processors=[[p] for p in processors])
        tokens: dict[int, list[int]] = {u: [] for u in uids}
        finished: dict[int, str] = {}
        for _ in range(10 * max_tokens):
            if len(finished) == len(uids):
                break
            for response in gen.next()[1]:
                tokens[response.uid].append(response.token)
                if response.finish_reason is not None:
                    finished[response.uid] = response.finish_reason
    finally:
        gen.close()
    assert set(finished) == set(uids)
    texts = [loaded.tokenizer.decode(without_eos(loaded, tokens[u])) for u in uids]
    for (_, constraint), processor, text in zip(constraints, processors, texts):
        assert processor.matches(text), (constraint, text)
        if "regex" in constraint:
            assert re.fullmatch(constraint["regex"], text)
        else:
            jsonschema.validate(json.loads(text), PERSON)
    assert all(finished[u] == "stop" for u in uids)


# --- the processor on its own (the model's tokenizer, synthetic logits) ------------------------


def test_the_first_call_is_the_prompt_and_forbidden_logits_become_minus_infinity(loaded):
    p = GrammarLogitsProcessor(loaded.tokenizer, regex=r"[0-9]{2}")
    width = loaded.vocab_size
    prompt = chat(loaded, "Two digits:")
    out = p(mx.array(prompt), mx.zeros((1, width)))
    allowed = np.isfinite(np.array(out[0]))
    assert allowed.shape == (width,)
    assert set(np.flatnonzero(allowed).tolist()) == set(p.grammar.allowed_token_ids(p.grammar.initial_state).tolist())
    tok = loaded.tokenizer
    seven, letter, digit = (tok.encode(c, add_special_tokens=False) for c in "7a5")
    out = np.array(p(mx.array(prompt + seven), mx.zeros((1, width)))[0])
    assert p.walk.tokens == seven
    assert np.isneginf(out[letter[0]]) and out[digit[0]] == 0.0


def test_a_rewind_gives_the_same_masks_as_a_fresh_processor(loaded):
    tok = loaded.tokenizer
    prompt = chat(loaded, "Email:")
    out_ids = tok.encode("jane@example.com", add_special_tokens=False)
    width = loaded.vocab_size
    p = GrammarLogitsProcessor(tok, regex=r"[a-z]+@[a-z]+\.com")
    for n in range(len(out_ids) + 1):
        p(mx.array(prompt + out_ids[:n]), mx.zeros((1, width)))
    rewound = p(mx.array(prompt + out_ids[:2]), mx.zeros((1, width)))  # e.g. speculative decoding
    fresh = GrammarLogitsProcessor(tok, regex=r"[a-z]+@[a-z]+\.com")
    fresh(mx.array(prompt), mx.zeros((1, width)))
    expected = fresh(mx.array(prompt + out_ids[:2]), mx.zeros((1, width)))
    assert p.state == fresh.state and p.walk.tokens == out_ids[:2]
    assert np.array_equal(np.array(rewound), np.array(expected))
    with pytest.raises(ValueError, match="one sequence"):
        p(mx.array(prompt[:3]), mx.zeros((1, width)))


def test_processors_share_the_compiled_grammar_and_reset(loaded):
    a = GrammarLogitsProcessor(loaded.tokenizer, json_schema=PERSON)
    b = GrammarLogitsProcessor(loaded.tokenizer, json_schema=json.dumps(PERSON))
    assert a.compiled is b.compiled
    a(mx.array([1, 2, 3]), mx.zeros((1, loaded.vocab_size)))
    a.reset()
    a(mx.array([1, 2, 3, 4, 5]), mx.zeros((1, loaded.vocab_size)))  # a new prompt, not a step
    assert a.walk.tokens == []
    with pytest.raises(ValueError):
        GrammarLogitsProcessor(loaded.tokenizer, regex="[0-9]", max_tokens=0)
    with pytest.raises(onyx.InvalidRegexError):
        GrammarLogitsProcessor(loaded.tokenizer, regex="(")


def documented_block(marker: str) -> str:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    return next(b for b in re.findall(r"```python\n(.*?)```", doc, flags=re.S) if marker in b)


@pytest.mark.slow
def test_the_documented_example(loaded):
    """The lines of docs/integrations.md, with the default model in place of the Hugging Face download."""
    code = documented_block("onyx.integrations.mlx_lm")
    download = 'load("mlx-community/Qwen2.5-0.5B-Instruct-4bit")'
    assert download in code
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code.replace(download, "(readme_model, readme_tokenizer)"),
             {"readme_model": loaded.model, "readme_tokenizer": loaded.tokenizer})
    assert re.fullmatch(r"[A-Z]{3}-[0-9]{4}", out.getvalue().strip()), out.getvalue()


@pytest.mark.slow
def test_speculative_generate_with_a_draft_model_gives_the_same_tokens(loaded):
    """mlx-lm's speculative decoding calls the processor for the draft's and the target's
    positions and rewinds after a rejection; the model drafting for itself, greedy, must give
    plain decoding's tokens."""
    prompt = chat(loaded, "Describe a person as JSON.")
    plain = GrammarLogitsProcessor(loaded.tokenizer, json_schema=PERSON, max_tokens=40)
    expected = mlx_lm_greedy(loaded, prompt, plain, 40)
    drafted = GrammarLogitsProcessor(loaded.tokenizer, json_schema=PERSON, max_tokens=40)
    ids = [r.token for r in stream_generate(loaded.model, loaded.tokenizer, prompt, max_tokens=40, draft_model=loaded.model,
                                            num_draft_tokens=3, logits_processors=[drafted])]
    assert without_eos(loaded, ids) == expected
    assert drafted.matches(loaded.tokenizer.decode(expected))
