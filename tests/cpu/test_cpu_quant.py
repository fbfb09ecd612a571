"""Quantized weights multiplied by the BLAS shim (onyx/cpu/quant.py, quant_shim.c), against
float32 products with the same weights dequantized, and the default model against its float32
copy. Linux only (the shim is what runs them)."""

from __future__ import annotations

import ctypes
import gc
import sys

import pytest

from onyx.cpu import blas
from onyx.chat.setup import chat_ids
from onyx.models import loader as models

import mlx.core as mx  # noqa: E402  (after onyx: OpenBLAS and the shim are preloaded first)
import mlx.nn as nn  # noqa: E402
import numpy as np  # noqa: E402

from onyx.cpu.quant import CpuQuantizedEmbedding, CpuQuantizedLinear, use_quantized_weights  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or blas.shim_library() is None,
                                reason="the quantized path runs in the Linux BLAS shim")


def stats() -> list[int]:
    out = (ctypes.c_long * 3)()
    blas.shim_library().onyx_quant_stats(out)
    return list(out)


def quantized_linear(n: int, k: int, bits: int, group: int, scale_dtype=mx.float16, seed: int = 0):
    w = mx.random.normal((n, k), key=mx.random.key(seed)) * 0.05
    q = nn.QuantizedLinear.from_linear(nn.Linear(k, n, bias=False), group_size=group, bits=bits)
    q.weight, q.scales, q.biases = mx.quantize(w, group_size=group, bits=bits)
    q.scales, q.biases = q.scales.astype(scale_dtype), q.biases.astype(scale_dtype)
    dense = mx.dequantize(q.weight, q.scales.astype(mx.float32), q.biases.astype(mx.float32),
                          group_size=group, bits=bits)
    return q, dense


@pytest.mark.parametrize("n, k, bits, group, scale_dtype", [
    (64, 576, 4, 32, mx.float16), (61, 576, 8, 32, mx.float16), (50, 1536, 4, 64, mx.bfloat16),
    (35, 256, 8, 64, mx.float32), (7, 96, 4, 32, mx.float16),
])
def test_products_match_float32_with_the_dequantized_weights(n, k, bits, group, scale_dtype):
    q, dense = quantized_linear(n, k, bits, group, scale_dtype)
    shim = CpuQuantizedLinear(q, blas.shim_library())
    before = stats()
    x = mx.random.normal((45, k), key=mx.random.key(1))
    got, want = np.array(shim(x)), np.array(x @ dense.T)
    assert stats()[0] > before[0]  # the shim ran it, not MLX or OpenBLAS
    assert got.shape == (45, n)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    # one row gets the same bits alone, in a small batch (fused tiles) or a large one (buffered)
    for rows in (1, 2, 3, 5, 7, 8, 12, 13, 32):
        assert (np.array(shim(x[3:3 + rows])) == got[3:3 + rows]).all(), rows
    # leading dimensions and a bias are kept
    assert np.array(shim(x[:6].reshape(2, 3, k))).shape == (2, 3, n)


def test_the_split_between_threads_does_not_change_a_bit():
    q, _ = quantized_linear(4096, 576, 4, 32)  # large enough to be split
    shim = CpuQuantizedLinear(q, blas.shim_library())
    x = mx.random.normal((3, 576), key=mx.random.key(2))
    lib = blas.shim_library()
    try:
        lib.onyx_blas_shim_threads(1)
        alone = np.array(shim(x))
        lib.onyx_blas_shim_threads(2)
        split = np.array(shim(x))
    finally:
        lib.onyx_blas_shim_threads(blas.shim_threads())
    assert (alone == split).all()


def test_a_module_gone_is_forgotten_by_the_shim():
    q, _ = quantized_linear(16, 64, 4, 32)
    gc.collect()
    start = stats()[2]
    shim = CpuQuantizedLinear(q, blas.shim_library())
    assert stats()[2] == start + 1
    del shim
    gc.collect()
    assert stats()[2] == start


def test_a_call_that_cannot_be_the_registered_matrix_gives_nan_not_garbage():
    q, _ = quantized_linear(16, 64, 4, 32)
    shim = CpuQuantizedLinear(q, blas.shim_library())
    carrier = shim._carrier.floats  # 16 x 8 floats: 8 packed words per row
    before = stats()[1]
    bad = np.array(mx.ones((3, 8)) @ carrier.T)  # 3 rows: not a whole number of 64-value rows
    assert np.isnan(bad).all() and stats()[1] == before + 1


def test_modules_the_shim_cannot_take_stay_with_mlx():
    model = nn.Sequential(nn.Linear(64, 16), nn.Linear(64, 16))
    nn.quantize(model, group_size=32, bits=3, class_predicate=lambda p, m: p == "layers.0")
    nn.quantize(model, group_size=32, bits=4, class_predicate=lambda p, m: p == "layers.1")
    assert use_quantized_weights(model) == 1
    assert isinstance(model.layers[0], nn.QuantizedLinear) and isinstance(model.layers[1], CpuQuantizedLinear)


# -- the default model ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pair():
    return models.load(), models.load(dtype="float32")


def test_the_default_model_keeps_its_quantized_weights(pair):
    quantized, dense = pair
    assert quantized.dtype == "float32+q4,q8" and dense.dtype == "float32"
    layers = quantized.model.model.layers
    assert all(isinstance(m, CpuQuantizedLinear) for m in (layers[0].self_attn.q_proj, layers[-1].mlp.down_proj))
    assert isinstance(quantized.model.model.embed_tokens, CpuQuantizedEmbedding)


def test_logits_within_the_quantization_error_of_the_float32_copy(pair):
    quantized, dense = pair
    ids = mx.array(chat_ids(quantized, [{"role": "user", "content": "Describe Paris as JSON."}]))[None]
    got, want = np.array(quantized.model(ids)[0]), np.array(dense.model(ids)[0])
    # the float32 copy went through float16 (MLX's dequantize returns the scales' dtype), the
    # shim computes scale * q + bias in float32: the difference is float16's rounding, carried
    # through 30 layers, not more
    assert np.abs(got - want).max() <= 5e-3 * np.abs(want).max()
    assert (got.argmax(-1) == want.argmax(-1)).mean() >= 0.95


@pytest.mark.parametrize("content", ["Generate an order ID", "Describe Paris as JSON.", "Weather in Paris?",
                                     "Describe a person as JSON.", "Count to five."])
def test_greedy_answers_equal_the_float32_copy_on_the_readme_prompts(pair, content):
    quantized, dense = pair
    ids = chat_ids(quantized, [{"role": "user", "content": content}])
    assert (models.greedy_generate(quantized, ids, 40, stop_at_eos=False)
            == models.greedy_generate(dense, ids, 40, stop_at_eos=False))
