"""OpenAI's Responses API (`POST /v1/responses`) as a reading of the chat path.

A Responses request is rewritten into a chat request (`ChatCompletionRequest`): `input` items
become messages (function and custom calls as assistant `tool_calls`, their outputs as `tool`
turns), `instructions` a system message, `text.format` the `response_format`, flat tools and
`tool_choice` chat's nested ones, `max_output_tokens` `max_completion_tokens`, `reasoning.effort`
`reasoning_effort`. From there it is a chat request (`translate.chat_request`, the same options,
the same constraint path); errors name the Responses field (`param_name`).

The answer is built from the chat output parser's deltas by `Output`, which turns them into
output items (`reasoning`, `message`, `function_call`, `custom_tool_call`) and, when streaming,
into the Responses events (`response.created`, `response.output_item.added`,
`response.output_text.delta`, `response.function_call_arguments.delta`, ...,
`response.completed`). A whole answer is the same deltas fed at once, so both agree.

`onyx.server.state.ResponseStore` keeps the conversations of recent responses in memory (the
last `RESPONSE_STORE_SIZE`; none survives a restart) for `previous_response_id`.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from typing import Any, AsyncIterator

from onyx.server import choices, errors, responses, translate
from onyx.server.errors import APIError
from onyx.server.jobs import Job
from onyx.server.schemas import ChatCompletionRequest, ResponsesRequest
from onyx.server.state import ResponseStore, ServerState

# Fields given to the chat request as they are (Onyx's extensions and the sampling fields).
_SAME = ("model", "temperature", "top_p", "parallel_tool_calls", "seed", "stop", "regex", "grammar", "lark",
         "max_reasoning_tokens", "speculative", "num_draft_tokens", "jump_forward", "phi", "top_k", "min_p",
         "max_whitespace", "presence_penalty", "frequency_penalty", "logit_bias", "metadata", "user",
         "prompt_cache_key", "safety_identifier", "service_tier")
_MEDIA = ("input_image", "input_file", "input_audio", "image_url")
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


# -- the request ---------------------------------------------------------------------------

def chat_request(state: ServerState, store: ResponseStore, body: ResponsesRequest) -> tuple[ChatCompletionRequest, list[dict]]:
    """The chat request a Responses request means, and its conversation (the messages without
    the instructions: what a follow-up continues)."""
    unknown = sorted(body.model_extra or {})
    if unknown:
        raise APIError(400, f"unrecognized request argument(s): {', '.join(unknown)}", param=unknown[0],
                       code="unknown_parameter")
    if body.background:
        raise APIError(400, "background responses are not supported by this server", param="background",
                       code="unsupported_parameter")
    history: list[dict] = []
    if body.previous_response_id is not None:
        found = store.get(body.previous_response_id)
        if found is None:
            raise APIError(400, f"previous response {body.previous_response_id!r} not found (this server keeps "
                                f"the last {store.size} responses in memory)", param="previous_response_id",
                           code="previous_response_not_found")
        history = list(found)
    conversation = history + input_messages(body.input)
    if not conversation:
        raise APIError(400, "input must be a non-empty string or list of items", param="input", code="invalid_parameter")
    messages = ([{"role": "system", "content": body.instructions}] if body.instructions else []) + conversation

    chat: dict[str, Any] = {name: getattr(body, name) for name in _SAME if getattr(body, name) is not None}
    chat["messages"] = messages
    if body.max_output_tokens is not None:
        chat["max_completion_tokens"] = body.max_output_tokens
    if body.tools is not None:
        if not isinstance(body.tools, list):
            raise APIError(400, "tools must be a list", param="tools", code="invalid_parameter")
        chat["tools"] = [chat_tool(t, i) for i, t in enumerate(body.tools)]
    if body.tool_choice is not None:
        chat["tool_choice"] = chat_tool_choice(body.tool_choice)
    fmt = response_format(body.text)
    if fmt is not None:
        chat["response_format"] = fmt
    effort = (body.reasoning or {}).get("effort")
    if effort is not None:
        chat["reasoning_effort"] = effort
    try:
        return ChatCompletionRequest.model_validate(chat), conversation
    except ValueError as e:  # a shape the chat request refuses (a pydantic ValidationError)
        raise APIError(400, f"invalid request: {e}", param="input", code="invalid_parameter") from None


def input_messages(items: Any) -> list[dict]:
    """`input` (a string, or items) as chat messages."""
    if items is None:
        return []
    if isinstance(items, str):
        return [{"role": "user", "content": items}] if items else []
    out: list[dict] = []
    for i, item in enumerate(items):
        where = f"input.{i}"
        if not isinstance(item, dict):
            raise APIError(400, "each input item must be an object", param=where, code="invalid_parameter")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise APIError(400, f"a message's role must be user, assistant, system or developer, got {role!r}",
                               param=f"{where}.role", code="invalid_parameter")
            out.append({"role": "system" if role == "developer" else role,
                        "content": _text(item.get("content"), f"{where}.content")})
        elif kind in ("function_call", "custom_tool_call"):
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise APIError(400, f"a {kind} item needs its call_id", param=f"{where}.call_id",
                               code="invalid_parameter")
            if kind == "function_call":
                call = {"id": call_id, "type": "function",
                        "function": {"name": item.get("name"), "arguments": item.get("arguments", "{}")}}
            else:
                call = {"id": call_id, "type": "custom", "custom": {"name": item.get("name"), "input": item.get("input")}}
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            elif last is not None and last["role"] == "assistant" and last.get("content") is not None:
                last["tool_calls"] = [call]  # text, then calls: one assistant turn
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise APIError(400, f"a {kind} item needs the call_id of its call", param=f"{where}.call_id",
                               code="invalid_parameter")
            out.append({"role": "tool", "tool_call_id": call_id, "content": _text(item.get("output"), f"{where}.output")})
        elif kind == "reasoning":
            continue  # earlier thinking: templates drop it from the prompt
        else:
            raise APIError(400, f"input items of type {kind!r} are not supported by this server",
                           param=f"{where}.type", code="unsupported_parameter")
    return out


def _text(content: Any, param: str) -> str:
    """A message's content (a string, or text parts) as text; media parts are refused."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise APIError(400, "content must be a string or a list of content parts", param=param,
                       code="invalid_parameter")
    parts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _MEDIA:
            raise APIError(400, f"{kind} content is not supported: this server's model reads text only",
                           param=f"{param}.{j}", code="unsupported_content")
        if kind not in _TEXT_PARTS or not isinstance(part.get("text"), str):
            raise APIError(400, f"content parts must be text ({', '.join(_TEXT_PARTS[:2])}), got {kind!r}",
                           param=f"{param}.{j}", code="invalid_parameter")
        parts.append(part["text"])
    return "".join(parts)


