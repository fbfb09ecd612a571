"""The OpenAI-compatible HTTP server: `create_app(engine)` returns a FastAPI app.

    POST /v1/chat/completions   POST /v1/completions   GET /v1/models   GET /health

How a request flows
-------------------
1. Middleware: the API key (when one is set; /v1/* only) and the body-size limit (413).
2. The endpoint checks the values it owns (max_tokens bounds, temperature range, model name,
   regex vs response_format, ...) and turns the body into engine options.
3. *Prepare*, in a small thread pool: `engine.chat(..., stream=True)` / `engine.generate(...)`
   validates the options and compiles the grammar (cached by pattern in the engine), and returns
   a generator that has not started. Bad requests fail here, before queueing, as 400s.
4. *Generate*: the generator joins a FIFO queue served by one worker thread (the engine runs one
   generation at a time anyway). The worker drives it and forwards each chunk to the request's
   asyncio queue with `call_soon_threadsafe`; the event loop never blocks on the model.
5. The endpoint answers from that queue: one JSON body, or SSE chunks. Streaming and
   non-streaming requests take the same path, so their text is the same for the same seed.

Cancellation: each request has a `threading.Event` passed to the engine as `cancel` (the decode
loop checks it before every token). It is set when the client disconnects (for SSE Starlette
cancels the response task; for plain requests a watcher task waits for `http.disconnect`), and
the worker closes the generator whatever happens, which frees the request's KV blocks. A request
cancelled while still queued is dropped without running.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import itertools
import json
import logging
import threading
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

import onyx
from server.schemas import ChatCompletionRequest, CompletionRequest, RepairRequest

log = logging.getLogger("onyx.server")

from server.defaults import (  # noqa: E402  (re-exported)
    DEFAULT_ALIASES,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_QUEUE,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MAX_TOKENS_LIMIT,
    MAX_STOP_STRINGS,
)

# Onyx extension fields passed to the engine as they are (the engine validates them, and answers
# RequestError "unknown option(s)" for one it does not know yet → 400).
ENGINE_PASSTHROUGH = ("speculative", "num_draft_tokens", "phi", "jump_forward", "top_k", "min_p",
                      "max_whitespace")

# Accepted OpenAI fields and the values that ask for nothing Onyx lacks.
_HARMLESS = {
    "n": (None, 1),
    "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
    "logprobs": (None, False, 0),
    "top_logprobs": (None, 0),
    "echo": (None, False),
    "suffix": (None, ""),
    "best_of": (None, 1),
    "tool_choice": (None, "none", "auto"),
    "function_call": (None, "none", "auto"),
}


class APIError(Exception):
    """An error answered as OpenAI's `{"error": {message, type, param, code}}`."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.extra = extra

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code, **self.extra}}

    def response(self, headers: dict | None = None) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def _error_payload(status: int, message: str, type_: str, code: str | None, param=None) -> bytes:
    return json.dumps({"error": {"message": message, "type": type_, "param": param, "code": code}}).encode()


# -- the generation queue -------------------------------------------------------------------------

class _Job:
    """One generation: its engine generator, cancel event, and the asyncio queue it reports to."""

    _ids = itertools.count(1)

    def __init__(self, gen, cancel: threading.Event, loop: asyncio.AbstractEventLoop) -> None:
        self.id = next(self._ids)
        self.gen = gen
        self.cancel = cancel
        self.loop = loop
        self.events: asyncio.Queue = asyncio.Queue()
        self.enqueued_at = time.perf_counter()
        self.started_at: float | None = None
        self.finished = False

    def post(self, kind: str, value: Any = None) -> None:
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))
        except RuntimeError:  # the event loop is gone (shutdown): nobody is listening
            self.cancel.set()


