"""The server under careless and hostile input: a real server with the real default model, a
small grammar-cache budget and a short body timeout. Every bad value is a 4xx naming its field
(never a 500), an error keeps the connection, a valid request's output always validates whatever
its sampling settings and stop strings, and grammar memory stays within its budget."""

from __future__ import annotations

import http.client as http_client
import json
import re
import socket
import time
from pathlib import Path
from urllib.parse import urlparse

import httpx
import jsonschema
import pytest

from server_process import running_server

GRAMMAR_CACHE_BYTES = 96 << 20
SMALL_CACHE_BYTES = 2 << 20
BODY_TIMEOUT_S = 2
USER = [{"role": "user", "content": "Give me a short answer."}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("reliability"), "--grammar-cache-bytes", str(GRAMMAR_CACHE_BYTES),
                        "--body-timeout-s", str(BODY_TIMEOUT_S), startup_s=180) as s:
        yield s


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server["base"], timeout=120) as c:
        yield c


def raw(http, path: str, body: str) -> httpx.Response:
    return http.post(path, content=body.encode(), headers={"Content-Type": "application/json"})


CHAT = '{"model": "onyx", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}], '
SCHEMA = '{"type": "json_schema", "json_schema": {"name": "x", "schema": %s}}'

# (endpoint, body, the field the 400 must name): lone surrogates anywhere, numbers JSON has not.
BOMBS = [
    ("/v1/chat/completions", CHAT + '"regex": "\\ud800"}', "regex"),
    ("/v1/completions", '{"model": "onyx", "max_tokens": 4, "prompt": "x", "regex": "a\\udfff"}', "regex"),
    ("/v1/repair", '{"text": "\\ud800", "regex": "a"}', "text"),
    ("/v1/repair", '{"text": "a", "regex": "\\ud800"}', "regex"),
    ("/v1/repair", '{"text": "a", "json_schema": "{\\"const\\": \\"\\ud800\\"}"}', "json_schema"),
    ("/v1/chat/completions", CHAT + '"tools": [{"type": "function", "function": {"name": "f", "description": '
                                    '"\\ud800", "parameters": {"type": "object"}}}]}',
     "tools.0.function.description"),
    ("/v1/chat/completions", CHAT + '"response_format": ' + SCHEMA % '{"enum": ["ok", "\\udc00"]}' + '}',
     "response_format.json_schema.schema.enum.1"),
    ("/v1/chat/completions", CHAT + '"response_format": ' + SCHEMA % '{"properties": {"\\ud800": {}}}' + '}',
     "response_format.json_schema.schema.properties"),
    ("/v1/messages", '{"model": "onyx", "max_tokens": 4, "messages": [{"role": "user", "content": "\\ud83d"}]}',
     "messages.0.content"),
    ("/v1/responses", '{"model": "onyx", "input": "\\udead", "max_output_tokens": 4}', "input"),
    ("/v1/chat/completions", CHAT + '"response_format": ' + SCHEMA % '{"type": "number", "maximum": NaN}' + '}',
     "response_format.json_schema.schema.maximum"),
    ("/v1/chat/completions", CHAT + '"response_format": ' + SCHEMA % '{"minimum": -Infinity}' + '}',
     "response_format.json_schema.schema.minimum"),
    ("/v1/chat/completions", CHAT + '"response_format": ' + SCHEMA % '{"const": 1e400}' + '}',
     "response_format.json_schema.schema.const"),
    ("/v1/chat/completions", CHAT + '"temperature": Infinity}', "temperature"),
    ("/v1/chat/completions", CHAT + '"top_p": NaN}', "top_p"),
    ("/v1/repair", '{"text": "a", "regex": "a", "max_cost": 9223372036854775808}', "max_cost"),
    ("/v1/repair", '{"text": "a", "regex": "a", "max_cost": -1}', "max_cost"),
]


@pytest.mark.parametrize("path, body, field", BOMBS, ids=[f"{p}:{f}" for p, _, f in BOMBS])
def test_bad_values_are_400s_naming_the_field(http, path, body, field):
    r = raw(http, path, body)
    assert r.status_code == 400, (r.status_code, r.text)
    text = r.text
    assert field in text, text
    assert "Traceback" not in text


