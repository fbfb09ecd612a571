"""MLX's CPU backend made fast (Linux); nothing here is used on Metal.

- `blas.py`: OpenBLAS preloaded before `mlx.core`, and the few-row GEMM shim (`blas_shim.c`)
  built once for this machine;
- `quant.py`: 4- and 8-bit weights kept quantized and multiplied by the shim (`quant_shim.c`);
- `patches.py`: the one place that adapts a loaded model to the CPU: `rope.py` (angles from a
  table), `exp.py` (a vectorised exp for SwiGLU and softmax; the shim's C softmax,
  `softmax_shim.c`, for prompt chunks), `overlap.py` (layers that start
  their own evaluation), all switched in through `override.py`;
- `malloc.py`: glibc's malloc arenas capped in the server.

Importing this package preloads OpenBLAS (`blas.ensure_fast_blas`): every part of Onyx that runs
MLX imports it first, and the grammar core alone (`import onyx`) does not, so Onyx used as a
library inside another engine leaves that process's libraries alone.
"""

from onyx.cpu.blas import ensure_fast_blas

ensure_fast_blas()
