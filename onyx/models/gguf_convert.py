"""Converts a GGUF file, once, into an mlx-lm model folder.

    path = convert_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")
    # -> ~/.cache/onyx/models/smollm2-135m-instruct.q4_1-<sha256[:12]>/
    #      config.json  model.safetensors  tokenizer.json  tokenizer_config.json  onyx_gguf.json

The folder is what `mlx_lm.utils.load_model` reads: mlx-lm's config for the architecture, the
weights under mlx-lm's parameter names, and a Hugging Face tokenizer rebuilt from the GGUF header
(`onyx.models.gguf_tokenizer`). It is keyed by the GGUF's sha256, written into a temporary directory and
renamed into place, so a half-written folder is never used and a second call does no work.

Tensors are read with the GGUF reader of `onyx.models.gguf_reader` (see there for which tensor types
stay quantized and which become float16).

* Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 are affine per 32 values (`x = d*q + m`), which is exactly
  MLX's affine quantization with group size 32: they stay quantized in the folder (`weight`
  uint32, `scales`, `biases` float16) with their own bit width (4, 5 or 8), and config.json gets
  mlx-lm's `quantization` entry with a per-module entry for every module whose bits differ from
  the default (and `false` for float modules), so a Mac loads them quantized.
* K-quants (Q4_K, Q5_K, Q6_K), F16, BF16 and F32 become float16.

Architecture conventions of llama.cpp's converters that are undone here:
* llama: `attn_q` / `attn_k` rows are permuted for llama.cpp's rope layout (pairs interleaved);
  they are permuted back per head (rows of `weight`, `scales` and `biases` alike).
* gemma3: RMSNorm weights are stored with Gemma's "+1" added; mlx-lm's Gemma adds 1 itself, so
  1 is subtracted here. (Checked: with the +1 left in, Gemma 3 270M answers garbage.)
"""

from __future__ import annotations

import onyx.cpu  # noqa: F401,I001 - OpenBLAS preloaded before MLX (Linux)
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from onyx.models.gguf_reader import GROUP, GGUFError, GGUFReader, Quantized

CONVERTER_VERSION = 1
MARKER = "onyx_gguf.json"


# ----------------------------------------------------------------------------------------------
# Architectures: config.json and tensor names
# ----------------------------------------------------------------------------------------------

_LAYER_NAMES = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm",
}
_ARCH_LAYER_NAMES = {
    "llama": {"ffn_norm": "post_attention_layernorm"},
    "qwen2": {"ffn_norm": "post_attention_layernorm"},
    "gemma3": {
        "ffn_norm": "pre_feedforward_layernorm", "post_attention_norm": "post_attention_layernorm",
        "post_ffw_norm": "post_feedforward_layernorm", "attn_q_norm": "self_attn.q_norm",
        "attn_k_norm": "self_attn.k_norm",
    },
}
SUPPORTED_ARCHITECTURES = tuple(_ARCH_LAYER_NAMES)


def mlx_name(arch: str, gguf_name: str) -> str | None:
    """mlx-lm parameter name of GGUF tensor `gguf_name` (None: not a model parameter)."""
    top = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
           "output.weight": "lm_head.weight"}
    if gguf_name in top:
        return top[gguf_name]
    if gguf_name == "rope_freqs.weight":
        return None
    m = re.fullmatch(r"blk\.(\d+)\.(\w+)\.(weight|bias)", gguf_name)
    if m:
        names = {**_LAYER_NAMES, **_ARCH_LAYER_NAMES[arch]}
        if m.group(2) in names:
            return f"model.layers.{m.group(1)}.{names[m.group(2)]}.{m.group(3)}"
    raise GGUFError(f"GGUF tensor {gguf_name!r} has no counterpart in mlx-lm's {arch} model")


def _get(md: dict, key: str, default: Any = None, *, required: bool = False) -> Any:
    if key in md:
        return md[key]
    if required:
        raise GGUFError(f"GGUF metadata has no {key!r}")
    return default


