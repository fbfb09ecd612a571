"""Tool calling on real tokenizers and templates: 22 tools in `required`, named and `auto`
modes, every walk of the grammar parsing into calls whose arguments validate; streaming deltas
reassembling to the parsed message; prompts with calls and results through the DeepSeek-R1
(Qwen2 tokenizer) template and SmolLM2's ChatML fallback."""

from __future__ import annotations

import dataclasses
import json
import random

import jsonschema
import pytest

import onyx
from grammar_walks import finish, ordinary_allowed, text_of
from onyx.chat import tool_formats as tf
from onyx.chat import tools as T
from onyx.options import ToolChoice, parse_tool_choice, parse_tools
from onyx.chat.template import ChatTemplate
from onyx.chat.tool_parser import ToolCallParser, parse
from tool_schemas import TOOLS

FUNCTIONS = parse_tools(TOOLS)
FORMAT_CHECKER = jsonschema.FormatChecker()
PARAMS = {f.name: f.parameters for f in FUNCTIONS}


@pytest.fixture(scope="module")
def templates(vocabs):
    from conftest import gguf_path

    return {name: ChatTemplate.from_gguf_metadata(onyx.read_gguf_metadata(str(gguf_path(asset))))
            for name, asset in (("qwen2", "qwen2-tokenizer"), ("smollm2", "smollm2"))}


def counter_ids():
    n = iter(range(10**6))
    return lambda: f"call_{next(n)}"


def walk(g, vocab, rng, steps, prefix: bytes = b"") -> bytes:
    """A random walk (after writing `prefix` through the grammar), finished by the shortest
    route; returns the text (special tokens as their text)."""
    state, tokens = g.initial_state, []
    while prefix:
        fits = [t for t in ordinary_allowed(g, vocab, state).tolist() if prefix.startswith(vocab.token_bytes(t))]
        t = max(fits, key=lambda t: len(vocab.token_bytes(t)))
        state, prefix = g.advance(state, t), prefix[len(vocab.token_bytes(t)):]
        tokens.append(t)
    for _ in range(steps):
        allowed = ordinary_allowed(g, vocab, state)
        if len(allowed) == 0:
            break
        t = int(allowed[rng.randrange(len(allowed))])
        state = g.advance(state, t)
        tokens.append(t)
    more, state = finish(g, vocab, state, rng)
    assert g.is_accepting(state)
    return text_of(vocab, tokens + more)


def check_calls(msg, *, only: str | None = None) -> None:
    for call in msg.tool_calls:
        assert call["type"] == "function" and call["id"].startswith("call_")
        name = call["function"]["name"]
        assert name in PARAMS and (only is None or name == only)
        jsonschema.validate(json.loads(call["function"]["arguments"]), PARAMS[name], format_checker=FORMAT_CHECKER)


def reassemble(deltas: list[dict]) -> tuple[str, list[dict]]:
    """Content and tool calls from OpenAI-style stream deltas."""
    content, calls = "", []
    for d in deltas:
        content += d.get("content", "")
        for c in d.get("tool_calls", []):
            if c["index"] == len(calls):
                assert c["id"] and c["function"]["name"], "a call's first delta carries its id and name"
                calls.append({"id": c["id"], "type": c["type"], "function": dict(c["function"])})
            else:
                assert set(c) == {"index", "function"} and set(c["function"]) == {"arguments"}
                calls[c["index"]]["function"]["arguments"] += c["function"]["arguments"]
    return content, calls


def check_streaming(text: str, fmt, rng) -> None:
    whole = parse(text, fmt, new_id=counter_ids())
    for _ in range(3):
        p = ToolCallParser(fmt, new_id=counter_ids())
        deltas, i = [], 0
        while i < len(text):
            n = rng.choice([1, 1, 2, 3, 7, 20])
            deltas += p.feed(text[i:i + n])
            i += n
        deltas += p.finish()
        content, calls = reassemble(deltas)
        assert content == whole.content and calls == whole.tool_calls, text


