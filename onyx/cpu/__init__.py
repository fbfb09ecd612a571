"""MLX's CPU backend made fast (Linux); nothing here is used on Metal.

- `blas.py`: OpenBLAS preloaded before `mlx.core`, and the few-row GEMM shim (`blas_shim.c`)
  built once for this machine;
- `quant.py`: 4- and 8-bit weights kept quantized and multiplied by the shim (`quant_shim.c`);
- `patches.py`: the one place that adapts a loaded model to the CPU: `rope.py` (angles from a
  table), `exp.py` (a vectorised exp for SwiGLU and softmax), `overlap.py` (layers that start
  their own evaluation), all switched in through `override.py`;
- `malloc.py`: glibc's malloc arenas capped in the server.

Nothing is imported here: `onyx/__init__` imports `onyx.cpu.blas` before anything loads MLX.
"""
