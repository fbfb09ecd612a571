"""Converts a GGUF file, once, into an mlx-lm model folder.

    path = convert_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")
    # -> ~/.cache/onyx/models/smollm2-135m-instruct.q4_1-<sha256[:12]>/
    #      config.json  model.safetensors  tokenizer.json  tokenizer_config.json  onyx_gguf.json

The folder is what `mlx_lm.utils.load_model` reads: mlx-lm's config for the architecture, the
weights under mlx-lm's parameter names, and a Hugging Face tokenizer rebuilt from the GGUF header
(`onyx.gguf_tokenizer`). It is keyed by the GGUF's sha256, written into a temporary directory and
renamed into place, so a half-written folder is never used and a second call does no work.

Tensors are read with a small GGUF reader of our own (numpy over a memory map), not
`mx.load`: MLX's GGUF loader cannot read Q5_0, Q5_1 or Q5_K, which common files use
(Gemma 3 270M's Q4_K_M file has Q5_0 attention and FFN tensors).

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

import hashlib
import json
import mmap
import os
import re
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

CONVERTER_VERSION = 1
MARKER = "onyx_gguf.json"
GROUP = 32  # every legacy GGUF quant block is 32 values: MLX's affine group size


class GGUFError(ValueError):
    """The GGUF file cannot be converted (unsupported architecture or tensor type, bad file)."""


# ----------------------------------------------------------------------------------------------
# GGUF tensor reader
# ----------------------------------------------------------------------------------------------

# ggml type id -> (name, values per block, bytes per block)
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292), 30: ("BF16", 1, 2),
}
QUANTIZED_TYPES = {"Q4_0": 4, "Q4_1": 4, "Q5_0": 5, "Q5_1": 5, "Q8_0": 8}  # -> MLX bits
FLOAT_TYPES = {"F32", "F16", "BF16", "Q4_K", "Q5_K", "Q6_K"}  # -> float16

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # numpy order: the last axis is GGUF's ne[0], contiguous
    ggml_type: int
    offset: int  # absolute, in the file

    @property
    def type_name(self) -> str:
        return GGML_TYPES.get(self.ggml_type, (f"type {self.ggml_type}",))[0]


@dataclass
class Quantized:
    """An MLX affine-quantized matrix: `weight` uint32 (rows, cols*bits/32), `scales` and
    `biases` float16 (rows, cols/32)."""
    weight: np.ndarray
    scales: np.ndarray
    biases: np.ndarray
    bits: int

    def take_rows(self, index: np.ndarray) -> "Quantized":
        return Quantized(self.weight[index], self.scales[index], self.biases[index], self.bits)


class GGUFReader:
    """Tensor table and tensor data of a GGUF file (v2/v3), over a read-only memory map."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._file = open(self.path, "rb")
        try:
            self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:
            self._file.close()
            raise GGUFError(f"{self.path} is empty, not a GGUF file") from None
        self.tensors: dict[str, TensorInfo] = {}
        self.scalars: dict[str, Any] = {}
        self._parse()

    def close(self) -> None:
        try:
            self._map.close()
        except BufferError:
            pass  # numpy views of the map are still alive; it is unmapped when they are freed
        self._file.close()

    def __enter__(self) -> "GGUFReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _parse(self) -> None:
        m = self._map
        if m[:4] != b"GGUF":
            raise GGUFError(f"{self.path} is not a GGUF file (no GGUF magic)")
        version, = struct.unpack_from("<I", m, 4)
        if version < 2:
            raise GGUFError(f"{self.path}: GGUF version {version} is not supported (need 2 or 3)")
        n_tensors, n_kv = struct.unpack_from("<QQ", m, 8)
        pos = 24

        def string(pos: int) -> tuple[str, int]:
            n, = struct.unpack_from("<Q", m, pos)
            return bytes(m[pos + 8:pos + 8 + n]).decode("utf-8", "replace"), pos + 8 + n

        def skip_or_read(vtype: int, pos: int) -> tuple[Any, int]:
            if vtype == 8:
                return string(pos)
            if vtype == 9:
                etype, count = struct.unpack_from("<IQ", m, pos)
                pos += 12
                if etype == 8:
                    for _ in range(count):
                        n, = struct.unpack_from("<Q", m, pos)
                        pos += 8 + n
                elif etype == 9:
                    for _ in range(count):
                        _, pos = skip_or_read(9, pos)
                else:
                    pos += struct.calcsize(_SCALAR[etype]) * count
                return None, pos
            fmt = _SCALAR.get(vtype)
            if fmt is None:
                raise GGUFError(f"{self.path}: unknown GGUF value type {vtype}")
            return struct.unpack_from(fmt, m, pos)[0], pos + struct.calcsize(fmt)

        try:
            for _ in range(n_kv):
                key, pos = string(pos)
                vtype, = struct.unpack_from("<I", m, pos)
                value, pos = skip_or_read(vtype, pos + 4)
                if value is not None:
                    self.scalars[key] = value
            infos = []
            for _ in range(n_tensors):
                name, pos = string(pos)
                n_dims, = struct.unpack_from("<I", m, pos)
                dims = struct.unpack_from(f"<{n_dims}Q", m, pos + 4)
                ggml_type, offset = struct.unpack_from("<IQ", m, pos + 4 + 8 * n_dims)
                pos += 4 + 8 * n_dims + 12
                infos.append((name, tuple(reversed(dims)), ggml_type, offset))
        except struct.error:
            raise GGUFError(f"{self.path} is truncated: its header ends early") from None
        align = int(self.scalars.get("general.alignment", 32))
        data_start = (pos + align - 1) // align * align
        for name, shape, ggml_type, offset in infos:
            self.tensors[name] = TensorInfo(name, shape, ggml_type, data_start + offset)

    def raw(self, info: TensorInfo) -> np.ndarray:
        """The tensor's bytes as uint8 rows (rows, bytes per row); checks the type and size."""
        if info.ggml_type not in GGML_TYPES:
            raise GGUFError(f"{self.path}: tensor {info.name} has unknown ggml type {info.ggml_type}")
        _, block, nbytes = GGML_TYPES[info.ggml_type]
        cols = info.shape[-1]
        rows = int(np.prod(info.shape[:-1], dtype=np.int64)) if len(info.shape) > 1 else 1
        if cols % block:
            raise GGUFError(f"{self.path}: tensor {info.name} has {cols} columns, not a multiple of {block}")
        row_bytes = cols // block * nbytes
        end = info.offset + rows * row_bytes
        if end > len(self._map):
            raise GGUFError(f"{self.path} is truncated: tensor {info.name} ends at byte {end}, "
                            f"the file has {len(self._map)} (an incomplete download or one part of a split file?)")
        return np.frombuffer(self._map, dtype=np.uint8, count=rows * row_bytes, offset=info.offset).reshape(rows, row_bytes)

    def load(self, name: str) -> np.ndarray | Quantized:
        """Float tensors as float32 numpy arrays in their numpy shape; Q4_0/Q4_1/Q5_0/Q5_1/Q8_0
        matrices as `Quantized`."""
        info = self.tensors[name]
        kind = info.type_name
        raw = self.raw(info)
        if kind in QUANTIZED_TYPES:
            if len(info.shape) != 2:
                return dequantize(_legacy(kind, raw)).reshape(info.shape)
            return _legacy(kind, raw)
        decode = _FLOAT_DECODERS.get(kind)
        if decode is None:
            raise GGUFError(f"{self.path}: tensor {name} is {kind}, which Onyx cannot read "
                            f"(supported: {', '.join(sorted(QUANTIZED_TYPES) + sorted(FLOAT_TYPES))}); "
                            f"use a GGUF quantized as Q4_0, Q4_1, Q8_0, Q4_K_M, Q5_K_M, Q6_K or F16")
        return decode(raw).reshape(info.shape)


