"""vLLM's CPU build with the onyx structured-output backend, in the vLLM environment the
Makefile builds (`make vllm-test`): the default model (SmolLM2-135M-Instruct) converted from
the project's GGUF to a float32 Hugging Face folder once, in the cache directory."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

from onyx.models import assets  # noqa: E402  (no MLX, no BLAS: only where files are)
from onyx.paths import cache_dir  # noqa: E402


def convert(gguf: Path, out: Path) -> Path:
    """The GGUF model as a float32 Hugging Face folder at `out` (made once)."""
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


@pytest.fixture(scope="session")
def model_dir() -> str:
    return str(convert(assets.asset_path("smollm2"), cache_dir() / "vllm" / "smollm2-135m-instruct-f32"))