@pytest.mark.parametrize("body", [
    '{"model": "onyx", "max_tokens": 4, "prompt": [[false]]}',
    '{"model": "onyx", "max_tokens": true, "prompt": "x"}',
    '{"model": "onyx", "max_tokens": 4.5, "prompt": "x"}',
    '{"model": "onyx", "max_tokens": 4, "prompt": "x", "seed": true}',
    '{"model": "onyx", "max_tokens": 4, "prompt": "x", "stream": "yes"}',
])
def test_integer_and_boolean_fields_are_strict(http, body):
    r = raw(http, "/v1/completions", body)
    assert r.status_code == 422, r.text


def test_a_phi_exact_refusal_on_a_huge_language_is_a_400(http):
    props = {f"p{i}": {"type": "boolean"} for i in range(300)}
    schema = {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
    r = http.post("/v1/chat/completions", json={"model": "onyx", "max_tokens": 2048, "messages": USER, "phi": "exact",
                                                "max_whitespace": 0, "response_format": {
                                                    "type": "json_schema", "json_schema": {"name": "x", "schema": schema}}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "phi", r.text


def test_an_error_answer_keeps_the_connection(server):
    url = urlparse(server["base"])
    conn = http_client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        for body in ('{"text": "\\ud800", "regex": "a"}', '{"text": "a", "regex": "("}', '{"text": 1}'):
            conn.request("POST", "/v1/repair", body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            assert 400 <= r.status < 500 and (r.getheader("connection") or "").lower() != "close"
            sock = conn.sock
        conn.request("POST", "/v1/repair", body='{"text": "ab", "regex": "a+"}',
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200 and json.loads(r.read())["text"] == "a"
        assert conn.sock is sock  # the same connection all along
    finally:
        conn.close()


def test_a_body_that_never_arrives_is_a_408(server):
    url = urlparse(server["base"])
    with socket.create_connection((url.hostname, url.port), timeout=30) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 500\r\n\r\n{\"model\": ")
        started = time.monotonic()
        answer = s.recv(4096).decode()
        assert answer.startswith("HTTP/1.1 408"), answer
        assert time.monotonic() - started < BODY_TIMEOUT_S + 10


@pytest.mark.parametrize("settings", [
    {"top_p": 5e-324, "temperature": 1.0},
    {"top_p": 1.4e-45, "temperature": 0.7},
    {"temperature": 1e-40},
    {"temperature": 2.0, "top_k": 100000, "min_p": 0.999},
    {"temperature": 5e-324, "top_p": 1e-300},
])
def test_extreme_sampling_settings_keep_the_guarantee(http, settings):
    for stream in (False, True):
        body = {"model": "onyx", "max_tokens": 12, "messages": USER, "regex": "[a-z]{2,5}( [a-z]{2,5})?",
                "seed": 7, "stream": stream, **settings}
        r = http.post("/v1/chat/completions", json=body)
        assert r.status_code == 200, r.text
        if stream:
            events = [json.loads(line[6:]) for line in r.text.splitlines()
                      if line.startswith("data: {")]
            assert not any("error" in e for e in events), r.text
            text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
        else:
            text = r.json()["choices"][0]["message"]["content"]
        assert re.fullmatch("[a-z]{2,5}( [a-z]{2,5})?", text), (settings, text)


@pytest.mark.parametrize("stop", [["}"], ['"'], [","], [":", "{"]])
def test_a_stop_string_under_a_constraint_ends_only_complete_output(http, stop):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "tags": {"type": "array", "items": {"type": "string", "maxLength": 8},
                                                        "maxItems": 3}},
              "required": ["name", "tags"], "additionalProperties": False}
    for fmt in ({"type": "json_object"}, {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}):
        r = http.post("/v1/chat/completions", json={
            "model": "onyx", "max_tokens": 120, "messages": [{"role": "user", "content": "A person as JSON."}],
            "response_format": fmt, "stop": stop, "seed": 3, "temperature": 0.8})
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        if choice["finish_reason"] == "stop":
            value = json.loads(choice["message"]["content"])
            if fmt["type"] == "json_schema":
                jsonschema.validate(value, schema)
            assert r.json()["onyx"]["valid"] is True


@pytest.fixture(scope="module")
def small_cache(tmp_path_factory):
    """A server whose grammar cache holds about two small grammars."""
    with running_server(tmp_path_factory.mktemp("grammar-budget"), "--grammar-cache-bytes", str(SMALL_CACHE_BYTES),
                        startup_s=180) as s, httpx.Client(base_url=s["base"], timeout=120) as http:
        yield http


def test_grammar_memory_stays_within_its_budget(small_cache):
    # A grammar keeps its automaton, the token rows its requests visited and its distances to
    # the end (about 0.5-1.1 MB each here: 600 states, most tokens allowed in a row): each
    # further one pushes out the least recently used, once its request has ended too.
    for n in range(600, 608):
        r = small_cache.post("/v1/chat/completions", json={"model": "onyx", "max_tokens": 8, "messages": USER,
                                                           "regex": "[a-z ]{1,%d}" % n})
        assert r.status_code == 200, r.text
        cache = small_cache.get("/health").json()["grammar_cache"]
        assert cache["max_bytes"] == SMALL_CACHE_BYTES
        assert 0 < cache["bytes"] <= SMALL_CACHE_BYTES, cache
    assert cache["evictions"] >= 3, cache


def test_one_grammar_over_the_budget_is_a_400(small_cache):
    # about 3.4 MB of automaton alone: refused once compiled, and nothing of it kept
    before = small_cache.get("/health").json()["grammar_cache"]
    r = small_cache.post("/v1/chat/completions", json={"model": "onyx", "max_tokens": 8, "messages": USER,
                                                       "regex": "[a-z ]{1,60000}"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "grammar_too_large" and err["param"] == "regex", err
    after = small_cache.get("/health").json()["grammar_cache"]
    assert after["size"] <= before["size"] and after["bytes"] <= SMALL_CACHE_BYTES, (before, after)


def test_a_failed_request_keeps_no_grammar(http, server):
    before = httpx.get(server["base"] + "/health", timeout=10).json()["grammar_cache"]
    r = http.post("/v1/chat/completions", json={"model": "onyx", "max_tokens": 8, "messages": USER,
                                                "regex": "[a-z ]{500}"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "max_tokens_too_small", r.text
    after = httpx.get(server["base"] + "/health", timeout=10).json()["grammar_cache"]
    assert after["compiles"] == before["compiles"] + 1 and after["size"] <= before["size"], (before, after)


def test_schemathesis_finds_no_server_error(tmp_path_factory):
    """Schemathesis over the server's own OpenAPI document (examples, coverage and fuzzing
    phases, bounded), on a server whose max_tokens limit keeps generations short: no 5xx, and
    every status answered is one the document lists. One worker: generating from several
    threads at once can trip CPython 3.11's `ast.parse` inside hypothesis."""
    import shutil
    import subprocess
    import sys

    cli = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert cli, "schemathesis is a test dependency (pyproject's test extra)"
    with running_server(tmp_path_factory.mktemp("schemathesis"), "--max-tokens-limit", "8", startup_s=180) as s:
        run = subprocess.run([cli, "run", s["base"] + "/openapi.json", "--checks",
                              "not_a_server_error,status_code_conformance", "--max-examples", "25", "--seed", "1",
                              "--phases", "examples,coverage,fuzzing", "--workers", "1",
                              "--generation-deterministic"],
                             capture_output=True, text=True, timeout=1200, cwd=tmp_path_factory.mktemp("st-out"))
        summary = run.stdout[-3000:]
        assert run.returncode == 0, summary
        assert re.search(r"\d+ generated, \d+ passed", summary), summary
        assert httpx.get(s["base"] + "/health", timeout=10).json()["requests"]["errors"].get("500", 0) == 0
