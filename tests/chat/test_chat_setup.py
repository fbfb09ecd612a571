"""`Engine.chat` with tools and thinking blocks, on the real default model: calls come back
parsed; messages with calls and results render; with a template whose generation prompt opens a
`<think>` block, the constraint engages after the block closes and a reasoning budget closes it
in time; logit adjustments per row."""

from __future__ import annotations

import json
import re

import jsonschema
import numpy as np
import pytest

import onyx
from onyx.chat.setup import ChatFormat, check_messages
from onyx.chat.template import ChatTemplate
from onyx.decoding.processors import BiasAndPenalties
from onyx.options import LogitAdjustments
from tool_schemas import TOOLS

WEATHER = [t for t in TOOLS if t["function"]["name"] == "get_weather"]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def test_chat_returns_parsed_calls(engine):
    r = engine.chat(ASK, tools=WEATHER, tool_choice={"type": "function", "function": {"name": "get_weather"}},
                    max_tokens=48, temperature=0)
    assert r.valid is True and r.finish_reason == "tool_calls"
    assert len(r.tool_calls) == 1 and r.content == ""
    call = r.tool_calls[0]
    assert call["function"]["name"] == "get_weather" and call["id"].startswith("call_")
    jsonschema.validate(json.loads(call["function"]["arguments"]), WEATHER[0]["function"]["parameters"])
    assert r.message()["content"] is None and r.message()["tool_calls"] == r.tool_calls
    # The streamed deltas carry the same call.
    args = "".join(d["tool_calls"][0]["function"].get("arguments", "")
                   for c in engine.chat(ASK, tools=WEATHER, tool_choice="required", parallel_tool_calls=False,
                                        max_tokens=48, temperature=0, stream=True)
                   for d in c.deltas if "tool_calls" in d)
    assert args == call["function"]["arguments"]


def test_a_conversation_with_calls_and_results_renders(engine):
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    messages = ASK + [{"role": "assistant", "content": None, "tool_calls": [call]},
                      {"role": "tool", "tool_call_id": "call_1", "content": "18C and sunny"}]
    text = engine.chat_format.setup(messages, onyx.GenerateOptions.parse(tools=WEATHER)).prompt
    assert '"name": "get_weather"' in text and "18C and sunny" in text and "<tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n")
    r = engine.chat(messages, tools=WEATHER, max_tokens=8, temperature=0)
    assert r.finish_reason in ("stop", "length", "tool_calls")


def test_messages_are_checked():
    with pytest.raises(onyx.RequestError) as e:
        check_messages([{"role": "tool", "content": "x"}])
    assert e.value.param == "messages.0.tool_call_id"
    with pytest.raises(onyx.RequestError) as e:
        check_messages([{"role": "user", "content": None}])
    assert e.value.param == "messages.0.content"
    out = check_messages([{"role": "assistant", "content": None, "tool_calls": [
        {"function": {"name": "f", "arguments": {"a": 1}}}]}])
    assert out[0]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'


@pytest.fixture
def thinking_engine(engine):
    """The engine with SmolLM2's template changed to open a `<think>` block in the generation
    prompt (as DeepSeek-R1's later templates do); restored afterwards."""
    source = engine.loaded.tokenizer.chat_template
    opened = source.replace("'<|im_start|>assistant\n'", "'<|im_start|>assistant\n<think>\n'")
    assert opened != source
    saved = engine.chat_format
    engine.chat_format = ChatFormat(ChatTemplate(opened), engine.vocab)
    try:
        assert engine.chat_format.thinking.opened_by_prompt
        yield engine
    finally:
        engine.chat_format = saved


def test_the_constraint_engages_after_the_thinking_block(thinking_engine):
    r = thinking_engine.chat([{"role": "user", "content": "Pick a number."}], regex="[0-9]{3}", max_tokens=40,
                             temperature=0.8, seed=5)
    assert r.valid is True
    assert "</think>" in r.text
    assert r.reasoning_content is not None and "</think>" not in r.reasoning_content
    assert re.fullmatch("[0-9]{3}", r.content)