class Scheduler:
    """A FIFO queue of generations served by one worker thread."""

    def __init__(self, max_queue: int = DEFAULT_MAX_QUEUE) -> None:
        self.max_queue = max_queue
        self._queue: collections.deque[_Job] = collections.deque()
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.active: _Job | None = None
        self.served = 0
        self.cancelled = 0
        self.failed = 0

    @property
    def queued(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        with self._cv:
            if self._thread is None or not self._thread.is_alive():
                self._stopping = False
                self._thread = threading.Thread(target=self._worker, name="onyx-generate", daemon=True)
                self._thread.start()

    def submit(self, job: _Job) -> None:
        self.start()
        with self._cv:
            if len(self._queue) >= self.max_queue:
                raise APIError(503, f"the server is busy: {len(self._queue)} requests are already "
                                    f"waiting (limit {self.max_queue}); retry later",
                               type="server_error", code="server_overloaded")
            self._queue.append(job)
            self._cv.notify()

    def stop(self, timeout: float = 10.0) -> None:
        """Cancels everything queued or running and ends the worker."""
        with self._cv:
            self._stopping = True
            for job in self._queue:
                job.cancel.set()
            if self.active is not None:
                self.active.cancel.set()
            self._cv.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _worker(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stopping:
                    self._cv.wait()
                if not self._queue:
                    return
                job = self._queue.popleft()
                self.active = job
            try:
                self._drive(job)
            finally:
                with self._cv:
                    self.active = None

    def _drive(self, job: _Job) -> None:
        gen = job.gen
        try:
            if job.cancel.is_set():
                self.cancelled += 1
                job.post("cancelled")
                return
            job.started_at = time.perf_counter()
            final = None
            for chunk in gen:
                job.post("chunk", chunk)
                if chunk.result is not None:
                    final = chunk.result
            if final is not None and final.finish_reason == "cancelled":
                self.cancelled += 1
            else:
                self.served += 1
        except BaseException as e:  # reported to the request; the worker lives on
            self.failed += 1
            if not _is_client_error(e):
                log.error("generation failed:\n%s", traceback.format_exc())
            job.post("error", e)
        finally:
            gen.close()  # frees the KV sequence if the generator did not finish
            job.post("end")


def _is_client_error(e: BaseException) -> bool:
    return isinstance(e, (onyx.RequestError, onyx.GrammarError))


# -- mapping engine errors ------------------------------------------------------------------------

def _engine_error(e: BaseException, constraint_param: str | None) -> APIError:
    """An engine/grammar exception as an APIError (400 for the client's mistakes)."""
    msg = str(e)
    if isinstance(e, onyx.InvalidRegexError):
        offset = getattr(e, "offset", None)
        where = f" (offset {offset})" if offset is not None else ""
        return APIError(400, f"{msg}{where}", param="regex", code="invalid_regex", offset=offset)
    if isinstance(e, onyx.UnsupportedRegexError):
        return APIError(400, msg, param="regex", code="unsupported_regex",
                        offset=getattr(e, "offset", None))
    if isinstance(e, onyx.UnsupportedSchemaError):
        keyword = getattr(e, "keyword", None)
        return APIError(400, msg, param="response_format", code="unsupported_schema_keyword", keyword=keyword)
    if isinstance(e, onyx.InvalidSchemaError):
        return APIError(400, msg, param="response_format", code="invalid_schema")
    if isinstance(e, onyx.GrammarTooLargeError):
        return APIError(400, msg, param=constraint_param, code="grammar_too_large")
    if isinstance(e, onyx.EmptyLanguageError):
        return APIError(400, msg, param=constraint_param, code="empty_language")
    if isinstance(e, onyx.GrammarError):
        return APIError(400, msg, param=constraint_param, code="grammar_error")
    if isinstance(e, onyx.RequestError):
        param = msg.split(" ", 1)[0] if " must " in msg else None
        if param is not None and not param.isidentifier():
            param = None
        return APIError(400, msg, param=param, code="invalid_parameter")
    if type(e).__name__ == "CacheFullError":
        return APIError(503, "the KV cache is full; retry later", type="server_error", code="server_overloaded")
    return APIError(500, "the server had an error while processing the request", type="server_error",
                    code="internal_error")


# -- the app --------------------------------------------------------------------------------------

class _State:
    """Everything the endpoints share."""

    def __init__(self, engine, *, api_key, max_body_bytes, max_tokens_limit, default_max_tokens,
                 max_queue, aliases) -> None:
        self.engine = engine
        self.api_key = api_key or None
        self.max_body_bytes = int(max_body_bytes)
        self.max_tokens_limit = int(max_tokens_limit)
        self.default_max_tokens = min(int(default_max_tokens), self.max_tokens_limit)
        self.model_name = str(engine.model_name)
        self.aliases = [a for a in dict.fromkeys(aliases) if a != self.model_name]
        self.scheduler = Scheduler(max_queue)
        self.prepare_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="onyx-prepare")
        self.started = time.time()
        self.in_flight = 0
        self.requests_total = 0
        self.errors = collections.Counter()
        # Grammar compile counter: the engine caches compiled grammars by pattern; a request whose
        # pattern maps to a grammar object this server has not seen before is a compile.
        self._grammar_seen: collections.OrderedDict[tuple, Any] = collections.OrderedDict()
        self._grammar_lock = threading.Lock()
        self.grammar_compiles = 0
        self.grammar_hits = 0
        self.context_length = _context_length(engine)

    def note_grammar(self, key: tuple, grammar: Any) -> None:
        with self._grammar_lock:
            if self._grammar_seen.get(key) is grammar:
                self.grammar_hits += 1
                self._grammar_seen.move_to_end(key)
            else:
                self.grammar_compiles += 1
                self._grammar_seen[key] = grammar
                while len(self._grammar_seen) > 512:
                    self._grammar_seen.popitem(last=False)

    def grammar_cache_size(self) -> int | None:
        cache = getattr(self.engine, "_grammars", None)
        return len(cache) if cache is not None else None

    def model_names(self) -> list[str]:
        return [self.model_name, *self.aliases]


def _context_length(engine) -> int | None:
    try:
        from onyx.models import read_config

        cfg = read_config(engine.loaded.path)
    except Exception:
        return None
    for c in (cfg, cfg.get("text_config") or {}):
        n = c.get("max_position_embeddings")
        if isinstance(n, int) and n > 0:
            return n
    return None


def create_app(engine, *, api_key: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               max_tokens_limit: int = DEFAULT_MAX_TOKENS_LIMIT,
               default_max_tokens: int = DEFAULT_MAX_TOKENS, max_queue: int = DEFAULT_MAX_QUEUE,
               aliases: tuple[str, ...] | list[str] = DEFAULT_ALIASES) -> FastAPI:
    """The FastAPI app serving `engine` (an `onyx.Engine`, already loaded).

    api_key: when set, /v1/* needs `Authorization: Bearer <api_key>` (401 otherwise); /health
    stays open. max_body_bytes: larger request bodies get 413. max_tokens_limit: the largest
    max_tokens a request may ask for (400 above). default_max_tokens: used when a request gives
    none. max_queue: generations that may wait for the model (503 above). aliases: names a
    request's `model` may use besides `engine.model_name`."""
    state = _State(engine, api_key=api_key, max_body_bytes=max_body_bytes,
                   max_tokens_limit=max_tokens_limit, default_max_tokens=default_max_tokens,
                   max_queue=max_queue, aliases=tuple(aliases))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        state.scheduler.start()
        try:
            yield
        finally:
            await asyncio.get_running_loop().run_in_executor(None, state.scheduler.stop)
            state.prepare_pool.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="Onyx", version=_version(), lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.onyx = state

    # -- errors --

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError):
        state.errors[exc.status] += 1
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        state.errors[422] += 1
        errors = exc.errors()
        parts, param = [], None
        for err in errors[:5]:
            if err.get("type") == "json_invalid":
                ctx = err.get("ctx") or {}
                return APIError(422, f"the request body is not valid JSON ({ctx.get('error', 'decode error')} "
                                     f"at position {err.get('loc', ('', '?'))[-1]})",
                                code="invalid_json").response()
            loc = [str(x) for x in err.get("loc", ()) if x != "body"]
            if param is None and loc:
                param = ".".join(loc)
            parts.append(f"{'.'.join(loc) or 'body'}: {err.get('msg', 'invalid')}")
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        return APIError(422, "invalid request body: " + "; ".join(parts) + more, param=param,
                        code="invalid_request_body").response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        state.errors[exc.status_code] += 1
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path}"
        return APIError(exc.status_code, message, code=code).response(headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        # Starlette re-raises the exception after this response, so the server logs its traceback;
        # the client gets the generic error only.
        state.errors[500] += 1
        log.error("unhandled %s on %s %s", type(exc).__name__, request.method, request.url.path)
        return APIError(500, "the server had an error while processing the request",
                        type="server_error", code="internal_error").response()

    # -- endpoints --

    @app.get("/health")
    async def health():
        pool = engine.runner.pool
        kv = dict(pool.stats())
        sched = state.scheduler
        return {
            "status": "ok",
            "model": state.model_name,
            "models": state.model_names(),
            "device": getattr(engine.loaded, "device", None),
            "uptime_s": round(time.time() - state.started, 3),
            "kv": kv,
            "used_blocks": kv.get("used_blocks"),
            "free_blocks": kv.get("free_blocks"),
            "live_sequences": kv.get("live_sequences"),
            "prefix_cached_blocks": kv.get("prefix_cached_blocks"),
            "requests": {
                "active": 1 if sched.active is not None else 0,
                "queued": sched.queued,
                "in_flight": state.in_flight,
                "total": state.requests_total,
                "served": sched.served,
                "cancelled": sched.cancelled,
                "failed": sched.failed,
                "errors": {str(k): v for k, v in sorted(state.errors.items())},
            },
            "grammar_cache": {
                "size": state.grammar_cache_size(),
                "compiles": state.grammar_compiles,
                "hits": state.grammar_hits,
            },
            "asyncio_tasks": len(asyncio.all_tasks()),
            "threads": threading.active_count(),
            "limits": {
                "max_body_bytes": state.max_body_bytes,
                "max_tokens": state.max_tokens_limit,
                "default_max_tokens": state.default_max_tokens,
                "max_queue": sched.max_queue,
                "context_length": state.context_length,
            },
            "auth": state.api_key is not None,
        }

    @app.get("/v1/models")
    async def list_models():
        created = int(state.started)
        return {"object": "list",
                "data": [{"id": name, "object": "model", "created": created, "owned_by": "onyx"}
                         for name in state.model_names()]}

    @app.get("/v1/models/{model_id:path}")
    async def get_model(model_id: str):
        if model_id not in state.model_names():
            raise _unknown_model(state, model_id)
        return {"id": model_id, "object": "model", "created": int(state.started), "owned_by": "onyx"}

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest, request: Request):
        messages = _messages(body)
        opts, constraint = _options(state, body, chat=True)

        def prepare():
            ids = engine.chat_prompt_ids(messages)
            _check_context(state, len(ids), opts["max_tokens"])
            return engine.chat(messages, stream=True, **opts)

        return await _serve(state, request, body, prepare, opts, constraint, chat=True)

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request):
        prompt = _prompt(body)
        opts, constraint = _options(state, body, chat=False)

        def prepare():
            n = len(prompt) if isinstance(prompt, list) else len(engine.loaded.encode(prompt))
            _check_context(state, n, opts["max_tokens"])
            return engine.generate(prompt, stream=True, **opts)

        return await _serve(state, request, body, prepare, opts, constraint, chat=False)

    @app.post("/v1/repair")
    async def repair(body: RepairRequest):
        if (body.regex is None) == (body.json_schema is None):
            raise APIError(400, "give exactly one of regex or json_schema", param="regex", code="invalid_parameter")
        for name in ("insert_cost", "delete_cost", "substitute_cost"):
            if not 1 <= getattr(body, name) <= 1000:
                raise APIError(400, f"{name} must be between 1 and 1000", param=name, code="invalid_parameter")
        if body.max_cost is not None and body.max_cost < 0:
            raise APIError(400, "max_cost must be >= 0", param="max_cost", code="invalid_parameter")
        deadline = REPAIR_DEADLINE_MS if body.deadline_ms is None else body.deadline_ms
        if not 0 <= deadline <= REPAIR_MAX_DEADLINE_MS:
            raise APIError(400, f"deadline_ms must be between 0 and {REPAIR_MAX_DEADLINE_MS}",
                           param="deadline_ms", code="invalid_parameter")
        constraint = "regex" if body.regex is not None else "json_schema"

        def work():
            grammar = engine.compile(regex=body.regex, json_schema=body.json_schema,
                                     max_whitespace=body.max_whitespace)
            check = grammar.validate(body.text)
            r = grammar.repair(body.text, body.max_cost, deadline, insert_cost=body.insert_cost,
                               delete_cost=body.delete_cost, substitute_cost=body.substitute_cost)
            return check, r

        try:
            check, r = await asyncio.get_running_loop().run_in_executor(state.prepare_pool, work)
        except (onyx.GrammarError, onyx.RequestError) as e:
            raise _engine_error(e, constraint) from None
        return {
            "object": "onyx.repair",
            "valid_input": check.valid,
            "error_offset": check.error_offset,
            "status": r.status,
            "text": r.text,
            "cost": r.cost,
            "lower_bound": r.lower_bound,
            "edits": [{"kind": k, "offset": o, "old": _byte(old), "new": _byte(new)} for k, o, old, new in r.edits],
        }

    app.add_middleware(_LimitsMiddleware, state=state)
    return app


