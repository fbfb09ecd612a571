"""Overlapping a forward's graph building with its computation on the CPU.

MLX is lazy: a forward first builds the graph of every layer in Python, and only the final
evaluation starts computing. On the CPU the two cannot overlap by themselves, so the step
costs the Python time (a few milliseconds for a 30-layer model, more for ragged batches) plus
the arithmetic. `use_overlapped_layers` makes every `EVERY`-th decoder layer start evaluating its
output (`mx.async_eval`) as soon as its graph is built: the layers before it compute while
Python builds the ones after it, and each evaluation walks a smaller graph.

`bench/batch_json_bench.py --overlap` measures the same forwards with the layers switched and
switched back; the gain is largest for small models and few rows, where Python's share of the
step is largest. Every second layer is about as good as every layer and starts half as many
evaluations. The arithmetic is the same: logits are bit-identical.

On Metal, where the GPU computes and the CPU only encodes, this is not applied.
"""

from __future__ import annotations

import mlx.core as mx

from onyx.cpu.override import CallOverride

EVERY = 2  # a layer in this many starts the evaluation of what came before it

_start = mx.async_eval  # (a name of this module, so that tests can count the evaluations started)


def _overlapped_call(self, *args, **kwargs):
    out = super(type(self), self).__call__(*args, **kwargs)
    _start(out)
    return out


_OVERLAPPED = CallOverride(_overlapped_call)


def starts_evaluation(layer) -> bool:
    """Whether `use_overlapped_layers` made this layer start evaluating its output."""
    return _OVERLAPPED.applies_to(layer)


def decoder_layers(model) -> list:
    """The decoder layers of an mlx-lm model (`model.model.layers`), or [] for another layout."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    return list(layers) if isinstance(layers, (list, tuple)) else []


def use_overlapped_layers(model, every: int = EVERY) -> int:
    """Makes every `every`-th decoder layer of `model` (not the last: the caller evaluates the
    output) start evaluating its output once its graph is built. Its class becomes a subclass
    whose only change is `__call__`; its parameters stay where they are. Returns how many
    layers were switched."""
    layers = decoder_layers(model)
    switched = 0
    for i, layer in enumerate(layers[:-1]):
        if (i + 1) % every == 0:
            _OVERLAPPED.switch(layer)
            switched += 1
    return switched
