"""A chat request's setup: the prompt, the constraint and the output parser, from the messages and
the options.

`ChatFormat` is a model's chat conventions, read once from its tokenizer's template: the
template (`onyx.chat.template.ChatTemplate`), what it does with tools (`onyx.chat.tools.support`),
and its thinking block (`onyx.chat.reasoning.detect`). `ChatFormat.setup(messages, options)` then:

1. checks the messages (`check_messages`): system/developer, user and assistant turns with
   string content; assistant turns with `tool_calls` (function calls, or custom tool calls,
   rewritten as the function calls they are shown as) and `content` null; `role: "tool"`
   results with their `tool_call_id`;
2. renders the prompt: plainly, or through `onyx.chat.tools.render` when the request has tools or
   the conversation has calls and results;
3. composes the constraint as one structure: the tool-call section under `tool_choice`
   (`onyx.chat.tools.plan`), or the request's own regex / JSON Schema, or (`auto` with a regex or
   schema) either of them; behind the thinking block when the template has one
   (`onyx.chat.reasoning.structure`: the constraint engages after the block closes). A request with
   neither keeps its plain constraint, so its cache key is unchanged;
4. says how to read the output (`onyx.chat.output.OutputParser`: reasoning, content and
   tool calls), and how many tokens the thinking block may take (`ReasoningBudget`).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, replace
from typing import Any

from onyx.chat import reasoning as rs
from onyx.grammar import structure as st
from onyx.chat import tools as T
from onyx.chat.output import OutputParser
from onyx.chat.template import ChatTemplate, TemplateError
from onyx.errors import RequestError
from onyx.options import CUSTOM_INPUT, DEFAULT_MAX_WHITESPACE, ConstraintSpec, GenerateOptions, ToolChoice

ROLES = ("system", "developer", "user", "assistant", "tool")


@dataclass
class ChatSetup:
    """What `Engine.chat` runs: the prompt's text, the options with the composed constraint, and
    the output's reading."""

    prompt: str
    options: GenerateOptions
    thinking: rs.ThinkingFormat | None = None
    plan: T.Plan | None = None
    budget: rs.ReasoningBudget | None = None
    answer_closes: bool = False  # the answer is a constrained value or calls, never free text

    @property
    def parses_output(self) -> bool:
        return self.thinking is not None or self.tool_format is not None

    @property
    def tool_format(self):
        t = self.options.tools
        return self.plan.format if self.plan is not None and t is not None and t.calling else None

    def output_parser(self) -> OutputParser | None:
        """A fresh parser for one sample's output (None: the output is all content)."""
        if not self.parses_output:
            return None
        custom = self.plan.custom_names if self.plan is not None else frozenset()
        return OutputParser(self.thinking, self.tool_format, custom=custom, answer_closes=self.answer_closes)


