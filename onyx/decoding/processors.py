"""Per-row logit work of one sequence in the batched step, besides the grammar mask and Φ.

- `Adjuster`: `logit_bias`, `presence_penalty` and `frequency_penalty`, added to a sequence's
  rows *before* the mask (so a bias can never let a forbidden token through). Row i of a round
  scores the token after the committed output plus the round's first i drafts, so its
  penalties count those tokens.
- `ReasoningGate`: the reasoning budget (`onyx.chat.reasoning.ReasoningBudget`) restricting a row's
  mask while the thinking block is open.
- `logprob_arrays` / `logprob_entries`: the log-probabilities reported to the caller. They
  describe the distribution the token was drawn from before sampling's own reshaping: the
  log-softmax of the row's logits after the adjustments, the grammar mask (and Φ), and before
  temperature, top-k, top-p and min-p. A masked token has probability 0 there, so it is never
  listed, and every listed value is finite.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from onyx.grammar.constraint import bitmask_to_bool
from onyx.options import LogitAdjustments


class Adjuster:
    """One sequence's logit_bias and penalties (`adjust` must be `active`)."""

    def __init__(self, adjust: LogitAdjustments, width: int, prompt_len: int) -> None:
        self.adjust = adjust
        self.width = width
        self.prompt_len = prompt_len
        bias = np.zeros(width, dtype=np.float32)
        for t, b in adjust.logit_bias:
            if t < width:
                bias[t] = b
        self.bias = mx.array(bias) if adjust.logit_bias else None
        self.penalised = adjust.presence_penalty != 0.0 or adjust.frequency_penalty != 0.0

    def rows(self, rows: mx.array, context: list[int], drafts: list[int]) -> mx.array:
        """`rows` (k, V) adjusted; `context` is the prompt and the committed tokens."""
        if self.bias is not None:
            rows = rows + self.bias
        if not self.penalised:
            return rows
        a = self.adjust
        counts = np.bincount(np.asarray(context[self.prompt_len:], dtype=np.int64),
                             minlength=self.width)[:self.width].astype(np.float32)
        out = []
        for i in range(rows.shape[0]):
            if i:
                counts[drafts[i - 1]] += 1.0
            out.append(a.presence_penalty * (counts > 0) + a.frequency_penalty * counts)
        return rows - mx.array(np.stack(out))


class ReasoningGate:
    """A sequence's reasoning budget: its state (advanced on committed tokens) and the mask
    restriction of each verified row."""

    def __init__(self, budget, grammar, width: int) -> None:
        self.budget = budget
        self.grammar = grammar
        self.width = width
        self.state = budget.initial_state
        self.used = 0

    def advance(self, token: int) -> None:
        if self.budget.is_open(self.state):
            self.state = self.budget.advance(self.state, token)
            self.used += 1

    def row_masks(self, states: list[int], drafts: list[int], remaining: int, masks) -> list[mx.array]:
        """Masks of rows along the drafts (`states[i]`: the request's grammar state before row
        i), the budget's restriction ANDed in while the block is open."""
        out, b = [], self.state
        for i, s in enumerate(states):
            if not self.budget.is_open(b):
                out.append(masks.within(s, remaining - i - 1))
            else:
                words = self.grammar.token_bitmask_within(s, remaining - i - 1)
                if not words.any():
                    words = self.grammar.token_bitmask(s)
                out.append(bitmask_to_bool(self.budget.restrict(words, b, self.used + i), self.width))
            if i < len(drafts):
                try:
                    b = self.budget.advance(b, drafts[i])
                except ValueError:  # a draft the budget's grammar refuses: the rows after it are not used
                    break
        return out


def logprob_arrays(target: mx.array, k: int) -> list[mx.array]:
    """Lazy arrays for the logprobs of every row of `target` (the masked logits): the full
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
