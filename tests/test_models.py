"""Real models, no mocks: the embedded default (SmolLM2-135M-Instruct, llama, Q4_1 GGUF) and
Gemma 3 270M (gemma3, Q4_K_M GGUF with Q5_0/Q8_0/Q4_K/Q6_K tensors).

Both are fetched once per machine (`python -m onyx.assets fetch smollm2 gemma3-270m`, which
`make test` does) and converted once into ~/.cache/onyx/models; a cold first run takes about a
minute, later runs reuse the cache.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from onyx import assets, gguf_convert, models, platform
from onyx.gguf_convert import GGUFReader, Quantized
from onyx.errors import ModelError

import mlx.core as mx  # noqa: E402  (after onyx.models: OpenBLAS is preloaded first)
import mlx.nn as nn  # noqa: E402
import onyx  # noqa: E402


def asset(name: str):
    try:
        return assets.fetch(name, quiet=True)
    except assets.AssetError as e:
        pytest.fail(f"asset {name} is missing and could not be fetched: {e}")


@pytest.fixture(scope="module")
def smollm2():
    return models.load()  # the default model


@pytest.fixture(scope="module")
def gemma3():
    return models.load(str(asset("gemma3-270m")))  # by path: the GGUF route


# -- answers ------------------------------------------------------------------------------------

def test_default_model_answers_the_capital_of_france(smollm2):
    assert smollm2.name == "smollm2"
    assert smollm2.vocab_size == 49152
    assert smollm2.eos_token_ids == [2]  # <|im_end|>
    ids = smollm2.chat_ids([{"role": "user", "content": "What is the capital of France?"}])
    assert smollm2.tokenizer.decode(ids).startswith("<|im_start|>")  # the ChatML template
    out = models.greedy_generate(smollm2, ids, 24)
    text = smollm2.tokenizer.decode(out)
    assert "Paris" in text, text
    assert out[-1] == 2, "generation should stop at <|im_end|>"


def test_gemma3_completes_sensibly(gemma3):
    # Gemma 3 270M here is the base model (no chat template): plain completions. Measured greedy
    # outputs: " Paris\nQuestion: ...", " 6, 7, 8, 9, 10, ...". A wrong RMSNorm convention (the
    # +1 llama.cpp adds) or a bad Q5_0 decode turns both into noise.
    assert gemma3.vocab_size == 262144
    assert 1 in gemma3.eos_token_ids and 106 in gemma3.eos_token_ids  # <eos>, <end_of_turn>
    assert gemma3.bos_token_id == 2
    tok = gemma3.tokenizer
    ids = gemma3.encode("Question: What is the capital of France?\nAnswer:")
    assert ids[0] == 2 and ids.count(2) == 1
    answer = tok.decode(models.greedy_generate(gemma3, ids, 8))
    assert answer.strip().startswith("Paris"), answer
    counting = tok.decode(models.greedy_generate(gemma3, gemma3.encode("1, 2, 3, 4, 5,"), 10))
    assert counting.startswith(" 6, 7, 8"), counting


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_cpu_rope_reads_a_table_and_metal_keeps_mlx_rope(name, request):
    from onyx.cpu_rope import TableRoPE

    loaded = request.getfixturevalue(name)
    ropes = [m.rope for _, m in loaded.model.named_modules() if hasattr(m, "rope")]
    assert ropes
    assert all(isinstance(r, TableRoPE) == (loaded.device == "cpu") for r in ropes)


def test_greedy_generate_matches_recomputing_without_a_cache(smollm2):
    ids = smollm2.chat_ids([{"role": "user", "content": "Name a color."}])
    fast = models.greedy_generate(smollm2, ids, 6, stop_at_eos=False)
    seq = list(ids)
    for _ in range(6):
        logits = smollm2.model(mx.array(seq)[None])
        seq.append(int(mx.argmax(logits[0, -1]).item()))
    assert fast == seq[len(ids):]
    assert models.greedy_generate(smollm2, ids, 0) == []


# -- conversion ---------------------------------------------------------------------------------

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


def test_metal_path_loads_the_same_weights_quantized(smollm2):
    # What a Mac does with the folder: keep the quantized modules, per-module bits from config.
    quantized = models.load(dequantize=False)
    embed = quantized.model.model.embed_tokens
    q_proj = quantized.model.model.layers[0].self_attn.q_proj
    assert isinstance(embed, nn.QuantizedEmbedding) and embed.bits == 8
    assert isinstance(q_proj, nn.QuantizedLinear) and q_proj.bits == 4 and q_proj.group_size == 32
    assert "q4" in quantized.dtype and "q8" in quantized.dtype
    for qm, fm in ((embed, smollm2.model.model.embed_tokens),
                   (q_proj, smollm2.model.model.layers[0].self_attn.q_proj)):
        dense = mx.dequantize(qm.weight, qm.scales, qm.biases, group_size=qm.group_size, bits=qm.bits)
        assert mx.array_equal(dense.astype(mx.float32), fm.weight).item()
    assert smollm2.dtype == ("float32" if smollm2.device == "cpu" else smollm2.dtype)


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


# -- errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, words", [
    ("/nonexistent/dir/model.gguf", ["/nonexistent/dir/model.gguf", "no such file"]),
    ("./missing-model.gguf", ["missing-model.gguf", "no such file"]),
    ("no-such-model", ["no-such-model", "not a model Onyx knows", "smollm2"]),
])
def test_bad_specs_raise_model_error(spec, words):
    with pytest.raises(ModelError) as e:
        models.load(spec)
    for word in words:
        assert word in str(e.value)


def test_files_that_are_not_models_raise_model_error(tmp_path):
    not_gguf = tmp_path / "weights.bin"
    not_gguf.write_bytes(b"hello")
    with pytest.raises(ModelError, match="not a GGUF file"):
        models.load(str(not_gguf))
    with pytest.raises(ModelError, match="no config.json"):
        models.load(str(tmp_path))
    truncated = tmp_path / "truncated.gguf"
    with open(asset("smollm2"), "rb") as f:
        truncated.write_bytes(f.read(3_000_000))
    with pytest.raises(ModelError, match="truncated"):
        models.load(str(truncated))


def test_unreachable_hugging_face_id_says_so():
    # No hub is reachable from the test machines; on a Mac with internet this id would download.
    spec = "onyx-tests-no-such-org/no-such-model"
    with pytest.raises(ModelError) as e:
        models.load(spec)
    message = str(e.value)
    assert spec in message and "not a local file or folder" in message and "download" in message


# -- platform -----------------------------------------------------------------------------------

def test_platform_choices_and_blas():
    status = platform.blas_status()
    assert isinstance(status, str) and status
    if sys.platform == "darwin":
        assert platform.ensure_fast_blas() is False
    else:
        assert platform.default_device() == "cpu" and not platform.is_apple_silicon()
        if platform.find_blas_library() and "OpenBLAS" in status:
            assert platform.ensure_fast_blas() is True
    # Whatever BLAS (and shim) is in use, one-row, one-column and few-row products (the shim's
    # own kernels: 1..8 rows, any K and N, with tails) must be right, transposed or not, with
    # beta = 0 on uninitialised outputs and with alpha/beta.
    rng = np.random.default_rng(0)
    for m, n, k in [(1, 300, 70), (1, 130, 1541), (300, 1, 70), (1, 1, 9), (5, 6, 7), (2, 300, 70), (8, 130, 17),
                    (3, 64, 576), (7, 1000, 8), (9, 40, 33)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        c = rng.standard_normal((m, n)).astype(np.float32)
        for A in (mx.array(a), mx.array(np.ascontiguousarray(a.T)).T):
            for B in (mx.array(b), mx.array(np.ascontiguousarray(b.T)).T):
                np.testing.assert_allclose(np.array(A @ B), a @ b, rtol=1e-4, atol=1e-4)
                np.testing.assert_allclose(np.array(mx.addmm(mx.array(c), A, B, alpha=0.5, beta=2.0)),
                                           0.5 * (a @ b) + 2 * c, rtol=1e-4, atol=1e-4)
        wide = mx.array(np.concatenate([a, rng.standard_normal((m, 5)).astype(np.float32)], axis=1))
        np.testing.assert_allclose(np.array(wide[:, :k] @ mx.array(np.ascontiguousarray(b.T)).T), a @ b,
                                   rtol=1e-4, atol=1e-4)  # a row stride larger than K
