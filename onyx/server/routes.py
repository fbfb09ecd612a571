"""The endpoints.

    POST /v1/chat/completions   POST /v1/completions   POST /v1/responses   POST /v1/messages
    POST /v1/repair             GET /v1/models         GET /v1/models/{id}    GET /health

`/v1/responses` (OpenAI's Responses API) and `/v1/messages` (Anthropic's Messages API) are chat
requests underneath (`openai_responses`, `anthropic_messages`).

How a generation request flows:
1. The middleware has checked the API key and the body size; pydantic has checked the body's
   shape (422 otherwise).
2. `translate` turns the body into the prompt and `GenerateOptions` (400 for bad values).
3. *Prepare*, in a small thread pool: the prompt is tokenized and checked against the context,
   the engine compiles the grammar (cached by pattern) and queues the request
   (`Engine.submit`). Bad requests fail here; a full queue is a 503.
4. *Generate*: the engine's scheduler decodes it in its batch with every other request
   (`onyx.scheduler`); the answer is read from the job's events (`jobs.Job`,
   `responses.py`), as one JSON body or as server-sent events. `n > 1` samples are forks of the
   prompt's KV, decoded side by side.

Cancellation: each request has a `threading.Event` the batch checks at every step boundary.
It is set when the client disconnects (for SSE Starlette cancels the response task; for plain
requests a watcher task waits for `http.disconnect`); the request then leaves the batch and its
KV blocks are freed.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import sys
import threading
import time
import traceback
import uuid

from fastapi import APIRouter, Request

from onyx import errors as E
from onyx.cpu.malloc import allocator
from onyx.grammar.repair import repair_for_schema
from onyx.server import anthropic_messages, errors, openai_responses, responses, translate
from onyx.server.config import REPAIR_DEADLINE_MS, REPAIR_MAX_COST, REPAIR_MAX_DEADLINE_MS
from onyx.server.errors import APIError
from onyx.server.jobs import Job
from onyx.server.schemas import (ChatCompletionRequest, CompletionRequest, MessagesRequest, RepairRequest,
                                 ResponsesRequest)
from onyx.server.state import ServerState

log = logging.getLogger("onyx.server")
router = APIRouter(responses=errors.OPENAPI_ERRORS)


def _state(request: Request) -> ServerState:
    return request.app.state.onyx


@router.get("/health")
async def health(request: Request):
    state = _state(request)
    engine_stats = state.engine.stats()
    kv = engine_stats["kv"]
    batch = engine_stats["batch"]
    return {
        "status": "ok",
        "model": state.model_name,
        "models": state.model_names(),
        "device": state.description["device"],
        "uptime_s": round(time.time() - state.started, 3),
        "rss_bytes": _rss_bytes(),
        "allocator": allocator(),
        "mlx_memory": _mlx_memory(),
        "kv": kv,
        "used_blocks": kv.get("used_blocks"),
        "free_blocks": kv.get("free_blocks"),
        "live_sequences": kv.get("live_sequences"),
        "prefix_cached_blocks": kv.get("prefix_cached_blocks"),
        "requests": {
            "active": batch["running_requests"],
            "queued": batch["queued_requests"],
            "in_flight": state.in_flight,
            "total": state.requests_total,
            "served": batch["served"],
            "cancelled": batch["cancelled"],
            "failed": batch["failed"],
            "errors": {str(k): v for k, v in sorted(state.errors.items())},
        },
        "batch": {
            "active_rows": batch["active_rows"],
            "max_batch": batch["max_batch"],
            "steps": batch["steps"],
            "kv_used_blocks": batch["kv_used_blocks"],
            "kv_reserved_blocks": batch["kv_reserved_blocks"],
            "kv_max_blocks": batch["kv_max_blocks"],
        },
        "grammar_cache": engine_stats["grammar_cache"],
        "asyncio_tasks": len(asyncio.all_tasks()),
        "threads": threading.active_count(),
        "threads_by_name": _threads_by_name(),
        "limits": {
            "max_body_bytes": state.config.max_body_bytes,
            "max_tokens": state.config.max_tokens_limit,
            "default_max_tokens": state.config.default_max_tokens,
            "max_queue": batch["max_queue"],
            "max_batch": batch["max_batch"],
            "context_length": state.context_length,
        },
        "auth": state.config.api_key is not None,
    }


@router.get("/v1/models")
async def list_models(request: Request):
    state = _state(request)
    return {"object": "list",
            "data": [{"id": name, "object": "model", "created": int(state.started), "owned_by": "onyx"}
                     for name in state.model_names()]}


@router.get("/v1/models/{model_id:path}")
async def get_model(model_id: str, request: Request):
    state = _state(request)
    if model_id not in state.model_names():
        raise translate.unknown_model(state, model_id)
    return {"id": model_id, "object": "model", "created": int(state.started), "owned_by": "onyx"}


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, request: Request):
    state = _state(request)
    messages, options, constraint = translate.chat_request(state, body)
    return await _generate(state, request, body, _chat_prepare(state, body, messages, options), constraint,
                           chat=True)


def _chat_prepare(state: ServerState, body: ChatCompletionRequest, messages: list[dict], options):
    """What queues a chat request (in the prepare pool): its prompt and setup, checked."""
    engine = state.engine

    def prepare(job: Job):
        ids, setup = engine.prepare_chat(messages, options)
        translate.check_context(state, len(ids), options.max_tokens)
        translate.check_fits(state, setup.options, translate.max_tokens_param(body, chat=True))
        return engine.submit(ids, setup.options, on_event=job.on_event, on_end=job.on_end, cancel=job.cancel,
                             setup=setup)

    return prepare


@router.post("/v1/responses")
async def create_response(body: ResponsesRequest, request: Request):
    """OpenAI's Responses API, read as a chat request (`openai_responses`)."""
    state = _state(request)
    store = state.response_store
    try:
        chat, conversation = openai_responses.chat_request(state, store, body)
        messages, options, constraint = translate.chat_request(state, chat)
        job = await start_job(state, _chat_prepare(state, chat, messages, options), constraint)
    except APIError as e:
        raise openai_responses.renamed(e) from None
    meta = openai_responses.meta(state, body, conversation)
    if body.stream:
        return stream_job(state, job, openai_responses.sse(state, store, job, meta))
    try:
        results = await responses.collect_results(request, job, constraint)
        if not isinstance(results, list):
            return results  # the client went away
        return openai_responses.whole(store, job, meta, results[0])
    except APIError as e:
        raise openai_responses.renamed(e) from None
    finally:
        finish_job(state, job)


