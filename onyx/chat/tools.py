"""Tool calling the OpenAI way, over any model's own tool-call format.

The pieces a request with `tools` goes through, each a function:

1. `parse_tools(tools)` and `parse_tool_choice(tool_choice, functions)` (`onyx.options`) check
   the request's fields (`RequestError` naming the field). A custom tool (`type: "custom"`,
   input free text or a sentence of a Lark grammar or a regex) becomes a `Function` of one string
   argument, `input`, its format told in its description: chat templates only know functions.
2. `plan(template, vocab, functions, choice, parallel_tool_calls)` picks the format
   (`onyx/chat/tool_formats.py`: from the chat template, else the Hermes fallback), finds what the
   template can render itself, checks custom tools' grammars (`check_custom_tools`), and builds
   the structure spec that constrains the answer:
   - `none`: free text that never opens a call;
   - `auto`: free text (never containing the trigger), then optionally the trigger and valid
     calls, then the end; formats without a trigger (Llama 3 JSON): either text that does not
     start like a call, or calls;
   - `required`: the answer is one call or more (several with `parallel_tool_calls`);
   - a named tool: one call of that tool; `allowed_tools`: `auto` or `required` over those tools.
   Arguments are always constrained by the function's `parameters` (`strict` or not); a custom
   tool's are `{"input": "..."}` where the string, decoded, is a sentence of its grammar.
3. `render(template, messages, plan)` renders the prompt: the template's own tool rendering
   where it has one, else the tools described in a system message (`describe`), assistant
   `tool_calls` written in the format (custom calls as function calls with `{"input": ...}`),
   and `role: "tool"` results as `<tool_response>` user turns (the fallback for templates
   without tool support, such as SmolLM2's ChatML).
4. `onyx.chat.tool_parser.ToolCallParser(plan.format, custom=...)` turns the output into
   `content` and OpenAI `tool_calls` (`type: "function"` with `function.arguments` as a JSON
   string, or `type: "custom"` with `custom.input` the decoded string), whole or as streaming
   deltas.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field

from onyx.grammar import structure as st
from onyx.chat import tool_formats as tf
from onyx.chat.template import ChatTemplate, TemplateError
from onyx.errors import GrammarError, RequestError
from onyx.options import DEFAULT_MAX_WHITESPACE, Function, ToolChoice

_PROBE_FN = "onyx_probe_function"
_PROBE_RESULT = "onyx probe result"


@dataclass(frozen=True)
class Support:
    """What a chat template does with tools by itself."""

    renders_tools: bool  # writes the `tools` list into the prompt
    renders_calls: bool  # writes assistant `tool_calls` and `role: "tool"` results
    string_arguments: bool = False  # wants `function.arguments` as a JSON string, not a dict


def support(template: ChatTemplate) -> Support:
    """Probes the template with a conversation naming a made-up function."""
    probe_tool = Function(_PROBE_FN, "probe", {"type": "object", "properties": {"q": {"type": "string"}}}).openai()
    user = {"role": "user", "content": "probe"}
    try:
        renders_tools = _PROBE_FN in template.render([user], tools=[probe_tool])
    except TemplateError:
        renders_tools = False
    for as_string in (False, True):
        call = _assistant_calls([{"id": "call_probe", "type": "function",
                                  "function": {"name": _PROBE_FN, "arguments": '{"q": "x"}'}}], as_string)
        tool = {"role": "tool", "tool_call_id": "call_probe", "name": _PROBE_FN, "content": _PROBE_RESULT}
        try:
            text = template.render([user, call, tool], tools=[probe_tool] if renders_tools else None)
        except TemplateError:
            continue
        if _PROBE_FN in text and _PROBE_RESULT in text:
            return Support(renders_tools, True, as_string)
    return Support(renders_tools, False)


@dataclass(frozen=True)
class Plan:
    """How one request's tools are prompted, constrained and parsed."""

    format: tf.ToolFormat
    native: bool  # the format is the template's own (else the Hermes fallback)
    support: Support
    functions: tuple[Function, ...]
    choice: ToolChoice
    spec: st.Spec | None  # the structure constraining the answer (None: unconstrained)

    @property
    def custom_names(self) -> frozenset[str]:
        """The names of the custom tools (their calls are read back as `custom.input`)."""
        return frozenset(f.name for f in self.functions if f.custom is not None)