@pytest.mark.parametrize("name", ["qwen2", "smollm2"])
def test_required_and_named_calls_always_parse_and_validate(vocabs, templates, name):
    vocab, template = vocabs[name], templates[name]
    rng = random.Random(17)
    required = T.plan(template, vocab, FUNCTIONS, parse_tool_choice("required", FUNCTIONS))
    assert required.format is (tf.DEEPSEEK_V3 if name == "qwen2" else tf.HERMES)
    g = vocab.compile_structure(required.spec)
    seen = set()
    for _ in range(20):
        # Past the format's opening markers (many tokens of text here), then at random.
        text = walk(g, vocab, rng, steps=rng.randrange(1, 30), prefix=required.format.opener.encode()).decode("utf-8")
        msg = parse(text, required.format)
        assert msg.tool_calls and msg.content == "" and not msg.incomplete, text
        check_calls(msg)
        seen |= {c["function"]["name"] for c in msg.tool_calls}
        check_streaming(text, required.format, rng)
    assert len(seen) >= 3  # random walks reach several functions; the named modes cover all
    for f in FUNCTIONS:
        choice = parse_tool_choice({"type": "function", "function": {"name": f.name}}, FUNCTIONS)
        g = vocab.compile_structure(T.spec(required.format, vocab, FUNCTIONS, choice))
        for _ in range(2):
            text = walk(g, vocab, rng, steps=rng.randrange(0, 15)).decode("utf-8")
            msg = parse(text, required.format)
            assert len(msg.tool_calls) == 1, text
            check_calls(msg, only=f.name)


@pytest.mark.parametrize("name", ["qwen2", "smollm2"])
def test_auto_is_text_or_valid_calls(vocabs, templates, name):
    vocab, template = vocabs[name], templates[name]
    p = T.plan(template, vocab, FUNCTIONS, parse_tool_choice("auto", FUNCTIONS))
    g = vocab.compile_structure(p.spec)
    rng = random.Random(23)
    called = 0
    for i in range(12):
        # Half the walks are steered into a call after a little text.
        prefix = f"Let me check.{p.format.opener}".encode() if i % 2 else b""
        text = walk(g, vocab, rng, steps=rng.randrange(0, 20), prefix=prefix).decode("utf-8", errors="replace")
        msg = parse(text, p.format)
        assert p.format.trigger not in msg.content
        check_calls(msg)
        called += bool(msg.tool_calls)
        check_streaming(text, p.format, rng)
    assert called >= 6


def test_none_never_opens_a_call(vocabs, templates):
    vocab = vocabs["qwen2"]
    p = T.plan(templates["qwen2"], vocab, FUNCTIONS, parse_tool_choice("none", FUNCTIONS))
    g = vocab.compile_structure(p.spec)
    rng = random.Random(2)
    for _ in range(4):
        text = walk(g, vocab, rng, steps=30).decode("utf-8", errors="replace")
        assert not parse(text, p.format).tool_calls


def test_a_special_token_trigger_is_that_token_only(vocabs):
    """Mistral's layout with a trigger that is a control token of this vocabulary (no
    tokenizer in the test assets has Mistral's own `[TOOL_CALLS]`)."""
    vocab = vocabs["qwen2"]
    trigger = "<|fim_prefix|>"
    fmt = dataclasses.replace(tf.MISTRAL, name="mistral_like", section_open=trigger + "[", trigger=trigger,
                              markers=(trigger,))
    spec = T.spec(fmt, vocab, FUNCTIONS[:5], ToolChoice("auto"))
    g = vocab.compile_structure(spec)
    (tid,) = g.special_tokens
    assert tid == vocab.find_tokens(trigger)[0] and vocab.is_special(tid)
    assert tid in g.allowed_token_ids(g.initial_state)
    rng = random.Random(4)
    for i in range(6):
        text = walk(g, vocab, rng, steps=8, prefix=(trigger + "[").encode() if i % 2 else b"").decode("utf-8", "replace")
        msg = parse(text, fmt)
        check_calls(msg)
        assert bool(msg.tool_calls) == bool(i % 2)


@pytest.mark.parametrize("fmt", list(tf.FORMATS.values()), ids=lambda f: f.name)
def test_every_format_round_trips(fmt):
    calls = [("get_weather", '{"city": "Paris", "unit": "celsius"}'),
             ("create_user", '{"user": {"name": "Ann", "address": {"city": "Oslo"}, "roles": ["admin"]}}')]
    text = ("I'll look that up.\n" if fmt.trigger else "") + tf.render_calls(fmt, calls)
    msg = parse(text, fmt, new_id=counter_ids())
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg.tool_calls] == \
        [(n, json.loads(a)) for n, a in calls]
    assert msg.content == ("I'll look that up.\n" if fmt.trigger else "")
    assert msg.finish_reason == "tool_calls"
    check_streaming(text, fmt, random.Random(1))
    # Cut anywhere, the parse never invents a call and keeps what was written.
    for cut in range(0, len(text), 7):
        part = parse(text[:cut], fmt)
        assert len(part.tool_calls) <= 2


