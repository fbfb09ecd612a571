"""onyx.integrations.transformers: `model.generate` on a real model transformers loads from the
default model's GGUF gives valid output for a regex and a JSON Schema, batched; and the
processor's masks, row by row, on synthetic scores (rows reordered as beam search does, rows
that ended padded). torch is the `torch` extra, which `make test` installs."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import jsonschema
import numpy as np
import pytest

import onyx
from onyx.models import assets

try:
    import torch
except ImportError:  # only the message differs: every test here then fails
    torch = None

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def Processor():
    if torch is None:
        pytest.fail("torch is not installed: `make test` installs it (the `torch` extra: pip install -e '.[torch]')")
    torch.set_num_threads(1)  # a shared 2-core machine: a second thread spinning costs far more than it gives
    from onyx.integrations.transformers import GrammarLogitsProcessor

    return GrammarLogitsProcessor


@pytest.fixture(scope="module")
def hf_model(Processor):
    """SmolLM2-135M-Instruct as transformers reads it: tokenizer and weights from the GGUF."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = assets.asset_path("smollm2")
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `python -m onyx.models.assets fetch smollm2` (make test does)")
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
    model.eval()
    return model, tokenizer


def prompts(tokenizer, texts: list[str]):
    chats = [tokenizer.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True, tokenize=False)
             for t in texts]
    return tokenizer(chats, return_tensors="pt", padding=True, add_special_tokens=False)


def completions(tokenizer, out, enc) -> list[str]:
    start = enc["input_ids"].shape[1]
    return [tokenizer.decode(row[start:], skip_special_tokens=True) for row in out]


@pytest.mark.slow
def test_regex_batched_greedy(Processor, hf_model):
    model, tokenizer = hf_model
    pattern = r"[A-Z]{3}-[0-9]{4}"
    processor = Processor(tokenizer, regex=pattern, max_new_tokens=16)
    enc = prompts(tokenizer, ["Generate an order ID", "Give me the product code of a blue chair"])
    out = model.generate(**enc, max_new_tokens=16, do_sample=False, logits_processor=[processor],
                         pad_token_id=tokenizer.eos_token_id)
    texts = completions(tokenizer, out, enc)
    assert all(re.fullmatch(pattern, t) for t in texts), texts
    generated = out[:, enc["input_ids"].shape[1]:]
    assert all(tokenizer.eos_token_id in row.tolist() for row in generated)  # each row stopped at EOS


@pytest.mark.slow
def test_json_schema_sampled_and_budget_aware(Processor, hf_model):
    model, tokenizer = hf_model
    grammar = Processor(tokenizer, json_schema=PERSON).grammar
    shortest = grammar.min_tokens_to_accept(grammar.initial_state)
    for max_new_tokens in (48, shortest + 2):
        processor = Processor(tokenizer, json_schema=PERSON, max_new_tokens=max_new_tokens)
        enc = prompts(tokenizer, ["Describe a person as JSON.", "Give me a JSON record of a user."])
        torch.manual_seed(3)
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=True, temperature=0.9,
                             logits_processor=[processor], pad_token_id=tokenizer.eos_token_id)
        for text in completions(tokenizer, out, enc):
            jsonschema.validate(json.loads(text), PERSON)
            assert processor.matches(text)


# --- the processor on its own (a transformers fast tokenizer, synthetic scores) ----------------


@pytest.fixture(scope="module")
def fast_tokenizer(Processor, hf_tokenizers):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=hf_tokenizers["smollm2"], eos_token="<|im_end|>")


def ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def allowed_sets(scores) -> list[set[int]]:
    return [set(np.flatnonzero(np.isfinite(row.numpy())).tolist()) for row in scores]


def test_each_row_gets_its_own_state(Processor, fast_tokenizer):
    tok = fast_tokenizer
    p = Processor(tok, regex=r"[a-z]+@[a-z]+\.com")
    g = p.grammar
    width = 49152 + 8  # scores wider than the vocabulary
    prompt = torch.tensor([[5, 6, 7], [8, 9, 10]])
    first = p(prompt, torch.zeros(2, width))
    initial = set(g.allowed_token_ids(g.initial_state).tolist())
    assert allowed_sets(first) == [initial, initial]
    a, b = ids(tok, "janedoe"), ids(tok, "bob@xyz")  # before the @ / after it
    n = min(len(a), len(b))
    for k in range(1, n + 1):
        rows = [a[:k], b[:k]]
        scores = p(torch.cat([prompt, torch.tensor(rows)], dim=1), torch.zeros(2, width))
    expected = []
    for row in rows:
        s = g.initial_state
        for t in row:
            s = g.advance(s, t)
        expected.append(set(g.allowed_token_ids(s).tolist()))
    assert allowed_sets(scores) == expected and expected[0] != expected[1]
    assert scores.dtype == torch.float32 and scores.shape == (2, width)


