"""exp for MLX's CPU backend as fused elementwise operations, and the two places that use it: the
SwiGLU of a model's MLP and the softmax of the batched attention.

On the CPU backend (the `mlx[cpu]` wheels) MLX evaluates `exp` one element at a time with a
scalar routine, an order of magnitude slower than a multiply-add over an array. A batched
decoding step takes hundreds of thousands of exps in its SwiGLUs and more in attention's softmax
as the context grows, so they show in the step time.

`exp` here is the classic range reduction (as in Cephes' `expf`): x = n ln2 + r with |r| <= ln2/2,
ln2 split into a part exact in float32 and a correction; e^r from a degree-7 polynomial; 2^n
written straight into the exponent bits. Under `mx.compile` (shapeless, so one trace serves
every shape) the arithmetic is one fused loop; the bit cast and the last product are two more
operations, as a bit cast cannot be compiled shapeless. Its relative error against float64 is
below MLX's own CPU `exp` (`tests/cpu/test_cpu_exp.py` checks the bound); the input is clamped
to [-87.34, 88], so the result is never 0 or inf (1.2e-38 at the low end, 1.7e38 at the high;
NaN stays NaN).

`use_fast_swiglu(model)` gives each MLP that computes down(silu(gate(x)) * up(x)) this SwiGLU,
after checking on a random input that it computes the same (a model whose MLP does something
else keeps its own). `masked_softmax` is the softmax of `onyx.kv.ragged`'s CPU attention, and
`shim_softmax` the same through the BLAS shim's vectorised C for the large ones (prompt chunks).
On Metal, none of this is used: MLX's kernels there are vectorised.
"""

from __future__ import annotations

import ctypes
from functools import partial

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from onyx.cpu.override import CallOverride

_LOG2E = 1.4426950408889634
_LN2_HI = 0.693359375  # ln 2 to 11 bits: n * _LN2_HI is exact for the n that occur
_LN2_LO = -2.12194440e-4  # ln 2 - _LN2_HI
# e^r on [-ln2/2, ln2/2]: 1 + r + r^2 (c0 + c1 r + ... + c5 r^5), Cephes' expf coefficients
_POLY = (5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3, 1.3981999507e-3,
         1.9875691500e-4)


@partial(mx.compile, shapeless=True)
def _exp_parts(x: mx.array) -> tuple[mx.array, mx.array]:
    x = mx.clip(x, -87.33654, 88.0)
    n = mx.floor(x * _LOG2E + 0.5)
    r = x - n * _LN2_HI - n * _LN2_LO
    p = _POLY[-1]
    for c in reversed(_POLY[:-1]):
        p = p * r + c
    return p * (r * r) + r + 1.0, (n.astype(mx.int32) + 127) << 23


def exp(x: mx.array) -> mx.array:
    """e^x for float32 `x`, clamped to [e^-87.34, e^88] (see the module docstring)."""
    p, bits = _exp_parts(x)
    return p * mx.view(bits, mx.float32)


@partial(mx.compile, shapeless=True)
def _silu_times(gate: mx.array, x: mx.array, e: mx.array) -> mx.array:
    return gate / (1.0 + e) * x


def swiglu(gate: mx.array, x: mx.array) -> mx.array:
    """silu(gate) * x = gate / (1 + e^-gate) * x, for `gate` and `x` of one shape."""
    return _silu_times(gate, x, exp(-gate)).astype(gate.dtype)


def masked_softmax(scores: mx.array, mask: mx.array | None) -> mx.array:
    """Softmax over the last axis of the entries where the boolean `mask` (broadcast to
    `scores`; None: every entry) is true; the others are 0. Every row must have one entry that
    is true. (Only `exp` is compiled: a shapeless trace records a broadcast only where the first
    call's shapes differ, so a first call with one key would divide without one ever after.)"""
    if mask is None:
        e = exp(scores - scores.max(axis=-1, keepdims=True))
    else:
        s = mx.where(mask, scores, -mx.inf)
        e = mx.where(mask, exp(s - s.max(axis=-1, keepdims=True)), 0.0)
    return (e / e.sum(axis=-1, keepdims=True)).astype(scores.dtype)


