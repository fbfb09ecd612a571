"""GGUF → mlx-lm folder, on the real files: conversion happens once, the config matches the
GGUF metadata, the tensor reader matches MLX's own, and llama.cpp's rope permutation is undone."""

from __future__ import annotations

import json

import numpy as np
import pytest

from onyx.models import assets

from onyx.models import gguf_convert
from onyx.models.gguf_reader import GGUFReader, Quantized

import mlx.core as mx  # noqa: E402  (after onyx: OpenBLAS is preloaded first)
import onyx  # noqa: E402


def asset(name: str):
    try:
        return assets.fetch(name, quiet=True)
    except assets.AssetError as e:
        pytest.fail(f"asset {name} is missing and could not be fetched: {e}")


def test_conversion_happens_once(tmp_path, monkeypatch):
    gguf = asset("smollm2")  # from the real asset cache, before ONYX_CACHE moves
    monkeypatch.setenv("ONYX_CACHE", str(tmp_path))  # a cold models cache: this converts for real
    before = gguf_convert.conversions
    first = gguf_convert.convert_gguf(gguf)
    assert gguf_convert.conversions == before + 1
    assert first.parent == tmp_path / "models"
    assert first.name.startswith("smollm2-135m-instruct.q4_1-")
    marker = first / gguf_convert.MARKER
    stamp = marker.stat().st_mtime_ns
    second = gguf_convert.convert_gguf(gguf)
    assert second == first and gguf_convert.conversions == before + 1
    assert marker.stat().st_mtime_ns == stamp
    assert gguf_convert.cached_folder(gguf) == first
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.startswith(".smollm2")]  # no temp dirs left
    assert {p.name for p in first.iterdir()} >= {"config.json", "model.safetensors", "tokenizer.json",
                                                 "tokenizer_config.json", gguf_convert.MARKER}


@pytest.fixture(scope="module", params=["smollm2", "gemma3-270m"])
def converted(request):
    gguf = asset(request.param)
    folder = gguf_convert.convert_gguf(gguf)
    return gguf, folder


def test_config_matches_gguf_metadata(converted):
    gguf, folder = converted
    md = onyx.read_gguf_metadata(str(gguf))
    arch = md["general.architecture"]
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == {"llama": "llama", "gemma3": "gemma3_text"}[arch]
    assert config["num_hidden_layers"] == md[f"{arch}.block_count"]
    assert config["num_attention_heads"] == md[f"{arch}.attention.head_count"]
    assert config["num_key_value_heads"] == md[f"{arch}.attention.head_count_kv"]
    assert config["hidden_size"] == md[f"{arch}.embedding_length"]
    assert config["intermediate_size"] == md[f"{arch}.feed_forward_length"]
    assert config["vocab_size"] == len(md["tokenizer.ggml.tokens"])
    assert config["max_position_embeddings"] == md[f"{arch}.context_length"]
    assert config["tie_word_embeddings"] is True  # neither file has an output tensor
    if arch == "llama":
        assert config["rope_theta"] == md["llama.rope.freq_base"] == 100000.0
        assert config["head_dim"] == 64
        quant = config["quantization"]  # Q4_1 everywhere but the Q8_0 embedding
        assert (quant["bits"], quant["group_size"]) == (4, 32)
        assert quant["model.embed_tokens"]["bits"] == 8
    else:
        assert config["head_dim"] == md["gemma3.attention.key_length"] == 256
        assert config["sliding_window"] == md["gemma3.attention.sliding_window"] == 512
        assert config["query_pre_attn_scalar"] == 256
        assert config["rope_theta"] == 1_000_000.0 and config["rope_local_base_freq"] == 10_000.0
        quant = config["quantization"]  # Q5_0 mostly, Q8_0 embedding and some v_proj, K-quants -> float
        assert quant["bits"] == 5 and quant["model.embed_tokens"]["bits"] == 8
        assert quant["model.layers.0.mlp.down_proj"] is False
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    eos = config["eos_token_id"]
    assert md["tokenizer.ggml.eos_token_id"] in (eos if isinstance(eos, list) else [eos])
    assert tokenizer_config["eos_token"] == md["tokenizer.ggml.tokens"][md["tokenizer.ggml.eos_token_id"]]


def test_reader_matches_mlx_for_q4_1_and_q8_0():
    # mx.load reads Q4_0/Q4_1/Q8_0 correctly (not Q5_0, and its Q4_K is wrong in mlx 0.32.4):
    # our reader must give bit-identical MLX-quantized arrays for these.
    path = asset("smollm2")
    ref = mx.load(str(path))
    with GGUFReader(path) as reader:
        for name in ("token_embd.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight", "output_norm.weight"):
            t = reader.load(name)
            base = name.rsplit(".", 1)[0]
            if isinstance(t, Quantized):
                for field in ("weight", "scales", "biases"):
                    assert np.array_equal(getattr(t, field), np.array(ref[f"{base}.{field}"])), (name, field)
            else:
                assert np.array_equal(t, np.array(ref[name]))


def test_unpermute_inverts_llama_cpp_rope_permutation():
    heads, head_dim, cols = 3, 8, 5
    hf = np.arange(heads * head_dim * cols, dtype=np.float32).reshape(heads * head_dim, cols)
    # llama.cpp's converter: per head, the two halves of the rows become interleaved pairs.
    gguf = hf.reshape(heads, 2, head_dim // 2, cols).swapaxes(1, 2).reshape(hf.shape)
    assert not np.array_equal(gguf, hf)
    assert np.array_equal(gguf_convert._unpermute_rows(gguf, heads), hf)
