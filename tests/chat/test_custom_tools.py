"""OpenAI custom tools (free text, Lark, regex) on real tokenizers: the request fields and their
errors, random walks of the constrained call section parsing into custom calls whose input the
grammar accepts (judged by the `lark` package and `re`), the input decoded as it streams, and
custom calls in the conversation rendered as the function calls they are shown as."""

from __future__ import annotations

import json
import random
import re

import lark
import pytest

import onyx
from onyx.chat import tool_formats as tf
from onyx.chat import tools as T
from onyx.chat.setup import check_messages
from onyx.chat.template import ChatTemplate
from onyx.chat.tool_parser import ToolCallParser, parse
from onyx.options import CustomFormat, ToolChoice, parse_tool_choice, parse_tools
from test_tools import counter_ids, walk

# Sums of names, quoted strings and brackets: recursive, with quotes and backslashes inside the
# sentences, so the JSON escape matters.
SUMS = r'''
start: sum
sum: term ("+" term)*
term: NAME | STRING | "(" sum ")"
NAME: /[a-z]{1,8}/
STRING: /"[^"\\\n]{0,8}"/
'''
PATCH_REGEX = r"(add|del) [a-z]{1,6}\.py\n"


def custom(name: str, fmt: dict | None = None, description: str = "") -> dict:
    tool: dict = {"name": name, "description": description}
    if fmt is not None:
        tool["format"] = fmt
    return {"type": "custom", "custom": tool}


def grammar(syntax: str, definition: str) -> dict:
    return {"type": "grammar", "grammar": {"syntax": syntax, "definition": definition}}


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
                                          "required": ["city"], "additionalProperties": False}}}
TOOLS = [custom("calc", grammar("lark", SUMS), "Adds things."), custom("patch", grammar("regex", PATCH_REGEX)),
         custom("note", {"type": "text"}), custom("shout"), WEATHER]
FUNCTIONS = parse_tools(TOOLS)
CUSTOM = frozenset(f.name for f in FUNCTIONS if f.custom is not None)
SUMS_PARSER = lark.Lark(SUMS)


@pytest.fixture(scope="module")
def chatml():
    from conftest import gguf_path

    return ChatTemplate.from_gguf_metadata(onyx.read_gguf_metadata(str(gguf_path("smollm2"))))


def test_custom_tools_become_functions_of_one_string():
    calc, patch, note, shout, weather = FUNCTIONS
    assert calc.custom == CustomFormat("lark", SUMS) and patch.custom == CustomFormat("regex", PATCH_REGEX)
    assert note.custom == shout.custom == CustomFormat("text", "") and weather.custom is None
    assert [f.kind for f in FUNCTIONS] == ["custom"] * 4 + ["function"]
    shown = calc.openai()["function"]
    assert shown["parameters"]["properties"]["input"]["type"] == "string"
    assert shown["parameters"]["required"] == ["input"]
    assert shown["description"].startswith("Adds things.\n\n") and SUMS in shown["description"]
    assert PATCH_REGEX in patch.description and "free text" in note.description


@pytest.mark.parametrize("tool, param", [
    ({"type": "custom", "custom": {"name": "bad name"}}, "tools.0.custom.name"),
    ({"type": "custom"}, "tools.0"),
    ({"type": "plugin", "plugin": {"name": "x"}}, "tools.0"),
    (custom("c", {"type": "binary"}), "tools.0.custom.format.type"),
    (custom("c", {"type": "grammar"}), "tools.0.custom.format.grammar"),
    (custom("c", grammar("gbnf", "root ::= \"a\"")), "tools.0.custom.format.grammar.syntax"),
    (custom("c", grammar("lark", "")), "tools.0.custom.format.grammar.definition"),
    (custom("c", "text"), "tools.0.custom.format"),
    ({"type": "custom", "custom": {"name": "c", "description": 3}}, "tools.0.custom.description"),
])
def test_bad_custom_tools_name_their_field(tool, param):
    with pytest.raises(onyx.RequestError) as e:
        parse_tools([tool])
    assert e.value.param == param


def test_tool_choice_names_custom_tools_and_allowed_tools():
    assert parse_tool_choice({"type": "custom", "custom": {"name": "calc"}}, FUNCTIONS) == ToolChoice("function", "calc")
    # The type must match the tool's kind.
    for bad in ({"type": "function", "function": {"name": "calc"}}, {"type": "custom", "custom": {"name": "get_weather"}},
                {"type": "custom", "custom": {"name": "nope"}}):
        with pytest.raises(onyx.RequestError) as e:
            parse_tool_choice(bad, FUNCTIONS)
        assert e.value.param == "tool_choice"
    allowed = {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
        {"type": "custom", "custom": {"name": "patch"}}, {"type": "function", "function": {"name": "get_weather"}}]}}
    assert parse_tool_choice(allowed, FUNCTIONS) == ToolChoice("required", allowed=("patch", "get_weather"))
    allowed["allowed_tools"]["tools"][1] = {"type": "function", "function": {"name": "calc"}}
    with pytest.raises(onyx.RequestError) as e:
        parse_tool_choice(allowed, FUNCTIONS)
    assert e.value.param == "tool_choice.allowed_tools.tools.1"
    with pytest.raises(onyx.RequestError) as e:
        parse_tool_choice({"type": "allowed_tools", "allowed_tools": {"mode": "sometimes", "tools": []}}, FUNCTIONS)
    assert e.value.param == "tool_choice.allowed_tools.mode"


