"""Onyx as a custom logits processor in the real vLLM (the way in without a plug-in): per-request
constraints in `extra_args`, a batch of constrained and free requests, and a constraint that
fails to compile ending its own request without stopping the engine."""

from __future__ import annotations

import json
import os
import re

import jsonschema
import pytest

ITEM = {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 999},
                                         "tag": {"enum": ["red", "green"]}},
        "required": ["id", "tag"], "additionalProperties": False}


@pytest.fixture(scope="module")
def llm(model_dir):
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from vllm import LLM

    from onyx.integrations.vllm import OnyxLogitsProcessor

    engine = LLM(model=model_dir, dtype="float32", enforce_eager=True, max_model_len=1024, seed=0,
                 logits_processors=[OnyxLogitsProcessor])
    yield engine
    del engine


def params(max_tokens: int, **extra):
    from vllm import SamplingParams

    return SamplingParams(max_tokens=max_tokens, temperature=0, extra_args=extra or None)


def test_constraints_from_extra_args_in_a_mixed_batch(llm):
    cases = [("A code: ", params(16, onyx_regex=r"[a-z]{2}-[0-9]{3}")),
             ("An item as JSON: ", params(48, onyx_json_schema=json.dumps(ITEM))),
             ("Say hi: ", params(12, onyx_grammar='root ::= "hi" ("!" | "?")')),
             ("Once upon a time", params(9)),
             ("Broken: ", params(16, onyx_regex="(")),
             ("A code again: ", params(16, onyx_regex=r"[a-z]{2}-[0-9]{3}"))]
    outs = [o.outputs[0] for o in llm.generate([p for p, _ in cases], [sp for _, sp in cases], use_tqdm=False)]
    assert re.fullmatch(r"[a-z]{2}-[0-9]{3}", outs[0].text) and outs[0].finish_reason == "stop"
    jsonschema.validate(json.loads(outs[1].text), ITEM)
    assert outs[2].text in ("hi!", "hi?")
    # The free request is untouched; the broken one ends at once and the rest go on.
    assert len(outs[3].token_ids) >= 1
    assert outs[4].text == "" and outs[4].finish_reason == "stop"
    assert re.fullmatch(r"[a-z]{2}-[0-9]{3}", outs[5].text)


def test_a_request_asking_for_two_constraints_is_refused(llm):
    from vllm.exceptions import VLLMValidationError

    with pytest.raises(VLLMValidationError, match="not several"):
        llm.generate(["x"], [params(4, onyx_regex="a", onyx_lark="start: \"a\"")], use_tqdm=False)
