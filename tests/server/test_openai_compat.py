"""What clients rely on, end to end (a real server, the real default model, the official `openai`
client): finish reasons that say whether the output is complete, a 400 up front when no valid
answer fits in max_tokens, no call markup in `content`, and the model name the request used."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest
from pydantic import BaseModel

from server_process import running_server
from tool_schemas import TOOLS

openai = pytest.importorskip("openai")

WEATHER = next(t for t in TOOLS if t["function"]["name"] == "get_weather")
TIME = next(t for t in TOOLS if t["function"]["name"] == "get_time")
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather in Paris and in Rome?"}]
POINT = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
         "required": ["x", "y"], "additionalProperties": False}


class Point(BaseModel):
    x: int
    y: int


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("compat"), "--alias", "onyx", "--alias", "local") as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server["base"] + "/v1", api_key="unused", max_retries=0, timeout=600)


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server["base"], timeout=600) as c:
        yield c


def too_small(http, body: dict) -> dict:
    """The 400 of a request whose shortest valid answer cannot fit; returns its error."""
    r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "max_tokens_too_small" and isinstance(err["min_tokens"], int)
    assert str(err["min_tokens"]) in err["message"]
    return err


def test_required_calls_closed_at_max_tokens_say_tool_calls(client, http):
    """Under `required` with parallel calls the budget-aware mask closes the last call in time;
    at budgets from the shortest call up, every answer is complete calls: `tool_calls`, never
    `length`, and never markup as content."""
    base = {"model": "onyx", "messages": ASK, "tools": [WEATHER, TIME], "tool_choice": "required"}
    shortest = too_small(http, {**base, "max_tokens": 1})["min_tokens"]
    assert shortest > 1
    for max_tokens in range(shortest, shortest + 12, 2):
        for seed in (1, 2):
            r = client.chat.completions.create(**base, max_tokens=max_tokens, temperature=1.0, seed=seed)
            choice = r.choices[0]
            assert choice.finish_reason == "tool_calls", (max_tokens, choice)
            assert choice.message.content is None and choice.message.tool_calls
            assert r.usage.completion_tokens <= max_tokens
            for call in choice.message.tool_calls:
                jsonschema.validate(json.loads(call.function.arguments), PARAMS[call.function.name])
            assert r.model_extra["onyx"]["valid"] is True


def test_a_named_call_that_cannot_fit_is_a_400_naming_the_field(http):
    body = {"model": "onyx", "messages": ASK, "tools": [WEATHER],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    err = too_small(http, {**body, "max_completion_tokens": 3})
    assert err["param"] == "max_completion_tokens"
    assert too_small(http, {**body, "max_tokens": 3, "stream": True})["param"] == "max_tokens"
    r = http.post("/v1/chat/completions", json={**body, "max_tokens": err["min_tokens"]})
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "tool_calls"


def test_json_that_closes_at_max_tokens_says_stop(client, http):
    fmt = {"type": "json_schema", "json_schema": {"name": "point", "schema": POINT, "strict": True}}
    base = {"model": "onyx", "messages": [{"role": "user", "content": "A point as JSON."}], "response_format": fmt}
    shortest = too_small(http, {**base, "max_tokens": 2})["min_tokens"]
    for max_tokens in (shortest, shortest + 1, shortest + 3):
        r = client.chat.completions.create(**base, max_tokens=max_tokens, temperature=1.0, seed=4)
        assert r.choices[0].finish_reason == "stop", max_tokens
        jsonschema.validate(json.loads(r.choices[0].message.content), POINT)
    # the client's parse() accepts it (it raises on `length`)
    r = client.chat.completions.parse(model="onyx", messages=base["messages"], max_tokens=shortest,
                                      response_format=Point)
    assert isinstance(r.choices[0].message.parsed, Point)


def test_free_text_cut_at_max_tokens_says_length(client):
    r = client.chat.completions.create(model="onyx", messages=[{"role": "user", "content": "Tell me a long story."}],
                                       max_tokens=4, temperature=0)
    assert r.choices[0].finish_reason == "length"
    r = client.chat.completions.create(model="onyx", messages=[{"role": "user", "content": "Tell me a long story."}],
                                       tools=[WEATHER], tool_choice="auto", max_tokens=4, temperature=0)
    choice = r.choices[0]
    assert choice.finish_reason == "length" and "<tool_call" not in (choice.message.content or "")


def test_streamed_finish_reason_matches_the_whole_answer(client, http):
    body = {"model": "onyx", "messages": ASK, "tools": [WEATHER, TIME], "tool_choice": "required", "temperature": 0}
    shortest = too_small(http, {**body, "max_tokens": 1})["min_tokens"]
    whole = client.chat.completions.create(**body, max_tokens=shortest + 2)
    finish, content = None, ""
    for chunk in client.chat.completions.create(**body, max_tokens=shortest + 2, stream=True):
        if chunk.choices:
            finish = chunk.choices[0].finish_reason or finish
            content += chunk.choices[0].delta.content or ""
    assert finish == whole.choices[0].finish_reason == "tool_calls" and content == ""


def test_the_answer_names_the_model_the_request_used(client, http):
    own = http.get("/health").json()["model"]
    for name in ("onyx", "local", own):
        r = client.chat.completions.create(model=name, messages=ASK, max_tokens=2)
        assert r.model == name
        chunks = list(client.chat.completions.create(model=name, messages=ASK, max_tokens=2, stream=True))
        assert {c.model for c in chunks} == {name}
        assert client.completions.create(model=name, prompt="Hi", max_tokens=2).model == name
    r = http.post("/v1/chat/completions", json={"messages": ASK, "max_tokens": 2})
    assert r.json()["model"] == own
    r = http.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": ASK, "max_tokens": 2})
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"


def test_legacy_functions_come_back_as_function_call(client, http):
    fn = WEATHER["function"]
    r = client.chat.completions.create(model="onyx", messages=ASK, functions=[fn], function_call={"name": fn["name"]},
                                       max_tokens=64, temperature=0)
    choice = r.choices[0]
    assert choice.finish_reason == "function_call" and not choice.message.tool_calls
    call = choice.message.function_call
    assert call.name == "get_weather"
    jsonschema.validate(json.loads(call.arguments), PARAMS["get_weather"])
    # streamed: function_call fragments that add up to the same call
    name, args, finish = None, "", None
    for chunk in client.chat.completions.create(model="onyx", messages=ASK, functions=[fn], max_tokens=64,
                                                function_call={"name": fn["name"]}, temperature=0, stream=True):
        delta = chunk.choices[0].delta
        finish = chunk.choices[0].finish_reason or finish
        if delta.function_call is not None:
            name = delta.function_call.name or name
            args += delta.function_call.arguments or ""
        assert not delta.tool_calls
    assert (name, args, finish) == ("get_weather", call.arguments, "function_call")
    # the call and its result go back in the legacy shapes
    messages = ASK + [{"role": "assistant", "content": None, "function_call": {"name": call.name, "arguments": call.arguments}},
                      {"role": "function", "name": "get_weather", "content": '{"temperature_c": 18}'}]
    answer = client.chat.completions.create(model="onyx", messages=messages, functions=[fn], function_call="none",
                                            max_tokens=8)
    assert answer.choices[0].message.function_call is None and answer.choices[0].message.content
    r = http.post("/v1/chat/completions", json={"model": "onyx", "messages": ASK, "functions": [fn], "tools": [WEATHER]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "functions"


def test_opt_in_fields_are_accepted(client):
    r = client.chat.completions.create(
        model="onyx", messages=ASK, max_tokens=4, reasoning_effort="low", verbosity="low", prompt_cache_key="k",
        safety_identifier="s", store=True, metadata={"a": "b"}, user="u", modalities=["text"],
        web_search_options={}, service_tier="auto")
    assert r.choices[0].message.content is not None
    # allowed_tools restricts the calls to the tools it lists
    r = client.chat.completions.create(model="onyx", messages=ASK, tools=[WEATHER, TIME], max_tokens=48,
                                       tool_choice={"type": "allowed_tools", "allowed_tools": {
                                           "mode": "required", "tools": [{"type": "function", "function": {"name": "get_time"}}]}})
    assert {c.function.name for c in r.choices[0].message.tool_calls} == {"get_time"}


def test_a_prediction_is_a_source_of_drafts(client):
    """A predicted output is drafted from and verified exactly: the answer is the model's own
    (the same as without it, greedily), and its tokens were proposed."""
    text = "The quick brown fox jumps over the lazy dog. " * 3
    ask = [{"role": "user", "content": "Write a sentence."}]
    plain = client.chat.completions.create(model="onyx", messages=ask, max_tokens=24, temperature=0,
                                           extra_body={"speculative": "aware"})
    own = plain.choices[0].message.content
    predicted = client.chat.completions.create(model="onyx", messages=ask, max_tokens=24, temperature=0,
                                               prediction={"type": "content", "content": own + " " + text})
    assert predicted.choices[0].message.content == own
    stats = predicted.model_extra["onyx"]
    assert stats["accepted"] > plain.model_extra["onyx"]["accepted"], stats


@pytest.mark.parametrize("body, param", [
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                                {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]},
     "messages.0.content.1.image_url"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}]},
     "messages.0.content.0.input_audio"),
    ({"messages": ASK, "modalities": ["text", "audio"]}, "modalities"),
    ({"messages": ASK, "audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    ({"messages": ASK, "reasoning_effort": "extreme"}, "reasoning_effort"),
    ({"messages": ASK, "prediction": {"type": "content", "content": 5}}, "prediction"),
    ({"messages": ASK, "frobnicate": True}, "frobnicate"),
])
def test_what_cannot_be_served_is_a_400_naming_the_field(http, body, param):
    r = http.post("/v1/chat/completions", json={"model": "onyx", "max_tokens": 4, **body})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