def test_a_reasoning_budget_closes_the_block_in_time(thinking_engine, engine):
    budget = 6
    r = thinking_engine.chat([{"role": "user", "content": "Think hard, then pick a number."}], regex="[0-9]{3}",
                             max_tokens=40, max_reasoning_tokens=budget, temperature=1.0, seed=2)
    assert r.valid is True and re.fullmatch("[0-9]{3}", r.content)
    text, used = "", 0
    for t in r.token_ids:  # tokens up to and including the one that completes "</think>"
        text += engine.vocab.token_bytes(t).decode("utf-8", "replace")
        used += 1
        if "</think>" in text:
            break
    assert used <= budget


def test_bias_and_penalties_add_bias_and_count_penalties_per_row():
    import mlx.core as mx

    adjust = LogitAdjustments.parse({"3": 2.0}, presence_penalty=0.5, frequency_penalty=0.25)
    a = BiasAndPenalties(adjust, width=6, prompt_len=2)
    context = [5, 5, 1, 1, 2]  # prompt [5, 5], then 1, 1, 2 generated
    rows = np.array(a.rows(mx.zeros((3, 6)), context, [2, 4]))
    expect = np.zeros((3, 6), dtype=np.float32)
    expect[:, 3] += 2.0
    counts = [{1: 2, 2: 1}, {1: 2, 2: 2}, {1: 2, 2: 2, 4: 1}]  # row i also counts the first i drafts
    for i, c in enumerate(counts):
        for t, n in c.items():
            expect[i, t] -= 0.5 + 0.25 * n
    np.testing.assert_allclose(rows, expect)


def test_thinking_streams_apart_from_the_answer(thinking_engine):
    chunks = list(thinking_engine.chat([{"role": "user", "content": "Pick a number."}], regex="[0-9]{3}",
                                       max_tokens=40, temperature=0.8, seed=5, stream=True))
    result = chunks[-1].result
    deltas = [d for c in chunks for d in c.deltas]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == result.reasoning_content
    assert "".join(d.get("content", "") for d in deltas) == result.content
    assert re.fullmatch("[0-9]{3}", result.content)


def test_deepseek_r1_template_composes_tools_after_the_opened_block(vocabs):
    """The Qwen2 / DeepSeek-R1-Distill tokenizer and template from the GGUF header (no model):
    the template's own tool format, the thinking block the prompt opens, and one structure for
    both that the grammar core compiles."""
    from conftest import gguf_path
    from test_reasoning import opened_template

    vocab = vocabs["qwen2"]
    template = opened_template(ChatTemplate.from_gguf_metadata(onyx.read_gguf_metadata(str(gguf_path("qwen2-tokenizer")))))
    fmt = ChatFormat(template, vocab)
    setup = fmt.setup(ASK, onyx.GenerateOptions.parse(tools=WEATHER, tool_choice="required", max_tokens=64))
    assert setup.thinking is not None and setup.thinking.opened_by_prompt
    assert setup.plan.native and setup.tool_format is not None
    assert setup.prompt.endswith("<think>\n") and "get_weather" in setup.prompt
    spec = setup.options.constraint
    assert spec.source == "tools" and "</think>" in spec.structure
    g = vocab.compile_structure(json.loads(spec.structure))
    assert not g.is_accepting(g.initial_state)  # a call must follow the block
    parser = setup.output_parser()
    assert parser is not None
    with pytest.raises(onyx.RequestError) as e:
        ChatFormat(ChatTemplate(engine_free_template()), vocab).setup(
            ASK, onyx.GenerateOptions.parse(max_reasoning_tokens=8))
    assert e.value.param == "max_reasoning_tokens"


def engine_free_template() -> str:
    """A ChatML template without a thinking block."""
    return ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