def chat_tool(tool: Any, i: int) -> Any:
    """A Responses tool (flat: {type, name, description, parameters, strict} or a custom tool
    with a flat grammar format) as a chat tool; other tool types are refused."""
    if not isinstance(tool, dict):
        return tool  # chat's checks name it
    kind = tool.get("type")
    spec = {k: v for k, v in tool.items() if k != "type"}
    if kind == "function":
        return {"type": "function", "function": spec}
    if kind == "custom":
        fmt = spec.get("format")
        if isinstance(fmt, dict) and fmt.get("type") == "grammar":
            spec["format"] = {"type": "grammar", "grammar": {"syntax": fmt.get("syntax"),
                                                             "definition": fmt.get("definition")}}
        return {"type": "custom", "custom": spec}
    raise APIError(400, f"tools of type {kind!r} are not supported by this server (function and custom tools are)",
                   param=f"tools.{i}.type", code="unsupported_parameter")


def _chat_ref(ref: Any) -> Any:
    if isinstance(ref, dict) and ref.get("type") in ("function", "custom"):
        return {"type": ref["type"], ref["type"]: {"name": ref.get("name")}}
    return ref


def chat_tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        tools = choice.get("tools")
        return {"type": "allowed_tools", "allowed_tools": {
            "mode": choice.get("mode"), "tools": [_chat_ref(t) for t in tools] if isinstance(tools, list) else tools}}
    return _chat_ref(choice)


def response_format(text: dict | None) -> dict | None:
    """`text.format` as chat's `response_format`."""
    if text is None:
        return None
    fmt = text.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise APIError(400, "text.format must be {type: 'text' | 'json_object' | 'json_schema', ...}",
                       param="text.format", code="invalid_parameter")
    if fmt["type"] != "json_schema":
        return {"type": fmt["type"]}
    if "schema" not in fmt:
        raise APIError(400, "text.format of type json_schema needs a schema", param="text.format.schema",
                       code="invalid_parameter")
    return {"type": "json_schema", "json_schema": {k: fmt[k] for k in ("name", "description", "schema", "strict")
                                                   if k in fmt}}


_RENAMES = [
    (re.compile(r"^messages(\..*)?$"), "input"),
    (re.compile(r"^max_completion_tokens$"), "max_output_tokens"),
    (re.compile(r"^response_format(\.json_schema)?"), "text.format"),
    (re.compile(r"^reasoning_effort$"), "reasoning.effort"),
    (re.compile(r"^(tools\.\d+)\.custom\.format\.grammar"), r"\1.format"),
    (re.compile(r"^(tools\.\d+)\.(function|custom)"), r"\1"),
    (re.compile(r"^tool_choice\.allowed_tools"), "tool_choice"),
]


