"""How each model family writes tool calls, detected from its chat template.

A format is a layout of literal pieces around a function name and its arguments:

    section_open  call_open NAME name_close ARGUMENTS call_close  separator  call_open ...  section_close

Hermes/Qwen2.5 (`<tool_call>\\n{"name": "f", "arguments": {...}}\\n</tool_call>`), Llama 3.x JSON
(`{"name": "f", "parameters": {...}}`), Mistral (`[TOOL_CALLS][{"name": ..., "arguments": ...}]`,
and the newer `[TOOL_CALLS]f[ARGS]{...}`), DeepSeek V3/R1 (`<｜tool▁calls▁begin｜>...`, with a
fenced JSON block, and V3.1 without) and FunctionGemma (`<start_function_call>call:f{k:v}...`,
whose arguments are not JSON: see `onyx/chat/gemma_calls.py`) are all such layouts, so one spec
builder (`call_spec`), one renderer (`render_calls`) and one streaming parser
(`onyx/chat/tool_parser.py`) serve them all. `markers` are the pieces a tokenizer may hold as single
(often special) tokens; the spec names them as tokens when the vocabulary has them.

Detection (`detect`) reads the template source for each family's own markers, as mlx-lm's
`_infer_tool_parser` does; the grammar of each format is Onyx's. A template with no tool-call
convention (SmolLM2's plain ChatML) gets `None`, and the caller falls back to Hermes with the
tools described in a system message (`onyx/chat/tools.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from onyx.grammar import structure as st
from onyx.options import CUSTOM_INPUT, DEFAULT_MAX_WHITESPACE, CustomFormat, Function

# How a custom tool's arguments begin: the one string argument it is shown with.
CUSTOM_OPEN = '{"' + CUSTOM_INPUT + '": '

# DeepSeek's tool tokens (fullwidth bars, "▁" for spaces).
DS_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
DS_CALLS_END = "<｜tool▁calls▁end｜>"
DS_CALL_BEGIN = "<｜tool▁call▁begin｜>"
DS_CALL_END = "<｜tool▁call▁end｜>"
DS_SEP = "<｜tool▁sep｜>"


@dataclass(frozen=True)
class ToolFormat:
    name: str
    call_open: str
    name_close: str
    call_close: str
    separator: str = ""
    section_open: str = ""
    section_close: str = ""
    # What begins tool calls inside free text (`auto`); None: the whole answer is text or calls.
    trigger: str | None = None
    markers: tuple[str, ...] = ()
    arguments: str = "json"  # "json", or "gemma" (FunctionGemma's own syntax)

    @property
    def opener(self) -> str:
        """The text every tool-call section starts with."""
        return self.section_open + self.call_open


HERMES = ToolFormat("hermes", call_open='<tool_call>\n{"name": "', name_close='", "arguments": ',
                    call_close="}\n</tool_call>", separator="\n", trigger="<tool_call>",
                    markers=("<tool_call>", "</tool_call>"))
LLAMA3_JSON = ToolFormat("llama3_json", call_open='{"name": "', name_close='", "parameters": ', call_close="}",
                         separator="; ")
MISTRAL = ToolFormat("mistral", section_open="[TOOL_CALLS][", call_open='{"name": "', name_close='", "arguments": ',
                     call_close="}", separator=", ", section_close="]", trigger="[TOOL_CALLS]",
                     markers=("[TOOL_CALLS]",))
MISTRAL_ARGS = ToolFormat("mistral_args", call_open="[TOOL_CALLS]", name_close="[ARGS]", call_close="",
                          trigger="[TOOL_CALLS]", markers=("[TOOL_CALLS]", "[ARGS]"))
DEEPSEEK_V3 = ToolFormat("deepseek_v3", section_open=DS_CALLS_BEGIN, call_open=f"{DS_CALL_BEGIN}function{DS_SEP}",
                         name_close="\n```json\n", call_close=f"\n```{DS_CALL_END}", separator="\n",
                         section_close=DS_CALLS_END, trigger=DS_CALLS_BEGIN,
                         markers=(DS_CALLS_BEGIN, DS_CALLS_END, DS_CALL_BEGIN, DS_CALL_END, DS_SEP))
DEEPSEEK_V3_1 = ToolFormat("deepseek_v3_1", section_open=DS_CALLS_BEGIN, call_open=DS_CALL_BEGIN, name_close=DS_SEP,
                           call_close=DS_CALL_END, section_close=DS_CALLS_END, trigger=DS_CALLS_BEGIN,
                           markers=(DS_CALLS_BEGIN, DS_CALLS_END, DS_CALL_BEGIN, DS_CALL_END, DS_SEP))
FUNCTION_GEMMA = ToolFormat("function_gemma", call_open="<start_function_call>call:", name_close="",
                            call_close="<end_function_call>", trigger="<start_function_call>",
                            markers=("<start_function_call>", "<end_function_call>", "<escape>"), arguments="gemma")

FORMATS: dict[str, ToolFormat] = {f.name: f for f in
                                  (HERMES, LLAMA3_JSON, MISTRAL, MISTRAL_ARGS, DEEPSEEK_V3, DEEPSEEK_V3_1, FUNCTION_GEMMA)}


def detect(template: str | None) -> ToolFormat | None:
    """The tool-call format a chat template was written for, or None when it has none (or one
    Onyx does not constrain yet: Qwen3-Coder's XML calls, pythonic calls)."""
    if not template:
        return None
    if "[TOOL_CALLS]" in template:
        return MISTRAL_ARGS if "[ARGS]" in template else MISTRAL
    if "tool▁calls▁begin" in template:
        return DEEPSEEK_V3 if "```json" in template else DEEPSEEK_V3_1
    if "<start_function_call>" in template:
        return FUNCTION_GEMMA
    if "<tool_call>" in template:
        if "<function=" in template:
            return None  # Qwen3-Coder: XML parameters, not constrained yet
        return HERMES
    if "<|python_tag|>" in template or ("ipython" in template and '"parameters"' in template):
        return LLAMA3_JSON
    return None


def arguments_spec(fmt: ToolFormat, vocab, fn: Function, *, max_whitespace: int = DEFAULT_MAX_WHITESPACE) -> st.Spec:
    """The arguments of one call of `fn`: JSON under its `parameters`, or for a custom tool
    `custom_arguments_spec`."""
    if fn.custom is not None:
        return custom_arguments_spec(fmt, vocab, fn.custom)
    if fmt.arguments == "gemma":
        from onyx.chat.gemma_calls import arguments_spec as gemma_spec

        return gemma_spec(fn.parameters, vocab)
    return st.json_schema(fn.parameters, max_whitespace=max_whitespace)


def custom_input_spec(custom: CustomFormat) -> st.Spec:
    """A custom tool's input as a JSON string value: any JSON string for free text, else a JSON
    string whose decoded value is a sentence of the grammar (its escape, `{"json_string": ...}`)."""
    if custom.syntax == "text":
        return st.json_schema({"type": "string"})
    return st.json_string({custom.syntax: custom.definition})


def custom_arguments_spec(fmt: ToolFormat, vocab, custom: CustomFormat) -> st.Spec:
    """A custom tool's arguments, `{"input": "..."}`: the function of one string argument it is
    shown as. In FunctionGemma's syntax the string is free text between `<escape>`s (a grammar's
    sentences could hold `<escape>` themselves, so grammars are refused there, see
    `onyx.chat.tools.check_custom_tools`)."""
    if fmt.arguments == "gemma":
        esc = st.marked(vocab, "<escape>", ("<escape>",))
        return st.seq("{" + CUSTOM_INPUT + ":", esc, st.free_text(esc), esc, "}")
    return st.seq(CUSTOM_OPEN, custom_input_spec(custom), "}")


def call_spec(fmt: ToolFormat, vocab, fn: Function, *, max_whitespace: int = DEFAULT_MAX_WHITESPACE) -> st.Spec:
    """One call of `fn`."""
    return st.seq(st.marked(vocab, fmt.call_open, fmt.markers), fn.name, st.marked(vocab, fmt.name_close, fmt.markers),
                  arguments_spec(fmt, vocab, fn, max_whitespace=max_whitespace),
                  st.marked(vocab, fmt.call_close, fmt.markers))


def calls_spec(fmt: ToolFormat, vocab, functions: list[Function], *, parallel: bool,
               max_whitespace: int = DEFAULT_MAX_WHITESPACE) -> st.Spec:
    """A tool-call section: one call (several with `parallel`) of any of `functions`."""
    one = st.any_of(*(call_spec(fmt, vocab, f, max_whitespace=max_whitespace) for f in functions))
    calls = st.repeat(one, min=1, max=None if parallel else 1, separator=st.marked(vocab, fmt.separator, fmt.markers))
    return st.seq(st.marked(vocab, fmt.section_open, fmt.markers), calls, st.marked(vocab, fmt.section_close, fmt.markers))


def render_calls(fmt: ToolFormat, calls: list[tuple[str, str]]) -> str:
    """Calls as the model writes them, from (name, arguments as JSON text) pairs."""
    def one(name: str, arguments: str) -> str:
        if fmt.arguments == "gemma":
            from onyx.chat.gemma_calls import to_gemma

            arguments = to_gemma(json.loads(arguments))
        return fmt.call_open + name + fmt.name_close + arguments + fmt.call_close

    return fmt.section_open + fmt.separator.join(one(n, a) for n, a in calls) + fmt.section_close