class ChatFormat:
    """One model's chat conventions (see the module docstring). Thread-safe: probes run once."""

    def __init__(self, template: ChatTemplate, vocab) -> None:
        self.template = template
        self.vocab = vocab
        self._lock = threading.Lock()
        self._support: T.Support | None = None
        self._thinking: rs.ThinkingFormat | None | bool = False  # False: not detected yet
        self._budgets: dict[tuple, rs.ReasoningBudget] = {}

    @classmethod
    def from_tokenizer(cls, tokenizer, vocab) -> "ChatFormat":
        return cls(ChatTemplate.from_tokenizer(tokenizer), vocab)

    @property
    def support(self) -> T.Support:
        with self._lock:
            if self._support is None:
                self._support = T.support(self.template) if self.template.source else T.Support(False, False)
            return self._support

    @property
    def thinking(self) -> rs.ThinkingFormat | None:
        with self._lock:
            if self._thinking is False:
                self._thinking = rs.detect(self.template) if self.template.source else None
            return self._thinking

    def setup(self, messages: list[dict], options: GenerateOptions) -> ChatSetup:
        """The prompt, constraint and output reading of one chat request. Raises `RequestError`
        (naming the field) for bad messages or tools."""
        msgs = check_messages(messages)
        tools = options.tools
        has_tool_turns = any(m["role"] == "tool" or m.get("tool_calls") for m in msgs)
        plan = None
        if tools is not None or has_tool_turns:
            functions = list(tools.functions) if tools is not None else []
            choice = tools.choice if tools is not None else ToolChoice("none")
            parallel = tools.parallel if tools is not None else True
            try:
                plan = T.plan(self.template, self.vocab, functions, choice, parallel,
                              max_whitespace=options.constraint.max_whitespace if options.constraint else DEFAULT_MAX_WHITESPACE,
                              template_support=self.support)
            except TemplateError as e:
                raise RequestError(str(e), param="tools") from None
        prompt = self._render(msgs, plan)
        thinking = self.thinking
        budget = None
        if options.max_reasoning_tokens is not None and thinking is None:
            raise RequestError("max_reasoning_tokens needs a model whose chat template has a thinking block",
                               param="max_reasoning_tokens")
        if thinking is not None and options.reasoning_budget is not None:  # reasoning_effort alone: ignored without
            budget = self._budget(thinking, options.reasoning_budget)
        answer, source = self._answer(options, plan)
        spec = options.constraint
        if thinking is not None and (answer is not None or budget is not None):
            spec = ConstraintSpec.of_structure(
                rs.structure(thinking, answer, self.vocab, require_thinking=budget is not None),
                source or "max_reasoning_tokens")
        elif source == "tools":
            spec = ConstraintSpec.of_structure(answer, "tools")
        if spec is not None and options.phi != "none" and spec is not options.constraint:
            raise RequestError("phi reweighting is not available with tools or a thinking block", param="phi")
        closes = options.constraint is not None or (
            tools is not None and tools.calling and tools.choice.mode in ("required", "function"))
        return ChatSetup(prompt, replace(options, constraint=spec), thinking, plan, budget, closes)

    def _render(self, msgs: list[dict], plan: T.Plan | None) -> str:
        msgs = [{**m, "role": "system"} if m["role"] == "developer" else m for m in msgs]
        try:
            if plan is not None:
                return T.render(self.template, msgs, plan)
            return self.template.render(msgs)
        except TemplateError as e:
            raise RequestError(str(e), param="messages") from None

    def _answer(self, options: GenerateOptions, plan: T.Plan | None) -> tuple[st.Spec | None, str | None]:
        """The structure of the answer (after any thinking block), and the field it comes from;
        (None, None) when unconstrained."""
        own = _as_spec(options.constraint)
        tools = options.tools
        if plan is None or tools is None or not tools.functions:
            return own, (options.constraint.param if own is not None else None)
        if tools.choice.mode == "none":
            return (own, options.constraint.param) if own is not None else (plan.spec, "tools")
        if tools.choice.mode == "auto" and own is not None:
            required = ToolChoice("required", allowed=tools.choice.allowed)
            calls = T.spec(plan.format, self.vocab, list(tools.functions), required, tools.parallel,
                           max_whitespace=options.constraint.max_whitespace)
            return st.any_of(own, calls), "tools"
        return plan.spec, "tools"

    def _budget(self, thinking: rs.ThinkingFormat, n: int) -> rs.ReasoningBudget:
        key = (thinking, n)
        with self._lock:
            hit = self._budgets.get(key)
        if hit is None:
            hit = rs.ReasoningBudget(self.vocab, thinking, n)
            with self._lock:
                self._budgets[key] = hit
        return hit


def _as_spec(c: ConstraintSpec | None) -> st.Spec | None:
    if c is None:
        return None
    if c.regex is not None:
        return st.regex(c.regex)
    if c.structure is not None:
        return json.loads(c.structure)
    if c.gbnf is not None:
        return {"gbnf": c.gbnf}
    if c.lark is not None:
        return {"lark": c.lark}
    return st.json_schema(json.loads(c.json_schema), max_whitespace=c.max_whitespace)


