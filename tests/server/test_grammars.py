"""Grammars through the real server and the official `openai` client: a GBNF `grammar` field (as
llama.cpp's server takes it; llama.cpp's own JSON grammar), its typed 400s, and a recursive
Pydantic model through `parse`, nested as deep as the model writes it."""

from __future__ import annotations

import json
from typing import Optional

import httpx
import pytest
from lark import Lark
from pydantic import BaseModel

from onyx.models import assets
from server_process import running_server

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("grammars"), "--max-batch", "4") as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server["base"] + "/v1", api_key="unused", max_retries=0, timeout=900)


@pytest.fixture(scope="module")
def json_gbnf() -> str:
    return (assets.fetch("llama-cpp-grammars", quiet=True) / "json.gbnf").read_text()


def test_a_gbnf_grammar_field_constrains_chat_and_completions(client, json_gbnf):
    r = client.chat.completions.create(
        model="onyx", messages=[{"role": "user", "content": "Describe a cat as a JSON object."}],
        max_tokens=80, temperature=0.8, seed=4, extra_body={"grammar": json_gbnf})
    text = r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop" and r.onyx["valid"] is True, (text, r.choices[0].finish_reason)
    assert isinstance(json.loads(text), dict)  # llama.cpp's JSON grammar: an object at the root
    c = client.completions.create(model="onyx", prompt="A JSON object about dogs:", max_tokens=60, temperature=0.8,
                                  seed=5, extra_body={"grammar": 'root ::= "[" [0-9]+ ("," [0-9]+)* "]"\n'})
    assert c.choices[0].finish_reason == "stop"
    assert Lark('start: "[" INT ("," INT)* "]"\n%import common.INT').parse(c.choices[0].text)


def test_bad_grammars_are_400s_that_name_the_place(server):
    with httpx.Client(base_url=server["base"], timeout=300) as http:
        body = {"model": "onyx", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        r = http.post("/v1/chat/completions", json={**body, "grammar": 'root ::= "a" item\n'})
        err = r.json()["error"]
        assert r.status_code == 400 and err["code"] == "invalid_grammar" and err["param"] == "grammar"
        assert err["rule"] == "item" and err["line"] == 1 and "never defined" in err["message"]
        r = http.post("/v1/chat/completions", json={**body, "grammar": "root ::= root \"x\" | \"y\"\n"})
        assert r.status_code == 400 and "left recursion" in r.json()["error"]["message"]
        r = http.post("/v1/chat/completions", json={**body, "grammar": 'root ::= "x"\n', "regex": "x"})
        assert r.status_code == 400 and r.json()["error"]["param"] in ("grammar", "regex")
        r = http.post("/v1/chat/completions", json={**body, "grammar": ""})
        assert r.status_code == 400 and r.json()["error"]["param"] == "grammar"
        assert http.get("/health").status_code == 200


class Comment(BaseModel):
    author: str
    text: str
    replies: list["Comment"]


class Thread(BaseModel):
    title: str
    first: Optional[Comment]


def test_a_recursive_pydantic_model_through_parse(client):
    r = client.chat.completions.parse(
        model="onyx", response_format=Thread, max_tokens=300, temperature=0.7, seed=1,
        messages=[{"role": "user", "content": "Write a discussion thread with nested replies as JSON."}])
    parsed = r.choices[0].message.parsed
    assert isinstance(parsed, Thread), r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"
    # The schema nests without a depth limit: the model's own nesting, however deep, is kept.
    depth, node = 0, parsed.first
    while node is not None:
        depth += 1
        node = node.replies[0] if node.replies else None
    assert depth >= 1, r.choices[0].message.content