def _blocks(raw: np.ndarray, fields: list[tuple]) -> np.ndarray:
    rows, row_bytes = raw.shape
    dt = np.dtype(fields)
    return raw.reshape(-1).view(dt).reshape(rows, row_bytes // dt.itemsize)


def _legacy(kind: str, raw: np.ndarray) -> Quantized:
    """Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 rows -> MLX affine levels, scales, biases (exact)."""
    has_min = kind in ("Q4_1", "Q5_1")
    has_high = kind in ("Q5_0", "Q5_1")
    fields = [("d", "<f2")] + ([("m", "<f2")] if has_min else []) + ([("qh", "<u4")] if has_high else [])
    fields.append(("qs", "i1", 32) if kind == "Q8_0" else ("qs", "u1", 16))
    b = _blocks(raw, fields)  # (rows, blocks)
    rows, nblocks = b.shape
    d = b["d"].astype(np.float16)
    qs = b["qs"]
    if kind == "Q8_0":
        levels = (qs.astype(np.int16) + 128).astype(np.uint8)  # (rows, blocks, 32)
        bias = d * np.float16(-128)
        bits = 8
    else:
        levels = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # element j, then j+16
        if has_high:
            high = (b["qh"][..., None] >> np.arange(32, dtype=np.uint32)) & 1
            levels |= (high.astype(np.uint8) << 4)
        bits = 5 if has_high else 4
        bias = b["m"].astype(np.float16) if has_min else d * np.float16(-(1 << (bits - 1)))
    return Quantized(pack(levels.reshape(rows, nblocks * GROUP), bits), d, bias.astype(np.float16), bits)


def pack(levels: np.ndarray, bits: int) -> np.ndarray:
    """Packs unsigned `bits`-bit levels (rows, cols) into MLX's uint32 layout: a little-endian
    bit stream per row (value k in bits [k*bits, (k+1)*bits))."""
    rows, cols = levels.shape
    levels = np.ascontiguousarray(levels, dtype=np.uint8)
    if bits == 8:
        return levels.view("<u4").copy()
    if bits == 4:
        pairs = levels.reshape(rows, cols // 2, 2)
        return np.ascontiguousarray(pairs[..., 0] | (pairs[..., 1] << 4)).view("<u4").copy()
    out = np.empty((rows, cols * bits // 32), dtype="<u4")
    shifts = np.arange(bits, dtype=np.uint8)
    step = max(1, (1 << 22) // max(cols, 1))
    for r in range(0, rows, step):
        chunk = levels[r:r + step]
        stream = ((chunk[..., None] >> shifts) & 1).reshape(chunk.shape[0], -1)
        out[r:r + step] = np.packbits(stream, axis=-1, bitorder="little").view("<u4")
    return out


def dequantize(q: Quantized) -> np.ndarray:
    """float32 values of an MLX affine-quantized matrix (the inverse of `pack`; for tests and
    for tensors that must be float)."""
    rows = q.weight.shape[0]
    cols = q.weight.shape[1] * 32 // q.bits
    stream = np.unpackbits(q.weight.view(np.uint8), axis=-1, bitorder="little").reshape(rows, cols, q.bits)
    levels = (stream.astype(np.uint32) << np.arange(q.bits, dtype=np.uint32)).sum(-1).astype(np.float32)
    levels = levels.reshape(rows, -1, GROUP)
    out = levels * q.scales.astype(np.float32)[..., None] + q.biases.astype(np.float32)[..., None]
    return out.reshape(rows, cols)


def _scale_min_k4(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 8 six-bit (scale, min) pairs packed into 12 bytes (Q4_K, Q5_K)."""
    s = scales.astype(np.uint8)
    sc = np.concatenate([s[..., 0:4] & 63, (s[..., 8:12] & 0x0F) | ((s[..., 0:4] >> 6) << 4)], axis=-1)
    mn = np.concatenate([s[..., 4:8] & 63, (s[..., 8:12] >> 4) | ((s[..., 4:8] >> 6) << 4)], axis=-1)
    return sc.astype(np.float32), mn.astype(np.float32)


def _q4_k(raw: np.ndarray) -> np.ndarray:
    b = _blocks(raw, [("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12), ("qs", "u1", 128)])
    sc, mn = _scale_min_k4(b["scales"])  # (rows, blocks, 8)
    qs = b["qs"].reshape(*b.shape, 4, 32)
    q = np.stack([qs & 0x0F, qs >> 4], axis=-2).reshape(*b.shape, 8, 32).astype(np.float32)
    d = b["d"].astype(np.float32)[..., None]
    dmin = b["dmin"].astype(np.float32)[..., None]
    y = (d * sc)[..., None] * q - (dmin * mn)[..., None]
    return y.reshape(b.shape[0], -1)


def _q5_k(raw: np.ndarray) -> np.ndarray:
    b = _blocks(raw, [("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12), ("qh", "u1", 32), ("qs", "u1", 128)])
    sc, mn = _scale_min_k4(b["scales"])
    qs = b["qs"].reshape(*b.shape, 4, 32)
    qh = b["qh"][..., None, :]  # (rows, blocks, 1, 32)
    chunk = np.arange(4, dtype=np.uint8)[:, None]
    lo = (qs & 0x0F) | (((qh >> (2 * chunk)) & 1) << 4)
    hi = (qs >> 4) | (((qh >> (2 * chunk + 1)) & 1) << 4)
    q = np.stack([lo, hi], axis=-2).reshape(*b.shape, 8, 32).astype(np.float32)
    d = b["d"].astype(np.float32)[..., None]
    dmin = b["dmin"].astype(np.float32)[..., None]
    y = (d * sc)[..., None] * q - (dmin * mn)[..., None]
    return y.reshape(b.shape[0], -1)


def _q6_k(raw: np.ndarray) -> np.ndarray:
    b = _blocks(raw, [("ql", "u1", 128), ("qh", "u1", 64), ("scales", "i1", 16), ("d", "<f2")])
    ql = b["ql"].reshape(*b.shape, 2, 64)  # two halves of 128 values
    qh = b["qh"].reshape(*b.shape, 2, 32)
    quarters = [
        (ql[..., :32] & 0x0F) | (((qh >> 0) & 3) << 4),
        (ql[..., 32:] & 0x0F) | (((qh >> 2) & 3) << 4),
        (ql[..., :32] >> 4) | (((qh >> 4) & 3) << 4),
        (ql[..., 32:] >> 4) | (((qh >> 6) & 3) << 4),
    ]
    q = np.stack(quarters, axis=-2).astype(np.float32) - 32  # (rows, blocks, 2, 4, 32)
    q = q.reshape(*b.shape, 2, 8, 16)
    sc = b["scales"].astype(np.float32).reshape(*b.shape, 2, 8)
    y = b["d"].astype(np.float32)[..., None, None, None] * sc[..., None] * q
    return y.reshape(b.shape[0], -1)


def _bf16(raw: np.ndarray) -> np.ndarray:
    return (raw.reshape(-1).view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(raw.shape[0], -1)


_FLOAT_DECODERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "F32": lambda raw: raw.reshape(-1).view("<f4").reshape(raw.shape[0], -1),
    "F16": lambda raw: raw.reshape(-1).view("<f2").astype(np.float32).reshape(raw.shape[0], -1),
    "BF16": _bf16,
    "Q4_K": _q4_k,
    "Q5_K": _q5_k,
    "Q6_K": _q6_k,
}


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
    from onyx.assets import cache_dir

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
    from onyx.gguf_tokenizer import write_tokenizer_files

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
