"""Small randomly initialised mlx-lm models (llama, qwen2, gemma3_text with sliding-window layers)
and helpers shared by the KV tests: cheap models whose every test crosses block boundaries."""

from __future__ import annotations

import random

import pytest

import onyx.cpu  # noqa: F401  (OpenBLAS before mlx.core)
import mlx.core as mx  # noqa: E402
from mlx_lm.models import gemma3_text, llama, qwen2  # noqa: E402

VOCAB = 101
ATOL = 1e-5  # incremental vs incremental (same chunking)
ATOL_FULL = 1e-4  # vs one full forward: mlx-lm's own KVCache is 1.8e-5 off it on the gemma3 model


def _init(model, seed):
    model.set_dtype(mx.float32)
    mx.eval(model.parameters())
    return model


def _seeded(seed, build):
    mx.random.seed(seed)
    return _init(build(), seed)


def make_llama(seed=0, layers=3, layer_types=None, sliding_window=None):
    args = llama.ModelArgs(model_type="llama", hidden_size=64, num_hidden_layers=layers,
                           intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                           rms_norm_eps=1e-5, vocab_size=VOCAB, layer_types=layer_types,
                           sliding_window=sliding_window)
    return _seeded(seed, lambda: llama.Model(args))


def make_qwen2(seed=1):
    args = qwen2.ModelArgs(model_type="qwen2", hidden_size=64, num_hidden_layers=2,
                           intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                           rms_norm_eps=1e-6, vocab_size=VOCAB)
    return _seeded(seed, lambda: qwen2.Model(args))


def make_gemma3(seed=2, window=6):
    args = gemma3_text.ModelArgs(model_type="gemma3_text", hidden_size=64, num_hidden_layers=4,
                                 intermediate_size=128, num_attention_heads=4, head_dim=16,
                                 num_key_value_heads=1, vocab_size=VOCAB, sliding_window=window,
                                 sliding_window_pattern=2, query_pre_attn_scalar=16)
    return _seeded(seed, lambda: gemma3_text.Model(args))


MODELS = {"llama": make_llama, "qwen2": make_qwen2, "gemma3": make_gemma3,
          "llama_swa": lambda: make_llama(seed=3, layers=4, sliding_window=5,
                                          layer_types=["sliding_attention", "full_attention"] * 2)}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    return MODELS[request.param]()


@pytest.fixture(scope="module")
def tiny():
    return make_llama()


@pytest.fixture(scope="module")
def gemma():
    return make_gemma3()


def tokens(n, seed=0):
    rng = random.Random(seed)
    return [rng.randrange(VOCAB) for _ in range(n)]


def full_logits(model, toks):
    """Reference: one forward over the whole sequence, no cache."""
    out = model(mx.array(toks)[None])[0]
    mx.eval(out)
    return out


def run(model, seq, toks):
    out = model(mx.array(toks)[None], cache=seq.layer_caches())[0]
    mx.eval(out)
    return out


def cached_prefix(model, pool, toks):
    """Runs `toks` through a new sequence and leaves their full blocks in the pool's prefix
    cache (the sequence is freed)."""
    seq = pool.sequence()
    run(model, seq, toks)
    pool.register_prefix(toks, seq)
    seq.free()


def close(a, b, atol):
    return mx.allclose(a, b, atol=atol, rtol=0).item()
