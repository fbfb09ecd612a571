"""Request body → what the engine runs: the prompt (messages or text) and `GenerateOptions`.

The server checks what it owns (the model name, its max_tokens limit, the number of stop strings,
OpenAI fields it accepts only with harmless values, regex vs response_format); every other value
is checked once, by `GenerateOptions` (tools, tool_choice, logprobs, logit_bias, penalties, ...)
or by the engine's chat setup (messages with tool calls and results), whose `RequestError` names
the field.
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
    "echo": (None, False),
    "suffix": (None, ""),
    "best_of": (None, 1),
}
# OpenAI fields asking for what a text-only server cannot give (audio output).
_REFUSED = ("audio",)
# Content parts a text-only model cannot read, by type; the field that carries each.
_MEDIA_PARTS = {"image_url": "image_url", "input_image": "image_url", "input_audio": "input_audio",
                "file": "file", "input_file": "file"}

# Fields given to `GenerateOptions` as they are: Onyx's extensions, declared in the schemas, and
# OpenAI's sampling fields.
EXTENSIONS = ("speculative", "num_draft_tokens", "phi", "jump_forward", "top_k", "min_p", "max_whitespace",
              "logit_bias", "presence_penalty", "frequency_penalty")
CHAT_FIELDS = ("tools", "tool_choice", "parallel_tool_calls", "max_reasoning_tokens", "top_logprobs",
               "reasoning_effort", "prediction")


def chat_request(state: ServerState, body: ChatCompletionRequest) -> tuple[list[dict], GenerateOptions, str | None]:
    """The messages, the options, and the field that carries the constraint (for errors)."""
    return messages(body), *options(state, body, chat=True)


def completion_request(state: ServerState, body: CompletionRequest) -> tuple[str | list[int], GenerateOptions, str | None]:
    return prompt(body), *options(state, body, chat=False)


def messages(body: ChatCompletionRequest) -> list[dict]:
    """The messages as plain dicts (role, content, and tool_calls / tool_call_id / name where
    given); the engine's chat setup checks them (`onyx.chat.setup.check_messages`)."""
    if not body.messages:
        raise APIError(400, "messages must be a non-empty list", param="messages")
    out = []
    legacy_ids: dict[str, str] = {}  # legacy function calls' names -> the ids given them
    for i, m in enumerate(body.messages):
        d = {"role": "system" if m.role == "developer" else m.role, "content": m.content}
        if isinstance(m.content, list):
            for j, part in enumerate(m.content):
                field = _MEDIA_PARTS.get(part.type)
                if field is not None:
                    raise APIError(400, f"{part.type} content parts are not supported: this server's model reads "
                                        f"text only", param=f"messages.{i}.content.{j}.{field}",
                                   code="unsupported_content")
            d["content"] = [p.model_dump(exclude_none=True) for p in m.content]
        for key in ("tool_calls", "tool_call_id", "name"):
            if getattr(m, key) is not None:
                d[key] = getattr(m, key)
        if m.function_call is not None and m.role == "assistant" and m.tool_calls is None:
            call_id = f"call_legacy_{i}"
            legacy_ids[str(m.function_call.get("name"))] = call_id
            d["tool_calls"] = [{"id": call_id, "type": "function", "function": m.function_call}]
        if m.role == "function":  # a legacy function result: the tool result of the last call of that name
            d["role"] = "tool"
            d["tool_call_id"] = legacy_ids.get(m.name or "", f"call_legacy_{m.name}")
        out.append(d)
    return out


def legacy_functions(body) -> bool:
    """The request uses legacy function calling (`functions`): its answer is shaped that way."""
    return getattr(body, "functions", None) is not None


