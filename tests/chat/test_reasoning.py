"""Reasoning models with the DeepSeek-R1-Distill-Qwen tokenizer and template (from the GGUF
header in the test assets): detecting the thinking block, the constraint engaging after it,
the split into reasoning and content, and a reasoning budget that closes the block in time."""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

import onyx
from grammar_walks import finish, ordinary_allowed, text_of
from onyx.chat import reasoning as R
from onyx.grammar import structure as st
from onyx.chat import tools as T
from onyx.options import parse_tool_choice, parse_tools
from onyx.chat.output import OutputParser, parse
from onyx.chat.template import ChatTemplate
from tool_schemas import TOOLS

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}, "confidence": {"enum": ["low", "high"]}},
          "required": ["answer", "confidence"], "additionalProperties": False}
GEN_PROMPT = "{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜>'}}{% endif %}"


@pytest.fixture(scope="module")
def qwen(vocabs):
    from conftest import gguf_path

    meta = onyx.read_gguf_metadata(str(gguf_path("qwen2-tokenizer")))
    return vocabs["qwen2"], ChatTemplate.from_gguf_metadata(meta)


def opened_template(template: ChatTemplate) -> ChatTemplate:
    """The same template with the generation prompt opening the block, as DeepSeek-R1's later
    templates do."""
    assert GEN_PROMPT in template.source
    source = template.source.replace(GEN_PROMPT, GEN_PROMPT.replace("'<｜Assistant｜>'", "'<｜Assistant｜><think>\\n'"))
    return ChatTemplate(source, bos_token=template.bos_token, eos_token=template.eos_token)


def test_detects_the_block_and_whether_the_prompt_opens_it(qwen):
    vocab, template = qwen
    assert vocab.find_tokens("<think>") == [151648] and not vocab.is_special(151648)
    assert vocab.find_tokens("</think>") == [151649] and not vocab.is_special(151649)
    assert R.detect(template) == R.ThinkingFormat("<think>", "</think>", opened_by_prompt=False)
    assert R.detect(opened_template(template)) == R.ThinkingFormat("<think>", "</think>", opened_by_prompt=True)
    toggled = ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}{% if add_generation_prompt %}A:"
                           "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
                           "{% else %}<think>\n{% endif %}{% endif %}")
    assert R.detect(toggled).opened_by_prompt and not R.detect(toggled, enable_thinking=False).opened_by_prompt
    assert R.detect(ChatTemplate("{{ messages[0].content }}")) is None


def walk(g, vocab, rng, steps, prefix_tokens=()) -> tuple[list[int], int]:
    state = g.initial_state
    tokens = list(prefix_tokens)
    for t in tokens:
        state = g.advance(state, t)
    for _ in range(steps):
        allowed = ordinary_allowed(g, vocab, state)
        if len(allowed) == 0:
            break
        t = int(allowed[rng.randrange(len(allowed))])
        state = g.advance(state, t)
        tokens.append(t)
    more, state = finish(g, vocab, state, rng)
    assert g.is_accepting(state)
    return tokens + more, state


@pytest.mark.parametrize("opened", [True, False])
def test_the_schema_engages_after_the_block(qwen, opened):
    vocab, _ = qwen
    fmt = R.ThinkingFormat(opened_by_prompt=opened)
    g = vocab.compile_structure(R.structure(fmt, st.json_schema(SCHEMA), vocab))
    think, close = vocab.find_tokens("<think>")[0], vocab.find_tokens("</think>")[0]
    rng = random.Random(31)
    for i in range(10):
        start = [] if opened or i % 3 == 0 else [think]
        tokens, _ = walk(g, vocab, rng, steps=rng.randrange(0, 25), prefix_tokens=start)
        text = text_of(vocab, tokens).decode("utf-8")
        reasoning, content = R.split(text, fmt)
        jsonschema.validate(json.loads(content), SCHEMA)
        if opened or start:
            assert reasoning is not None and "</think>" not in reasoning
            assert text.count("</think>") == 1 + content.count("</think>")
        if reasoning is None:  # no block: only when the prompt leaves it to the model
            assert not opened and content == text
    # Inside the block, the closing tag is always one token away; before it, no JSON.
    s = g.initial_state if opened else g.advance(g.initial_state, think)
    assert close in g.allowed_token_ids(s)
    assert g.min_tokens_to_accept(s) >= 2


