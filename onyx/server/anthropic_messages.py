"""Anthropic's Messages API (`POST /v1/messages`) as a reading of the chat path.

A Messages request is rewritten into a chat request: `system` a system message, `text` blocks
content, assistant `tool_use` blocks `tool_calls` (their `input` as JSON arguments), user
`tool_result` blocks `tool` turns, `tools` (`input_schema`) strict function tools, `tool_choice`
(`auto`, `any`, `tool`, `none`, `disable_parallel_tool_use`) chat's, `stop_sequences` `stop`,
`thinking.budget_tokens` `max_reasoning_tokens`, `output_config` (`format` a JSON Schema
`response_format`, `effort` `reasoning_effort`). From there it is a chat request (the same
options and constraint path). Errors are Anthropic's shape, `{"type": "error", "error": {type,
message}}` (with `param` naming the Messages field, an addition clients ignore), made by
`onyx.server.errors.anthropic_body`.

The answer's content blocks (`thinking`, `text`, `tool_use`) are built from the chat output
parser's deltas by `Blocks`, which also writes the stream events (`message_start`,
`content_block_start`, `content_block_delta` with `text_delta` / `input_json_delta` /
`thinking_delta`, `content_block_stop`, `message_delta`, `message_stop`).
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any, AsyncIterator

from onyx.server import choices, errors, responses
from onyx.server.errors import APIError
from onyx.server.jobs import Job
from onyx.server.schemas import ChatCompletionRequest, MessagesRequest
from onyx.server.state import ServerState

# Fields given to the chat request as they are (sampling, and Onyx's extensions).
_SAME = ("model", "temperature", "top_p", "top_k", "seed", "regex", "grammar", "lark", "speculative",
         "num_draft_tokens", "jump_forward", "phi", "min_p", "max_whitespace")
_MEDIA = ("image", "document", "search_result", "container_upload")
_EFFORT = {"max": "xhigh"}  # output_config.effort as OpenAI's reasoning_effort (the others are spelt alike)


# -- the request ---------------------------------------------------------------------------

def chat_request(body: MessagesRequest) -> ChatCompletionRequest:
    """The chat request a Messages request means."""
    unknown = sorted(body.model_extra or {})
    if unknown:
        raise APIError(400, f"unrecognized request argument(s): {', '.join(unknown)}", param=unknown[0],
                       code="unknown_parameter")
    chat: dict[str, Any] = {name: getattr(body, name) for name in _SAME if getattr(body, name) is not None}
    chat["max_tokens"] = body.max_tokens
    system = _text(body.system, "system") if body.system is not None else None
    chat["messages"] = ([{"role": "system", "content": system}] if system else []) + messages(body.messages)
    if body.stop_sequences is not None:
        chat["stop"] = body.stop_sequences
    if body.tools is not None:
        if not isinstance(body.tools, list):
            raise APIError(400, "tools must be a list", param="tools", code="invalid_parameter")
        chat["tools"] = [chat_tool(t, i) for i, t in enumerate(body.tools)]
    if body.tool_choice is not None:
        chat["tool_choice"], parallel = chat_tool_choice(body.tool_choice)
        if parallel is not None:
            chat["parallel_tool_calls"] = parallel
    config = body.output_config or {}
    fmt = config.get("format")
    if fmt is not None:
        if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
            raise APIError(400, "output_config.format must be {type: 'json_schema', schema: {...}}",
                           param="output_config.format", code="invalid_parameter")
        chat["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt["schema"]}}
    if config.get("effort") is not None:
        chat["reasoning_effort"] = _EFFORT.get(config["effort"], config["effort"])
    thinking = body.thinking or {}
    if thinking.get("type") == "enabled":
        chat["max_reasoning_tokens"] = thinking.get("budget_tokens")
    elif thinking and thinking.get("type") not in ("disabled", "adaptive"):
        raise APIError(400, "thinking must be {type: 'enabled', budget_tokens} or {type: 'disabled'}",
                       param="thinking.type", code="invalid_parameter")
    try:
        return ChatCompletionRequest.model_validate(chat)
    except ValueError as e:
        raise APIError(400, f"invalid request: {e}", param="messages", code="invalid_parameter") from None


def messages(items: Any) -> list[dict]:
    if not isinstance(items, list) or not items:
        raise APIError(400, "messages must be a non-empty list", param="messages", code="invalid_parameter")
    out: list[dict] = []
    for i, m in enumerate(items):
        where = f"messages.{i}"
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("user", "assistant"):
            raise APIError(400, f"a message's role must be user or assistant, got {role!r}", param=f"{where}.role",
                           code="invalid_parameter")
        content = m.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise APIError(400, "content must be a string or a list of content blocks", param=f"{where}.content",
                           code="invalid_parameter")
        texts: list[str] = []
        calls: list[dict] = []
        for j, block in enumerate(content):
            at = f"{where}.content.{j}"
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "tool_use" and role == "assistant":
                if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                    raise APIError(400, "a tool_use block needs an id and a name", param=at, code="invalid_parameter")
                calls.append({"id": block["id"], "type": "function",
                              "function": {"name": block["name"], "arguments": json.dumps(block.get("input") or {})}})
            elif kind == "tool_result" and role == "user":
                if not isinstance(block.get("tool_use_id"), str):
                    raise APIError(400, "a tool_result block needs the tool_use_id it answers",
                                   param=f"{at}.tool_use_id", code="invalid_parameter")
                result = block.get("content", "")
                text = result if isinstance(result, str) else _text(result, f"{at}.content")
                if block.get("is_error"):
                    text = f"Error: {text}"
                out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
            elif kind in ("thinking", "redacted_thinking") and role == "assistant":
                continue  # earlier thinking: templates drop it from the prompt
            elif kind in _MEDIA:
                raise APIError(400, f"{kind} blocks are not supported: this server's model reads text only",
                               param=at, code="unsupported_content")
            else:
                raise APIError(400, f"content blocks of type {kind!r} are not supported in a {role} message",
                               param=f"{at}.type", code="invalid_parameter")
        if calls:
            out.append({"role": "assistant", "content": "".join(texts) or None, "tool_calls": calls})
        elif texts or role == "assistant":
            out.append({"role": role, "content": "".join(texts)})
    return out


def _text(content: Any, param: str) -> str:
    """A string, or a list of text blocks, as text."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise APIError(400, "expected a string or a list of text blocks", param=param, code="invalid_parameter")
    parts = []
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in _MEDIA:
            raise APIError(400, f"{kind} blocks are not supported: this server's model reads text only",
                           param=f"{param}.{j}", code="unsupported_content")
        if kind != "text" or not isinstance(block.get("text"), str):
            raise APIError(400, f"expected text blocks, got {kind!r}", param=f"{param}.{j}", code="invalid_parameter")
        parts.append(block["text"])
    return "".join(parts)