def check_input(name: str, text: str) -> None:
    """The input is a sentence of the tool's format."""
    if name == "calc":
        SUMS_PARSER.parse(text)  # raises when lark refuses it
    elif name == "patch":
        assert re.fullmatch(PATCH_REGEX, text), text
    else:
        assert isinstance(text, str)


def reassemble(deltas: list[dict]) -> list[dict]:
    calls: list[dict] = []
    for d in deltas:
        for c in d.get("tool_calls", []):
            if c["index"] == len(calls):
                kind = c["type"]
                assert c["id"] and c[kind]["name"], "a call's first delta carries its id, type and name"
                calls.append({"id": c["id"], "type": kind, kind: dict(c[kind])})
            else:
                (key,) = set(c) - {"index"}
                (part,) = c[key].items()
                calls[c["index"]][key][part[0]] += part[1]
    return calls


def test_calls_of_custom_tools_parse_into_sentences(smollm2, chatml):
    """Required calls among the four custom tools and a function: every random walk parses into
    calls; a custom call's input is a sentence of its grammar, and streamed deltas (cut at
    random, escapes split) reassemble to the same calls."""
    rng = random.Random(5)
    p = T.plan(chatml, smollm2, FUNCTIONS, parse_tool_choice("required", FUNCTIONS))
    assert p.format is tf.HERMES and p.custom_names == CUSTOM
    g = smollm2.compile_structure(p.spec)
    assert g.is_pushdown  # the Lark tool recurses
    seen = set()
    for _ in range(25):
        text = walk(g, smollm2, rng, steps=rng.randrange(5, 60), prefix=p.format.opener.encode()).decode()
        msg = parse(text, p.format, custom=CUSTOM)
        assert msg.tool_calls and not msg.incomplete, text
        for call in msg.tool_calls:
            if call["type"] == "custom":
                assert set(call["custom"]) == {"name", "input"} and "function" not in call
                check_input(call["custom"]["name"], call["custom"]["input"])
                seen.add(call["custom"]["name"])
            else:
                assert json.loads(call["function"]["arguments"]).keys() == {"city"}
        for _ in range(2):
            parser = ToolCallParser(p.format, new_id=counter_ids(), custom=CUSTOM)
            deltas, i = [], 0
            while i < len(text):
                n = rng.choice([1, 1, 2, 5, 13])
                deltas += parser.feed(text[i:i + n])
                i += n
            deltas += parser.finish()
            assert reassemble(deltas) == parse(text, p.format, new_id=counter_ids(), custom=CUSTOM).tool_calls
    assert len(seen) >= 2
    # Each custom tool named: one call of it.
    for name in sorted(CUSTOM):
        named = T.spec(p.format, smollm2, FUNCTIONS, ToolChoice("function", name))
        g = smollm2.compile_structure(named)
        for _ in range(3):
            text = walk(g, smollm2, rng, steps=rng.randrange(3, 40), prefix=p.format.opener.encode()).decode()
            (call,) = parse(text, p.format, custom=CUSTOM).tool_calls
            assert call["type"] == "custom" and call["custom"]["name"] == name
            check_input(name, call["custom"]["input"])


def test_the_escape_is_what_constrains_the_string(smollm2):
    """A Lark sentence holding quotes is accepted JSON-escaped, and refused with a raw quote."""
    spec = tf.custom_arguments_spec(tf.HERMES, smollm2, FUNCTIONS[0].custom)
    g = smollm2.compile_structure(spec)
    sentence = 'a+("b c"+d)'
    assert g.validate(json.dumps({"input": sentence})).valid
    assert g.validate(json.dumps({"input": f"{sentence}+\"é\""}, ensure_ascii=False)).valid
    assert not g.validate('{"input": "a+("b c"+d)"}').valid
    assert not g.validate(json.dumps({"input": "a+"})).valid
    free = smollm2.compile_structure(tf.custom_arguments_spec(tf.HERMES, smollm2, CustomFormat("text")))
    assert free.validate(json.dumps({"input": "any \"text\"\n\u00e9"}, ensure_ascii=False)).valid
    assert not free.validate('{"input": "a"b"}').valid
    # Free text is a JSON Schema string: the escapes writers use stand for their characters.
    assert free.validate('{"input": "\\u00e9"}').valid
    # A grammar's sentence is spelled one way (json_escape.rs): é raw, not \u00e9.
    assert not g.validate(json.dumps({"input": f"{sentence}+\"é\""})).valid