REPAIR_DEADLINE_MS = 1000.0
REPAIR_MAX_DEADLINE_MS = 10_000.0


def _byte(b: int | None) -> str | None:
    """A repair edit's byte as a 1-character string (printable ASCII) or a \\xNN escape."""
    if b is None:
        return None
    return chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("onyx")
    except Exception:
        return "0"


def _unknown_model(state: _State, name: str) -> APIError:
    return APIError(404, f"the model {name!r} does not exist on this server; it serves "
                         f"{', '.join(repr(n) for n in state.model_names())}",
                    param="model", code="model_not_found")


# -- turning a body into engine options -----------------------------------------------------------

def _messages(body: ChatCompletionRequest) -> list[dict]:
    if not body.messages:
        raise APIError(400, "messages must be a non-empty list", param="messages")
    out = []
    for i, m in enumerate(body.messages):
        role = m.role
        if role == "developer":
            role = "system"
        if role not in ("system", "user", "assistant"):
            raise APIError(400, f"messages[{i}].role {m.role!r} is not supported (use system, developer, "
                                f"user or assistant)", param=f"messages.{i}.role")
        if isinstance(m.content, str):
            content = m.content
        elif isinstance(m.content, list):
            texts = []
            for part in m.content:
                if part.type != "text" or part.text is None:
                    raise APIError(400, f"messages[{i}]: content parts of type {part.type!r} are not "
                                        f"supported (only text)", param=f"messages.{i}.content")
                texts.append(part.text)
            content = "".join(texts)
        else:
            raise APIError(400, f"messages[{i}] has no content", param=f"messages.{i}.content")
        out.append({"role": role, "content": content})
    return out


