"""Request body → what the engine runs: the prompt (messages or text) and `GenerateOptions`.

The server checks what it owns (the model name, its max_tokens limit, the number of stop strings,
OpenAI fields it accepts only with harmless values, regex vs response_format); every other value
is checked once, by `GenerateOptions`, whose `RequestError` names the field.
"""

from __future__ import annotations

from typing import Any

from onyx.errors import RequestError
from onyx.options import GenerateOptions
from onyx.server.config import MAX_STOP_STRINGS
from onyx.server.errors import APIError
from onyx.server.schemas import ChatCompletionRequest, CompletionRequest
from onyx.server.state import ServerState

# OpenAI fields accepted only with values that ask for nothing Onyx lacks.
_HARMLESS = {
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
_REFUSED = ("logit_bias", "tools", "functions")

# Onyx's extension fields, declared in the schemas, given to `GenerateOptions` as they are.
EXTENSIONS = ("speculative", "num_draft_tokens", "phi", "jump_forward", "top_k", "min_p", "max_whitespace")


def chat_request(state: ServerState, body: ChatCompletionRequest) -> tuple[list[dict], GenerateOptions, str | None]:
    """The messages, the options, and the field that carries the constraint (for errors)."""
    return messages(body), *options(state, body, chat=True)


def completion_request(state: ServerState, body: CompletionRequest) -> tuple[str | list[int], GenerateOptions, str | None]:
    return prompt(body), *options(state, body, chat=False)


def messages(body: ChatCompletionRequest) -> list[dict]:
    if not body.messages:
        raise APIError(400, "messages must be a non-empty list", param="messages")
    out = []
    for i, m in enumerate(body.messages):
        role = "system" if m.role == "developer" else m.role
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


def prompt(body: CompletionRequest) -> str | list[int]:
    p = body.prompt
    if isinstance(p, str):
        text = p
    elif isinstance(p, list) and p and all(isinstance(x, int) and not isinstance(x, bool) for x in p):
        text = list(p)
    elif isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
        text = p[0]
    else:
        raise APIError(400, "prompt must be a string, one string in a list, or a list of token ids "
                            "(several prompts per request are not supported)", param="prompt")
    if not text:
        raise APIError(400, "prompt is empty", param="prompt")
    return text


def options(state: ServerState, body, *, chat: bool) -> tuple[GenerateOptions, str | None]:
    """`GenerateOptions` from a request body, and the field that carries the constraint."""
    if body.model is not None and body.model not in state.model_names():
        raise unknown_model(state, body.model)
    unknown = sorted(body.model_extra or {})
    if unknown:
        raise APIError(400, f"unrecognized request argument(s): {', '.join(unknown)}", param=unknown[0],
                       code="unknown_parameter")
    for name, allowed in _HARMLESS.items():
        value = getattr(body, name, None)
        if value is not None and value not in allowed:
            raise APIError(400, f"{name}={value!r} is not supported by this server", param=name,
                           code="unsupported_parameter")
    for name in _REFUSED:
        if getattr(body, name, None):
            raise APIError(400, f"{name} is not supported by this server", param=name, code="unsupported_parameter")

    kwargs: dict[str, Any] = {name: getattr(body, name) for name in EXTENSIONS}
    kwargs["max_tokens"] = _max_tokens(state, body, chat)
    kwargs["temperature"] = 1.0 if body.temperature is None else body.temperature  # OpenAI's default
    kwargs["top_p"] = body.top_p
    kwargs["seed"] = body.seed
    kwargs["n"] = body.n
    if body.stop is not None:
        stop = [body.stop] if isinstance(body.stop, str) else list(body.stop)
        if len(stop) > MAX_STOP_STRINGS or not all(stop):
            raise APIError(400, f"stop must be a non-empty string or a list of at most {MAX_STOP_STRINGS} "
                                f"non-empty strings", param="stop", code="invalid_parameter")
        kwargs["stop"] = stop

    constraint = None
    rf = body.response_format
    if body.regex is not None:
        if rf is not None and rf.type != "text":
            raise APIError(400, "give either regex or response_format, not both", param="regex",
                           code="invalid_parameter")
        kwargs["regex"] = body.regex
        constraint = "regex"
    elif rf is not None and rf.type == "json_schema":
        if rf.json_schema is None or rf.json_schema.schema_ is None:
            raise APIError(400, "response_format of type json_schema needs json_schema.schema",
                           param="response_format", code="invalid_parameter")
        kwargs["json_schema"] = rf.json_schema.schema_
        constraint = "response_format"
    elif rf is not None and rf.type == "json_object":
        kwargs["json_schema"] = {"type": "object"}
        constraint = "response_format"
    try:
        return GenerateOptions.parse(**kwargs), constraint
    except RequestError as e:
        raise APIError(400, str(e), param=e.param, code="invalid_parameter") from None


def _max_tokens(state: ServerState, body, chat: bool) -> int:
    """max_tokens within this server's limit (chat: max_completion_tokens wins, as in OpenAI's API)."""
    name, value = "max_tokens", body.max_tokens
    if chat and body.max_completion_tokens is not None:
        name, value = "max_completion_tokens", body.max_completion_tokens
    limit = state.config.max_tokens_limit
    if value is None:
        return state.config.default_max_tokens
    if value < 1:
        raise APIError(400, f"{name} must be a positive integer, got {value}", param=name, code="invalid_parameter")
    if value > limit:
        raise APIError(400, f"{name}={value} is over this server's limit of {limit}", param=name,
                       code="invalid_parameter")
    return value


def check_context(state: ServerState, prompt_tokens: int, max_tokens: int) -> None:
    n = state.context_length
    if n is not None and prompt_tokens + max_tokens > n:
        raise APIError(400, f"this model's context is {n} tokens; the prompt has {prompt_tokens} and "
                            f"max_tokens asks for {max_tokens} more", param="messages",
                       code="context_length_exceeded")


def unknown_model(state: ServerState, name: str) -> APIError:
    return APIError(404, f"the model {name!r} does not exist on this server; it serves "
                         f"{', '.join(repr(n) for n in state.model_names())}",
                    param="model", code="model_not_found")