def test_allowed_tools_narrow_the_calls(smollm2, chatml):
    choice = parse_tool_choice({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
        {"type": "custom", "custom": {"name": "patch"}}]}}, FUNCTIONS)
    p = T.plan(chatml, smollm2, FUNCTIONS, choice)
    g = smollm2.compile_structure(p.spec)
    rng = random.Random(2)
    for _ in range(5):
        text = walk(g, smollm2, rng, steps=rng.randrange(3, 30), prefix=p.format.opener.encode()).decode()
        calls = parse(text, p.format, custom=CUSTOM).tool_calls
        assert calls and all(c["type"] == "custom" and c["custom"]["name"] == "patch" for c in calls)
    # Every tool is still shown to the model.
    assert all(f.name in T.describe(p.format, list(p.functions)) for f in FUNCTIONS)


def test_bad_grammars_name_their_tool(smollm2, chatml):
    tools = [WEATHER, custom("calc", grammar("lark", "start: foo\n"))]
    functions = parse_tools(tools)
    with pytest.raises(onyx.InvalidGrammarError) as e:
        T.plan(chatml, smollm2, functions, ToolChoice("auto"))
    assert e.value.param == "tools.1.custom.format.grammar.definition" and e.value.rule == "foo" and e.value.line == 1
    functions = parse_tools([custom("re", grammar("regex", "a(b"))])
    with pytest.raises(onyx.InvalidRegexError) as e:
        T.plan(chatml, smollm2, functions, ToolChoice("required"))
    assert e.value.param == "tools.0.custom.format.grammar.definition"
    # A special token inside the input is refused (a JSON string holds text).
    functions = parse_tools([custom("tok", grammar("lark", 'start: "a" <|im_end|>\n'))])
    with pytest.raises(onyx.GrammarError) as e:
        T.plan(chatml, smollm2, functions, ToolChoice("required"))
    assert e.value.param == "tools.0.custom.format.grammar.definition"
    # FunctionGemma's strings are not JSON strings: grammars are refused there, free text is not.
    with pytest.raises(onyx.RequestError) as e:
        T.check_custom_tools(tf.FUNCTION_GEMMA, smollm2, FUNCTIONS)
    assert e.value.param == "tools.0.custom.format"
    T.check_custom_tools(tf.FUNCTION_GEMMA, smollm2, FUNCTIONS[2:])


def test_the_input_decodes_across_any_cut():
    """Escapes (surrogate pairs included) cut anywhere between feeds decode to the same input."""
    text = 'a "quoted" \\ back\nslash\t\u0001 é 😀 end'
    args = json.dumps({"input": text})  # ASCII-only: é and 😀 as \u escapes, 😀 a surrogate pair
    assert "\\ud83d\\ude00" in args
    written = tf.render_calls(tf.HERMES, [("note", args)])
    for cut in range(1, 40):
        parser = ToolCallParser(tf.HERMES, new_id=counter_ids(), custom=frozenset({"note"}))
        deltas = [d for i in range(0, len(written), cut) for d in parser.feed(written[i:i + cut])] + parser.finish()
        (call,) = reassemble(deltas)
        assert call["custom"] == {"name": "note", "input": text}, cut
        assert parser.result.tool_calls == [call]
    # Arguments that are not {"input": "..."} (an unconstrained model) are the input as written.
    (call,) = parse(tf.render_calls(tf.HERMES, [("note", '{"text": 1}')]), tf.HERMES,
                    custom=frozenset({"note"})).tool_calls
    assert call["custom"]["input"] == '{"text": 1}'


def test_custom_calls_in_the_conversation(smollm2, chatml):
    conversation = [
        {"role": "user", "content": "Add a and b."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "custom", "custom": {"name": "calc", "input": 'a+"b"'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ab"},
    ]
    msgs = check_messages(conversation)
    assert msgs[1]["tool_calls"] == [{"id": "call_1", "type": "function",
                                      "function": {"name": "calc", "arguments": '{"input": "a+\\"b\\""}'}}]
    p = T.plan(chatml, smollm2, FUNCTIONS, ToolChoice("auto"))
    prompt = T.render(chatml, msgs, p)
    assert '<tool_call>\n{"name": "calc", "arguments": {"input": "a+\\"b\\""}}\n</tool_call>' in prompt
    assert "<tool_response>\nab\n</tool_response>" in prompt
    # The call written in the prompt reads back as the same custom call.
    turn = prompt.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
    (call,) = parse(turn, tf.HERMES, custom=CUSTOM).tool_calls
    assert call["type"] == "custom" and call["custom"] == {"name": "calc", "input": 'a+"b"'}
    for bad, param in (({"type": "custom", "custom": {"name": "calc"}}, "messages.1.tool_calls.0.custom.input"),
                       ({"type": "custom", "custom": {"input": "x"}}, "messages.1.tool_calls.0.custom")):
        with pytest.raises(onyx.RequestError) as e:
            check_messages([conversation[0], {"role": "assistant", "content": None, "tool_calls": [bad]}])
        assert e.value.param == param
