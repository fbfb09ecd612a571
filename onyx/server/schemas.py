"""Request bodies of the OpenAI-compatible endpoints (pydantic models).

Only *types* are checked here, strictly: a body that does not have the right shape (not JSON, a
missing `messages`, a string where a number belongs, `true` or `1.5` where an integer belongs)
is a 422. Values (temperature range, max_tokens bounds, regex syntax, schema keywords, ...) are
checked by the app and the engine, and are 400s, as in OpenAI's API.

Fields a client may send are of three kinds:

* OpenAI fields Onyx implements (messages/prompt, max_tokens, max_completion_tokens, temperature,
  top_p, seed, stop, stream, stream_options, response_format, n, tools, tool_choice,
  parallel_tool_calls, logprobs, top_logprobs, logit_bias, presence_penalty, frequency_penalty);
* OpenAI fields accepted for compatibility when they ask for nothing Onyx lacks (`echo` false,
  `best_of` 1, `modalities` ["text"], ...) and otherwise refused with a 400 naming them; `user`,
  `metadata`, `store`, `verbosity`, `prompt_cache_key`, `safety_identifier`,
  `web_search_options`, ... are ignored; legacy `functions` / `function_call` are read as tools;
* Onyx extensions, declared here: `regex`, `max_reasoning_tokens`, and the engine options
  `speculative`, `num_draft_tokens`, `jump_forward`, `phi`, `top_k`, `min_p` and
  `max_whitespace`, whose values `onyx.options.GenerateOptions` checks. Any other unknown field is a 400 (a typo like
  `regexp` must not silently give unconstrained output).
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt


class _Open(BaseModel):
    """A body that keeps unknown fields (the app decides what they mean)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class TextPart(_Open):
    type: str
    text: Optional[str] = None


class ChatMessage(_Open):
    role: str
    content: Union[str, list[TextPart], None] = None
    name: Optional[str] = None
    tool_calls: Optional[list[Any]] = None  # assistant turns that called tools
    tool_call_id: Optional[str] = None  # role "tool": the call this result answers
    function_call: Optional[dict[str, Any]] = None  # the legacy form of one tool call


class JSONSchemaFormat(_Open):
    name: Optional[str] = None
    description: Optional[str] = None
    # `schema` would shadow a BaseModel attribute: stored as schema_, spelt "schema" on the wire.
    schema_: Union[dict[str, Any], StrictBool, None] = Field(default=None, alias="schema")
    strict: Optional[StrictBool] = None


class ResponseFormat(_Open):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: Optional[JSONSchemaFormat] = None


class StreamOptions(_Open):
    include_usage: Optional[StrictBool] = None


class _OnyxFields(_Open):
    """Onyx's own fields, on every generating endpoint."""

    seed: Optional[StrictInt] = None
    # `regex` is the paper's field: the output must fully match this regex.
    regex: Optional[str] = None
    # A grammar the output must match: GBNF text (llama.cpp's server takes it as `grammar`), or
    # Lark text (the subset llguidance reads).
    grammar: Optional[str] = None
    lark: Optional[str] = None
    speculative: Optional[str] = None
    num_draft_tokens: Union[StrictInt, str, None] = None
    jump_forward: Optional[StrictBool] = None
    phi: Optional[str] = None
    top_k: Optional[StrictInt] = None
    min_p: Optional[StrictFloat] = None
    max_whitespace: Optional[StrictInt] = None


class _Extensions(_OnyxFields):
    """Onyx's fields and the sampling fields OpenAI's endpoints share."""

    stop: Union[str, list[str], None] = None
    # OpenAI fields accepted only with values that ask for nothing Onyx lacks.
    presence_penalty: Optional[StrictFloat] = None
    frequency_penalty: Optional[StrictFloat] = None
    logit_bias: Optional[dict[str, Any]] = None


class _Common(_Extensions):
    model: Optional[str] = None
    max_tokens: Optional[StrictInt] = None
    temperature: Optional[StrictFloat] = None
    top_p: Optional[StrictFloat] = None
    stream: Optional[StrictBool] = False
    stream_options: Optional[StreamOptions] = None
    n: Optional[StrictInt] = None  # samples of the prompt (forks of its KV, decoded side by side)
    logprobs: Union[StrictBool, StrictInt, None] = None
    # OpenAI fields with no effect here.
    user: Optional[str] = None
    metadata: Optional[dict[str, Any]] = None
    store: Optional[StrictBool] = None
    service_tier: Optional[str] = None


