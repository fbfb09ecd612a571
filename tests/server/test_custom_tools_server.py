"""OpenAI custom tools through the real server (the default model) and the official `openai`
client: a Lark tool's call input parses with `lark`, a regex tool's matches, free text is a
string; custom and function tools together; named and `allowed_tools` choices; the input
streamed; custom calls in the conversation; bad tools as 400s naming the field."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from lark import Lark

from server_process import running_server

openai = pytest.importorskip("openai")

# Recursive, with quotes inside sentences: the call's JSON string holds them escaped.
SUMS = r'''
start: sum
sum: term (" + " term)*
term: NAME | STRING | "(" sum ")"
NAME: /[a-z]{1,6}/
STRING: /"[a-z ]{0,6}"/
'''
FILE_REGEX = r"(add|delete) [a-z_]{1,8}\.py"


def custom(name: str, description: str, fmt: dict | None = None) -> dict:
    tool = {"type": "custom", "custom": {"name": name, "description": description}}
    if fmt is not None:
        tool["custom"]["format"] = fmt
    return tool


def grammar(syntax: str, definition: str) -> dict:
    return {"type": "grammar", "grammar": {"syntax": syntax, "definition": definition}}


CALC = custom("calc", "Adds names and quoted strings.", grammar("lark", SUMS))
FILES = custom("files", "Adds or deletes one Python file.", grammar("regex", FILE_REGEX))
NOTE = custom("note", "Writes a note.")
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}},
                   "required": ["city"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "Use a tool."}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("custom_tools"), "--max-batch", "4") as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server["base"] + "/v1", api_key="unused", max_retries=0, timeout=900)


def one_call(r, kind: str, *, finish: tuple[str, ...] = ("tool_calls",)):
    """The answer's one call, of type `kind`. A call may close on the budget's last token: the
    constraint makes it complete in time (`valid`), and the finish reason is then `length`."""
    choice = r.choices[0]
    assert choice.finish_reason in finish and r.onyx["valid"] is True, choice
    (call,) = choice.message.tool_calls
    assert call.type == kind and call.id.startswith("call_")
    return call


def test_a_lark_custom_tool(client):
    r = client.chat.completions.create(model="onyx", messages=ASK, tools=[CALC], tool_choice="required",
                                       max_tokens=64, temperature=0.9, seed=3)
    call = one_call(r, "custom")
    assert call.custom.name == "calc"
    Lark(SUMS).parse(call.custom.input)  # raises when lark refuses the input
    # Named, among other tools: one call of that tool.
    r = client.chat.completions.create(model="onyx", messages=ASK, tools=[WEATHER, CALC, NOTE],
                                       tool_choice={"type": "custom", "custom": {"name": "calc"}},
                                       max_tokens=64, temperature=0.9, seed=4)
    call = one_call(r, "custom")
    assert call.custom.name == "calc"
    Lark(SUMS).parse(call.custom.input)


def test_a_regex_and_a_free_text_custom_tool(client):
    r = client.chat.completions.create(model="onyx", messages=ASK, tools=[FILES],
                                       tool_choice={"type": "custom", "custom": {"name": "files"}},
                                       max_tokens=48, temperature=0.9, seed=5)
    call = one_call(r, "custom")
    assert call.custom.name == "files" and re.fullmatch(FILE_REGEX, call.custom.input), call.custom.input
    # Free text may run to the budget: the string is closed in time whatever the model writes.
    r = client.chat.completions.create(model="onyx", messages=[{"role": "user", "content": "Note that I left."}],
                                       tools=[NOTE], tool_choice="required", max_tokens=40, seed=6)
    call = one_call(r, "custom", finish=("tool_calls", "length"))
    assert call.custom.name == "note" and isinstance(call.custom.input, str)


def test_function_and_custom_tools_together(client):
    tools = [WEATHER, CALC, FILES]
    kinds = set()
    for seed in range(3):
        r = client.chat.completions.create(model="onyx", messages=ASK, tools=tools, tool_choice="required",
                                           parallel_tool_calls=False, max_tokens=64, temperature=1.0, seed=seed)
        call = one_call(r, r.choices[0].message.tool_calls[0].type)
        kinds.add(call.type)
        if call.type == "function":
            assert call.function.name == "get_weather" and set(json.loads(call.function.arguments)) == {"city"}
        elif call.custom.name == "calc":
            Lark(SUMS).parse(call.custom.input)
        else:
            assert re.fullmatch(FILE_REGEX, call.custom.input)
    r = client.chat.completions.create(model="onyx", messages=ASK, tools=tools, max_tokens=48, seed=1,
                                       tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert one_call(r, "function").function.name == "get_weather"
    # allowed_tools: only those tools may be called, though all are shown.
    r = client.chat.completions.create(model="onyx", messages=ASK, tools=tools, max_tokens=48, seed=2,
                                       tool_choice={"type": "allowed_tools", "allowed_tools": {
                                           "mode": "required", "tools": [{"type": "custom", "custom": {"name": "files"}}]}})
    assert all(c.type == "custom" and c.custom.name == "files" for c in r.choices[0].message.tool_calls)


def test_the_input_streams_as_it_decodes(server, client):
    body = {"model": "onyx", "messages": ASK, "tools": [CALC], "tool_choice": "required", "max_tokens": 64,
            "temperature": 0}
    whole = client.chat.completions.create(**body).choices[0].message.tool_calls[0]
    calls: list[dict] = []
    with httpx.Client(base_url=server["base"], timeout=300) as http:
        with http.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as r:
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                for c in (json.loads(line[6:])["choices"] or [{}])[0].get("delta", {}).get("tool_calls") or []:
                    if c["index"] == len(calls):
                        assert c["type"] == "custom" and c["custom"]["name"] == "calc"
                        calls.append({"id": c["id"], "input": c["custom"]["input"]})
                    else:
                        calls[c["index"]]["input"] += c["custom"]["input"]
    assert [c["input"] for c in calls] == [whole.custom.input]


def test_custom_calls_and_their_results_in_the_conversation(client):
    messages = ASK + [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "custom", "custom": {"name": "calc", "input": 'a + "b c"'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ab c"},
        {"role": "user", "content": "Thanks. Say done."},
    ]
    r = client.chat.completions.create(model="onyx", messages=messages, tools=[CALC], tool_choice="none",
                                       max_tokens=8, seed=1)
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content


@pytest.mark.parametrize("tool, code, param", [
    (custom("c", "", grammar("lark", "start: a\na: \"x\" b\n")), "invalid_grammar",
     "tools.0.custom.format.grammar.definition"),
    (custom("c", "", grammar("regex", "(ab")), "invalid_regex", "tools.0.custom.format.grammar.definition"),
    (custom("c", "", grammar("gbnf", 'root ::= "a"')), "invalid_parameter", "tools.0.custom.format.grammar.syntax"),
    (custom("c", "", {"type": "json"}), "invalid_parameter", "tools.0.custom.format.type"),
    ({"type": "custom", "custom": {"name": "has space"}}, "invalid_parameter", "tools.0.custom.name"),
])
def test_bad_custom_tools_are_400s_naming_the_field(server, tool, code, param):
    with httpx.Client(base_url=server["base"], timeout=300) as http:
        body = {"model": "onyx", "messages": ASK, "max_tokens": 4, "tools": [tool], "tool_choice": "required"}
        r = http.post("/v1/chat/completions", json=body)
        err = r.json()["error"]
        assert r.status_code == 400 and err["code"] == code and err["param"] == param, err
        if code == "invalid_grammar":
            assert err["rule"] == "b" and err["line"] == 2
        r = http.post("/v1/chat/completions", json={**body, "tools": [WEATHER], "tool_choice": {
            "type": "custom", "custom": {"name": "get_weather"}}})
        assert r.status_code == 400 and r.json()["error"]["param"] == "tool_choice"
