"""A GGUF tensor reader of our own: numpy over a memory map.

Not `mx.load`: MLX's GGUF loader cannot read Q5_0, Q5_1 or Q5_K, which common files use (Gemma 3
270M's Q4_K_M file has Q5_0 attention and FFN tensors), and its Q4_K is wrong in mlx 0.32.4.

* Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 are affine per 32 values (`x = d*q + m`), which is exactly
  MLX's affine quantization with group size 32: `load` returns them as `Quantized` (`weight`
  uint32 packed levels, `scales`, `biases` float16) with their own bit width.
* K-quants (Q4_K, Q5_K, Q6_K), F16, BF16 and F32 are returned as float arrays.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

GROUP = 32  # every legacy GGUF quant block is 32 values: MLX's affine group size


class GGUFError(ValueError):
    """The GGUF file cannot be converted (unsupported architecture or tensor type, bad file)."""


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


