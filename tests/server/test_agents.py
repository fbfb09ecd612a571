"""The agents' API end to end: a real server with the real default model (SmolLM2-135M, whose
ChatML template has no tool support, so the Hermes fallback), driven by the official `openai`
client. Strict tool calls over the 22 schemas of `tool_schemas.py` in `required` and named
modes; `auto`; streamed tool-call deltas against the whole answer; a round trip through a tool
result; the client's `parse` helpers; logprobs, logit_bias and the penalties; bad tool input."""

from __future__ import annotations

import json
import math
import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import jsonschema
import pytest
from pydantic import BaseModel

from server_process import running_server
from tool_schemas import TOOLS

openai = pytest.importorskip("openai")

PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
FORMATS = jsonschema.FormatChecker()
WEATHER = [t for t in TOOLS if t["function"]["name"] == "get_weather"]
SOME = [t for t in TOOLS if t["function"]["name"] in ("get_weather", "send_email", "get_time")]
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("agents"), "--max-batch", "8") as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server["base"] + "/v1", api_key="unused", max_retries=0, timeout=900)


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server["base"], timeout=900) as c:
        yield c


def assert_valid_calls(message, allowed: set[str]) -> None:
    assert message.tool_calls, message
    for call in message.tool_calls:
        assert call.type == "function" and call.id.startswith("call_")
        assert call.function.name in allowed
        args = json.loads(call.function.arguments)
        jsonschema.validate(args, PARAMS[call.function.name], format_checker=FORMATS)


def ask_for(tool: dict) -> list[dict]:
    fn = tool["function"]
    return [{"role": "user", "content": f"{fn['description']}, please."}]


def test_required_and_named_calls_over_22_tools_all_validate(client):
    """Each schema once named (next to a second tool, so the choice matters) and once required
    (alone, one call). Few tools per request and one call per answer keep the prompts and the
    answers short on a shared 2-core machine; several calls per answer are tested below."""
    assert len(TOOLS) >= 20

    def named(i):
        tool, other = TOOLS[i], TOOLS[(i + 1) % len(TOOLS)]
        name = tool["function"]["name"]
        r = client.chat.completions.create(model="onyx", messages=ask_for(tool), tools=[other, tool], max_tokens=80,
                                           tool_choice={"type": "function", "function": {"name": name}},
                                           parallel_tool_calls=False, temperature=0.8, seed=7)
        return r, {name}

    def required(i):
        r = client.chat.completions.create(model="onyx", messages=ask_for(TOOLS[i]), tools=[TOOLS[i]], max_tokens=80,
                                           tool_choice="required", parallel_tool_calls=False, temperature=0.8,
                                           seed=11)
        return r, {TOOLS[i]["function"]["name"]}

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(named, range(len(TOOLS)))) + list(pool.map(required, range(len(TOOLS))))
    for r, allowed in answers:
        choice = r.choices[0]
        assert_valid_calls(choice.message, allowed)
        assert r.model_extra["onyx"]["valid"] is True
        # complete calls, even when budget-aware masking closed them at max_tokens
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert all(len(r.choices[0].message.tool_calls) == 1 for r, _ in answers)


def test_auto_is_text_or_valid_calls(client):
    asks = ["What is the weather in Paris?", "Tell me a joke.", "Send an email to bob@example.com saying hi.",
            "What time is it?"]
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda q: client.chat.completions.create(
            model="onyx", messages=[{"role": "user", "content": q}], tools=SOME, tool_choice="auto",
            max_tokens=64, temperature=0.7, seed=3), asks))
    for r in answers:
        m = r.choices[0].message
        if m.tool_calls:
            assert_valid_calls(m, set(PARAMS))
        else:
            assert isinstance(m.content, str) and "<tool_call>" not in m.content


def test_none_never_calls(client):
    r = client.chat.completions.create(model="onyx", messages=ASK_WEATHER, tools=WEATHER, tool_choice="none",
                                       max_tokens=32, temperature=0)
    assert not r.choices[0].message.tool_calls and "<tool_call>" not in r.choices[0].message.content


