"""Anthropic's Messages API end to end: a real server (with an API key, as Anthropic's client
sends it in `x-api-key`) and the real default model, driven by the official `anthropic` client
unchanged, and by raw HTTP for the errors. Assertions are on shapes and validity."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest
from pydantic import BaseModel

from server_process import running_server
from tool_schemas import TOOLS

anthropic = pytest.importorskip("anthropic")

API_KEY = "sk-onyx-messages"
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
TOOL = {t["function"]["name"]: {"name": t["function"]["name"], "description": t["function"]["description"],
                                "input_schema": t["function"]["parameters"]} for t in TOOLS}
WEATHER, TIME = TOOL["get_weather"], TOOL["get_time"]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("messages"), "--api-key", API_KEY) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server["base"], api_key=API_KEY, max_retries=0, timeout=600)


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server["base"], timeout=600, headers={"x-api-key": API_KEY}) as c:
        yield c


def test_a_text_message(client):
    r = client.messages.create(model="onyx", max_tokens=16, system="You are terse.", messages=ASK, extra_body={"temperature": 0})
    assert r.id.startswith("msg_") and r.type == "message" and r.role == "assistant" and r.model == "onyx"
    assert [b.type for b in r.content] == ["text"] and r.content[0].text
    assert r.stop_reason in ("end_turn", "max_tokens")
    assert 0 < r.usage.output_tokens <= 16 and r.usage.input_tokens > 0


def test_stop_sequences_say_which_one_stopped(client):
    # Under a constraint a stop sequence ends the text only where the text before it is complete:
    # "1 2 " is (the group is optional), "1 2 3 " is not.
    ask = [{"role": "user", "content": "Count to ten."}]
    r = client.messages.create(model="onyx", max_tokens=32, messages=ask, stop_sequences=["3", "4"],
                               extra_body={"temperature": 0, "regex": "1 2 (3 4 5)?"})
    assert r.stop_reason == "stop_sequence" and r.stop_sequence == "3" and r.content[0].text == "1 2 "
    r = client.messages.create(model="onyx", max_tokens=32, messages=ask, stop_sequences=["4"],
                               extra_body={"temperature": 0, "regex": "1 2 3 4 5"})
    assert r.stop_reason == "end_turn" and r.stop_sequence is None and r.content[0].text == "1 2 3 4 5"


class City(BaseModel):
    name: str
    population: int


def test_structured_output_through_parse(client):
    r = client.messages.parse(model="onyx", max_tokens=48, output_format=City,
                              messages=[{"role": "user", "content": "Describe Paris as JSON."}])
    assert isinstance(r.parsed_output, City) and r.stop_reason == "end_turn"
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    r = client.messages.create(model="onyx", max_tokens=16, messages=ASK,
                               output_config={"format": {"type": "json_schema", "schema": schema}, "effort": "low"})
    jsonschema.validate(json.loads(r.content[0].text), schema)


def test_tools_any_and_named_are_valid_tool_use_blocks(client):
    r = client.messages.create(model="onyx", max_tokens=64, messages=ASK, tools=[WEATHER, TIME],
                               tool_choice={"type": "any"}, extra_body={"temperature": 0.7})
    uses = [b for b in r.content if b.type == "tool_use"]
    assert uses and r.stop_reason == "tool_use"
    for use in uses:
        assert use.id and use.name in ("get_weather", "get_time")
        jsonschema.validate(use.input, PARAMS[use.name])
    r = client.messages.create(model="onyx", max_tokens=64, messages=ASK, tools=[WEATHER, TIME],
                               tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True})
    [use] = r.content
    assert use.type == "tool_use" and use.name == "get_weather"
    jsonschema.validate(use.input, PARAMS["get_weather"])


def test_a_tool_result_round_trip(client):
    first = client.messages.create(model="onyx", max_tokens=64, messages=ASK, tools=[WEATHER],
                                   tool_choice={"type": "tool", "name": "get_weather"})
    [use] = first.content
    follow = ASK + [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                  "content": [{"type": "text", "text": '{"temperature_c": 18}'}]}]}]
    answer = client.messages.create(model="onyx", max_tokens=16, messages=follow, tools=[WEATHER],
                                    tool_choice={"type": "none"})
    assert [b.type for b in answer.content] == ["text"]
    alone = client.messages.create(model="onyx", max_tokens=1, messages=ASK, tools=[WEATHER],
                                   tool_choice={"type": "none"})
    assert answer.usage.input_tokens > alone.usage.input_tokens + 15


def test_streaming_text_and_tool_input(client):
    text = ""
    with client.messages.stream(model="onyx", max_tokens=16, messages=ASK, extra_body={"temperature": 0}) as stream:
        kinds = []
        for event in stream:
            kinds.append(event.type)
        final = stream.get_final_message()
        text = "".join(b.text for b in final.content if b.type == "text")
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_delta" in kinds and "message_delta" in kinds
    whole = client.messages.create(model="onyx", max_tokens=16, messages=ASK, extra_body={"temperature": 0})
    assert text == whole.content[0].text and final.stop_reason == whole.stop_reason
    partial = ""
    with client.messages.stream(model="onyx", max_tokens=64, messages=ASK, tools=[WEATHER], extra_body={"temperature": 0},
                                tool_choice={"type": "tool", "name": "get_weather"}) as stream:
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                partial += event.delta.partial_json
        final = stream.get_final_message()
    [use] = final.content
    assert use.type == "tool_use" and final.stop_reason == "tool_use" and json.loads(partial) == use.input
    jsonschema.validate(use.input, PARAMS["get_weather"])


@pytest.mark.parametrize("body, status, kind, param", [
    ({"messages": ASK, "frobnicate": 1}, 400, "invalid_request_error", "frobnicate"),
    ({"messages": ASK, "model": "claude-sonnet-4"}, 404, "not_found_error", "model"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "https://x"}}]}]},
     400, "invalid_request_error", "messages.0.content.0"),
    ({"messages": ASK, "tools": [{"type": "bash_20250124", "name": "bash"}]}, 400, "invalid_request_error", "tools.0.type"),
    ({"messages": ASK, "tools": [{"name": "f", "input_schema": {"type": "frob"}}]}, 400, "invalid_request_error", "tools"),
    ({"messages": ASK, "tools": [WEATHER], "tool_choice": {"type": "any"}, "max_tokens": 2}, 400,
     "invalid_request_error", "max_tokens"),
    ({"messages": ASK, "thinking": {"type": "enabled", "budget_tokens": 64}}, 400, "invalid_request_error",
     "thinking.budget_tokens"),
    ({"messages": ASK, "temperature": 3}, 400, "invalid_request_error", "temperature"),
    ({"messages": "hi"}, 400, "invalid_request_error", "messages"),
])
def test_errors_are_anthropic_shaped(http, body, status, kind, param):
    r = http.post("/v1/messages", json={"model": "onyx", "max_tokens": 16, **body})
    assert r.status_code == status, r.text
    err = r.json()
    assert err["type"] == "error" and err["error"]["type"] == kind and err["error"]["message"]
    assert err["error"]["param"] == param


def test_the_api_key_is_read_from_x_api_key(server):
    r = httpx.post(server["base"] + "/v1/messages", json={"model": "onyx", "max_tokens": 4, "messages": ASK},
                   headers={"x-api-key": "wrong"}, timeout=60)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"


@pytest.mark.parametrize("body", [
    {}, {"max_tokens": 4}, {"max_tokens": "four", "messages": ASK}, {"max_tokens": 4, "messages": [5]},
    {"max_tokens": 4, "messages": [{"role": "user", "content": [5, None]}]},
    {"max_tokens": 4, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": 1}]}]},
    {"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]},
    {"max_tokens": 4, "messages": ASK, "tools": [{"name": None, "input_schema": {}}]},
    {"max_tokens": 4, "messages": ASK, "tools": "x"}, {"max_tokens": 4, "messages": ASK, "tool_choice": {"type": "tool"}},
    {"max_tokens": 4, "messages": ASK, "system": [{"type": "image"}]},
    {"max_tokens": 4, "messages": ASK, "output_config": {"format": {"type": "json_schema", "schema": 5}}},
    {"max_tokens": 0, "messages": ASK}, {"max_tokens": 4, "messages": ASK, "stop_sequences": [""]},
])
def test_malformed_bodies_are_client_errors(http, body):
    r = http.post("/v1/messages", json={"model": "onyx", **body})
    assert r.status_code in (400, 404), r.text
    assert r.json()["type"] == "error" and r.json()["error"]["message"]
