"""The server under many requests at once: a real `python -m onyx.server --max-batch 8` subprocess
with the real default model and a context of CONTEXT tokens (`--context-length`, so that the
prompt that fills it costs seconds, not minutes), raw HTTP from parallel clients.

- n > 1: the choices of one request (forks of its prompt, decoded side by side), whole and
  streamed;
- /health shows the batch: active rows, queued requests, KV blocks used and reserved;
- a mixed burst of 64 requests (constrained and free, streaming and not, some cancelled mid-way,
  one whose prompt nearly fills the context, one invalid): every valid one is answered and valid,
  and afterwards no KV block is left but the prefix cache's.
"""

from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import jsonschema
import pytest

from server_process import running_server

RECORD = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


CONTEXT = 2048  # below the model's 8,192


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("server"), "--max-batch", "8", "--context-length", str(CONTEXT)) as s:
        yield s


def health(server) -> dict:
    return httpx.get(server["base"] + "/health", timeout=30).json()


def wait_idle(server, timeout: float = 120) -> dict:
    deadline = time.time() + timeout
    while True:
        h = health(server)
        if h["live_sequences"] == 0 and h["requests"]["active"] == 0 and h["requests"]["queued"] == 0 \
                and h["requests"]["in_flight"] == 0:
            return h
        if time.time() > deadline:
            pytest.fail(f"server not idle: {h}")
        time.sleep(0.3)


def chat(http: httpx.Client, **body) -> httpx.Response:
    body.setdefault("messages", [{"role": "user", "content": "Give me an order number."}])
    return http.post("/v1/chat/completions", json={"model": "onyx", **body})


def test_n_choices_whole_and_streamed(server):
    with httpx.Client(base_url=server["base"], timeout=600) as http:
        r = chat(http, n=3, max_tokens=8, temperature=1.0, seed=4, regex=r"[A-Z]{2}[0-9]{3}")
        assert r.status_code == 200, r.text
        body = r.json()
        assert [c["index"] for c in body["choices"]] == [0, 1, 2]
        for c in body["choices"]:
            assert re.fullmatch(r"[A-Z]{2}[0-9]{3}", c["message"]["content"])
        assert body["usage"]["completion_tokens"] == sum(s["completion_tokens"] for s in body["onyx"]["samples"])
        texts: dict[int, str] = {}
        finished = set()
        with http.stream("POST", "/v1/chat/completions", json={
                "model": "onyx", "messages": [{"role": "user", "content": "Give me an order number."}], "n": 2,
                "max_tokens": 8, "temperature": 1.0, "seed": 4, "regex": r"[A-Z]{2}[0-9]{3}", "stream": True}) as s:
            for line in s.iter_lines():
                if not line.startswith("data: {"):
                    continue
                for c in json.loads(line[6:])["choices"]:
                    texts[c["index"]] = texts.get(c["index"], "") + (c["delta"].get("content") or "")
                    if c["finish_reason"]:
                        finished.add(c["index"])
        assert finished == {0, 1}
        # sample i uses seed + i: the streamed samples are the whole answer's first two
        assert [texts[0], texts[1]] == [body["choices"][0]["message"]["content"],
                                        body["choices"][1]["message"]["content"]]
    h = wait_idle(server)
    assert h["used_blocks"] == h["prefix_cached_blocks"]


def test_health_shows_the_batch(server):
    h = health(server)
    b = h["batch"]
    assert b["max_batch"] == 8 and h["limits"]["max_batch"] == 8
    for key in ("active_rows", "kv_used_blocks", "kv_reserved_blocks", "kv_max_blocks", "steps"):
        assert isinstance(b[key], int)
    assert isinstance(h["requests"]["queued"], int)


def test_the_server_runs_under_jemalloc_where_it_is_installed(server):
    from onyx.cpu.malloc import fast_allocator_path

    assert health(server)["allocator"] == ("jemalloc" if fast_allocator_path() else "system")


def test_the_served_context_is_the_servers_limit(server):
    assert health(server)["limits"]["context_length"] == CONTEXT
    prompt = [(1000 + 7 * j) % 40000 + 100 for j in range(CONTEXT - 8)]
    with httpx.Client(base_url=server["base"], timeout=600) as http:
        r = http.post("/v1/completions", json={"model": "onyx", "prompt": prompt, "max_tokens": 16})
        assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded", r.text
        assert f"context is {CONTEXT} tokens" in r.json()["error"]["message"]
        r = http.post("/v1/completions", json={"model": "onyx", "prompt": prompt, "max_tokens": 8})
        assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == CONTEXT - 8, r.text