@router.post("/v1/completions")
async def completions(body: CompletionRequest, request: Request):
    state = _state(request)
    prompt, options, constraint = translate.completion_request(state, body)
    engine = state.engine

    def prepare(job: Job):
        ids = engine.prompt_ids(prompt)
        translate.check_context(state, len(ids), options.max_tokens)
        translate.check_fits(state, options, translate.max_tokens_param(body, chat=False))
        return engine.submit(ids, options, on_event=job.on_event, on_end=job.on_end, cancel=job.cancel)

    return await _generate(state, request, body, prepare, constraint, chat=False)


@router.post("/v1/messages")
async def create_message(body: MessagesRequest, request: Request):
    """Anthropic's Messages API, read as a chat request (`anthropic_messages`)."""
    state = _state(request)
    chat = anthropic_messages.chat_request(body)  # its errors name the Messages fields already
    try:
        messages, options, constraint = translate.chat_request(state, chat)
        job = await start_job(state, _chat_prepare(state, chat, messages, options), constraint)
    except APIError as e:
        raise anthropic_messages.renamed(e) from None
    meta = anthropic_messages.meta(translate.model_echo(state, body.model))
    if body.stream:
        return stream_job(state, job, anthropic_messages.sse(state, job, meta))
    try:
        results = await responses.collect_results(request, job, constraint)
        if not isinstance(results, list):
            return results  # the client went away
        return anthropic_messages.whole(job, meta, results[0])
    except APIError as e:
        raise anthropic_messages.renamed(e) from None
    finally:
        finish_job(state, job)


@router.post("/v1/repair")
async def repair(body: RepairRequest, request: Request):
    state = _state(request)
    if (body.regex is None) == (body.json_schema is None):
        raise APIError(400, "give exactly one of regex or json_schema", param="regex", code="invalid_parameter")
    costs = {n: getattr(body, n) for n in ("insert_cost", "delete_cost", "substitute_cost")}
    for name, cost in costs.items():
        if cost is not None and not 1 <= cost <= 1000:
            raise APIError(400, f"{name} must be between 1 and 1000", param=name, code="invalid_parameter")
    if body.max_cost is not None and not 0 <= body.max_cost <= REPAIR_MAX_COST:
        raise APIError(400, f"max_cost must be between 0 and {REPAIR_MAX_COST}", param="max_cost",
                       code="invalid_parameter")
    deadline = REPAIR_DEADLINE_MS if body.deadline_ms is None else body.deadline_ms
    if not 0 <= deadline <= REPAIR_MAX_DEADLINE_MS:
        raise APIError(400, f"deadline_ms must be between 0 and {REPAIR_MAX_DEADLINE_MS}",
                       param="deadline_ms", code="invalid_parameter")
    constraint = "regex" if body.regex is not None else "json_schema"

    def work():
        grammar = state.engine.compile(regex=body.regex, json_schema=body.json_schema,
                                       max_whitespace=body.max_whitespace)
        check = grammar.validate(body.text)
        if body.json_schema is None:
            r, pre_parsed = grammar.repair(body.text, body.max_cost, deadline, **costs), False
        else:
            schema = json.loads(body.json_schema) if isinstance(body.json_schema, str) else body.json_schema
            r, pre_parsed = repair_for_schema(grammar, body.text, schema, max_whitespace=body.max_whitespace,
                                              two_stage=body.pre_parse, max_cost=body.max_cost,
                                              deadline_ms=deadline, **costs)
        return check, r, pre_parsed

    try:
        check, r, pre_parsed = await asyncio.get_running_loop().run_in_executor(state.prepare_pool, work)
    except (E.GrammarError, E.RequestError) as e:
        raise errors.from_engine(e, constraint) from None
    return {
        "object": "onyx.grammar.repair",
        "valid_input": check.valid,
        "error_offset": check.error_offset,
        "pre_parsed": pre_parsed,  # the edits and cost refer to json_repair's reading of the text
        "status": r.status,
        "text": r.text,
        "cost": r.cost,
        "lower_bound": r.lower_bound,
        "edits": [{"kind": k, "offset": o, "old": _byte(old), "new": _byte(new)} for k, o, old, new in r.edits],
    }


