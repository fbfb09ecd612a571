"""vLLM's CPU build with the onyx structured-output backend, in the vLLM environment the
Makefile builds (`make vllm-test`): the default model (SmolLM2-135M-Instruct) converted from
the project's GGUF to a float32 Hugging Face folder once, in the cache directory."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

# By path: the checkout's root is not on sys.path here, so `onyx` is the installed wheel.
_spec = importlib.util.spec_from_file_location("vllm_worker", Path(__file__).resolve().parents[2] / "bench" / "vllm_worker.py")
vllm_worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vllm_worker)


@pytest.fixture(scope="session")
def model_dir() -> str:
    return vllm_worker.default_model()