def _burst_request(base: str, i: int, context_tokens: int) -> tuple[str, object]:
    """One request of the burst; returns (kind, what to check)."""
    kind = ["regex", "json", "stream", "cancel_stream", "cancel_whole", "completion_stream", "n2", "free"][i % 8]
    if i == 63:
        kind = "long"
    if i == 62:
        kind = "invalid"
    msgs = [{"role": "user", "content": f"Request {i}: give me an answer."}]
    with httpx.Client(base_url=base, timeout=1800) as http:
        if kind == "regex":
            r = chat(http, messages=msgs, max_tokens=8, temperature=0.7, seed=i, regex=r"[A-Z]{2}[0-9]{3}")
            return kind, (r.status_code, r.json()["choices"][0]["message"]["content"])
        if kind == "json":
            r = chat(http, messages=msgs, max_tokens=40, response_format={
                "type": "json_schema", "json_schema": {"name": "r", "schema": RECORD}})
            return kind, (r.status_code, r.json()["choices"][0]["message"]["content"])
        if kind in ("stream", "cancel_stream", "completion_stream"):
            url = "/v1/completions" if kind == "completion_stream" else "/v1/chat/completions"
            body = {"model": "onyx", "max_tokens": 24 if kind != "cancel_stream" else 200, "stream": True}
            if kind == "completion_stream":
                body.update(prompt=f"The year {i} was", regex=r" [0-9]{4}")
            else:
                body.update(messages=msgs, temperature=0.5, seed=i)
            out, done = [], False
            with http.stream("POST", url, json=body) as s:
                for n, line in enumerate(s.iter_lines()):
                    if kind == "cancel_stream" and n >= 6:
                        return kind, None  # leaving closes the connection mid-stream
                    if line == "data: [DONE]":
                        done = True
                    elif line.startswith("data: {"):
                        obj = json.loads(line[6:])
                        assert "error" not in obj, obj
                        for c in obj["choices"]:
                            out.append(c.get("text") or (c.get("delta") or {}).get("content") or "")
            return kind, (s.status_code, done, "".join(out))
        if kind == "cancel_whole":
            try:  # the client gives up after a second, queued or running
                http.post("/v1/chat/completions", timeout=1.0, json={
                    "model": "onyx", "messages": msgs, "max_tokens": 200, "regex": r"([a-z]+ ){100}[a-z]+"})
            except httpx.TimeoutException:
                pass
            return kind, None
        if kind == "n2":
            r = chat(http, messages=msgs, n=2, max_tokens=8, temperature=0.9, seed=i, regex=r"[a-z]{3,6}")
            return kind, (r.status_code, [c["message"]["content"] for c in r.json()["choices"]])
        if kind == "free":
            r = chat(http, messages=msgs, max_tokens=12, temperature=0)
            return kind, (r.status_code, r.json()["choices"][0]["message"]["content"])
        if kind == "invalid":
            r = chat(http, messages=msgs, regex="(x")
            return kind, (r.status_code, r.json())
        # long: a prompt of token ids that, with max_tokens, fills the context but for 4 tokens
        prompt = [(1000 + 7 * j) % 40000 + 100 for j in range(context_tokens - 16 - 4)]
        r = http.post("/v1/completions", json={"model": "onyx", "prompt": prompt, "max_tokens": 16,
                                                 "regex": r"[a-z ]{1,40}"})
        return kind, (r.status_code, r.json())


@pytest.mark.slow
def test_burst_of_64_mixed_requests(server):
    before = wait_idle(server)
    context = before["limits"]["context_length"]
    widths: list[int] = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            widths.append(health(server)["batch"]["active_rows"])
            time.sleep(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(64) as pool:
            results = list(pool.map(lambda i: _burst_request(server["base"], i, context), range(64)))
    finally:
        stop.set()
        watcher.join()
    kinds = {}
    for kind, got in results:
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "regex":
            assert got[0] == 200 and re.fullmatch(r"[A-Z]{2}[0-9]{3}", got[1]), got
        elif kind == "json":
            assert got[0] == 200
            jsonschema.validate(json.loads(got[1]), RECORD)
        elif kind == "stream":
            assert got[0] == 200 and got[1] and isinstance(got[2], str)
        elif kind == "completion_stream":
            assert got[0] == 200 and got[1] and re.fullmatch(r" [0-9]{4}", got[2]), got
        elif kind == "n2":
            assert got[0] == 200 and len(got[1]) == 2 and all(re.fullmatch(r"[a-z]{3,6}", t) for t in got[1]), got
        elif kind == "free":
            assert got[0] == 200 and got[1]
        elif kind == "invalid":
            assert got[0] == 400 and got[1]["error"]["param"] == "regex"
        elif kind == "long":
            assert got[0] == 200, got
            assert got[1]["usage"]["prompt_tokens"] + 16 <= context
            assert re.fullmatch(r"[a-z ]{1,40}", got[1]["choices"][0]["text"]) or \
                got[1]["choices"][0]["finish_reason"] == "length"
    assert kinds["cancel_stream"] == 8 and kinds["cancel_whole"] == 8 and kinds["long"] == 1
    assert max(widths) >= 4, "the requests were not batched"
    after = wait_idle(server, timeout=300)
    assert after["live_sequences"] == 0 and after["batch"]["kv_reserved_blocks"] == 0
    assert after["used_blocks"] == after["prefix_cached_blocks"], after["kv"]
    assert after["requests"]["cancelled"] >= before["requests"]["cancelled"] + 8