def param_name(param: str | None) -> str | None:
    """A chat request's field as the Responses field it came from."""
    if param is None:
        return None
    for pattern, repl in _RENAMES:
        param = pattern.sub(repl, param)
    return param


def renamed(e: APIError) -> APIError:
    e.param = param_name(e.param)
    if isinstance(e.message, str):
        e.message = e.message.replace("max_completion_tokens", "max_output_tokens")
    return e


# -- the answer ------------------------------------------------------------------------------

class Output:
    """A response's output items, built from the chat output parser's deltas; `feed` and
    `close` return the stream events each step makes (each with its `sequence_number`)."""

    def __init__(self) -> None:
        self.items: list[dict] = []
        self.seq = 0
        self._status = "completed"
        self._open: dict | None = None  # the item being written
        self._calls: dict[int, dict] = {}  # the parser's call index -> its item

    def event(self, kind: str, **fields: Any) -> dict:
        e = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return e

    def feed(self, delta: dict) -> list[dict]:
        out: list[dict] = []
        if delta.get("reasoning_content"):
            item = self._item("reasoning", out)
            item["content"][0]["text"] += delta["reasoning_content"]
            out.append(self.event("response.reasoning_text.delta", item_id=item["id"], output_index=self._index(item),
                                  content_index=0, delta=delta["reasoning_content"]))
        if delta.get("content"):
            item = self._item("message", out)
            item["content"][0]["text"] += delta["content"]
            out.append(self.event("response.output_text.delta", item_id=item["id"], output_index=self._index(item),
                                  content_index=0, delta=delta["content"], logprobs=[]))
        for call in delta.get("tool_calls") or []:
            if "id" in call:
                out += self._end()
                kind = call.get("type", "function")
                if kind == "custom":
                    item = {"type": "custom_tool_call", "id": new_id("ctc"), "call_id": call["id"],
                            "name": call["custom"]["name"], "input": "", "status": "in_progress"}
                else:
                    item = {"type": "function_call", "id": new_id("fc"), "call_id": call["id"],
                            "name": call["function"]["name"], "arguments": "", "status": "in_progress"}
                self._add(item, out)
                self._calls[call["index"]] = item
            item = self._calls.get(call["index"])
            if item is None:
                continue
            if item["type"] == "custom_tool_call":
                piece = (call.get("custom") or {}).get("input") or ""
                if piece:
                    item["input"] += piece
                    out.append(self.event("response.custom_tool_call_input.delta", item_id=item["id"],
                                          output_index=self._index(item), delta=piece))
            else:
                piece = (call.get("function") or {}).get("arguments") or ""
                if piece:
                    item["arguments"] += piece
                    out.append(self.event("response.function_call_arguments.delta", item_id=item["id"],
                                          output_index=self._index(item), delta=piece))
        return out

    def close(self, status: str) -> list[dict]:
        """Ends the open item; items end `completed`, or `incomplete` when the answer was cut."""
        self._status = status
        return self._end()

    def _index(self, item: dict) -> int:
        return next(i for i, x in enumerate(self.items) if x is item)

    def _item(self, kind: str, out: list[dict]) -> dict:
        if self._open is not None and self._open["type"] == kind:
            return self._open
        out += self._end()
        if kind == "message":
            item = {"type": "message", "id": new_id("msg"), "status": "in_progress", "role": "assistant",
                    "content": []}
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        else:
            item = {"type": "reasoning", "id": new_id("rs"), "summary": [], "content": [], "status": "in_progress"}
            part = {"type": "reasoning_text", "text": ""}
        self._add(item, out)
        item["content"].append(part)
        out.append(self.event("response.content_part.added", item_id=item["id"], output_index=self._index(item),
                              content_index=0, part=dict(part)))
        return item

    def _add(self, item: dict, out: list[dict]) -> None:
        self.items.append(item)
        self._open = item
        out.append(self.event("response.output_item.added", output_index=len(self.items) - 1,
                              item=json.loads(json.dumps(item))))

    def _end(self) -> list[dict]:
        item, self._open = self._open, None
        if item is None:
            return []
        out: list[dict] = []
        index = self._index(item)
        item["status"] = self._status
        if item["type"] in ("message", "reasoning"):
            part = item["content"][0]
            if item["type"] == "message":
                out.append(self.event("response.output_text.done", item_id=item["id"], output_index=index,
                                      content_index=0, text=part["text"], logprobs=[]))
            else:
                out.append(self.event("response.reasoning_text.done", item_id=item["id"], output_index=index,
                                      content_index=0, text=part["text"]))
            out.append(self.event("response.content_part.done", item_id=item["id"], output_index=index,
                                  content_index=0, part=dict(part)))
        elif item["type"] == "function_call":
            out.append(self.event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                                  name=item["name"], arguments=item["arguments"]))
        else:
            out.append(self.event("response.custom_tool_call_input.done", item_id=item["id"], output_index=index,
                                  input=item["input"]))
        out.append(self.event("response.output_item.done", output_index=index, item=json.loads(json.dumps(item))))
        return out