def test_streamed_tool_call_deltas_reassemble_to_the_whole_call(client):
    kwargs = dict(model="onyx", messages=ASK_WEATHER, tools=SOME, tool_choice="required", max_tokens=64,
                  temperature=0)
    whole = client.chat.completions.create(**kwargs).choices[0]
    calls: dict[int, dict] = {}
    finish = None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        choice = chunk.choices[0] if chunk.choices else None
        if choice is None:
            continue
        finish = choice.finish_reason or finish
        for d in choice.delta.tool_calls or []:
            if d.index not in calls:  # the first delta of a call: index, id and name
                assert d.id and d.function.name and d.type == "function"
                calls[d.index] = {"id": d.id, "name": d.function.name, "arguments": ""}
            else:
                assert d.id is None and not d.function.name
            calls[d.index]["arguments"] += d.function.arguments or ""
    assert finish == whole.finish_reason
    got = [(c["name"], c["arguments"]) for _, c in sorted(calls.items())]
    assert got == [(c.function.name, c.function.arguments) for c in whole.message.tool_calls]
    assert_valid_calls(whole.message, set(PARAMS))


def test_round_trip_call_result_answer(client):
    r = client.chat.completions.create(model="onyx", messages=ASK_WEATHER, tools=WEATHER, tool_choice="required",
                                       parallel_tool_calls=False, max_tokens=48, temperature=0)
    message = r.choices[0].message
    assert_valid_calls(message, {"get_weather"})
    call = message.tool_calls[0]
    messages = ASK_WEATHER + [message.model_dump(exclude_none=True),
                              {"role": "tool", "tool_call_id": call.id, "content": '{"temperature_c": 18, "sky": "clear"}'}]
    final = client.chat.completions.create(model="onyx", messages=messages, tools=WEATHER, max_tokens=40,
                                           temperature=0, tool_choice="none")
    answer = final.choices[0]
    assert answer.finish_reason in ("stop", "length") and not answer.message.tool_calls
    assert answer.message.content.strip()
    # The call and its result reached the prompt: it is longer than the question alone by more
    # than the result's own ~15 tokens.
    alone = client.chat.completions.create(model="onyx", messages=ASK_WEATHER, tools=WEATHER, max_tokens=1,
                                           temperature=0, tool_choice="none")
    assert final.usage.prompt_tokens > alone.usage.prompt_tokens + 20


class City(BaseModel):
    name: str
    population: int


class GetWeather(BaseModel):
    city: str
    unit: str


def test_openai_parse_helpers_work_unchanged(client):
    r = client.chat.completions.parse(model="onyx", messages=[{"role": "user", "content": "A city as JSON."}],
                                      response_format=City, max_tokens=48, temperature=0)
    assert isinstance(r.choices[0].message.parsed, City)
    r = client.chat.completions.parse(model="onyx", messages=ASK_WEATHER, max_tokens=64, temperature=0,
                                      tools=[openai.pydantic_function_tool(GetWeather)], tool_choice="required",
                                      parallel_tool_calls=False)
    call = r.choices[0].message.tool_calls[0]
    assert isinstance(call.function.parsed_arguments, GetWeather)


def test_logprobs_are_finite_and_never_show_a_masked_token(client):
    kwargs = dict(model="onyx", messages=[{"role": "user", "content": "Pick a number."}], max_tokens=8,
                  temperature=0, logprobs=True, top_logprobs=5, extra_body={"regex": "[0-9]{2,6}"})
    r = client.chat.completions.create(**kwargs)
    choice = r.choices[0]
    entries = choice.logprobs.content
    assert "".join(e.token for e in entries) == choice.message.content
    before = ""
    for e in entries:
        assert math.isfinite(e.logprob) and e.logprob <= 0
        assert 1 <= len(e.top_logprobs) <= 5
        values = [a.logprob for a in e.top_logprobs]
        assert all(math.isfinite(v) for v in values) and values == sorted(values, reverse=True)
        assert sum(math.exp(v) for v in values) <= 1 + 1e-4
        assert e.top_logprobs[0].token == e.token  # greedy: the top one is the one drawn
        for a in e.top_logprobs:  # only what the regex allows: digits, or the end once 2 are out
            assert re.fullmatch(r"[0-9]+", a.token) or (a.token == "<|im_end|>" and len(before) >= 2), a.token
        before += e.token
    streamed = [e.token for chunk in client.chat.completions.create(stream=True, **kwargs)
                if chunk.choices and chunk.choices[0].logprobs for e in chunk.choices[0].logprobs.content]
    assert streamed == [e.token for e in entries]


