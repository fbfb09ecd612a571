"""OpenAI's Responses API end to end: a real server with the real default model, driven by the
official `openai` client unchanged (`responses.create`, `responses.stream`, `responses.parse`) and
by raw HTTP for the errors. Assertions are on shapes and validity, never on what the model says."""

from __future__ import annotations

import json
import re

import httpx
import jsonschema
import pytest
from pydantic import BaseModel

from server_process import running_server
from tool_schemas import TOOLS

openai = pytest.importorskip("openai")

PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
# The Responses API's tools are flat: {type, name, description, parameters, strict}.
FLAT = {t["function"]["name"]: {"type": "function", **t["function"]} for t in TOOLS}
WEATHER, TIME = FLAT["get_weather"], FLAT["get_time"]
ORDER_ID = r"[A-Z]{3}-[0-9]{4}"
ORDER_TOOL = {"type": "custom", "name": "lookup_order", "description": "Look an order up by its id",
              "format": {"type": "grammar", "syntax": "regex", "definition": ORDER_ID}}
SUM_TOOL = {"type": "custom", "name": "add", "description": "Add numbers",
            "format": {"type": "grammar", "syntax": "lark",
                       "definition": 'start: NUM ("+" NUM)*\nNUM: /[0-9]{1,3}/'}}


class City(BaseModel):
    name: str
    population: int


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("responses")) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server["base"] + "/v1", api_key="unused", max_retries=0, timeout=600)


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server["base"], timeout=600) as c:
        yield c


def test_create_with_text_input(client):
    r = client.responses.create(model="onyx", input="Say hello.", max_output_tokens=16, temperature=0)
    assert r.id.startswith("resp_") and r.object == "response" and r.model == "onyx"
    assert r.status in ("completed", "incomplete")
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    [message] = r.output
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].type == "output_text" and r.output_text == message.content[0].text
    assert 0 < r.usage.output_tokens <= 16 and r.usage.input_tokens > 0
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens


def test_instructions_and_message_items_reach_the_prompt(client):
    items = [{"role": "developer", "content": "Be kind."},
             {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}]
    plain = client.responses.create(model="onyx", input=items, max_output_tokens=1)
    items = client.responses.create(model="onyx", instructions="You are a terse assistant who answers in French.",
                                    input=items, max_output_tokens=1)
    assert items.usage.input_tokens > plain.usage.input_tokens + 8
    assert items.instructions.startswith("You are a terse")


def test_json_schema_text_format_and_parse(client):
    schema = City.model_json_schema()
    schema["additionalProperties"] = False
    r = client.responses.create(model="onyx", input="Describe Paris as JSON.", max_output_tokens=48,
                                text={"format": {"type": "json_schema", "name": "city", "schema": schema,
                                                 "strict": True}})
    assert r.status == "completed"
    jsonschema.validate(json.loads(r.output_text), schema)
    parsed = client.responses.parse(model="onyx", input="Describe Paris as JSON.", max_output_tokens=48,
                                    text_format=City)
    assert isinstance(parsed.output_parsed, City)
    obj = client.responses.create(model="onyx", input="Any JSON object.", max_output_tokens=32,
                                  text={"format": {"type": "json_object"}})
    if obj.status == "completed":
        assert isinstance(json.loads(obj.output_text), dict)


def test_stream_events_reassemble_to_the_final_response(client):
    # Onyx's own fields ride in extra_body, as on chat: a regex the answer completes in time
    kwargs = dict(model="onyx", input="Count to five.", max_output_tokens=24, temperature=0,
                  extra_body={"regex": "[1-9]( [1-9]){4}"})
    kinds, text = [], ""
    with client.responses.stream(**kwargs) as stream:
        for event in stream:
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                text += event.delta
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert "response.output_item.added" in kinds and "response.output_text.done" in kinds
    assert re.fullmatch("[1-9]( [1-9]){4}", text) and text == final.output_text
    assert final.usage.output_tokens <= 24
    whole = client.responses.create(**kwargs)
    assert whole.output_text == final.output_text
    # cut at max_output_tokens: the stream ends with response.incomplete
    with httpx.stream("POST", str(client.base_url) + "responses", timeout=600,
                      json={"model": "onyx", "input": "Tell me a story.", "max_output_tokens": 3, "stream": True}) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    # the parse helper streams too
    with client.responses.stream(model="onyx", input="Describe Paris as JSON.", max_output_tokens=48,
                                 text_format=City) as stream:
        final = stream.get_final_response()
    assert isinstance(final.output_parsed, City)