def _rope_scaling(md: dict, p: str) -> dict | None:
    kind = _get(md, f"{p}.rope.scaling.type")
    if kind in (None, "none"):
        return None
    if kind == "linear":
        return {"rope_type": "linear", "factor": float(md[f"{p}.rope.scaling.factor"])}
    raise GGUFError(f"rope scaling {kind!r} in GGUF metadata is not supported by the converter")


def _llama3_rope_scaling(freqs: np.ndarray, theta: float, head_dim: int) -> dict:
    """Llama 3.x GGUFs carry `rope_freqs` (per-dimension divisors) instead of the scaling
    parameters mlx-lm wants. Infer them assuming Llama 3's published low/high frequency factors
    and check that they reproduce the tensor exactly."""
    freqs = freqs.reshape(-1).astype(np.float64)
    factor = float(freqs.max())
    for original in (8192, 4096, 16384, 32768):
        cand = {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": original}
        inv = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
        wavelen = 2 * np.pi / inv
        low_wl, high_wl = original / 1.0, original / 4.0
        smooth = (original / wavelen - 1.0) / (4.0 - 1.0)
        divisor = np.where(wavelen > low_wl, factor, np.where(wavelen < high_wl, 1.0, 1.0 / ((1 - smooth) / factor + smooth)))
        if divisor.shape == freqs.shape and np.allclose(divisor, freqs, rtol=1e-3):
            return cand
    raise GGUFError("GGUF tensor rope_freqs does not match Llama 3 rope scaling; this model's rope "
                    "scaling is not supported by the converter")


def model_config(md: dict, reader: GGUFReader) -> dict:
    """mlx-lm's config.json for the model in GGUF metadata `md`."""
    arch = _get(md, "general.architecture", required=True)
    if arch not in SUPPORTED_ARCHITECTURES:
        raise GGUFError(f"GGUF architecture {arch!r} is not supported (supported: {', '.join(SUPPORTED_ARCHITECTURES)})")
    p = arch
    hidden = int(_get(md, f"{p}.embedding_length", required=True))
    heads = int(_get(md, f"{p}.attention.head_count", required=True))
    kv_heads = int(_get(md, f"{p}.attention.head_count_kv", heads))
    head_dim = int(_get(md, f"{p}.attention.key_length", hidden // heads))
    embed = reader.tensors.get("token_embd.weight")
    if embed is None:
        raise GGUFError(f"{reader.path} has no token_embd tensor")
    vocab = int(embed.shape[0])
    config: dict[str, Any] = {
        "hidden_size": hidden,
        "num_hidden_layers": int(_get(md, f"{p}.block_count", required=True)),
        "intermediate_size": int(_get(md, f"{p}.feed_forward_length", required=True)),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "rms_norm_eps": float(_get(md, f"{p}.attention.layer_norm_rms_epsilon", 1e-6)),
        "vocab_size": vocab,
        "max_position_embeddings": int(_get(md, f"{p}.context_length", 2048)),
        "tie_word_embeddings": "output.weight" not in reader.tensors,
    }
    rope_scaling = _rope_scaling(md, p)
    if arch == "llama":
        theta = float(_get(md, f"{p}.rope.freq_base", 10000.0))
        if "rope_freqs.weight" in reader.tensors:
            rope_scaling = _llama3_rope_scaling(reader.load("rope_freqs.weight"), theta, head_dim)
        config.update(model_type="llama", architectures=["LlamaForCausalLM"], rope_theta=theta,
                      attention_bias="blk.0.attn_q.bias" in reader.tensors, mlp_bias=False,
                      rope_traditional=False)
    elif arch == "qwen2":
        config.update(model_type="qwen2", architectures=["Qwen2ForCausalLM"],
                      rope_theta=float(_get(md, f"{p}.rope.freq_base", 1000000.0)), rope_traditional=False)
    elif arch == "gemma3":
        layers = config["num_hidden_layers"]
        config.update(
            model_type="gemma3_text", architectures=["Gemma3ForCausalLM"],
            rope_theta=float(_get(md, f"{p}.rope.freq_base", 1000000.0)),
            # llama.cpp's defaults for Gemma 3 when the GGUF does not say otherwise.
            rope_local_base_freq=float(_get(md, f"{p}.rope.freq_base_swa", 10000.0)),
            sliding_window=int(_get(md, f"{p}.attention.sliding_window", 512)),
            sliding_window_pattern=int(_get(md, f"{p}.attention.sliding_window_pattern", 6)),
            # Gemma 3 27B scales queries by hidden/heads, the others by head_dim.
            query_pre_attn_scalar=int(hidden // heads if layers == 62 else head_dim),
            hidden_activation="gelu_pytorch_tanh",
        )
    if rope_scaling is not None:
        config["rope_scaling"] = rope_scaling
    eos = []
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
        if isinstance(md.get(key), int) and md[key] not in eos:
            eos.append(int(md[key]))
    if arch == "gemma3":
        tokens = md.get("tokenizer.ggml.tokens") or []
        for i in (106,) if len(tokens) > 106 and tokens[106] == "<end_of_turn>" else ():
            if i not in eos:
                eos.append(i)
    if eos:
        config["eos_token_id"] = eos if len(eos) > 1 else eos[0]
    if isinstance(md.get("tokenizer.ggml.bos_token_id"), int):
        config["bos_token_id"] = int(md["tokenizer.ggml.bos_token_id"])
    return config


def _unpermute_rows(a: np.ndarray, n_head: int) -> np.ndarray:
    """Undoes llama.cpp's rope permutation of attn_q/attn_k rows: per head, rows come as
    interleaved pairs (0, d/2, 1, d/2+1, ...); mlx-lm wants the two halves."""
    rows = a.shape[0]
    return a.reshape(n_head, rows // n_head // 2, 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)


# ----------------------------------------------------------------------------------------------
# Conversion
# ----------------------------------------------------------------------------------------------

def models_dir() -> Path:
    """Where converted models live: `$ONYX_CACHE/models` (default `~/.cache/onyx/models`)."""
    from onyx.paths import cache_dir

    return cache_dir() / "models"


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, remembered by (path, size, mtime) in the models cache so that loading a
    cached model does not rehash a large file every time."""
    path = Path(path).resolve()
    st = path.stat()
    key = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    index = models_dir() / ".sha256-index.json"
    try:
        known = json.loads(index.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    digest = h.hexdigest()
    known[key] = digest
    try:
        index.parent.mkdir(parents=True, exist_ok=True)
        tmp = index.with_name(f".sha256-index.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=0))
        os.replace(tmp, index)
    except OSError:
        pass
    return digest


def folder_name(gguf_path: str | Path, sha256: str) -> str:
    stem = Path(gguf_path).name
    stem = stem[:-5] if stem.lower().endswith(".gguf") else stem
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.").lower() or "model"
    return f"{stem}-{sha256[:12]}"


def cached_folder(gguf_path: str | Path) -> Path | None:
    """The converted folder for `gguf_path` if a complete one is cached, else None."""
    sha = file_sha256(gguf_path)
    dest = models_dir() / folder_name(gguf_path, sha)
    return dest if _is_complete(dest, sha) else None


def _is_complete(folder: Path, sha: str) -> bool:
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return marker.get("sha256") == sha and marker.get("converter_version") == CONVERTER_VERSION


conversions = 0  # how many conversions this process has done (tests check the cache with it)


def convert_gguf(gguf_path: str | Path, *, force: bool = False) -> Path:
    """Converts `gguf_path` into an mlx-lm folder under `models_dir()` once; returns the folder.

    Raises GGUFError for files that are not GGUF, truncated, or use an unsupported architecture
    or tensor type; FileNotFoundError if the file does not exist."""
    global conversions
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise FileNotFoundError(f"no such GGUF file: {gguf_path}")
    sha = file_sha256(gguf_path)
    root = models_dir()
    dest = root / folder_name(gguf_path, sha)
    if not force and _is_complete(dest, sha):
        return dest
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=root))
    try:
        info = write_mlx_folder(gguf_path, tmp)
        info.update(source=str(gguf_path.resolve()), sha256=sha, converter_version=CONVERTER_VERSION,
                    seconds=round(time.perf_counter() - started, 3), converted_at=time.time())
        (tmp / MARKER).write_text(json.dumps(info, indent=2))
        if dest.exists():
            if not force and _is_complete(dest, sha):  # another process won the race
                shutil.rmtree(tmp, ignore_errors=True)
                return dest
            shutil.rmtree(dest)  # stale: an older converter version
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    conversions += 1
    return dest


def write_mlx_folder(gguf_path: str | Path, out_dir: str | Path) -> dict:
    """Writes config.json, model.safetensors and the tokenizer files for `gguf_path` into
    `out_dir` (no caching, no atomicity: see `convert_gguf`). Returns facts for the marker."""
    import mlx.core as mx
    import onyx
    from onyx.models.gguf_tokenizer import write_tokenizer_files

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    try:
        md = onyx.read_gguf_metadata(str(gguf_path))
    except Exception as e:
        raise GGUFError(f"cannot read GGUF metadata of {gguf_path}: {e}") from e
    with GGUFReader(gguf_path) as reader:
        config = model_config(md, reader)
        arch = md["general.architecture"]
        heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
        weights: dict[str, mx.array] = {}
        bits_of: dict[str, int] = {}  # quantized module path -> bits
        float_modules: list[str] = []
        types: dict[str, int] = {}
        for name, info in reader.tensors.items():
            target = mlx_name(arch, name)
            if target is None:
                continue
            types[info.type_name] = types.get(info.type_name, 0) + 1
            t = reader.load(name)
            if arch == "llama" and re.fullmatch(r"blk\.\d+\.attn_[qk]\.(weight|bias)", name):
                n = heads if ".attn_q." in name else kv_heads
                t = t.take_rows(_unpermute_rows(np.arange(info.shape[0]), n)) if isinstance(t, Quantized) \
                    else _unpermute_rows(t, n)
            module = target.rsplit(".", 1)[0]
            if isinstance(t, Quantized):
                weights[target] = mx.array(t.weight)
                weights[module + ".scales"] = mx.array(t.scales)
                weights[module + ".biases"] = mx.array(t.biases)
                bits_of[module] = t.bits
                continue
            if arch == "gemma3" and name.endswith("norm.weight"):
                t = t - 1.0  # llama.cpp stores Gemma's 1 + w; mlx-lm's RMSNorm adds the 1 itself
            if t.ndim == 2 and target.endswith(".weight"):
                float_modules.append(module)
            weights[target] = mx.array(np.asarray(t, dtype=np.float32)).astype(mx.float16)
        if bits_of:
            default = max(set(bits_of.values()), key=list(bits_of.values()).count)
            quant: dict[str, Any] = {"group_size": GROUP, "bits": default, "mode": "affine"}
            for module, bits in sorted(bits_of.items()):
                if bits != default:
                    quant[module] = {"group_size": GROUP, "bits": bits, "mode": "affine"}
            for module in sorted(float_modules):
                quant[module] = False
            config["quantization"] = quant
            config["quantization_config"] = quant
        mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
        del weights
    (out / "config.json").write_text(json.dumps(dict(sorted(config.items())), indent=2))
    write_tokenizer_files(gguf_path, out)
    return {"architecture": arch, "tensor_types": types,
            "quantized_bits": sorted(set(bits_of.values()))}