def _rss_bytes() -> int | None:
    """The process's resident memory now (Linux), else its peak (macOS reports it in bytes)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
    except (ImportError, OSError):
        return None


def _mlx_memory() -> dict:
    """MLX's allocator: bytes held by live arrays and by its cache of freed buffers (kept for
    reuse, part of the resident memory)."""
    import mlx.core as mx

    return {"active_bytes": mx.get_active_memory(), "cache_bytes": mx.get_cache_memory(),
            "peak_bytes": mx.get_peak_memory()}


def _threads_by_name() -> dict[str, int]:
    """Live threads counted by name, a pool's workers (`name_0`, `name_1`, ...) under the pool's."""
    counts: collections.Counter = collections.Counter()
    for t in threading.enumerate():
        base, _, suffix = t.name.rpartition("_")
        counts[base if base and suffix.isdigit() else t.name] += 1
    return dict(sorted(counts.items()))


def _byte(b: int | None) -> str | None:
    """A repair edit's byte as a 1-character string (printable ASCII) or a \\xNN escape."""
    if b is None:
        return None
    return chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}"


async def _generate(state: ServerState, request: Request, body, prepare, constraint: str | None, *, chat: bool):
    """Prepares and queues the request off the event loop, and answers from its events."""
    job = await start_job(state, prepare, constraint)
    meta = dict(id=("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24], created=int(time.time()),
                model=translate.model_echo(state, body.model))
    if chat and translate.legacy_functions(body):
        meta["legacy"] = True
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return stream_job(state, job, responses.sse(state, job, meta, chat, include_usage, body.n or 1))
    try:
        return await responses.collect(request, job, meta, chat, constraint, body.n or 1)
    finally:
        finish_job(state, job)


async def start_job(state: ServerState, prepare, constraint: str | None) -> Job:
    """Runs `prepare(job)` (tokenize, check, compile, submit) in the prepare pool: the request is
    queued when this returns, else it raised the error to answer."""
    state.requests_total += 1
    cancel = threading.Event()
    loop = asyncio.get_running_loop()
    job = Job(loop, cancel)
    state.in_flight += 1
    try:
        try:
            job.request = await loop.run_in_executor(state.prepare_pool, _prepare_keeping_nothing_on_error,
                                                     state, prepare, job)
        except APIError:
            raise
        except E.QueueFullError as e:
            raise APIError(503, f"the server is busy: {e}; retry later", type="server_error",
                           code="server_overloaded") from None
        except Exception as e:
            err = errors.from_engine(e, constraint)
            if err.status == 500:
                log.error("preparing a request failed:\n%s", traceback.format_exc())
            raise err from None
    except BaseException:
        cancel.set()
        state.in_flight -= 1
        raise
    return job


def _prepare_keeping_nothing_on_error(state: ServerState, prepare, job: Job):
    with state.engine.grammars.kept_if_no_error():
        return prepare(job)


def finish_job(state: ServerState, job: Job) -> None:
    """After a whole answer: stops the generation if the handler was cancelled (a no-op when it
    finished) and releases the request."""
    job.cancel.set()
    state.in_flight -= 1


def stream_job(state: ServerState, job: Job, events) -> responses.StreamingJobResponse:
    """Server-sent `events` (an async iterator of lines) for a queued job."""
    closed = []

    def on_close() -> None:
        # Runs however the response ends (finished, client gone, server shutdown), even when the
        # body generator never started: stops the generation and releases the request.
        job.cancel.set()
        if not closed:
            closed.append(True)
            state.in_flight -= 1

    return responses.StreamingJobResponse(events, on_close, media_type="text/event-stream",
                                          headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