def test_function_tools_required_and_a_round_trip(client):
    r = client.responses.create(model="onyx", input="What is the weather in Paris?", tools=[WEATHER, TIME],
                                tool_choice="required", max_output_tokens=64, temperature=0.7)
    calls = [item for item in r.output if item.type == "function_call"]
    assert calls and r.status == "completed"
    for call in calls:
        assert call.call_id.startswith("call_") and call.name in ("get_weather", "get_time")
        jsonschema.validate(json.loads(call.arguments), PARAMS[call.name])
    # the calls and their outputs go back as items
    follow = [{"role": "user", "content": "What is the weather in Paris?"}] + [c.model_dump() for c in calls]
    follow += [{"type": "function_call_output", "call_id": c.call_id, "output": '{"temperature_c": 18}'} for c in calls]
    answer = client.responses.create(model="onyx", input=follow, tools=[WEATHER, TIME], tool_choice="none",
                                     max_output_tokens=24)
    assert [item.type for item in answer.output] == ["message"] and answer.output_text
    alone = client.responses.create(model="onyx", input=follow[:1], tools=[WEATHER, TIME], tool_choice="none",
                                    max_output_tokens=1)
    assert answer.usage.input_tokens > alone.usage.input_tokens + 10 * len(calls)


def test_named_tool_and_streamed_argument_deltas(client):
    kwargs = dict(model="onyx", input="Weather in Rome?", tools=[WEATHER, TIME], max_output_tokens=64,
                  tool_choice={"type": "function", "name": "get_weather"}, temperature=0)
    whole = client.responses.create(**kwargs)
    [call] = whole.output
    assert call.type == "function_call" and call.name == "get_weather"
    args, kinds = "", []
    with client.responses.stream(**kwargs) as stream:
        for event in stream:
            kinds.append(event.type)
            if event.type == "response.function_call_arguments.delta":
                args += event.delta
        final = stream.get_final_response()
    assert "response.function_call_arguments.done" in kinds and "response.output_text.delta" not in kinds
    assert args == final.output[0].arguments == call.arguments
    jsonschema.validate(json.loads(args), PARAMS["get_weather"])