def _legacy_tools(body) -> dict:
    """`functions` and `function_call` as tools, tool_choice and one call at most."""
    if body.tools is not None or body.tool_choice is not None:
        raise APIError(400, "give tools and tool_choice, or the legacy functions and function_call, not both",
                       param="functions" if body.functions is not None else "function_call",
                       code="invalid_parameter")
    if body.functions is None:
        raise APIError(400, "function_call needs functions", param="function_call", code="invalid_parameter")
    if not isinstance(body.functions, list):
        raise APIError(400, "functions must be a list of {name, description, parameters}", param="functions",
                       code="invalid_parameter")
    choice = body.function_call
    if isinstance(choice, dict):
        choice = {"type": "function", "function": {"name": choice.get("name")}}
    return {"tools": [{"type": "function", "function": f} for f in body.functions], "tool_choice": choice,
            "parallel_tool_calls": False}


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
    modalities = getattr(body, "modalities", None)
    if modalities is not None and any(m != "text" for m in modalities):
        raise APIError(400, f"modalities={modalities!r} is not supported: this server writes text only",
                       param="modalities", code="unsupported_parameter")

    kwargs: dict[str, Any] = {name: getattr(body, name) for name in EXTENSIONS}
    kwargs["max_tokens"] = _max_tokens(state, body, chat)
    kwargs["temperature"] = 1.0 if body.temperature is None else body.temperature  # OpenAI's default
    kwargs["top_p"] = body.top_p
    kwargs["seed"] = body.seed
    kwargs["n"] = body.n
    kwargs.update(_logprobs(body, chat))
    if chat:
        kwargs.update({name: getattr(body, name, None) for name in CHAT_FIELDS})
        if body.functions is not None or body.function_call is not None:
            kwargs.update(_legacy_tools(body))
    if body.stop is not None:
        stop = [body.stop] if isinstance(body.stop, str) else list(body.stop)
        if len(stop) > MAX_STOP_STRINGS or not all(stop):
            raise APIError(400, f"stop must be a non-empty string or a list of at most {MAX_STOP_STRINGS} "
                                f"non-empty strings", param="stop", code="invalid_parameter")
        kwargs["stop"] = stop

    constraint = None
    rf = body.response_format
    own = [(name, getattr(body, name)) for name in ("regex", "grammar", "lark") if getattr(body, name) is not None]
    if len(own) > 1:
        raise APIError(400, f"give one of regex, grammar and lark, not {own[0][0]} and {own[1][0]}", param=own[1][0],
                       code="invalid_parameter")
    if own:
        name, value = own[0]
        if rf is not None and rf.type != "text":
            raise APIError(400, f"give either {name} or response_format, not both", param=name,
                           code="invalid_parameter")
        kwargs[name] = value
        constraint = name
    elif rf is not None and rf.type == "json_schema":
        if rf.json_schema is None or rf.json_schema.schema_ is None:
            raise APIError(400, "response_format of type json_schema needs json_schema.schema",
                           param="response_format", code="invalid_parameter")
        kwargs["json_schema"] = rf.json_schema.schema_
        constraint = "response_format"
    elif rf is not None and rf.type == "json_object":
        kwargs["json_schema"] = {"type": "object"}
        constraint = "response_format"
    if chat and kwargs.get("tools") and constraint is None:
        constraint = "tools"
    try:
        return GenerateOptions.parse(**kwargs), constraint
    except RequestError as e:
        raise APIError(400, str(e), param=e.param, code="invalid_parameter") from None


def _logprobs(body, chat: bool) -> dict:
    """Chat: `logprobs` true/false and `top_logprobs`; completions: `logprobs` is the number of
    alternatives (0 to 5)."""
    value = body.logprobs
    if chat:
        if value is not None and not isinstance(value, bool):
            raise APIError(400, "logprobs must be true or false", param="logprobs", code="invalid_parameter")
        return {"logprobs": value}
    if value is None or value is False:
        return {}
    if isinstance(value, bool) or not 0 <= value <= 5:
        raise APIError(400, "logprobs must be an integer from 0 to 5", param="logprobs", code="invalid_parameter")
    return {"logprobs": True, "top_logprobs": value}


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


def max_tokens_param(body, chat: bool) -> str:
    """The field that set the request's max_tokens (for errors)."""
    return "max_completion_tokens" if chat and getattr(body, "max_completion_tokens", None) is not None \
        else "max_tokens"


def check_fits(state: ServerState, options: GenerateOptions, param: str) -> None:
    """Refuses (400) a request whose shortest valid answer (one call under `required`, the
    smallest JSON value, ...) needs more tokens than it may generate: it would end cut and
    invalid, so it is refused before anything runs, naming the smallest budget that fits."""
    shortest = state.engine.shortest_answer(options)
    if shortest is not None and shortest > options.max_tokens:
        raise APIError(400, f"{param}={options.max_tokens} is too small: the shortest answer valid under this "
                            f"request's constraint takes {shortest} tokens; ask for {param} >= {shortest}",
                       param=param, code="max_tokens_too_small", min_tokens=shortest)


def model_echo(state: ServerState, name: str | None) -> str:
    """The model name an answer carries: the one the request used (the model's own name or an
    alias), else the model's own."""
    return name if name is not None and name in state.model_names() else state.model_name


def check_context(state: ServerState, prompt_tokens: int, max_tokens: int) -> None:
    n = state.context_length
    if n is not None and prompt_tokens + max_tokens > n:
        raise APIError(400, f"this server's context is {n} tokens; the prompt has {prompt_tokens} and "
                            f"max_tokens asks for {max_tokens} more", param="messages",
                       code="context_length_exceeded")


def unknown_model(state: ServerState, name: str) -> APIError:
    return APIError(404, f"the model {name!r} does not exist on this server; it serves "
                         f"{', '.join(repr(n) for n in state.model_names())}",
                    param="model", code="model_not_found")