def chat_tool(tool: Any, i: int) -> dict:
    """An Anthropic client tool ({name, description, input_schema}) as a strict function tool."""
    if not isinstance(tool, dict):
        raise APIError(400, "each tool must be {name, description, input_schema}", param=f"tools.{i}",
                       code="invalid_parameter")
    if tool.get("type") not in (None, "custom"):
        raise APIError(400, f"tools of type {tool['type']!r} are not supported by this server (client tools are)",
                       param=f"tools.{i}.type", code="unsupported_parameter")
    if "input_schema" not in tool:
        raise APIError(400, "a tool needs an input_schema", param=f"tools.{i}.input_schema", code="invalid_parameter")
    fn = {"name": tool.get("name"), "parameters": tool["input_schema"], "strict": True}
    if tool.get("description"):
        fn["description"] = tool["description"]
    return {"type": "function", "function": fn}


def chat_tool_choice(choice: Any) -> tuple[Any, bool | None]:
    """chat's tool_choice and parallel_tool_calls for Anthropic's tool_choice."""
    if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
        raise APIError(400, "tool_choice must be {type: 'auto' | 'any' | 'tool' | 'none'}", param="tool_choice",
                       code="invalid_parameter")
    parallel = False if choice.get("disable_parallel_tool_use") else None
    kind = choice["type"]
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name")}}, parallel
    return {"auto": "auto", "any": "required", "none": "none"}[kind], parallel


_RENAMES = [
    (re.compile(r"^messages\..*$"), "messages"),
    (re.compile(r"^max_(completion_)?tokens$"), "max_tokens"),
    (re.compile(r"^stop$"), "stop_sequences"),
    (re.compile(r"^(tools\.\d+)\.function\.parameters"), r"\1.input_schema"),
    (re.compile(r"^(tools\.\d+)\.function"), r"\1"),
    (re.compile(r"^tool_choice\..*$"), "tool_choice"),
    (re.compile(r"^max_reasoning_tokens$"), "thinking.budget_tokens"),
    (re.compile(r"^reasoning_effort$"), "output_config.effort"),
    (re.compile(r"^response_format.*$"), "output_config.format"),
]


def renamed(e: APIError) -> APIError:
    """A chat request's error as the Messages field it came from."""
    if e.param is not None:
        for pattern, repl in _RENAMES:
            e.param = pattern.sub(repl, e.param)
    e.message = e.message.replace("max_completion_tokens", "max_tokens").replace("max_reasoning_tokens",
                                                                                 "thinking.budget_tokens")
    return e