def test_allowed_tools_and_parallel_calls(client):
    r = client.responses.create(model="onyx", input="Weather and time please.", tools=[WEATHER, TIME],
                                tool_choice={"type": "allowed_tools", "mode": "required",
                                             "tools": [{"type": "function", "name": "get_time"}]},
                                parallel_tool_calls=False, max_output_tokens=48)
    calls = [item for item in r.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_time" and r.parallel_tool_calls is False


def test_custom_tools_with_regex_and_lark_grammars(client):
    r = client.responses.create(model="onyx", input="Look up my order.", tools=[ORDER_TOOL],
                                tool_choice={"type": "custom", "name": "lookup_order"}, max_output_tokens=48)
    [call] = r.output
    assert call.type == "custom_tool_call" and call.name == "lookup_order"
    assert re.fullmatch(ORDER_ID, call.input), call.input
    r = client.responses.create(model="onyx", input="Add 2 and 40.", tools=[SUM_TOOL], tool_choice="required",
                                max_output_tokens=48, temperature=0.8)
    [call] = r.output
    assert call.type == "custom_tool_call" and re.fullmatch(r"[0-9]{1,3}(\+[0-9]{1,3})*", call.input), call.input
    pieces = ""
    with client.responses.stream(model="onyx", input="Look up my order.", tools=[ORDER_TOOL], tool_choice="required",
                                 max_output_tokens=48) as stream:
        for event in stream:
            if event.type == "response.custom_tool_call_input.delta":
                pieces += event.delta
        final = stream.get_final_response()
    assert final.output[0].type == "custom_tool_call" and pieces == final.output[0].input
    assert re.fullmatch(ORDER_ID, pieces)


def test_previous_response_id_continues_the_conversation(client, http):
    first = client.responses.create(model="onyx", input="My name is Ada.", max_output_tokens=8)
    alone = client.responses.create(model="onyx", input="What is my name?", max_output_tokens=4)
    second = client.responses.create(model="onyx", input="What is my name?", previous_response_id=first.id,
                                     max_output_tokens=4)
    assert second.previous_response_id == first.id
    assert second.usage.input_tokens > alone.usage.input_tokens + first.usage.output_tokens
    unstored = client.responses.create(model="onyx", input="Hi", store=False, max_output_tokens=2)
    r = http.post("/v1/responses", json={"model": "onyx", "input": "Hi", "previous_response_id": unstored.id})
    assert r.status_code == 400 and r.json()["error"]["param"] == "previous_response_id"


def test_reasoning_effort_and_no_op_fields_are_accepted(client):
    r = client.responses.create(model="onyx", input="Hi", max_output_tokens=2, reasoning={"effort": "low"},
                                metadata={"k": "v"}, user="u1", prompt_cache_key="k", safety_identifier="s",
                                truncation="disabled", store=True, include=["reasoning.encrypted_content"])
    assert r.status in ("completed", "incomplete") and r.metadata == {"k": "v"}


@pytest.mark.parametrize("body, status, param", [
    ({"input": "Hi", "frobnicate": 1}, 400, "frobnicate"),
    ({"input": []}, 400, "input"),
    ({"input": [{"role": "user", "content": [{"type": "input_text", "text": "Look:"},
                                             {"type": "input_image", "image_url": "https://x/y.png"}]}]},
     400, "input.0.content.1"),
    ({"input": [{"type": "item_reference", "id": "x"}]}, 400, "input.0.type"),
    ({"input": "Hi", "tools": [{"type": "web_search"}]}, 400, "tools.0.type"),
    ({"input": "Hi", "tools": [{"type": "function", "name": "bad name!"}]}, 400, "tools.0.name"),
    ({"input": "Hi", "tools": [ORDER_TOOL | {"format": {"type": "grammar", "syntax": "regex", "definition": "("}}]},
     400, "tools.0.format.definition"),
    ({"input": "Hi", "tools": [WEATHER], "tool_choice": "required", "max_output_tokens": 2}, 400, "max_output_tokens"),
    ({"input": "Hi", "text": {"format": {"type": "json_schema", "name": "x"}}}, 400, "text.format.schema"),
    ({"input": "Hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "frob"}}}}, 400, "text.format"),
    ({"input": "Hi", "reasoning": {"effort": "extreme"}}, 400, "reasoning.effort"),
    ({"input": "Hi", "background": True}, 400, "background"),
    ({"input": "Hi", "model": "gpt-5"}, 404, "model"),
    ({"input": "Hi", "temperature": 5}, 400, "temperature"),
])
def test_bad_requests_name_the_responses_field(http, body, status, param):
    r = http.post("/v1/responses", json={"model": "onyx", **body})
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["message"] and err["type"] == "invalid_request_error"


@pytest.mark.parametrize("body", [
    {}, {"input": 5}, {"input": [5]}, {"input": [{"type": "message", "role": "user", "content": [5]}]},
    {"input": [{"type": "function_call", "call_id": "c", "name": None}]},
    {"input": [{"type": "function_call_output", "output": "x"}]},
    {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "not json"}]},
    {"input": "Hi", "tools": [{"type": "function"}]}, {"input": "Hi", "tools": "x"},
    {"input": "Hi", "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": 5}},
    {"input": "Hi", "text": {"format": "json"}}, {"input": "Hi", "reasoning": "high"},
    {"input": "Hi", "max_output_tokens": -1}, {"input": "Hi", "previous_response_id": 5},
])
def test_malformed_bodies_are_client_errors(http, body):
    r = http.post("/v1/responses", json={"model": "onyx", **body})
    assert r.status_code in (400, 422), r.text
    assert r.json()["error"]["message"]
