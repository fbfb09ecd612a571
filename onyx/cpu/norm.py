"""RMS norms as one compiled kernel on MLX's CPU backend.

`mx.fast.rms_norm` is one kernel on Metal; on the CPU it runs as its parts (square, sum, scale,
add, reciprocal square root, two products and their broadcasts), about eleven operations, each
dispatched on its own. A small model's decode step runs two norms a layer, so on the CPU their
dispatch is a visible part of the step. `rms_norm` computes the same arithmetic in the same
order inside `mx.compile`: the sum, then one fused elementwise kernel.

`use_compiled_norms(model)` switches every plain `nn.RMSNorm` of a model (not the subclasses
some models define, such as Gemma's 1 + weight) to it, after checking it on a random input.
"""

from __future__ import annotations

from functools import partial

import mlx.core as mx
import mlx.nn as nn

from onyx.cpu.override import CallOverride


@partial(mx.compile, shapeless=True)
def _normalized(x: mx.array, weight: mx.array, inv_width: float, eps: float) -> mx.array:
    # (the width and eps are constants of the trace: a compiled function is kept per value)
    return x * mx.rsqrt(mx.sum(mx.square(x), axis=-1, keepdims=True) * inv_width + eps) * weight


def rms_norm(x: mx.array, weight: mx.array, eps: float) -> mx.array:
    """x / sqrt(mean(x², last axis) + eps) * weight, for float32 `x` of any leading shape."""
    return _normalized(x, weight, 1.0 / x.shape[-1], eps)


def _compiled_norm(self, x: mx.array) -> mx.array:
    if x.dtype != mx.float32:
        return super(type(self), self).__call__(x)
    return rms_norm(x, self["weight"], self.eps)


_COMPILED = CallOverride(_compiled_norm)


def takes_compiled_norm(module) -> bool:
    """Whether `use_compiled_norms` switched this module."""
    return _COMPILED.applies_to(module)


def use_compiled_norms(model) -> int:
    """Switches each `nn.RMSNorm` of `model` (exactly that class, float32 weights) to
    `rms_norm` when it gives the same values on a random input; returns how many it switched."""
    switched = 0
    for _, module in list(model.named_modules()):
        if takes_compiled_norm(module):
            switched += 1
            continue
        if type(module) is not nn.RMSNorm or module["weight"].dtype != mx.float32:
            continue
        width = module["weight"].shape[-1]
        x = mx.random.normal((3, width), key=mx.random.key(width)) * 4.0
        before = module(x)
        _COMPILED.switch(module)
        after = module(x)
        scale = float(mx.abs(before).max().item()) or 1.0
        if float(mx.abs(before - after).max().item()) <= 1e-6 * scale:
            switched += 1
        else:
            module.__class__ = nn.RMSNorm
    return switched