def test_completions_logprobs_shape(http):
    r = http.post("/v1/completions", json={"model": "onyx", "prompt": "1, 2, 3,", "max_tokens": 5,
                                           "temperature": 0, "logprobs": 2}).json()
    lp = r["choices"][0]["logprobs"]
    n = len(lp["tokens"])
    assert n == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) >= 1
    assert "".join(lp["tokens"]) == r["choices"][0]["text"]
    assert all(len(top) <= 2 and all(math.isfinite(v) for v in top.values()) for top in lp["top_logprobs"])
    assert lp["text_offset"] == sorted(lp["text_offset"])


def test_logit_bias_applies_before_the_mask(client, smollm2):
    def answer(**kw):
        r = client.chat.completions.create(model="onyx", messages=[{"role": "user", "content": "Pick a number."}],
                                           max_tokens=4, temperature=0, logprobs=True, **kw)
        return r.choices[0].message.content, r.choices[0].logprobs.content[0].token

    digits = {"regex": "[0-9]{2,6}"}
    text, first = answer(extra_body=digits)
    banned = int(smollm2.find_tokens(first)[0])
    text2, first2 = answer(logit_bias={str(banned): -100}, extra_body=digits)
    assert first2 != first and re.fullmatch("[0-9]{2,6}", text2)
    hello = int(smollm2.find_tokens("Hello")[0])
    # A huge bias on a token the regex forbids cannot get it through the mask...
    text3, _ = answer(logit_bias={str(hello): 100}, extra_body=digits)
    assert re.fullmatch("[0-9]{2,6}", text3)
    # ...while unconstrained it makes that token the first one.
    _, first4 = answer(logit_bias={str(hello): 100})
    assert first4 == "Hello"


def test_frequency_penalty_reduces_repetition(client):
    ask = [{"role": "user", "content": "Write the word cat ten times, separated by spaces."}]

    def most_repeated(**kw) -> int:
        r = client.chat.completions.create(model="onyx", messages=ask, max_tokens=24, temperature=0,
                                           logprobs=True, **kw)
        tokens = [e.token for e in r.choices[0].logprobs.content]
        return max(tokens.count(t) for t in set(tokens))

    assert most_repeated(frequency_penalty=2.0) < most_repeated()


@pytest.mark.parametrize("fields, param", [
    ({"tools": ["get_weather"]}, "tools.0"),
    ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools.0.function.name"),
    ({"tools": WEATHER, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": WEATHER, "tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}}}]}, "tools"),
    ({"tools": WEATHER, "messages": ASK_WEATHER + [{"role": "tool", "content": "18C"}]}, "messages.1.tool_call_id"),
    ({"messages": ASK_WEATHER + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{not json"}}]}]},
     "messages.1.tool_calls.0.function.arguments"),
    ({"messages": ASK_WEATHER + [{"role": "assistant", "content": None}]}, "messages.1.content"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": 99}, "top_logprobs"),
    ({"logit_bias": {"abc": 1}}, "logit_bias"),
    ({"logit_bias": {"5": 1000}}, "logit_bias"),
    ({"logit_bias": {"99999999": 1}}, "logit_bias"),
    ({"presence_penalty": 3}, "presence_penalty"),
    ({"max_reasoning_tokens": 10}, "max_reasoning_tokens"),  # SmolLM2's template has no thinking block
])
def test_bad_tool_and_sampling_input_is_400(http, fields, param):
    body = {"model": "onyx", "messages": ASK_WEATHER, "max_tokens": 4, **fields}
    r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    assert err["type"] == "invalid_request_error"