def plan(template: ChatTemplate, vocab, functions: list[Function], choice: ToolChoice,
         parallel_tool_calls: bool = True, *, max_whitespace: int = DEFAULT_MAX_WHITESPACE,
         template_support: Support | None = None) -> Plan:
    """The format, the template's support and the structure spec for a request. `vocab` names
    the format's markers as tokens where it has them. Pass `template_support` to reuse a probe.
    Raises `RequestError` or `GrammarError` (with `param` naming the tool) for custom tools
    whose grammar cannot constrain a call."""
    fmt = tf.detect(template.source)
    native = fmt is not None
    fmt = fmt or tf.HERMES
    sup = template_support or support(template)
    if not native:
        sup = Support(False, False)
    check_custom_tools(fmt, vocab, functions)
    return Plan(fmt, native, sup, tuple(functions), choice,
                spec(fmt, vocab, functions, choice, parallel_tool_calls, max_whitespace=max_whitespace))


def spec(fmt: tf.ToolFormat, vocab, functions: list[Function], choice: ToolChoice,
         parallel_tool_calls: bool = True, *, max_whitespace: int = DEFAULT_MAX_WHITESPACE) -> st.Spec | None:
    """The structure spec of an answer under `choice` (None: no constraint at all)."""
    trigger = st.marked(vocab, fmt.trigger, fmt.markers) if fmt.trigger else None
    if choice.mode == "none" or not functions:
        return st.free_text(trigger) if trigger is not None else None
    chosen = [f for f in functions if (choice.mode != "function" or f.name == choice.name)
              and (choice.allowed is None or f.name in choice.allowed)]
    section = tf.calls_spec(fmt, vocab, chosen, parallel=parallel_tool_calls and choice.mode != "function",
                            max_whitespace=max_whitespace)
    if choice.mode in ("required", "function"):
        return section
    if trigger is not None:
        return st.seq(st.free_text(trigger), st.optional(section))
    # No trigger: the answer is calls, or text that does not begin like them.
    first = re.escape(fmt.opener[0])
    return st.any_of(section, st.regex(f"(?s:(?:[^{first}].*)?)"))


# Custom tool inputs already compiled for a vocabulary, by (vocabulary id, spec text): a request
# repeating its tools (an agent's loop) is not compiled twice. A stale entry (a vocabulary freed
# and its id reused) is harmless: the whole structure is compiled again anyway.
_CHECKED: dict[tuple[int, str], None] = {}
_CHECKED_MAX = 256
_CHECKED_LOCK = threading.Lock()


def check_custom_tools(fmt: tf.ToolFormat, vocab, functions: list[Function]) -> None:
    """Compiles each custom tool's input on its own, so that a bad grammar is refused naming its
    tool (`param` is `tools.<i>.custom.format...`, also set on a `GrammarError`) rather than the
    whole tool section. `functions` are in the request's order."""
    for i, f in enumerate(functions):
        if f.custom is None or f.custom.syntax == "text":
            continue
        where = f"tools.{i}.custom.format"
        if fmt.arguments != "json":
            raise RequestError(f"custom tools with a grammar are not supported in the {fmt.name} call format "
                               "(its strings are not JSON strings)", param=where)
        node = tf.custom_input_spec(f.custom)
        key = (id(vocab), json.dumps(node))
        with _CHECKED_LOCK:
            if key in _CHECKED:
                continue
        try:
            vocab.compile_structure(node)
        except GrammarError as e:
            e.param = f"{where}.grammar.definition"
            raise
        with _CHECKED_LOCK:
            if len(_CHECKED) >= _CHECKED_MAX:
                del _CHECKED[next(iter(_CHECKED))]
            _CHECKED[key] = None