# Below this many scores the graph break costs more than MLX's softmax (and decode steps, whose
# rows must keep their bits whatever shares the step, stay on one path).
SHIM_SOFTMAX_MIN = 1 << 16


def shim_softmax(scores: mx.array, mask: mx.array | None) -> mx.array | None:
    """`masked_softmax` computed by the BLAS shim's vectorised row softmax (`softmax_shim.c`),
    for float32 scores of at least SHIM_SOFTMAX_MIN entries; None when the shim is not loaded or
    the scores are not that. It evaluates the scores first (a break in MLX's lazy graph), so it
    pays only where the exps outweigh that: the scores of a prompt chunk over a long history."""
    if scores.dtype != mx.float32 or scores.size < SHIM_SOFTMAX_MIN:
        return None
    lib = _softmax_library()
    if lib is None:
        return None
    s = scores if mask is None else mx.where(mask, scores, -mx.inf)
    mx.eval(s)
    x = np.ascontiguousarray(np.asarray(memoryview(s)))
    y = np.empty_like(x)
    cols = x.shape[-1]
    lib.onyx_softmax_rows(x.ctypes.data, cols, y.ctypes.data, cols, x.size // cols, cols)
    return mx.array(y)


_SOFTMAX_LIB: list = []


def _softmax_library():
    """The loaded shim's `onyx_softmax_rows` (argument types set), or None."""
    if not _SOFTMAX_LIB:
        from onyx.cpu.blas import shim_library

        lib = shim_library()
        f = getattr(lib, "onyx_softmax_rows", None) if lib is not None else None
        if f is not None:
            f.restype = None
            f.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_long]
        _SOFTMAX_LIB.append(None if f is None else lib)
    return _SOFTMAX_LIB[0]


def _swiglu_mlp(self, x: mx.array, *args, **kwargs) -> mx.array:
    if args or kwargs:  # a call this module did not check: the MLP's own
        return super(type(self), self).__call__(x, *args, **kwargs)
    return self.down_proj(swiglu(self.gate_proj(x), self.up_proj(x)))


_FAST = CallOverride(_swiglu_mlp)


def _float32_input_width(linear) -> int | None:
    """The input width of a Linear that computes in float32 (float32 weights, or quantized
    weights multiplied by the shim), else None."""
    from onyx.cpu.quant import CpuQuantizedLinear

    if isinstance(linear, CpuQuantizedLinear):
        return linear.input_dims
    weight = getattr(linear, "weight", None)
    if weight is None or weight.ndim != 2 or weight.dtype != mx.float32:
        return None
    return int(weight.shape[1])


def takes_fast_swiglu(module) -> bool:
    """Whether `use_fast_swiglu` switched this module."""
    return _FAST.applies_to(module)


def use_fast_swiglu(model) -> int:
    """Makes every MLP of `model` that has gate_proj, up_proj and down_proj and computes
    down(silu(gate(x)) * up(x)) use this module's SwiGLU (its class becomes a subclass whose only
    change is `__call__`; its parameters stay where they are). Each MLP is checked on a random
    input first: one that computes something else (GELU, a clipped gate) keeps its own.
    Returns how many were switched."""
    switched = 0
    for _, module in list(model.named_modules()):
        if not all(isinstance(getattr(module, n, None), nn.Module) for n in ("gate_proj", "up_proj", "down_proj")):
            continue
        cls = type(module)
        if takes_fast_swiglu(module):
            switched += 1
            continue
        width = _float32_input_width(module.gate_proj)
        if width is None:
            continue  # (MLX-quantized or half-precision MLPs: the SwiGLU is not the bottleneck there)
        x = mx.random.normal((4, width), key=mx.random.key(0))
        try:
            # gate values of a few units, where SiLU and its look-alikes (GELU) differ
            x = x * (3.0 / (float(mx.std(module.gate_proj(x)).item()) + 1e-12))
            before = module(x)
            _FAST.switch(module)
            after = module(x)
        except Exception:  # noqa: BLE001 - an MLP of another shape: leave it as it was
            module.__class__ = cls
            continue
        scale = float(mx.abs(before).max().item()) or 1.0
        if before.shape == after.shape and float(mx.abs(before - after).max().item()) <= 1e-4 * scale:
            switched += 1
        else:
            module.__class__ = cls
    return switched
