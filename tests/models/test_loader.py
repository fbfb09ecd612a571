"""Real models, no mocks: the embedded default (SmolLM2-135M-Instruct, llama, Q4_1 GGUF) and
Gemma 3 270M (gemma3, Q4_K_M GGUF with Q5_0/Q8_0/Q4_K/Q6_K tensors).

Both are fetched once per machine (`python -m onyx.models.assets fetch smollm2 gemma3-270m`, which
`make test` does) and converted once into ~/.cache/onyx/models; a cold first run takes about a
minute, later runs reuse the cache.
"""

from __future__ import annotations

import pytest

from onyx.chat.setup import chat_ids
from onyx.models import assets

from onyx.models import loader as models
from onyx.errors import ModelError

import mlx.core as mx  # noqa: E402  (after onyx.models.loader: OpenBLAS is preloaded first)
import mlx.nn as nn  # noqa: E402


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
    ids = chat_ids(smollm2, [{"role": "user", "content": "What is the capital of France?"}])
    assert smollm2.tokenizer.decode(ids).startswith("<|im_start|>")  # the ChatML template
    out = models.greedy_generate(smollm2, ids, 24)
    text = smollm2.tokenizer.decode(out)
    assert "Paris" in text, text
    assert out[-1] == 2, "generation should stop at <|im_end|>"


@pytest.mark.slow
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
    from onyx.cpu.rope import TableRoPE

    loaded = request.getfixturevalue(name)
    ropes = [m.rope for _, m in loaded.model.named_modules() if hasattr(m, "rope")]
    assert ropes
    assert all(isinstance(r, TableRoPE) == (loaded.device == "cpu") for r in ropes)


@pytest.mark.parametrize("name,swiglu", [("smollm2", True), ("gemma3", False)])
def test_cpu_mlps_take_the_vectorised_swiglu_only_where_they_compute_it(name, swiglu, request):
    # SmolLM2's MLPs are SwiGLU and take onyx.cpu.exp's on the CPU; Gemma 3's GELU ones keep theirs.
    from onyx.cpu.exp import takes_fast_swiglu

    loaded = request.getfixturevalue(name)
    mlps = [m for _, m in loaded.model.named_modules() if hasattr(m, "gate_proj")]
    switched = [takes_fast_swiglu(m) for m in mlps]
    assert mlps and all(s == (swiglu and loaded.device == "cpu") for s in switched)
    if not any(switched):
        return
    ids = mx.array(chat_ids(loaded, [{"role": "user", "content": "Name a color."}]))[None]
    got = loaded.model(ids)
    classes = [type(m) for m in mlps]
    try:
        for m, cls in zip(mlps, classes):
            m.__class__ = cls.__mro__[1]
        want = loaded.model(ids)
    finally:
        for m, cls in zip(mlps, classes):
            m.__class__ = cls
    assert float(mx.abs(got - want).max().item()) < 1e-4 * float(mx.abs(want).max().item())
    assert mx.array_equal(mx.argmax(got, axis=-1), mx.argmax(want, axis=-1))


@pytest.mark.parametrize("name,compiled", [("smollm2", True), ("gemma3", False)])
def test_cpu_rms_norms_run_compiled_where_they_are_mlxs_own(name, compiled, request):
    # SmolLM2's norms are nn.RMSNorm and run as one compiled kernel on the CPU; Gemma 3's
    # (1 + weight) subclass keeps its own. The logits stay within float32 rounding.
    from onyx.cpu.norm import takes_compiled_norm, use_compiled_norms

    loaded = request.getfixturevalue(name)
    norms = [m for _, m in loaded.model.named_modules() if "RMSNorm" in type(m).__name__]
    switched = [takes_compiled_norm(m) for m in norms]
    assert norms and all(s == (compiled and loaded.device == "cpu") for s in switched)
    if not any(switched):
        return
    ids = mx.array(chat_ids(loaded, [{"role": "user", "content": "Name a color."}]))[None]
    got = loaded.model(ids)
    try:
        for m in norms:
            m.__class__ = nn.RMSNorm
        want = loaded.model(ids)
    finally:
        switched_back = use_compiled_norms(loaded.model)  # (the fixture's model is shared)
    assert switched_back == len(norms)
    assert float(mx.abs(got - want).max().item()) < 1e-4 * float(mx.abs(want).max().item())
    assert mx.array_equal(mx.argmax(got, axis=-1), mx.argmax(want, axis=-1))