def describe(fmt: tf.ToolFormat, functions: list[Function], *, fallback_results: bool = True) -> str:
    """The tools and the format, for a system message (templates that do not render tools).
    `fallback_results` says tool results come back as `<tool_response>` turns (the fallback's
    way; a template that renders results has its own)."""
    lines = ["# Tools", "", "You may call one or more of these functions to answer. Each is given as a JSON "
             "Schema of its arguments:", ""]
    lines += [json.dumps(f.openai(), ensure_ascii=False) for f in functions]
    example = tf.render_calls(fmt, [("function_name", '{"argument": "value"}')])
    lines += ["", "To call a function, answer with exactly:", example]
    if fallback_results:
        lines += ["", "Results come back in a message starting with <tool_response>."]
    lines += ["Otherwise, answer normally."]
    return "\n".join(lines)


def render(template: ChatTemplate, messages: list[dict], p: Plan, *, add_generation_prompt: bool = True,
           **template_kwargs) -> str:
    """The prompt of a conversation with tools, tool calls and tool results, in the template's
    own way where it has one, else in the fallback's."""
    msgs = _name_tool_results(messages)
    tools = [f.openai() for f in p.functions] or None
    if not p.support.renders_tools and tools and p.choice.mode != "none":
        msgs = _with_system(msgs, describe(p.format, list(p.functions), fallback_results=not p.support.renders_calls))
    if p.support.renders_calls:
        msgs = [_assistant_calls(m.get("tool_calls"), p.support.string_arguments, m)
                if m.get("role") == "assistant" and m.get("tool_calls") else m for m in msgs]
    else:
        msgs = _written_out(msgs, p.format)
    return template.render(msgs, tools=tools if p.support.renders_tools else None,
                           add_generation_prompt=add_generation_prompt, **template_kwargs)


def _assistant_calls(calls: list[dict], as_string: bool, message: dict | None = None) -> dict:
    """An assistant message with `tool_calls` in the shape templates read: arguments as a dict
    (Hugging Face's convention) or as the JSON string (DeepSeek's templates)."""
    out = dict(message or {"role": "assistant", "content": None})
    fixed = []
    for c in calls:
        fn = dict(c.get("function") or {})
        args = fn.get("arguments", "{}")
        if as_string and not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        elif not as_string and isinstance(args, str):
            args = json.loads(args or "{}")
        fn["arguments"] = args
        fixed.append({**c, "type": c.get("type", "function"), "function": fn})
    out["tool_calls"] = fixed
    return out


def _name_tool_results(messages: list[dict]) -> list[dict]:
    """`role: "tool"` messages get the `name` of the call they answer (some templates print
    it), looked up by `tool_call_id`."""
    names: dict[str, str] = {}
    out = []
    for m in messages:
        for c in m.get("tool_calls") or []:
            names[c.get("id", "")] = (c.get("function") or {}).get("name", "")
        if m.get("role") == "tool" and "name" not in m and m.get("tool_call_id") in names:
            m = {**m, "name": names[m["tool_call_id"]]}
        out.append(m)
    return out


def _with_system(messages: list[dict], text: str) -> list[dict]:
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{first.get('content') or ''}\n\n{text}".lstrip()}] + messages[1:]
    return [{"role": "system", "content": text}] + messages


def _written_out(messages: list[dict], fmt: tf.ToolFormat) -> list[dict]:
    """The fallback: assistant calls become text in the format, and tool results (consecutive
    ones merged) become a user turn of `<tool_response>` blocks."""
    out: list[dict] = []
    for m in messages:
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls"):
            calls = [(c["function"]["name"], _arguments_text(c["function"].get("arguments")))
                     for c in m["tool_calls"]]
            text = "\n".join(s for s in (m.get("content") or "", tf.render_calls(fmt, calls)) if s)
            out.append({"role": "assistant", "content": text})
        elif role == "tool":
            block = f"<tool_response>\n{m.get('content') or ''}\n</tool_response>"
            if out and out[-1].get("role") == "user" and out[-1].get("_tool_results"):
                out[-1] = {**out[-1], "content": out[-1]["content"] + "\n" + block}
            else:
                out.append({"role": "user", "content": block, "_tool_results": True})
        else:
            out.append(m)
    return [{k: v for k, v in m.items() if k != "_tool_results"} for m in out]


def _arguments_text(args) -> str:
    return args if isinstance(args, str) else json.dumps(args if args is not None else {}, ensure_ascii=False)