def check_messages(messages: Any) -> list[dict]:
    """The conversation, checked: every message a dict with a known `role`; `content` a string
    (or a list of text parts), null only for an assistant turn with `tool_calls`; tool calls with
    a function name and JSON arguments, or a custom tool's name and string input; tool results
    with a `tool_call_id`. Returns copies with list contents joined, arguments as JSON strings
    and custom calls as function calls."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list of {role, content} objects", param="messages")
    out = []
    for i, m in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            role = m.get("role") if isinstance(m, dict) else None
            raise RequestError(f"messages[{i}].role must be one of {', '.join(ROLES)}, got {role!r}",
                               param=f"{where}.role")
        m = dict(m)
        calls = m.get("tool_calls")
        if calls is not None:
            if m["role"] != "assistant":
                raise RequestError("only assistant messages carry tool_calls", param=f"{where}.tool_calls")
            m["tool_calls"] = _check_calls(calls, where)
            if not m["tool_calls"]:
                del m["tool_calls"]
        content = _text(m.get("content"), f"{where}.content")
        if content is None and not m.get("tool_calls"):
            raise RequestError(f"messages[{i}] needs a string content", param=f"{where}.content")
        m["content"] = content
        if m["role"] == "tool":
            if not isinstance(m.get("tool_call_id"), str) or not m["tool_call_id"]:
                raise RequestError("a tool message needs the tool_call_id of the call it answers",
                                   param=f"{where}.tool_call_id")
            if content is None:
                raise RequestError("a tool message needs a string content", param=f"{where}.content")
        out.append(m)
    return out


def _text(content: Any, param: str) -> str | None:
    if content is None:
        return None
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise RequestError("content parts must be {type: 'text', text: ...} (only text is supported)",
                                   param=param)
            parts.append(part["text"])
        content = "".join(parts)
    if not isinstance(content, str):
        raise RequestError(f"content must be a string, got {type(content).__name__}", param=param)
    try:
        content.encode("utf-8")
    except UnicodeEncodeError as e:
        raise RequestError(f"{param} is not valid Unicode: {e.reason} at character {e.start}", param=param) from None
    return content


def _check_calls(calls: Any, where: str) -> list[dict]:
    """Function calls as they are (arguments as JSON text); custom tool calls as the function
    calls they are shown as (`{"input": ...}`), which is how the prompt writes them."""
    if not isinstance(calls, list):
        raise RequestError("tool_calls must be a list", param=f"{where}.tool_calls")
    out = []
    for j, c in enumerate(calls):
        at = f"{where}.tool_calls.{j}"
        if isinstance(c, dict) and c.get("type") == "custom":
            name, args = _custom_call(c, at)
        else:
            name, args = _function_call(c, at)
        call_id = c.get("id") or f"call_{j}"
        if not isinstance(call_id, str):
            raise RequestError("a tool call's id must be a string", param=f"{at}.id")
        out.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": args or "{}"}})
    return out


def _function_call(c: Any, at: str) -> tuple[str, str]:
    fn = c.get("function") if isinstance(c, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise RequestError("a tool call needs function.name", param=f"{at}.function")
    args = fn.get("arguments", "{}")
    if isinstance(args, str):
        try:
            json.loads(args or "{}")
        except ValueError:
            raise RequestError("function.arguments must be a JSON string", param=f"{at}.function.arguments") from None
    elif isinstance(args, dict):
        args = json.dumps(args, ensure_ascii=False)
    else:
        raise RequestError("function.arguments must be a JSON string", param=f"{at}.function.arguments")
    return fn["name"], args


def _custom_call(c: dict, at: str) -> tuple[str, str]:
    custom = c.get("custom")
    if not isinstance(custom, dict) or not isinstance(custom.get("name"), str) or not custom["name"]:
        raise RequestError("a custom tool call needs custom.name", param=f"{at}.custom")
    text = custom.get("input")
    if not isinstance(text, str):
        raise RequestError("custom.input must be a string", param=f"{at}.custom.input")
    return custom["name"], json.dumps({CUSTOM_INPUT: text}, ensure_ascii=False)


def prepare_chat(loaded, chat_format: ChatFormat, messages: list[dict],
                 options: GenerateOptions) -> tuple[list[int], ChatSetup]:
    """A conversation's prompt token ids for `loaded` (an `onyx.models.loader.LoadedModel`) and
    the request's setup, from the model's chat conventions (`chat_format`). Without a chat
    template the prompt is plain text (with BOS when the model wants one). Raises
    `RequestError`."""
    setup = chat_format.setup(messages, options)
    if chat_format.template.source is None:
        return loaded.encode(setup.prompt), setup
    return list(loaded.tokenizer.encode(setup.prompt, add_special_tokens=False)), setup


def chat_ids(loaded, messages: list[dict]) -> list[int]:
    """Token ids of a plain conversation (no tools, no constraint) for `loaded`, rendered the
    way the engine renders it: for code that holds a model but no engine."""
    chat_format = ChatFormat.from_tokenizer(loaded.tokenizer, loaded.vocabulary)
    return prepare_chat(loaded, chat_format, messages, GenerateOptions())[0]
