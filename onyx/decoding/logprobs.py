"""The log-probabilities reported to the caller.

They describe the distribution a token was drawn from before sampling's own reshaping: the
log-softmax of the row's logits after the logits processors (bias and penalties, the grammar
mask, Φ) and before temperature, top-k, top-p and min-p. A masked token has probability 0 there,
so it is never listed, and every listed value is finite.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np


def logprob_arrays(target: mx.array, k: int) -> list[mx.array]:
    """Lazy arrays for the logprobs of every row of `target` (the processed logits): the full
    log-softmax, and the indices and values of the `k` most likely tokens per row."""
    lp = target - mx.logsumexp(target, axis=-1, keepdims=True)
    if k <= 0:
        return [lp]
    top = mx.argsort(-lp, axis=-1)[:, :k]
    return [lp, top, mx.take_along_axis(lp, top, axis=-1)]


def logprob_entries(arrays: list, tokens: list[int], token_bytes) -> list[dict]:
    """One entry per row for the tokens committed there, in OpenAI's chat shape: `token`,
    `logprob`, `bytes` and `top_logprobs` (finite values only)."""
    lp = np.asarray(arrays[0])
    top = np.asarray(arrays[1]) if len(arrays) > 1 else None
    topv = np.asarray(arrays[2]) if len(arrays) > 1 else None
    out = []
    for i, t in enumerate(tokens):
        alts = []
        if top is not None:
            alts = [_entry(int(a), float(v), token_bytes) for a, v in zip(top[i], topv[i]) if np.isfinite(v)]
        e = _entry(t, float(lp[i, t]), token_bytes)
        e["top_logprobs"] = alts
        out.append(e)
    return out


def _entry(token: int, logprob: float, token_bytes) -> dict:
    b = token_bytes(token)
    return {"token": b.decode("utf-8", errors="replace"), "logprob": logprob, "bytes": list(b), "id": token}