def test_unconstrained_text_that_leaves_the_format_stays_content():
    text = "Use <tool_call> tags like <tool_call>\nnot json</tool_call> here."
    msg = parse(text, tf.HERMES)
    assert msg.tool_calls == [] and msg.content == text
    assert parse("plain answer {not a call}", tf.LLAMA3_JSON).content == "plain answer {not a call}"
    cut = parse('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa', tf.HERMES)
    assert cut.incomplete and cut.finish_reason is None
    assert cut.tool_calls[0]["function"]["arguments"] == '{"city": "Pa'


@pytest.mark.parametrize("fmt", list(tf.FORMATS.values()), ids=lambda f: f.name)
def test_a_call_cut_before_its_name_is_never_content(fmt):
    """A length-cut output that ends inside a call's opening, once its trigger is out: no call,
    no markup as content. (Before that, a partial trigger is text: free text may end that way.)"""
    before = "I'll look that up.\n" if fmt.trigger else ""
    text = tf.render_calls(fmt, [("get_weather", '{"city": "Paris"}')])
    header = text[:text.index("get_weather") + len("get_weather")]
    for cut in range(len(fmt.trigger) if fmt.trigger else 1, len(header)):
        msg = parse(before + header[:cut], fmt)
        assert msg.tool_calls == [] and msg.content == before and msg.incomplete, (fmt.name, header[:cut])
        assert msg.finish_reason is None


def test_detection_from_templates(templates):
    assert tf.detect(templates["qwen2"].source) is tf.DEEPSEEK_V3
    assert tf.detect(templates["smollm2"].source) is None
    snippets = {
        "{{ '[TOOL_CALLS][' }}{{ tool_calls | tojson }}": tf.MISTRAL,
        "{{ '[TOOL_CALLS]' + name + '[ARGS]' + args }}": tf.MISTRAL_ARGS,
        "{{- '<tool_call>\\n' + call | tojson + '\\n</tool_call>' }}": tf.HERMES,
        "<|python_tag|>{{ call }}": tf.LLAMA3_JSON,
        "<start_function_call>call:{{ name }}": tf.FUNCTION_GEMMA,
        "{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + name + '<｜tool▁sep｜>' + args}}": tf.DEEPSEEK_V3_1,
        "<tool_call>\n<function={{ name }}>": None,
    }
    for src, fmt in snippets.items():
        assert tf.detect(src) is fmt, src


def test_request_fields_are_checked():
    with pytest.raises(onyx.RequestError) as e:
        parse_tools([{"type": "function", "function": {"name": "bad name"}}])
    assert e.value.param == "tools.0.function.name"
    with pytest.raises(onyx.RequestError) as e:
        parse_tools([{"type": "function", "function": {"name": "f", "parameters": "x"}}])
    assert e.value.param == "tools.0.function.parameters"
    with pytest.raises(onyx.RequestError):
        parse_tools(TOOLS[:1] + TOOLS[:1])
    with pytest.raises(onyx.RequestError) as e:
        parse_tool_choice({"type": "function", "function": {"name": "nope"}}, FUNCTIONS)
    assert e.value.param == "tool_choice"
    with pytest.raises(onyx.RequestError):
        parse_tool_choice("required", [])
    assert parse_tool_choice(None, FUNCTIONS) == ToolChoice("auto")
    assert parse_tool_choice(None, []) == ToolChoice("none")
    f = parse_tools([{"type": "function", "function": {"name": "f"}}])[0]
    assert f.parameters == {"type": "object", "properties": {}} and not f.strict


