"""Answers in OpenAI's shapes: one JSON body, or server-sent events ending with `data: [DONE]`.

Both read the same job events, so streamed and whole answers carry the same text for the same
seed; a choice's shape (message, tool calls, reasoning, logprobs) is `choices.py`'s. Every
answer carries Onyx's statistics under `onyx` (validity, tokens/s, drafting, the time spent
queued).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from onyx.server import choices, errors
from onyx.server.jobs import Job
from onyx.server.state import ServerState


def usage(results: list) -> dict:
    """Usage over a request's samples (the prompt counted once)."""
    s = results[0].stats
    prompt = int(s.get("prompt_tokens", 0))
    completion = sum(int(r.stats.get("completion_tokens", len(r.token_ids))) for r in results)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": int(s.get("cached_prompt_tokens", 0))}}


def onyx_stats(job: Job, result) -> dict:
    out = dict(result.stats)
    out["valid"] = result.valid
    out["tokens_per_s"] = result.stats.get("tokens_per_s")
    out["finish_reason"] = result.finish_reason
    if job.queue_s is not None:
        out["queue_s"] = round(job.queue_s, 6)
    return out


def final_body(job: Job, results: list, meta: dict, chat: bool) -> dict:
    shape = choices.chat_choice if chat else choices.completion_choice
    body_choices = [shape(i, result) for i, result in enumerate(results)]
    if meta.get("legacy"):
        body_choices = [choices.legacy_choice(c) for c in body_choices]
    stats = onyx_stats(job, results[0])
    if len(results) > 1:
        stats["samples"] = [onyx_stats(job, r) for r in results]
    return {"id": meta["id"], "object": "chat.completion" if chat else "text_completion",
            "created": meta["created"], "model": meta["model"], "system_fingerprint": None, "choices": body_choices,
            "usage": usage(results), "onyx": stats}


async def collect(request: Request, job: Job, meta: dict, chat: bool, constraint: str | None, n: int = 1) -> JSONResponse:
    """Waits for the whole answer (every sample), or for the client to go away (which cancels
    the job)."""
    results = await collect_results(request, job, constraint, n)
    if isinstance(results, JSONResponse):
        return results
    return JSONResponse(final_body(job, results, meta, chat))


async def collect_results(request: Request, job: Job, constraint: str | None, n: int = 1) -> list | JSONResponse:
    """Every sample's `Result`, or the 499 answer when the client went away (which cancels the
    job). Raises the `APIError` of a failed generation."""
    async def run():
        results, error = [None] * n, None
        async for kind, index, value in job.events_until_end():
            if kind == "chunk" and value.result is not None:
                results[index] = value.result
            elif kind == "error" and error is None:
                error = value
        return results, error

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
    results, error = runner.result()
    if error is not None:
        raise errors.from_engine(error, constraint)
    if any(r is None or r.finish_reason == "cancelled" for r in results):
        raise errors.cancelled_before_running() if job.queue_s is None else errors.cancelled()
    return results


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _sse_line(obj: Any) -> str:
    return "data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n\n"


async def sse(state: ServerState, job: Job, meta: dict, chat: bool, include_usage: bool, n: int = 1) -> AsyncIterator[str]:
    """The job's chunks as server-sent events (each choice's deltas carry its index)."""
    obj = "chat.completion.chunk" if chat else "text_completion"
    head = {"id": meta["id"], "object": obj, "created": meta["created"], "model": meta["model"],
            "system_fingerprint": None}

    def chat_chunk(index: int, delta: dict, finish: str | None = None, logprobs: dict | None = None) -> dict:
        return {**head, "choices": [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}

    def text_chunk(index: int, text: str, finish: str | None = None, logprobs: dict | None = None) -> dict:
        return {**head, "choices": [{"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}]}

    offsets = [choices.CompletionLogprobs() for _ in range(n)]
    results = [None] * n
    try:
        if chat:
            for i in range(n):
                yield _sse_line(chat_chunk(i, {"role": "assistant", "content": ""}))
        async for kind, index, value in job.events_until_end():
            if kind == "chunk":
                if chat:
                    for delta, logprobs in choices.chat_deltas(value):
                        if meta.get("legacy"):
                            delta = choices.legacy_delta(delta)
                        yield _sse_line(chat_chunk(index, delta, logprobs=logprobs))
                elif value.text or value.logprobs:
                    yield _sse_line(text_chunk(index, value.text, logprobs=offsets[index].shape(value.logprobs)))
                if value.result is None:
                    continue
                result = results[index] = value.result
                if result.finish_reason == "cancelled" and job.queue_s is None:
                    yield _sse_line(errors.cancelled_before_running().body())
                    continue
                reason = choices.finish_reason(result.finish_reason)
                if meta.get("legacy") and reason == "tool_calls":
                    reason = "function_call"
                final = chat_chunk(index, {}, reason) if chat else text_chunk(index, "", reason)
                final["usage"] = usage([result])
                final["onyx"] = onyx_stats(job, result)
                yield _sse_line(final)
            elif kind == "error":
                err = errors.from_engine(value, None)
                state.errors[err.status] += 1
                yield _sse_line(err.body())
        done = [r for r in results if r is not None]
        if include_usage and done:
            yield _sse_line({**head, "choices": [], "usage": usage(done)})
        yield "data: [DONE]\n\n"
    finally:
        # Normal end: a no-op. Client disconnect: Starlette cancels this generator's task, and the
        # event takes the request out of the engine's batch at the next step (KV freed).
        job.cancel.set()


class StreamingJobResponse(StreamingResponse):
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