# -- the answer ------------------------------------------------------------------------------

class Blocks:
    """A message's content blocks, built from the chat output parser's deltas; `feed` and
    `close` return the stream events each step makes."""

    def __init__(self) -> None:
        self.blocks: list[dict] = []
        self._open: str | None = None  # the kind of the last block while it is open
        self._args: dict[int, str] = {}  # tool_use blocks' argument text, by block index

    def feed(self, delta: dict) -> list[dict]:
        out: list[dict] = []
        if delta.get("reasoning_content"):
            out += self._start("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            self.blocks[-1]["thinking"] += delta["reasoning_content"]
            out.append(self._delta({"type": "thinking_delta", "thinking": delta["reasoning_content"]}))
        if delta.get("content"):
            out += self._start("text", {"type": "text", "text": ""})
            self.blocks[-1]["text"] += delta["content"]
            out.append(self._delta({"type": "text_delta", "text": delta["content"]}))
        for call in delta.get("tool_calls") or []:
            fn = call.get("function") or {}
            if "id" in call:
                out += self.close()
                out += self._start("tool_use", {"type": "tool_use", "id": call["id"], "name": fn.get("name", ""),
                                                "input": {}})
                self._args[len(self.blocks) - 1] = ""
            piece = fn.get("arguments") or ""
            if piece and self._open == "tool_use":
                self._args[len(self.blocks) - 1] += piece
                out.append(self._delta({"type": "input_json_delta", "partial_json": piece}))
        return out

    def close(self) -> list[dict]:
        if self._open is None:
            return []
        index = len(self.blocks) - 1
        if self._open == "tool_use":
            try:
                self.blocks[index]["input"] = json.loads(self._args[index] or "{}")
            except ValueError:  # cut off inside the arguments: what was written, unparsed
                self.blocks[index]["input"] = {}
        self._open = None
        return [{"type": "content_block_stop", "index": index}]

    def _start(self, kind: str, block: dict) -> list[dict]:
        if self._open == kind:
            return []
        out = self.close()
        self.blocks.append(block)
        self._open = kind
        return out + [{"type": "content_block_start", "index": len(self.blocks) - 1, "content_block": dict(block)}]

    def _delta(self, delta: dict) -> dict:
        return {"type": "content_block_delta", "index": len(self.blocks) - 1, "delta": delta}


def stop_reason(result) -> tuple[str, str | None]:
    if result.finish_reason == "tool_calls":
        return "tool_use", None
    if result.finish_reason == "length":
        return "max_tokens", None
    if result.stop_string is not None:
        return "stop_sequence", result.stop_string
    return "end_turn", None


def _usage(result) -> dict:
    u = responses.usage([result])
    return {"input_tokens": u["prompt_tokens"], "output_tokens": u["completion_tokens"],
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": u["prompt_tokens_details"]["cached_tokens"]}


def meta(model: str) -> dict:
    return {"id": "msg_" + secrets.token_hex(12), "type": "message", "role": "assistant", "model": model}


def whole(job: Job, meta: dict, result) -> dict:
    blocks = Blocks()
    for d in choices.result_deltas(result):
        blocks.feed(d)
    blocks.close()
    reason, sequence = stop_reason(result)
    return {**meta, "content": blocks.blocks, "stop_reason": reason, "stop_sequence": sequence,
            "usage": _usage(result), "onyx": responses.onyx_stats(job, result)}


def _line(event: dict) -> str:
    return f"event: {event['type']}\ndata: " + json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n\n"


async def sse(state: ServerState, job: Job, meta: dict) -> AsyncIterator[str]:
    """The job's chunks as Messages stream events."""
    blocks = Blocks()
    try:
        usage = {"input_tokens": len(job.request.prompt_ids), "output_tokens": 0}
        yield _line({"type": "message_start", "message": {**meta, "content": [], "stop_reason": None,
                                                          "stop_sequence": None, "usage": usage}})
        async for kind, _, value in job.events_until_end():
            if kind == "error":
                err = errors.from_engine(value, None)
                state.errors[err.status] += 1
                yield _line(errors.anthropic_body(err.status, err.message, err.param))
                continue
            for delta in value.deltas:
                for event in blocks.feed(delta):
                    yield _line(event)
            result = value.result
            if result is None:
                continue
            if result.finish_reason == "cancelled":
                err = errors.cancelled_before_running() if job.queue_s is None else errors.cancelled()
                yield _line(errors.anthropic_body(err.status, err.message))
                continue
            for event in blocks.close():
                yield _line(event)
            reason, sequence = stop_reason(result)
            yield _line({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": sequence},
                         "usage": _usage(result)})
            yield _line({"type": "message_stop"})
    finally:
        job.cancel.set()
