"""Which MLX device a model runs on, and in which dtype its weights are used.

* Apple Silicon (macOS, arm64): MLX runs on Metal and quantized weights stay quantized.
* Elsewhere (Linux: MLX's CPU backend): the CPU. 4- and 8-bit weights stay quantized and are
  multiplied by the BLAS shim's kernels (`onyx.cpu.quant`); other weights are computed in float32,
  since MLX's quantized and float16 matrix products on x86 CPUs are several times slower than
  float32 with OpenBLAS (`onyx.cpu.blas`).
"""

from __future__ import annotations

import platform as _platform
import sys


def is_macos() -> bool:
    return sys.platform == "darwin"


def is_apple_silicon() -> bool:
    """True on macOS running natively on arm64 (Metal is available to MLX)."""
    return is_macos() and _platform.machine() == "arm64"


def default_device() -> str:
    """"gpu" when MLX has a usable Metal device, else "cpu".

    Imports `mlx.core` when asked on Apple Silicon only; on other platforms the answer needs no
    import (and so does not spoil `ensure_fast_blas()`)."""
    if not is_apple_silicon():
        return "cpu"
    try:
        import mlx.core as mx

        return "gpu" if mx.metal.is_available() else "cpu"
    except Exception:
        return "cpu"


def default_dtype(device: str | None = None) -> str:
    """The dtype model weights are used in: "quantized" on both (quantized weights stay
    quantized: on Metal MLX's kernels multiply them, on the CPU the BLAS shim's kernels,
    `onyx.cpu.quant`; what neither takes is computed in float32 on the CPU)."""
    return "quantized"