def test_reasoning_then_tool_calls_stream_like_the_whole(qwen):
    vocab, template = qwen
    fmt = R.detect(opened_template(template))
    functions = parse_tools(TOOLS[:6])
    p = T.plan(template, vocab, functions, parse_tool_choice("required", functions))
    g = vocab.compile_structure(R.structure(fmt, p.spec, vocab))
    params = {f.name: f.parameters for f in functions}
    rng = random.Random(8)
    for _ in range(6):
        tokens, _ = walk(g, vocab, rng, steps=rng.randrange(0, 20))
        # Past the thinking, steer into the calls' text quickly.
        text = text_of(vocab, tokens).decode("utf-8")
        ids = iter(range(100))
        whole = parse(text, fmt, p.format, new_id=lambda: f"call_{next(ids)}")
        assert whole.reasoning_content is not None and whole.tool_calls and whole.content == ""
        for c in whole.tool_calls:
            jsonschema.validate(json.loads(c["function"]["arguments"]), params[c["function"]["name"]])
        assert whole.message()["content"] is None and whole.finish_reason == "tool_calls"
        ids = iter(range(100))
        streamed = OutputParser(fmt, p.format, new_id=lambda: f"call_{next(ids)}")
        reasoning, calls = "", {}
        i = 0
        while i <= len(text):
            n = rng.choice([1, 2, 5, 13])
            deltas = streamed.feed(text[i:i + n]) if i < len(text) else streamed.finish()
            i += n if i < len(text) else 1
            for d in deltas:
                reasoning += d.get("reasoning_content", "")
                assert not d.get("content")
                for c in d.get("tool_calls", []):
                    calls.setdefault(c["index"], {"id": c.get("id"), "name": c["function"].get("name"), "arguments": ""})
                    calls[c["index"]]["arguments"] += c["function"]["arguments"]
        assert reasoning == whole.reasoning_content
        assert [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for _, c in sorted(calls.items())] == whole.tool_calls


def test_split_and_stream_agree_on_edge_cases():
    fmt = R.ThinkingFormat()
    cases = {
        "<think>a</thi": ("a</thi", ""),
        "  <think>plan</think>\n\n{\"x\": 1}": ("plan", '{"x": 1}'),
        "no block here": (None, "no block here"),
        "<thin": (None, "<thin"),
    }
    for text, want in cases.items():
        assert R.split(text, fmt) == want, text
        p = R.ReasoningParser(fmt)
        deltas = [d for c in text for d in p.feed(c)] + p.finish()
        assert "".join(d.get("content", "") for d in deltas) == want[1]
        assert "".join(d.get("reasoning_content", "") for d in deltas) == (want[0] or "")
    opened = R.ThinkingFormat(opened_by_prompt=True)
    assert R.split("just thinking, cut off", opened) == ("just thinking, cut off", "")
    assert R.split("x</think>y", opened) == ("x", "y")


@pytest.mark.parametrize("opened", [True, False])
def test_a_reasoning_budget_closes_the_block_in_time(qwen, opened):
    """Random decoding under the request's mask and the budget's: the block always closes
    within `max_tokens` (tags included), and the answer after it is valid."""
    vocab, _ = qwen
    fmt = R.ThinkingFormat(opened_by_prompt=opened)
    g = vocab.compile_structure(R.structure(fmt, st.json_schema(SCHEMA), vocab, require_thinking=True))
    eos = set(vocab.eos_token_ids)
    rng = random.Random(13)
    for max_reasoning in (2, 5, 12):
        budget = R.ReasoningBudget(vocab, fmt, max_reasoning)
        for _ in range(4):
            s, b, used, tokens = g.initial_state, budget.initial_state, 0, []
            while budget.is_open(b):
                words = budget.restrict(np.asarray(g.token_bitmask(s)), b, used)
                ids = [t for t in np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")).tolist()
                       if t < vocab.size and t not in eos]
                t = rng.choice(ids)
                s, b, used = g.advance(s, t), budget.advance(b, t), used + 1
                tokens.append(t)
                assert used <= max_reasoning, text_of(vocab, tokens)
            more, s = finish(g, vocab, s, rng)
            text = text_of(vocab, tokens + more).decode("utf-8")
            reasoning, content = R.split(text, fmt)
            assert reasoning is not None
            jsonschema.validate(json.loads(content), SCHEMA)
    with pytest.raises(ValueError):
        R.ReasoningBudget(vocab, fmt, 0)


def test_reasoning_effort_bounds_the_block_where_there_is_one(qwen, vocabs):
    from onyx.chat.setup import ChatFormat
    from onyx.models.assets import asset_path
    from onyx.options import REASONING_EFFORT, GenerateOptions

    vocab, template = qwen
    ask = [{"role": "user", "content": "Hi"}]
    thinks = ChatFormat(template, vocab)
    for effort, bound in REASONING_EFFORT.items():
        setup = thinks.setup(ask, GenerateOptions.parse(reasoning_effort=effort))
        assert (setup.budget.max_tokens if setup.budget else None) == bound, effort
    # max_reasoning_tokens, when given, is the bound
    setup = thinks.setup(ask, GenerateOptions.parse(reasoning_effort="low", max_reasoning_tokens=9))
    assert setup.budget.max_tokens == 9
    # a template without a thinking block ignores reasoning_effort (max_reasoning_tokens is refused)
    meta = onyx.read_gguf_metadata(str(asset_path("smollm2")))
    plain = ChatFormat(ChatTemplate.from_gguf_metadata(meta), vocabs["smollm2"])
    assert plain.setup(ask, GenerateOptions.parse(reasoning_effort="high")).budget is None
    with pytest.raises(onyx.RequestError) as e:
        plain.setup(ask, GenerateOptions.parse(max_reasoning_tokens=8))
    assert e.value.param == "max_reasoning_tokens"
    with pytest.raises(onyx.RequestError) as e:
        GenerateOptions.parse(reasoning_effort="extreme")
    assert e.value.param == "reasoning_effort"