class ChatCompletionRequest(_Common):
    messages: list[ChatMessage]
    max_completion_tokens: Optional[StrictInt] = None
    response_format: Optional[ResponseFormat] = None
    top_logprobs: Optional[StrictInt] = None
    tools: Optional[list[Any]] = None
    tool_choice: Union[str, dict[str, Any], None] = None
    parallel_tool_calls: Optional[StrictBool] = None
    max_reasoning_tokens: Optional[StrictInt] = None  # Onyx: at most this many tokens of thinking
    reasoning_effort: Optional[str] = None  # a bound on thinking where the template thinks
    prediction: Optional[dict[str, Any]] = None  # predicted output: a source of drafts
    # Legacy function calling, read as tools and tool_choice.
    functions: Optional[list[Any]] = None
    function_call: Union[str, dict[str, Any], None] = None
    # OpenAI fields with no effect here (text only: modalities other than "text" and audio
    # output are refused).
    verbosity: Optional[str] = None
    prompt_cache_key: Optional[str] = None
    safety_identifier: Optional[str] = None
    modalities: Optional[list[str]] = None
    web_search_options: Optional[dict[str, Any]] = None
    audio: Optional[dict[str, Any]] = None


class CompletionRequest(_Common):
    prompt: Union[str, list[str], list[StrictInt], list[list[StrictInt]]]
    response_format: Optional[ResponseFormat] = None  # an Onyx extension on /v1/completions
    echo: Optional[StrictBool] = None
    suffix: Optional[str] = None
    best_of: Optional[StrictInt] = None


class RepairRequest(BaseModel):
    """`POST /v1/repair`: the closest text to `text` that matches `regex` or `json_schema`."""

    model_config = ConfigDict(extra="forbid")
    text: str
    regex: Optional[str] = None
    json_schema: Union[dict[str, Any], str, None] = None
    max_whitespace: StrictInt = 0
    max_cost: Optional[StrictInt] = None
    deadline_ms: Optional[StrictFloat] = None
    # No cost given: the default cost model (and, for a JSON Schema, json_repair's reading first
    # unless pre_parse is false). Any cost given: plain edit distance with those costs.
    insert_cost: Optional[StrictInt] = None
    delete_cost: Optional[StrictInt] = None
    substitute_cost: Optional[StrictInt] = None
    pre_parse: StrictBool = True


class ResponsesRequest(_Extensions):
    """`POST /v1/responses` (OpenAI's Responses API). Read into a chat request
    (`onyx.server.openai_responses`), so its values are checked where chat's are."""

    model: Optional[str] = None
    input: Union[str, list[Any], None] = None
    instructions: Optional[str] = None
    text: Optional[dict[str, Any]] = None  # {format: {type: text | json_object | json_schema, ...}, verbosity}
    tools: Optional[list[Any]] = None
    tool_choice: Union[str, dict[str, Any], None] = None
    parallel_tool_calls: Optional[StrictBool] = None
    max_output_tokens: Optional[StrictInt] = None
    temperature: Optional[StrictFloat] = None
    top_p: Optional[StrictFloat] = None
    stream: Optional[StrictBool] = False
    previous_response_id: Optional[str] = None
    store: Optional[StrictBool] = None  # false: this response is not kept for previous_response_id
    reasoning: Optional[dict[str, Any]] = None  # {effort, summary}: effort bounds the thinking block
    background: Optional[StrictBool] = None  # only false: answers are synchronous
    # OpenAI fields with no effect here.
    metadata: Optional[dict[str, Any]] = None
    user: Optional[str] = None
    prompt_cache_key: Optional[str] = None
    prompt_cache_retention: Optional[str] = None
    safety_identifier: Optional[str] = None
    service_tier: Optional[str] = None
    truncation: Optional[str] = None
    include: Optional[list[str]] = None
    stream_options: Optional[dict[str, Any]] = None
    max_reasoning_tokens: Optional[StrictInt] = None  # Onyx's; the other extensions are as on chat


class MessagesRequest(_OnyxFields):
    """`POST /v1/messages` (Anthropic's Messages API). Read into a chat request
    (`onyx.server.anthropic_messages`), so its values are checked where chat's are."""

    model: Optional[str] = None
    max_tokens: StrictInt
    messages: list[Any]
    system: Union[str, list[Any], None] = None
    tools: Optional[list[Any]] = None
    tool_choice: Optional[dict[str, Any]] = None
    stop_sequences: Optional[list[str]] = None
    temperature: Optional[StrictFloat] = None
    top_p: Optional[StrictFloat] = None
    top_k: Optional[StrictInt] = None
    stream: Optional[StrictBool] = False
    thinking: Optional[dict[str, Any]] = None  # {type: enabled, budget_tokens}: bounds the thinking block
    output_config: Optional[dict[str, Any]] = None  # {format: {type: json_schema, schema}, effort}
    # Anthropic fields with no effect here.
    metadata: Optional[dict[str, Any]] = None
    service_tier: Optional[str] = None
    cache_control: Optional[dict[str, Any]] = None
    inference_geo: Optional[str] = None
    # Onyx's own fields come from _OnyxFields, as on chat.