def _prompt(body: CompletionRequest) -> str | list[int]:
    p = body.prompt
    if isinstance(p, str):
        prompt = p
    elif isinstance(p, list) and p and all(isinstance(x, int) and not isinstance(x, bool) for x in p):
        prompt = list(p)
    elif isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
        prompt = p[0]
    else:
        raise APIError(400, "prompt must be a string, one string in a list, or a list of token ids "
                            "(several prompts per request are not supported)", param="prompt")
    if not prompt:
        raise APIError(400, "prompt is empty", param="prompt")
    return prompt


def _options(state: _State, body, *, chat: bool) -> tuple[dict, str | None]:
    """Engine options from a request body, with the server's own checks (400s)."""
    if body.model is not None and body.model not in state.model_names():
        raise _unknown_model(state, body.model)
    extra = dict(body.model_extra or {})
    unknown = sorted(k for k in extra if k not in ENGINE_PASSTHROUGH)
    if unknown:
        raise APIError(400, f"unrecognized request argument(s): {', '.join(unknown)}", param=unknown[0],
                       code="unknown_parameter")
    for name, allowed in _HARMLESS.items():
        value = getattr(body, name, None)
        if value is not None and value not in allowed:
            raise APIError(400, f"{name}={value!r} is not supported by this server", param=name,
                           code="unsupported_parameter")
    for name in ("logit_bias", "tools", "functions"):
        if getattr(body, name, None):
            raise APIError(400, f"{name} is not supported by this server", param=name,
                           code="unsupported_parameter")

    opts: dict[str, Any] = {}
    # max_tokens (chat: max_completion_tokens wins, as in OpenAI's API)
    name, max_tokens = "max_tokens", body.max_tokens
    if chat and body.max_completion_tokens is not None:
        name, max_tokens = "max_completion_tokens", body.max_completion_tokens
    if max_tokens is None:
        max_tokens = state.default_max_tokens
    if max_tokens < 1:
        raise APIError(400, f"{name} must be a positive integer, got {max_tokens}", param=name,
                       code="invalid_parameter")
    if max_tokens > state.max_tokens_limit:
        raise APIError(400, f"{name}={max_tokens} is over this server's limit of {state.max_tokens_limit}",
                       param=name, code="invalid_parameter")
    opts["max_tokens"] = max_tokens

    temperature = 1.0 if body.temperature is None else body.temperature
    if not (0.0 <= temperature <= 2.0):
        raise APIError(400, f"temperature must be between 0 and 2, got {temperature}", param="temperature",
                       code="invalid_parameter")
    opts["temperature"] = temperature
    if body.top_p is not None:
        if not (0.0 < body.top_p <= 1.0):
            raise APIError(400, f"top_p must be in (0, 1], got {body.top_p}", param="top_p",
                           code="invalid_parameter")
        opts["top_p"] = body.top_p
    if body.seed is not None:
        if not (0 <= body.seed < 2**64):
            raise APIError(400, f"seed must be an integer from 0 to 2^64-1, got {body.seed}", param="seed",
                           code="invalid_parameter")
        opts["seed"] = body.seed
    if body.stop is not None:
        stop = [body.stop] if isinstance(body.stop, str) else list(body.stop)
        if len(stop) > MAX_STOP_STRINGS or not all(stop):
            raise APIError(400, f"stop must be a non-empty string or a list of at most {MAX_STOP_STRINGS} "
                                f"non-empty strings", param="stop", code="invalid_parameter")
        if stop:
            opts["stop"] = stop

    # the constraint
    constraint = None
    rf = body.response_format
    if body.regex is not None:
        if rf is not None and rf.type != "text":
            raise APIError(400, "give either regex or response_format, not both", param="regex",
                           code="invalid_parameter")
        opts["regex"] = body.regex
        constraint = "regex"
    elif rf is not None:
        if rf.type == "json_schema":
            if rf.json_schema is None or rf.json_schema.schema_ is None:
                raise APIError(400, "response_format of type json_schema needs json_schema.schema",
                               param="response_format", code="invalid_parameter")
            opts["json_schema"] = rf.json_schema.schema_
            constraint = "response_format"
        elif rf.type == "json_object":
            opts["json_schema"] = {"type": "object"}
            constraint = "response_format"

    for k in ENGINE_PASSTHROUGH:
        if k in extra and extra[k] is not None:
            opts[k] = extra[k]
    return opts, constraint