def test_rows_reordered_by_beam_search_are_walked_again(Processor, fast_tokenizer):
    tok = fast_tokenizer
    p = Processor(tok, regex=r"[0-9]+(\.[0-9]+)?")
    prompt = torch.tensor([[1, 1], [1, 1]])
    one, dot = ids(tok, "1"), ids(tok, ".")
    p(prompt, torch.zeros(2, 49152))
    p(torch.cat([prompt, torch.tensor([one, one])], 1), torch.zeros(2, 49152))
    p(torch.cat([prompt, torch.tensor([one + dot, one + one])], 1), torch.zeros(2, 49152))
    swapped = torch.cat([prompt, torch.tensor([one + one + one, one + dot + one])], 1)  # beams swapped
    scores = p(swapped, torch.zeros(2, 49152))
    fresh = Processor(tok, regex=r"[0-9]+(\.[0-9]+)?")
    fresh(prompt, torch.zeros(2, 49152))
    expected = fresh(swapped, torch.zeros(2, 49152))
    assert torch.equal(scores, expected)
    assert allowed_sets(scores)[0] != allowed_sets(scores)[1]  # "111" may still take a dot, "1.1" may not


def test_a_row_that_ended_allows_only_eos_whatever_pads_it(Processor, fast_tokenizer):
    tok = fast_tokenizer
    p = Processor(tok, regex=r"(yes|no)", max_new_tokens=4)
    eos = tok.eos_token_id
    prompt = torch.tensor([[3, 4], [3, 4]])
    p(prompt, torch.zeros(2, 49152))
    yes, no = ids(tok, "yes"), ids(tok, "no")
    assert len(yes) == len(no) == 1
    p(torch.cat([prompt, torch.tensor([yes, no])], 1), torch.zeros(2, 49152))
    p(torch.cat([prompt, torch.tensor([yes + [eos], no + [eos]])], 1), torch.zeros(2, 49152))
    scores = p(torch.cat([prompt, torch.tensor([yes + [eos, 0], no + [eos, 0]])], 1), torch.zeros(2, 49152))
    assert allowed_sets(scores) == [{eos}, {eos}]
    with pytest.raises(ValueError, match="one processor per generate call"):
        p(torch.tensor([[3, 4, 5]]), torch.zeros(1, 49152))


def test_half_precision_scores_keep_their_dtype(Processor, fast_tokenizer):
    p = Processor(fast_tokenizer, json_schema=PERSON, max_new_tokens=30)
    scores = p(torch.tensor([[1, 2, 3]]), torch.zeros(1, 49152, dtype=torch.bfloat16))
    assert scores.dtype == torch.bfloat16
    assert torch.isneginf(scores).any() and torch.isfinite(scores).any()
    with pytest.raises(onyx.UnsupportedSchemaError):
        Processor(fast_tokenizer, json_schema={"type": "array", "items": {"type": "string"}, "uniqueItems": True,
                                               "minItems": 2})  # two distinct strings: refused


@pytest.mark.slow
def test_the_documented_example(hf_model):
    """The lines of docs/integrations.md, with the default model's GGUF in place of the Hugging Face download."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    code = next(b for b in re.findall(r"```python\n(.*?)```", doc, flags=re.S)
                if "onyx.integrations.transformers" in b)
    model, tokenizer = hf_model
    for name in ("AutoTokenizer", "AutoModelForCausalLM"):
        download = f'{name}.from_pretrained("HuggingFaceTB/SmolLM2-135M-Instruct")'
        assert download in code
        code = code.replace(download, f"readme_{name}")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {"readme_AutoTokenizer": tokenizer, "readme_AutoModelForCausalLM": model})
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    jsonschema.validate(json.loads(out.getvalue()), schema)  # the one print: the JSON, over lines or not
