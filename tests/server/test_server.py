"""The OpenAI-compatible server, end to end: a real `python -m onyx.server` subprocess with the real
default model on a loopback port, driven by the official `openai` client and raw `httpx`.

The soak test runs for $ONYX_SOAK_SECONDS (default 120) with a bounded request count.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import jsonschema
import pytest

from server_process import running_server

openai = pytest.importorskip("openai")

API_KEY = "sk-onyx-test-key"
MAX_TOKENS_LIMIT = 512
MAX_BODY_BYTES = 64 * 1024
SOAK_SECONDS = float(os.environ.get("ONYX_SOAK_SECONDS", "120"))
SOAK_PARTS = 3  # the soak's traffic in parts; the first fills caches and pools
SOAK_MAX_REQUESTS = 600  # split between the parts
SOAK_RSS_GROWTH = 128 << 20  # resident memory each later part may add over the part before
SOAK_RSS_TOTAL = 384 << 20  # resident memory the whole soak may add over its warmed-up start
SOAK_MLX_GROWTH = 16 << 20  # MLX array memory the later parts may add over the first


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("server"), "--api-key", API_KEY,
                        "--max-tokens-limit", str(MAX_TOKENS_LIMIT), "--max-body-bytes", str(MAX_BODY_BYTES),
                        startup_s=180) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server["base"] + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server["base"], timeout=120,
                      headers={"Authorization": f"Bearer {API_KEY}"}) as c:
        yield c


def health(server) -> dict:
    r = httpx.get(server["base"] + "/health", timeout=10)
    assert r.status_code == 200
    return r.json()


def wait_idle(server, timeout: float = 30.0) -> dict:
    """Health once no request is running or queued and no KV sequence is live."""
    deadline = time.time() + timeout
    while True:
        h = health(server)
        req = h["requests"]
        if h["live_sequences"] == 0 and req["active"] == 0 and req["queued"] == 0 and req["in_flight"] == 0:
            return h
        if time.time() > deadline:
            pytest.fail(f"server not idle after {timeout}s: {h}")
        time.sleep(0.2)


def onyx_stats(response) -> dict:
    return response.model_extra["onyx"]


USER = [{"role": "user", "content": "Give me an order number."}]


# -- the happy paths ------------------------------------------------------------------------------

def test_models_list_and_health_are_consistent(client, server):
    ids = [m.id for m in client.models.list().data]
    assert ids[0] == "smollm2" and {"onyx", "default"} <= set(ids)
    assert client.models.retrieve("onyx").id == "onyx"
    h = health(server)
    assert h["status"] == "ok" and h["model"] == "smollm2" and h["models"] == ids
    for key in ("used_blocks", "free_blocks", "live_sequences", "asyncio_tasks"):
        assert isinstance(h[key], int)
    assert {"active", "queued", "served"} <= set(h["requests"])
    assert h["limits"]["max_tokens"] == MAX_TOKENS_LIMIT and h["auth"] is True


def test_chat_regex_fully_matches(client):
    pattern = r"[A-Z]{3}-[0-9]{4}"
    r = client.chat.completions.create(model="onyx", messages=USER, max_tokens=16, temperature=0,
                                       extra_body={"regex": pattern})
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == "onyx"  # the name asked for
    text = r.choices[0].message.content
    assert re.fullmatch(pattern, text), text
    assert r.choices[0].message.role == "assistant" and r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    stats = onyx_stats(r)
    assert stats["valid"] is True and "tokens_per_s" in stats and stats["completion_tokens"] == r.usage.completion_tokens


def test_completions_endpoint_with_regex(client):
    r = client.completions.create(model="smollm2", prompt="The year the Berlin wall fell:", max_tokens=8,
                                  temperature=0, extra_body={"regex": r" ?[0-9]{4}"})
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert re.fullmatch(r" ?[0-9]{4}", r.choices[0].text), r.choices[0].text
    assert r.usage.completion_tokens > 0 and r.model_extra["onyx"]["valid"] is True


def test_response_format_json_schema_validates(client):
    schema = {"type": "object",
              "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    r = client.chat.completions.create(
        model="default", max_tokens=48, temperature=0,
        messages=[{"role": "user", "content": "Describe a person as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema}})
    value = json.loads(r.choices[0].message.content)
    jsonschema.validate(value, schema)
    assert onyx_stats(r)["valid"] is True


def test_response_format_json_object_is_a_dict(client):
    r = client.chat.completions.create(
        model="onyx", max_tokens=32, temperature=0,
        messages=[{"role": "user", "content": "Reply with a JSON object about a cat."}],
        response_format={"type": "json_object"})
    assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_response_format_text_is_unconstrained(client):
    r = client.chat.completions.create(model="onyx", messages=USER, max_tokens=4, temperature=0,
                                       response_format={"type": "text"})
    assert onyx_stats(r)["valid"] is None and r.choices[0].finish_reason in ("stop", "length")


def test_streaming_equals_non_streaming(client):
    kwargs = dict(model="onyx", messages=[{"role": "user", "content": "Tell me about the sea."}],
                  max_tokens=14, temperature=0.9, seed=1234)
    whole = client.chat.completions.create(**kwargs)
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert streamed == whole.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert chunks[-1].model_extra["onyx"]["completion_tokens"] == whole.usage.completion_tokens
    # a different seed samples differently (the seed reaches the sampler)
    other = [client.chat.completions.create(**{**kwargs, "seed": s}).choices[0].message.content
             for s in (1, 2)]
    assert len({whole.choices[0].message.content, *other}) > 1


def test_streaming_regex_raw_sse(http):
    body = {"model": "onyx", "messages": USER, "max_tokens": 12, "temperature": 0.7, "seed": 5,
            "regex": r"[0-9]{3}-[a-z]{2}", "stream": True, "stream_options": {"include_usage": True}}
    with http.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line[len("data: "):]) for line in lines[:-1]]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    assert re.fullmatch(r"[0-9]{3}-[a-z]{2}", text), text
    finals = [e for e in events if e["choices"] and e["choices"][0]["finish_reason"]]
    assert len(finals) == 1 and finals[0]["onyx"]["valid"] is True
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] > 0
    plain = http.post("/v1/chat/completions", json={**body, "stream": False}).json()
    assert plain["choices"][0]["message"]["content"] == text


def test_completions_streaming_equals_non_streaming(client):
    kwargs = dict(model="onyx", prompt="Once upon a time", max_tokens=10, temperature=0.8, seed=99)
    whole = client.completions.create(**kwargs).choices[0].text
    streamed = "".join(c.choices[0].text for c in client.completions.create(stream=True, **kwargs))
    assert streamed == whole


def test_stop_strings(client):
    r = client.completions.create(model="onyx", prompt="1, 2, 3, 4,", max_tokens=20, temperature=0,
                                  stop=[" 7"])
    assert " 7" not in r.choices[0].text and r.choices[0].finish_reason == "stop"


def test_onyx_extensions_pass_through_to_the_engine(http):
    ok = http.post("/v1/chat/completions", json={"messages": USER, "max_tokens": 4, "top_k": 5, "min_p": 0.05})
    assert ok.status_code == 200, ok.text
    # a value only the engine knows is wrong comes back as the engine's 400
    bad = http.post("/v1/chat/completions", json={"messages": USER, "max_tokens": 4, "top_k": -3})
    assert bad.status_code == 400 and "top_k" in bad.json()["error"]["message"]


# -- errors ---------------------------------------------------------------------------------------

def _error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"}
    assert "Traceback" not in err["message"]
    return err


def chat(http, **fields):
    return http.post("/v1/chat/completions", json={"model": "onyx", "messages": USER, "max_tokens": 4, **fields})


def test_bad_regex_is_400_and_says_where(http):
    err = _error(chat(http, regex="[0-9]{4}(ab"), 400)
    assert err["param"] == "regex" and err["code"] == "invalid_regex"
    assert "offset 8" in err["message"] and err["offset"] == 8


def test_unsupported_schema_keyword_is_400_and_named(http):
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "properties": {"a": {"type": "string", "pattern": "(a)\\1"}}}}}
    err = _error(chat(http, response_format=fmt), 400)
    assert "pattern" in err["message"] and err["keyword"] == "pattern"
    assert err["param"] == "response_format" and "#/properties/a" in err["message"]


def test_invalid_schema_is_400(http):
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nonsense"}}}
    assert _error(chat(http, response_format=fmt), 400)["code"] == "invalid_schema"
    assert _error(chat(http, response_format={"type": "json_schema", "json_schema": {"name": "x"}}), 400)


def test_grammar_over_the_size_limit_is_400(http):
    err = _error(chat(http, regex="[ab]*a[ab]{20}"), 400)
    assert err["code"] == "grammar_too_large" and "limit" in err["message"]


def test_regex_with_response_format_is_400(http):
    err = _error(chat(http, regex="[0-9]+", response_format={"type": "json_object"}), 400)
    assert err["param"] == "regex"


@pytest.mark.parametrize("fields, param", [
    ({"temperature": 5}, "temperature"),
    ({"temperature": -0.5}, "temperature"),
    ({"max_tokens": -1}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": MAX_TOKENS_LIMIT + 1}, "max_tokens"),
    ({"max_completion_tokens": 10**6}, "max_completion_tokens"),
    ({"top_p": 0}, "top_p"),
    ({"seed": -1}, "seed"),
    ({"stop": ["", "x"]}, "stop"),
    ({"n": 0}, "n"),
    ({"n": 99}, "n"),
    ({"logprobs": 2}, "logprobs"),
    ({"regexp": "[0-9]+"}, "regexp"),  # a typo is refused, not silently ignored
    ({"speculative": "sideways"}, "speculative"),
    ({"num_draft_tokens": 99}, "num_draft_tokens"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages.0.role"),
])
def test_bad_parameter_values_are_400(http, fields, param):
    err = _error(chat(http, **fields), 400)
    if param is not None:
        assert err["param"] == param, err
    assert err["type"] == "invalid_request_error"


def test_lone_surrogates_are_400_not_500(http):
    # "\udcff" is legal in a JSON string but is not a character: the tokenizer cannot take it.
    body = b'{"model": "onyx", "max_tokens": 4, "messages": [{"role": "user", "content": "hi \\udcff"}]}'
    r = http.post("/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
    err = _error(r, 400)
    assert err["param"] == "messages.0.content" and "not valid Unicode" in err["message"]
    body = b'{"model": "onyx", "max_tokens": 4, "prompt": "\\ud800"}'
    err = _error(http.post("/v1/completions", content=body, headers={"Content-Type": "application/json"}), 400)
    assert err["param"] == "prompt"


def test_completions_bad_values_are_400(http):
    base = {"model": "onyx", "prompt": "x", "max_tokens": 4}
    _error(http.post("/v1/completions", json={**base, "temperature": 3}), 400)
    _error(http.post("/v1/completions", json={**base, "prompt": ["a", "b"]}), 400)
    _error(http.post("/v1/completions", json={**base, "prompt": [10**9]}), 400)


@pytest.mark.parametrize("content", [
    b'{"model": "onyx", "messages": [',  # not JSON
    b'{"model": "onyx"}',  # no messages
    b'{"model": "onyx", "messages": "hi"}',  # wrong type
    b'{"model": "onyx", "messages": [{"content": "hi"}]}',  # no role
    b'{"model": "onyx", "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}',
    b'{"model": "onyx", "messages": [{"role": "user", "content": "hi"}], "jump_forward": "false"}',
    b'[1, 2]',
])
def test_malformed_bodies_are_422(http, content):
    r = http.post("/v1/chat/completions", content=content, headers={"Content-Type": "application/json"})
    err = _error(r, 422)
    assert err["type"] == "invalid_request_error"


def test_unknown_model_is_404(http, client):
    err = _error(chat(http, model="gpt-4o"), 404)
    assert err["code"] == "model_not_found" and "gpt-4o" in err["message"]
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=USER, max_tokens=2)
    _error(http.get("/v1/models/nope"), 404)


def test_body_over_the_limit_is_413(http):
    big = "x" * (MAX_BODY_BYTES + 10)
    _error(chat(http, messages=[{"role": "user", "content": big}]), 413)

    def chunked():  # no Content-Length: the limit is enforced while reading
        yield b'{"model": "onyx", "messages": [{"role": "user", "content": "'
        for _ in range(MAX_BODY_BYTES // 1024 + 2):
            yield b"y" * 1024
        yield b'"}]}'

    r = http.post("/v1/chat/completions", content=chunked(), headers={"Content-Type": "application/json"})
    _error(r, 413)


def test_api_key(server):
    base = server["base"]
    with httpx.Client(base_url=base, timeout=30) as c:
        assert _error(c.get("/v1/models"), 401)["code"] == "invalid_api_key"
        _error(c.get("/v1/models", headers={"Authorization": "Bearer wrong"}), 401)
        _error(c.get("/v1/models", headers={"Authorization": API_KEY}), 401)
        _error(c.post("/v1/chat/completions", json={"messages": USER}), 401)
        assert c.get("/v1/models", headers={"Authorization": f"Bearer {API_KEY}"}).status_code == 200
        assert c.get("/health").status_code == 200  # health stays open
    bad = openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_unknown_endpoint_is_json_404(http):
    _error(http.get("/v1/nothing-here"), 404)


# -- grammar cache --------------------------------------------------------------------------------

def test_repeated_regex_does_not_compile_again(http, server):
    pattern = r"[a-f]{2}-[0-9]{2}-cache-test"
    before = health(server)["grammar_cache"]
    first = chat(http, regex=pattern, max_tokens=12)
    assert first.status_code == 200 and re.fullmatch(pattern, first.json()["choices"][0]["message"]["content"])
    mid = health(server)["grammar_cache"]
    assert mid["compiles"] == before["compiles"] + 1 and mid["size"] == before["size"] + 1
    second = chat(http, regex=pattern, max_tokens=12, stream=True)
    assert second.status_code == 200
    after = health(server)["grammar_cache"]
    assert after["compiles"] == mid["compiles"] and after["size"] == mid["size"]
    assert after["hits"] > mid["hits"]  # found again (by the fit check and by the generation)


# -- concurrency and cancellation ------------------------------------------------------------------

def test_twenty_concurrent_requests_all_answered(client, server):
    base = health(server)["requests"]["served"]

    def one(i: int):
        pattern = rf"{i}-[a-z]{{2}}"
        r = client.chat.completions.create(model="onyx", messages=USER, max_tokens=8, temperature=0.5,
                                           seed=i, extra_body={"regex": pattern})
        return pattern, r.choices[0].message.content

    saw_queue = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            saw_queue.append(health(server)["requests"]["queued"])
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(20) as pool:
            results = list(pool.map(one, range(20)))
    finally:
        stop.set()
        watcher.join()
    for pattern, text in results:
        assert re.fullmatch(pattern, text), (pattern, text)
    assert max(saw_queue) > 1  # they really were queued, and /health answered meanwhile
    h = wait_idle(server)
    assert h["requests"]["served"] >= base + 20


def test_queue_is_fifo(client, server):
    wait_idle(server)
    done: list[int] = []
    lock = threading.Lock()

    def one(i: int):
        client.chat.completions.create(model="onyx", messages=USER, max_tokens=6, temperature=0,
                                       extra_body={"regex": "[0-9]{6}"})
        with lock:
            done.append(i)

    threads = []
    for i in range(5):
        t = threading.Thread(target=one, args=(i,))
        t.start()
        threads.append(t)
        time.sleep(0.15)
    for t in threads:
        t.join()
    assert done == list(range(5))


LONG = r"([a-z]+ ){100}[a-z]+"


def _assert_no_leaked_blocks(h: dict) -> None:
    assert h["live_sequences"] == 0
    # with no live sequence, the only blocks in use are the prefix cache's
    assert h["used_blocks"] == h["prefix_cached_blocks"], h["kv"]


def test_client_disconnect_mid_stream_frees_blocks(server):
    before = wait_idle(server)
    # the regex makes the answer long whatever the model would like (at least 100 words)
    body = {"model": "onyx", "messages": [{"role": "user", "content": "Write a very long story."}],
            "max_tokens": 400, "temperature": 0.8, "seed": 3, "stream": True, "regex": LONG}
    with httpx.Client(base_url=server["base"], timeout=60, headers={"Authorization": f"Bearer {API_KEY}"}) as c:
        with c.stream("POST", "/v1/chat/completions", json=body) as r:
            assert r.status_code == 200
            contents = 0
            for line in r.iter_lines():
                if line.startswith("data: {") and '"content":"' in line and '"content":""' not in line:
                    contents += 1
                if contents >= 3:
                    # (leaving the loop closes the connection: look before)
                    during = health(server)
                    break
            assert contents == 3
            assert during["live_sequences"] == 1 and during["requests"]["active"] == 1, during
    # the connection is closed: the generation stops well before 400 tokens
    after = wait_idle(server, timeout=20)
    _assert_no_leaked_blocks(after)
    assert after["requests"]["cancelled"] == before["requests"]["cancelled"] + 1
    assert after["asyncio_tasks"] <= before["asyncio_tasks"]


def test_client_disconnect_non_streaming_cancels(server):
    before = wait_idle(server)
    body = {"model": "onyx", "messages": [{"role": "user", "content": "Write a very long story."}],
            "max_tokens": 400, "temperature": 0.8, "seed": 4, "regex": LONG}
    t0 = time.time()
    with pytest.raises(httpx.TimeoutException):
        httpx.post(server["base"] + "/v1/chat/completions", json=body, timeout=1.5,
                   headers={"Authorization": f"Bearer {API_KEY}"})
    after = wait_idle(server, timeout=20)
    assert time.time() - t0 < 15
    _assert_no_leaked_blocks(after)
    assert after["requests"]["cancelled"] == before["requests"]["cancelled"] + 1
    assert after["asyncio_tasks"] <= before["asyncio_tasks"]


# -- soak -----------------------------------------------------------------------------------------

SOAK_PROMPTS = [
    [{"role": "user", "content": "Give me an order number."}],
    [{"role": "user", "content": "Reply with a JSON object about a dog."}],
    [{"role": "user", "content": "Say something short."}],
]


def _soak_request(client, http, i: int) -> None:
    kind = i % 5
    messages = SOAK_PROMPTS[i % len(SOAK_PROMPTS)]
    if kind == 0:
        r = client.chat.completions.create(model="onyx", messages=messages, max_tokens=8, temperature=0.7,
                                           seed=i, extra_body={"regex": r"[A-Z]{2}[0-9]{3}"})
        assert re.fullmatch(r"[A-Z]{2}[0-9]{3}", r.choices[0].message.content)
    elif kind == 1:
        r = client.chat.completions.create(model="onyx", messages=messages, max_tokens=16, temperature=0.7,
                                           seed=i, response_format={"type": "json_object"})
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    elif kind == 2:
        text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="onyx", messages=messages, max_tokens=6, temperature=0.7, seed=i, stream=True) if c.choices)
        assert isinstance(text, str)
    elif kind == 3:  # a client that goes away mid-stream
        body = {"model": "onyx", "messages": messages, "max_tokens": 60, "stream": True, "seed": i}
        with http.stream("POST", "/v1/chat/completions", json=body) as r:
            for n, _ in enumerate(r.iter_lines()):
                if n >= 4:
                    break
    else:  # an error path
        assert http.post("/v1/chat/completions", json={"messages": messages, "regex": "(x"}).status_code == 400


def _soak_traffic(client, http, counter, seconds: float) -> int:
    """Mixed requests from `counter`, two clients at a time, for `seconds`; how many ran."""
    deadline = time.time() + seconds
    lock = threading.Lock()
    count = [0]

    def worker():
        while time.time() < deadline:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            _soak_request(client, http, i)
            with lock:
                count[0] += 1

    with ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(worker) for _ in range(2)]:
            f.result()
    return count[0]


def _settled(server) -> dict:
    """Health once idle and the threads that fill KV view arrays in the background have ended."""
    deadline = time.time() + 20
    while True:
        h = wait_idle(server)
        if "onyx-kv-views" not in h["threads_by_name"] or time.time() > deadline:
            return h
        time.sleep(0.2)


@pytest.mark.slow
def test_soak_no_growth(client, server):
    """Mixed traffic (regex, JSON, streams, disconnects, errors; 2 clients at a time) for
    ONYX_SOAK_SECONDS, in three parts. Afterwards no KV blocks, live sequences, asyncio tasks or
    threads remain beyond the baseline, and the later parts added no memory. A leak grows with the
    traffic, so it shows in each later part; a cache or pool first filled (a new batch shape, an
    allocator's arena) lands in one part, so memory must stay flat over one of the later two."""
    from onyx.server.state import PREPARE_WORKERS

    with httpx.Client(base_url=server["base"], timeout=60, headers={"Authorization": f"Bearer {API_KEY}"}) as http:
        with ThreadPoolExecutor(2) as pool:  # every path and prompt once
            list(pool.map(lambda i: _soak_request(client, http, i), range(6)))
        marks = [_settled(server)]
        per_part, counts = SOAK_MAX_REQUESTS // SOAK_PARTS, []
        for part in range(SOAK_PARTS):
            start = 6 + part * per_part
            counts.append(_soak_traffic(client, http, iter(range(start, start + per_part)), SOAK_SECONDS / SOAK_PARTS))
            marks.append(_settled(server))
    base, first, after = marks[0], marks[1], marks[-1]
    assert all(n >= 5 for n in counts), counts
    _assert_no_leaked_blocks(after)
    assert after["used_blocks"] <= base["used_blocks"], (base["kv"], after["kv"])
    assert after["asyncio_tasks"] <= base["asyncio_tasks"]
    assert after["requests"]["failed"] == base["requests"]["failed"]
    # threads: none left by requests; the prepare pool starts its workers on demand, up to its size
    threads, before = dict(after["threads_by_name"]), dict(base["threads_by_name"])
    assert threads.pop("onyx-prepare", 0) <= PREPARE_WORKERS
    before.pop("onyx-prepare", None)
    assert all(n <= before.get(name, 0) for name, n in threads.items()), (base["threads_by_name"], threads)
    # memory: the whole soak within bounds, and no steady growth over the later parts
    rss = [m["rss_bytes"] for m in marks]
    growth = [b - a for a, b in zip(rss[1:], rss[2:])]
    assert min(growth) < SOAK_RSS_GROWTH, ([r >> 20 for r in rss], after["mlx_memory"])
    assert rss[-1] - rss[0] < SOAK_RSS_TOTAL, ([r >> 20 for r in rss], base["mlx_memory"], after["mlx_memory"])
    assert after["mlx_memory"]["active_bytes"] <= first["mlx_memory"]["active_bytes"] + SOAK_MLX_GROWTH, \
        (first["mlx_memory"], after["mlx_memory"])


def test_repair_endpoint(server):
    """POST /v1/repair: the closest text in the language, with the edits; errors as elsewhere."""
    import httpx

    base, headers = server["base"] + "/v1", {"Authorization": f"Bearer {API_KEY}"}
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}},
              "required": ["a", "b"], "additionalProperties": False}
    broken = '{"a":1,"b":"z",}'
    # The default for a schema: json_repair reads the text, Onyx's repair makes that valid.
    r = httpx.post(f"{base}/repair", json={"text": broken, "json_schema": schema}, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["valid_input"] is False and body["pre_parsed"] is True and body["status"] == "optimal"
    assert json.loads(body["text"]) in ({"a": 1, "b": "x"}, {"a": 1, "b": "y"})
    # Any cost given: plain edit distance on the text itself.
    r = httpx.post(f"{base}/repair", json={"text": broken, "json_schema": schema, "insert_cost": 1},
                   headers=headers, timeout=60)
    body = r.json()
    assert body["pre_parsed"] is False and json.loads(body["text"]) in ({"a": 1, "b": "x"}, {"a": 1, "b": "y"})
    assert body["cost"] == len(body["edits"]) == body["lower_bound"]
    # A valid text is left as it is.
    r = httpx.post(f"{base}/repair", json={"text": '{"a":2,"b":"y"}', "json_schema": schema}, headers=headers, timeout=60)
    assert r.json()["pre_parsed"] is False and r.json()["text"] == '{"a":2,"b":"y"}' and r.json()["cost"] == 0
    r = httpx.post(f"{base}/repair", json={"text": "12a4", "regex": "[0-9]{4}"}, headers=headers, timeout=60)
    assert r.status_code == 200 and r.json()["text"] in {"1204", "1214", "1224", "1234", "1244", "1254", "1264", "1274", "1284", "1294"}
    assert r.json()["error_offset"] == 2
    for bad, code in ((({"text": "x", "regex": "[a-"}), 400), (({"text": "x"}), 400),
                      (({"text": "x", "regex": "a", "json_schema": {"type": "string"}}), 400),
                      (({"text": "x", "regex": "a", "max_cost": -1}), 400), (({"regex": "a"}), 422),
                      (({"text": "x", "regex": "a", "delete_cost": 0}), 400)):
        r = httpx.post(f"{base}/repair", json=bad, headers=headers, timeout=60)
        assert r.status_code == code, (bad, r.text)
        assert "message" in r.json()["error"]