def _check_context(state: _State, prompt_tokens: int, max_tokens: int) -> None:
    n = state.context_length
    if n is not None and prompt_tokens + max_tokens > n:
        raise APIError(400, f"this model's context is {n} tokens; the prompt has {prompt_tokens} and "
                            f"max_tokens asks for {max_tokens} more", param="messages",
                       code="context_length_exceeded")


def _grammar_key(opts: dict) -> tuple | None:
    if "regex" in opts:
        return ("regex", opts["regex"])
    if "json_schema" in opts:
        s = opts["json_schema"]
        return ("schema", s if isinstance(s, str) else json.dumps(s), opts.get("max_whitespace"))
    return None


# -- answering ------------------------------------------------------------------------------------

async def _serve(state: _State, request: Request, body, prepare, opts: dict, constraint, *, chat: bool):
    state.requests_total += 1
    cancel = threading.Event()
    opts["cancel"] = cancel
    engine = state.engine
    loop = asyncio.get_running_loop()

    def prepare_and_count():
        gen = prepare()
        key = _grammar_key(opts)
        if key is not None:
            try:
                grammar = engine.compile(regex=opts.get("regex"), json_schema=opts.get("json_schema"),
                                         max_whitespace=int(opts.get("max_whitespace") or 0))
                state.note_grammar(key, grammar)
            except Exception:  # counting only; the engine already accepted the constraint
                pass
        return gen

    state.in_flight += 1
    try:
        try:
            gen = await loop.run_in_executor(state.prepare_pool, prepare_and_count)
        except APIError:
            raise
        except Exception as e:
            err = _engine_error(e, constraint)
            if err.status == 500:
                log.error("preparing a request failed:\n%s", traceback.format_exc())
            raise err from None
        job = _Job(gen, cancel, loop)
        try:
            state.scheduler.submit(job)
        except APIError:
            gen.close()
            raise
    except BaseException:
        state.in_flight -= 1
        raise

    meta = dict(id=("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24], created=int(time.time()),
                model=state.model_name)
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        closed = []

        def on_close() -> None:
            # Runs however the response ends (finished, client gone, server shutdown), even when the
            # body generator never started: stops the generation and releases the request.
            cancel.set()
            if not closed:
                closed.append(True)
                state.in_flight -= 1

        return _StreamingJobResponse(_sse(state, job, meta, chat, include_usage), on_close,
                                     media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    try:
        return await _collect(state, request, job, meta, chat, constraint)
    finally:
        cancel.set()  # no-op when finished; stops the generation if this handler was cancelled
        state.in_flight -= 1


async def _events(job: _Job) -> AsyncIterator[tuple[str, Any]]:
    while True:
        kind, value = await job.events.get()
        if kind == "end":
            job.finished = True
            return
        yield kind, value


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def _collect(state: _State, request: Request, job: _Job, meta: dict, chat: bool, constraint):
    async def run():
        result, error = None, None
        async for kind, value in _events(job):
            if kind == "chunk" and value.result is not None:
                result = value.result
            elif kind == "error":
                error = value
        return result, error

    runner = asyncio.ensure_future(run())
    watcher = asyncio.ensure_future(_wait_disconnect(request))
    try:
        await asyncio.wait({runner, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not runner.done():  # the client went away (or this handler was cancelled)
            job.cancel.set()
        for task in (runner, watcher):
            if not task.done():
                task.cancel()
        await asyncio.gather(runner, watcher, return_exceptions=True)
    if runner.cancelled() or runner.exception() is not None:
        # client disconnected: nobody reads this answer
        return JSONResponse({"error": {"message": "client disconnected", "type": "invalid_request_error",
                                       "param": None, "code": "client_disconnected"}}, status_code=499)
    result, error = runner.result()
    if error is not None:
        raise _engine_error(error, constraint)
    if result is None:
        raise APIError(503, "the request was cancelled before it ran", type="server_error", code="cancelled")
    return JSONResponse(_final_body(job, result, meta, chat))


def _usage(result) -> dict:
    s = result.stats
    prompt = int(s.get("prompt_tokens", 0))
    completion = int(s.get("completion_tokens", len(result.token_ids)))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": int(s.get("cached_prompt_tokens", 0))}}


def _onyx(job: _Job, result) -> dict:
    out = dict(result.stats)
    out["valid"] = result.valid
    out["tokens_per_s"] = result.stats.get("tokens_per_s")
    out["finish_reason"] = result.finish_reason
    if job.started_at is not None:
        out["queue_s"] = round(job.started_at - job.enqueued_at, 6)
    return out


def _finish_reason(reason: str) -> str:
    return "length" if reason == "length" else "stop"


def _final_body(job: _Job, result, meta: dict, chat: bool) -> dict:
    reason = _finish_reason(result.finish_reason)
    if chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": result.text, "refusal": None},
                  "logprobs": None, "finish_reason": reason}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": result.text, "logprobs": None, "finish_reason": reason}
        obj = "text_completion"
    return {"id": meta["id"], "object": obj, "created": meta["created"], "model": meta["model"],
            "system_fingerprint": None, "choices": [choice], "usage": _usage(result),
            "onyx": _onyx(job, result)}


def _sse_line(obj: Any) -> str:
    return "data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n\n"


async def _sse(state: _State, job: _Job, meta: dict, chat: bool, include_usage: bool) -> AsyncIterator[str]:
    obj = "chat.completion.chunk" if chat else "text_completion"
    head = {"id": meta["id"], "object": obj, "created": meta["created"], "model": meta["model"],
            "system_fingerprint": None}

    def chunk(delta_text: str | None, finish: str | None, role: bool = False) -> dict:
        if chat:
            delta: dict = {}
            if role:
                delta["role"] = "assistant"
            if delta_text is not None:
                delta["content"] = delta_text
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": delta_text or "", "logprobs": None, "finish_reason": finish}
        return {**head, "choices": [choice]}

    try:
        if chat:
            yield _sse_line(chunk("", None, role=True))
        async for kind, value in _events(job):
            if kind == "chunk":
                if value.result is None:
                    if value.text:
                        yield _sse_line(chunk(value.text, None))
                    continue
                result = value.result
                if value.text:
                    yield _sse_line(chunk(value.text, None))
                final = chunk(None if chat else "", _finish_reason(result.finish_reason))
                final["usage"] = _usage(result)
                final["onyx"] = _onyx(job, result)
                yield _sse_line(final)
                if include_usage:
                    yield _sse_line({**head, "choices": [], "usage": _usage(result)})
            elif kind == "error":
                err = _engine_error(value, None)
                state.errors[err.status] += 1
                yield _sse_line(err.body())
            elif kind == "cancelled":
                yield _sse_line(APIError(503, "the request was cancelled before it ran", type="server_error",
                                         code="cancelled").body())
        yield "data: [DONE]\n\n"
    finally:
        # Normal end: a no-op. Client disconnect: Starlette cancels this generator's task, and the
        # event stops the decode loop; the worker then closes the engine generator (KV freed).
        job.cancel.set()


class _StreamingJobResponse(StreamingResponse):
    """A StreamingResponse that calls `on_close` when it is done, however it ends."""

    def __init__(self, content, on_close, **kwargs) -> None:
        super().__init__(content, **kwargs)
        self._on_close = on_close

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:
                    pass


# -- middleware -----------------------------------------------------------------------------------

class _LimitsMiddleware:
    """API key on /v1/* (401) and the request-body limit (413), as a plain ASGI middleware. The
    body is read here (at most the limit) and replayed to the app; later `receive` calls go to the
    server, so the app still sees `http.disconnect`."""

    def __init__(self, app, state: _State) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        st = self.state
        path = scope.get("path", "")
        if st.api_key is not None and (path == "/v1" or path.startswith("/v1/")):
            if not _authorized(scope, st.api_key):
                st.errors[401] += 1
                return await _send_error(send, 401, "invalid or missing API key: send 'Authorization: "
                                                    "Bearer <key>'", "invalid_request_error",
                                         "invalid_api_key", headers=[(b"www-authenticate", b"Bearer")])
        limit = st.max_body_bytes
        length = _header(scope, b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                declared = -1
            if declared < 0:
                return await _send_error(send, 400, "invalid Content-Length", "invalid_request_error",
                                         "invalid_request")
            if declared > limit:
                st.errors[413] += 1
                return await _send_error(send, 413, f"request body of {declared} bytes is over the limit of "
                                                    f"{limit} bytes", "invalid_request_error",
                                         "request_too_large")
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                st.errors[413] += 1
                return await _send_error(send, 413, f"request body is over the limit of {limit} bytes",
                                         "invalid_request_error", "request_too_large")
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replay = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay_receive():
            if replay:
                return replay.pop()
            return await receive()

        return await self.app(scope, replay_receive, send)


def _header(scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k.lower() == name:
            return v.decode("latin-1")
    return None


def _authorized(scope, key: str) -> bool:
    value = _header(scope, b"authorization") or ""
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(token.strip().encode(), key.encode())


async def _send_error(send, status: int, message: str, type_: str, code: str, headers=()) -> None:
    body = _error_payload(status, message, type_, code)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})