def meta(state: ServerState, body: ResponsesRequest, conversation: list[dict]) -> dict:
    """What a response says of its request, and what to keep for a follow-up."""
    return {"id": new_id("resp"), "created_at": int(time.time()), "model": translate.model_echo(state, body.model),
            "body": body, "conversation": conversation}


def status_of(result) -> str:
    return "incomplete" if result.finish_reason == "length" else "completed"


def response_body(meta: dict, items: list[dict], status: str, result=None, job: Job | None = None) -> dict:
    body: ResponsesRequest = meta["body"]
    fmt = (body.text or {}).get("format") or {"type": "text"}
    out = {
        "id": meta["id"], "object": "response", "created_at": meta["created_at"], "status": status,
        "background": False, "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": body.instructions, "max_output_tokens": body.max_output_tokens, "model": meta["model"],
        "output": items, "parallel_tool_calls": body.parallel_tool_calls is not False,
        "previous_response_id": body.previous_response_id,
        "reasoning": {"effort": (body.reasoning or {}).get("effort"), "summary": None},
        "store": body.store is not False, "temperature": 1.0 if body.temperature is None else body.temperature,
        "text": {"format": fmt, "verbosity": (body.text or {}).get("verbosity", "medium")},
        "tool_choice": body.tool_choice if body.tool_choice is not None else "auto",
        "tools": body.tools or [], "top_p": 1.0 if body.top_p is None else body.top_p,
        "truncation": body.truncation or "disabled", "usage": None, "user": body.user,
        "metadata": body.metadata or {},
    }
    if status in ("completed", "incomplete"):
        out["completed_at"] = int(time.time())
    if result is not None:
        u = responses.usage([result])
        out["usage"] = {"input_tokens": u["prompt_tokens"],
                        "input_tokens_details": {"cached_tokens": u["prompt_tokens_details"]["cached_tokens"]},
                        "output_tokens": u["completion_tokens"],
                        "output_tokens_details": {"reasoning_tokens": int(result.stats.get("reasoning_tokens", 0))},
                        "total_tokens": u["total_tokens"]}
        if job is not None:
            out["onyx"] = responses.onyx_stats(job, result)
    return out


def keep(store: ResponseStore, meta: dict, result) -> None:
    """Keeps the conversation with this answer (unless the request said `store: false`)."""
    if meta["body"].store is False:
        return
    message = result.message()
    store.put(meta["id"], meta["conversation"] + [{k: v for k, v in message.items() if k != "reasoning_content"}])


def whole(store: ResponseStore, job: Job, meta: dict, result) -> dict:
    output = Output()
    for d in choices.result_deltas(result):
        output.feed(d)
    status = status_of(result)
    output.close(status)
    keep(store, meta, result)
    return response_body(meta, output.items, status, result, job)


def _line(event: dict) -> str:
    return f"event: {event['type']}\ndata: " + json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n\n"


async def sse(state: ServerState, store: ResponseStore, job: Job, meta: dict) -> AsyncIterator[str]:
    """The job's chunks as Responses events, ending with `response.completed` (or
    `response.incomplete` when cut at max_output_tokens)."""
    output = Output()
    try:
        yield _line(output.event("response.created", response=response_body(meta, [], "in_progress")))
        yield _line(output.event("response.in_progress", response=response_body(meta, [], "in_progress")))
        async for kind, _, value in job.events_until_end():
            if kind == "error":
                err = errors.from_engine(value, None)
                state.errors[err.status] += 1
                yield _line(output.event("error", code=err.code, message=err.message, param=err.param))
                failed = response_body(meta, output.items, "failed")
                failed["error"] = {"code": err.code or "server_error", "message": err.message}
                yield _line(output.event("response.failed", response=failed))
                continue
            for delta in value.deltas:
                for event in output.feed(delta):
                    yield _line(event)
            result = value.result
            if result is None:
                continue
            if result.finish_reason == "cancelled":
                err = errors.cancelled_before_running() if job.queue_s is None else errors.cancelled()
                yield _line(output.event("error", code=err.code, message=err.message, param=None))
                continue
            status = status_of(result)
            for event in output.close(status):
                yield _line(event)
            keep(store, meta, result)
            final = response_body(meta, output.items, status, result, job)
            yield _line(output.event("response.completed" if status == "completed" else "response.incomplete",
                                     response=final))
    finally:
        job.cancel.set()
