"""The one place that adapts a loaded model to MLX's CPU backend.

On the CPU, transcendental functions are scalar, every operation is dispatched on its own, and
MLX only starts computing once a forward's whole graph is built. Four patches address that, each
checked on the model it patches and each leaving the parameters where mlx-lm put them:

* `onyx.cpu.rope`: rotary embeddings read their angles from a table;
* `onyx.cpu.exp`: the SwiGLU of every MLP that computes one uses a vectorised exp;
* `onyx.cpu.norm`: RMS norms run as one compiled kernel rather than their eleven parts;
* `onyx.cpu.overlap`: every second decoder layer starts evaluating its output, so the layers
  compute while Python builds the rest of the forward.

On Metal none of them applies (`onyx.models.loader.load` calls this on the CPU only).
"""

from __future__ import annotations

from onyx.cpu.exp import use_fast_swiglu
from onyx.cpu.norm import use_compiled_norms
from onyx.cpu.overlap import use_overlapped_layers
from onyx.cpu.rope import use_table_rope


def apply_cpu_patches(model) -> dict[str, int]:
    """Applies the CPU patches to `model`; returns how many modules each one switched."""
    return {"rope": use_table_rope(model), "swiglu": use_fast_swiglu(model), "norm": use_compiled_norms(model),
            "overlap": use_overlapped_layers(model)}