CONVERSATION = [
    {"role": "user", "content": "What's the weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_7", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_7", "content": '{"temp_c": 21, "sky": "clear"}'},
]


def test_round_trip_through_the_deepseek_r1_template(vocabs, templates):
    template, vocab = templates["qwen2"], vocabs["qwen2"]
    p = T.plan(template, vocab, FUNCTIONS[:3], parse_tool_choice("auto", FUNCTIONS[:3]))
    assert p.native and p.support.renders_calls and p.support.string_arguments and not p.support.renders_tools
    prompt = T.render(template, CONVERSATION, p)
    # The tools are described in the system prompt, which this template puts first.
    assert prompt.startswith(template.bos_token + "# Tools") and '"name": "send_email"' in prompt
    assert tf.DEEPSEEK_V3.call_open in prompt  # the system prompt's example call, then the real one
    call_text = prompt[prompt.index("<｜Assistant｜>") + len("<｜Assistant｜>"):prompt.index("<｜tool▁outputs▁begin｜>")]
    call = parse(call_text + tf.DS_CALLS_END, tf.DEEPSEEK_V3).tool_calls[0]["function"]
    assert call == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert prompt.endswith('<｜tool▁output▁begin｜>{"temp_c": 21, "sky": "clear"}<｜tool▁output▁end｜><｜tool▁outputs▁end｜>')
    # The final answer after the result closes the turn.
    done = T.render(template, CONVERSATION + [{"role": "assistant", "content": "It is 21 °C and clear."}], p,
                    add_generation_prompt=False)
    assert done.endswith("<｜tool▁outputs▁end｜>It is 21 °C and clear.<｜end▁of▁sentence｜>")


def test_round_trip_through_the_chatml_fallback(vocabs, templates):
    template, vocab = templates["smollm2"], vocabs["smollm2"]
    p = T.plan(template, vocab, FUNCTIONS[:3], parse_tool_choice("auto", FUNCTIONS[:3]))
    assert not p.native and p.format is tf.HERMES and p.support == T.Support(False, False)
    prompt = T.render(template, CONVERSATION + [{"role": "tool", "tool_call_id": "call_8", "content": "second"}], p)
    assert prompt.startswith("<|im_start|>system\n# Tools")
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>' in prompt
    # Both results in one user turn, then the generation prompt.
    assert prompt.endswith('<|im_start|>user\n<tool_response>\n{"temp_c": 21, "sky": "clear"}\n</tool_response>\n'
                           '<tool_response>\nsecond\n</tool_response><|im_end|>\n<|im_start|>assistant\n')
    assistant_turn = prompt.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
    (call,) = parse(assistant_turn, tf.HERMES).tool_calls
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    done = T.render(template, CONVERSATION + [{"role": "assistant", "content": "21 °C, clear."}], p,
                    add_generation_prompt=False)
    assert done.endswith("<|im_start|>assistant\n21 °C, clear.<|im_end|>\n")
    # The user's own system message keeps its text, with the tools after it.
    with_system = T.render(template, [{"role": "system", "content": "Be brief."}] + CONVERSATION[:1], p)
    assert with_system.startswith("<|im_start|>system\nBe brief.\n\n# Tools")


def test_a_template_that_renders_tools_itself(vocabs):
    """A Hermes-style template of our own, which writes the tools, the calls (arguments as
    dicts) and the results: nothing is added to the system prompt."""
    source = (
        "{% if tools %}<|im_start|>system\nTools:{% for t in tools %}\n{{ t | tojson }}{% endfor %}<|im_end|>\n{% endif %}"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n"
        "{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>\n"
        "{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}\n</tool_call>{% endfor %}"
        "{% elif m.role == 'tool' %}<tool_response>\n{{ m.content }}\n</tool_response>"
        "{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    template = ChatTemplate(source)
    vocab = vocabs["smollm2"]
    p = T.plan(template, vocab, FUNCTIONS[:2], parse_tool_choice("required", FUNCTIONS[:2]))
    assert p.native and p.format is tf.HERMES and p.support == T.Support(True, True, False)
    prompt = T.render(template, CONVERSATION, p)
    assert "# Tools" not in prompt and prompt.count('"name": "search_web"') == 1
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in prompt
    assert prompt.endswith('</tool_response><|im_end|>\n<|im_start|>assistant\n')


def test_function_gemma_arguments_follow_their_schema(vocabs):
    """FunctionGemma's own argument syntax, on the Gemma 3 vocabulary (whose tokenizer has no
    function-call tokens, so the markers are text). Schemas with keywords the syntax cannot be
    constrained to are refused, never loosened."""
    from onyx.chat.gemma_calls import UnsupportedToolSchema

    vocab = vocabs["gemma3"]
    fmt = tf.FUNCTION_GEMMA
    usable, refused = [], []
    for f in FUNCTIONS:
        try:
            usable.append((f, vocab.compile_structure(T.spec(fmt, vocab, FUNCTIONS, ToolChoice("function", f.name)))))
        except UnsupportedToolSchema as e:
            refused.append(f.name)
            assert e.param == "tools"
    assert len(usable) >= 12 and "book_flight" in refused  # patterns and formats are refused
    rng = random.Random(9)
    for f, g in usable:
        text = walk(g, vocabs["gemma3"], rng, steps=rng.randrange(0, 12)).decode("utf-8")
        msg = parse(text, fmt)
        assert len(msg.tool_calls) == 1 and msg.tool_calls[0]["function"]["name"] == f.name, text
        check_calls(msg)
