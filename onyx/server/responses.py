"""Answers in OpenAI's shapes: one JSON body, or server-sent events ending with `data: [DONE]`.

Both read the same job events, so streamed and whole answers carry the same text for the same
seed. Every answer carries Onyx's statistics under `onyx` (validity, tokens/s, drafting, the
time spent queued).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from onyx.server import errors
from onyx.server.scheduler import Job
from onyx.server.state import ServerState


def usage(result) -> dict:
    s = result.stats
    prompt = int(s.get("prompt_tokens", 0))
    completion = int(s.get("completion_tokens", len(result.token_ids)))
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


def finish_reason(reason: str) -> str:
    return "length" if reason == "length" else "stop"


def final_body(job: Job, result, meta: dict, chat: bool) -> dict:
    reason = finish_reason(result.finish_reason)
    if chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": result.text, "refusal": None},
                  "logprobs": None, "finish_reason": reason}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": result.text, "logprobs": None, "finish_reason": reason}
        obj = "text_completion"
    return {"id": meta["id"], "object": obj, "created": meta["created"], "model": meta["model"],
            "system_fingerprint": None, "choices": [choice], "usage": usage(result),
            "onyx": onyx_stats(job, result)}


async def collect(request: Request, job: Job, meta: dict, chat: bool, constraint: str | None) -> JSONResponse:
    """Waits for the whole answer, or for the client to go away (which cancels the job)."""
    async def run():
        result, error = None, None
        async for kind, value in job.events_until_end():
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
        raise errors.from_engine(error, constraint)
    if result is None:
        raise errors.cancelled_before_running()
    return JSONResponse(final_body(job, result, meta, chat))


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _sse_line(obj: Any) -> str:
    return "data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n\n"


async def sse(state: ServerState, job: Job, meta: dict, chat: bool, include_usage: bool) -> AsyncIterator[str]:
    """The job's chunks as server-sent events."""
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
        async for kind, value in job.events_until_end():
            if kind == "chunk":
                if value.text:
                    yield _sse_line(chunk(value.text, None))
                if value.result is None:
                    continue
                result = value.result
                final = chunk(None if chat else "", finish_reason(result.finish_reason))
                final["usage"] = usage(result)
                final["onyx"] = onyx_stats(job, result)
                yield _sse_line(final)
                if include_usage:
                    yield _sse_line({**head, "choices": [], "usage": usage(result)})
            elif kind == "error":
                err = errors.from_engine(value, None)
                state.errors[err.status] += 1
                yield _sse_line(err.body())
            elif kind == "cancelled":
                yield _sse_line(errors.cancelled_before_running().body())
        yield "data: [DONE]\n\n"
    finally:
        # Normal end: a no-op. Client disconnect: Starlette cancels this generator's task, and the
        # event stops the decode loop; the worker then closes the engine generator (KV freed).
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