def test_greedy_generate_matches_recomputing_without_a_cache(smollm2):
    ids = chat_ids(smollm2, [{"role": "user", "content": "Name a color."}])
    fast = models.greedy_generate(smollm2, ids, 6, stop_at_eos=False)
    seq = list(ids)
    for _ in range(6):
        logits = smollm2.model(mx.array(seq)[None])
        seq.append(int(mx.argmax(logits[0, -1]).item()))
    assert fast == seq[len(ids):]
    assert models.greedy_generate(smollm2, ids, 0) == []


# -- conversion ---------------------------------------------------------------------------------

def test_metal_path_loads_the_same_weights_quantized(smollm2):
    # What a Mac does with the folder: keep the quantized modules, per-module bits from config.
    quantized = models.load(dtype="stored")
    dense_model = models.load(dtype="float32")
    embed = quantized.model.model.embed_tokens
    q_proj = quantized.model.model.layers[0].self_attn.q_proj
    assert isinstance(embed, nn.QuantizedEmbedding) and embed.bits == 8
    assert isinstance(q_proj, nn.QuantizedLinear) and q_proj.bits == 4 and q_proj.group_size == 32
    assert quantized.dtype == "float16+q4,q8" and dense_model.dtype == "float32"
    for qm, fm in ((embed, dense_model.model.model.embed_tokens),
                   (q_proj, dense_model.model.model.layers[0].self_attn.q_proj)):
        dense = mx.dequantize(qm.weight, qm.scales, qm.biases, group_size=qm.group_size, bits=qm.bits)
        assert mx.array_equal(dense.astype(mx.float32), fm.weight).item()
    # the default keeps them quantized on both platforms (on the CPU: the shim's modules)
    assert smollm2.dtype == ("float32+q4,q8" if smollm2.device == "cpu" else quantized.dtype)


def test_unknown_dtype_is_a_model_error():
    with pytest.raises(ModelError, match="dtype must be one of quantized, float32, stored"):
        models.load(dtype="int4")


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


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_every_second_cpu_layer_starts_evaluating_while_the_rest_is_built(name, request):
    # onyx.cpu.overlap: on the CPU every second decoder layer but the last starts evaluating its
    # output (mx.async_eval) once its graph is built; the logits stay bit-identical.
    from onyx.cpu import overlap as cpu_overlap
    from onyx.cpu.overlap import decoder_layers, starts_evaluation

    loaded = request.getfixturevalue(name)
    layers = decoder_layers(loaded.model)
    marked = [i for i, layer in enumerate(layers) if starts_evaluation(layer)]
    assert len(layers) > 4
    assert marked == (list(range(1, len(layers) - 1, 2)) if loaded.device == "cpu" else [])
    if not marked:
        return
    ids = mx.array(chat_ids(loaded, [{"role": "user", "content": "Name three rivers."}]))[None]
    started = []
    real = cpu_overlap._start
    cpu_overlap._start = lambda out: (started.append(out), real(out))
    try:
        got = loaded.model(ids)
    finally:
        cpu_overlap._start = real
    assert len(started) == len(marked)
    classes = [type(layer) for layer in layers]
    try:
        for i in marked:
            layers[i].__class__ = classes[i].__mro__[1]
        want = loaded.model(ids)
    finally:
        for layer, cls in zip(layers, classes):
            layer.__class__ = cls
    assert mx.array_equal(got, want)  # the same arithmetic: only when it runs changes
    assert cpu_overlap.use_overlapped_layers(loaded.model) == len(marked)  # again: nothing changes
    assert [type(layer) for layer in layers] == classes
    assert cpu_overlap.use_overlapped_layers(nn.Linear(2, 2)) == 0  # no decoder layers
