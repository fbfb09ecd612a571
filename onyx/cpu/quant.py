"""Quantized weights on MLX's CPU backend, multiplied by the shim's kernels (Linux).

MLX's own quantized product on x86 CPUs is far slower than a float32 product, so the CPU path
used to dequantize every weight to float32 at load time: a token then reads 32 bits per weight
from memory. `use_quantized_weights(model)` keeps MLX's 4- and 8-bit affine weights (what a
GGUF's Q4_0, Q4_1 and Q8_0 tensors load as, and mlx-community's 4/8-bit models) as they are and
has the shim (`quant_shim.c`) multiply by them: each Linear's packed words are shown to MLX as a
float32 array of the same bytes (the *carrier*, registered with the shim by its address), and the
Linear calls `x.reshape(-1, Kc) @ carrier.T`; the shim recognises the carrier inside
`cblas_sgemm` and writes x @ W^T for the true shapes into the first rows of the result.

Each weight is read as stored (4.5 to 8.5 bits) and dequantized in the kernel (in registers for
a few rows of x, into a per-thread buffer for more), so the outputs equal a float32 product with
the dequantized weights up to the order of additions, and a row of x gets the same bits alone or
in a batch.

Modules this cannot take (other bit widths, other quantization modes, no shim in the process)
are dequantized to float32 as before. On Metal none of this is used.
"""

from __future__ import annotations

import ctypes
import weakref

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from onyx.cpu.blas import shim_library

_SCALE_DTYPES = {mx.float32: 0, mx.float16: 1, mx.bfloat16: 2}


def _address(a: mx.array) -> int:
    """The address of an evaluated, contiguous array's data."""
    if a.dtype == mx.bfloat16:  # (no buffer-protocol format for it; the same bytes as uint16)
        a = mx.view(a, mx.uint16)
        mx.eval(a)
    view = np.asarray(memoryview(a))
    if not view.flags.c_contiguous:
        raise ValueError("array is not contiguous")
    return int(view.__array_interface__["data"][0])


class _Carrier:
    """One quantized matrix registered with the shim: N x K values, kept as MLX stored them."""

    def __init__(self, lib, weight: mx.array, scales: mx.array, biases: mx.array, bits: int,
                 group_size: int) -> None:
        if scales.dtype not in _SCALE_DTYPES:
            scales, biases = scales.astype(mx.float32), biases.astype(mx.float32)
        weight, scales, biases = (mx.contiguous(a) for a in (weight, scales, biases))
        self.floats = mx.view(weight, mx.float32)  # the packed words, as MLX sees them
        self.floats_t = self.floats.T
        mx.eval(weight, scales, biases, self.floats, self.floats_t)
        self.n, self.kc = self.floats.shape
        self.k = self.kc * 32 // bits
        self.rows_per_row = 32 // bits  # rows of the reshaped input per true row
        self._keep = (weight, scales, biases)
        address = _address(self.floats)
        if address != _address(weight):
            raise ValueError("the float32 view of the weights is a copy")
        rc = lib.onyx_quant_register(
            ctypes.c_void_p(address), self.n, self.k, bits, group_size, ctypes.c_void_p(_address(scales)),
            ctypes.c_void_p(_address(biases)), _SCALE_DTYPES[scales.dtype])
        if rc != 0:
            raise ValueError(f"the shim refused a {self.n} x {self.k} matrix ({bits} bits, groups of "
                             f"{group_size}): code {rc}")
        weakref.finalize(self, lib.onyx_quant_unregister, ctypes.c_void_p(address))

    def matmul(self, x: mx.array) -> mx.array:
        """x @ W^T for float `x` of shape (..., K)."""
        lead = x.shape[:-1]
        rows = x.size // self.k
        if x.dtype != mx.float32:
            x = x.astype(mx.float32)
        return (x.reshape(rows * self.rows_per_row, self.kc) @ self.floats_t)[:rows].reshape(*lead, self.n)



class CpuQuantizedLinear(nn.Module):
    """A quantized Linear whose product runs in the shim; parameters as nn.QuantizedLinear's."""

    def __init__(self, q: nn.QuantizedLinear, lib) -> None:
        super().__init__()
        self.group_size, self.bits = q.group_size, q.bits
        self.weight, self.scales, self.biases = q.weight, q.scales, q.biases
        if "bias" in q:
            self.bias = q.bias.astype(mx.float32)
        self._carrier = _Carrier(lib, q.weight, q.scales, q.biases, q.bits, q.group_size)
        self.input_dims, self.output_dims = self._carrier.k, self._carrier.n
        self.freeze()

    def __call__(self, x: mx.array) -> mx.array:
        y = self._carrier.matmul(x)
        return y + self.bias if "bias" in self else y


class CpuQuantizedEmbedding(nn.Module):
    """A quantized Embedding: looked-up rows dequantized to float32; `as_linear` (tied output
    heads) runs in the shim."""

    def __init__(self, q: nn.QuantizedEmbedding, lib) -> None:
        super().__init__()
        self.group_size, self.bits = q.group_size, q.bits
        self.num_embeddings, self.dims = q.num_embeddings, q.dims
        self.weight, self.scales, self.biases = q.weight, q.scales, q.biases
        self._carrier = _Carrier(lib, q.weight, q.scales, q.biases, q.bits, q.group_size)
        self.freeze()

    def __call__(self, x: mx.array) -> mx.array:
        return mx.dequantize(self.weight[x], self.scales[x], self.biases[x], group_size=self.group_size,
                             bits=self.bits).astype(mx.float32)

    def as_linear(self, x: mx.array) -> mx.array:
        return self._carrier.matmul(x)


def _takes(m) -> bool:
    return (isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding)) and m.bits in (4, 8)
            and getattr(m, "mode", "affine") == "affine" and m.get("biases") is not None
            and m.group_size % 32 == 0)


def use_quantized_weights(model) -> int:
    """Swaps each 4/8-bit affine QuantizedLinear / QuantizedEmbedding of `model` for one whose
    products run in the shim; returns how many were swapped (0 when the shim is not loaded)."""
    from mlx.utils import tree_unflatten

    lib = shim_library()
    if lib is None:
        return 0
    swaps = []
    for path, m in model.named_modules():
        if not _takes(m):
            continue
        try:
            cls = CpuQuantizedLinear if isinstance(m, nn.QuantizedLinear) else CpuQuantizedEmbedding
            swaps.append((path, cls(m, lib)))
        except ValueError:
            continue  # left quantized; the caller dequantizes what is left
    if swaps:
        model.update_modules(tree_unflatten(swaps))
    return len(swaps)


def is_shim_quantized(module) -> bool:
    return isinstance(module, (CpuQuantizedLinear, CpuQuantizedEmbedding))
