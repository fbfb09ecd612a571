"""Logits processors: what a sequence's rows go through before they are a law to sample from.

One protocol, in the manner of mlx-lm's `make_logits_processors`: a processor is called as
`processor(rows, check)` and returns the rows changed, where `rows` is the (k, V) slice of the
step's logits that scores this round's pending token and drafts, and `check` is the round's
`onyx.decoding.verify.Check` (the committed context, the drafts, the grammar state and mask of
each row). Row i scores the token after the committed output plus the round's first i drafts.
`make_processors` builds a sequence's list, in this order:

1. `BiasAndPenalties`: `logit_bias`, `presence_penalty` and `frequency_penalty` (before the mask,
   so a bias can never let a forbidden token through; row i's penalties count the first i drafts);
2. `GrammarMask`: the grammar's budget-aware row masks (`Check.row_masks`, made while the
   forward runs), forbidden tokens set to -inf;
3. `PhiWeights`: Φ's log-weights (`onyx.decoding.phi`), which read the rows as they were before
   the mask.

`ReasoningGate` is not a processor: it restricts the row masks themselves while a thinking block
is open (`onyx.chat.reasoning.ReasoningBudget`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import mlx.core as mx
import numpy as np

from onyx.decoding.sampling import RowSampling, Sampler, apply_mask, mask_to_mlx
from onyx.options import LogitAdjustments, SamplingParams

if TYPE_CHECKING:
    from onyx.decoding.verify import Check


class LogitsProcessor(Protocol):
    def __call__(self, rows: mx.array, check: "Check") -> mx.array: ...


class BiasAndPenalties:
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

    def __call__(self, rows: mx.array, check: "Check") -> mx.array:
        return self.rows(rows, check.context, check.proposal.tokens)

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


class GrammarMask:
    """The grammar's row masks (`Check.row_masks`); keeps the rows as they were before it in
    `Check.unmasked`, for Φ."""

    def __call__(self, rows: mx.array, check: "Check") -> mx.array:
        check.unmasked = rows
        masks = check.row_masks
        return apply_mask(rows, mx.stack(masks) if len(masks) > 1 else masks[0][None])


class PhiWeights:
    """Φ's log-weights added to the masked rows (`phi.log_weights` per row: None leaves a row
    as it is)."""

    def __init__(self, phi: Any) -> None:
        self.phi = phi

    def __call__(self, rows: mx.array, check: "Check") -> mx.array:
        drafts = check.proposal.tokens
        raw = check.unmasked if check.unmasked is not None else rows
        ws = [self.phi.log_weights(check.context + drafts[:i], check.states[i], rows[i], raw[i])
              for i in range(check.rows)]
        if all(w is None for w in ws):
            return rows
        return rows + mx.stack([w if w is not None else mx.zeros_like(rows[i]) for i, w in enumerate(ws)])


def make_processors(*, adjust: LogitAdjustments | None = None, width: int = 0, prompt_len: int = 0,
                    constrained: bool = False, phi: Any = None) -> list[LogitsProcessor]:
    """A sequence's processors, in order: bias and penalties (when `adjust` is active), the
    grammar mask (when `constrained`), Φ (when given; it needs the mask)."""
    out: list[LogitsProcessor] = []
    if adjust is not None and adjust.active:
        out.append(BiasAndPenalties(adjust, width, prompt_len))
    if constrained:
        out.append(GrammarMask())
        if phi is not None:
            out.append(PhiWeights(phi))
    return out


def row_sampling(params: SamplingParams, constraint: Any = None, *, phi: Any = None,
                 adjust: LogitAdjustments | None = None, width: int = 0, prompt_len: int = 0, gate: Any = None,
                 logprobs: int | None = None, token_bytes: Any = None) -> RowSampling:
    """One sequence's `RowSampling`: its own random stream for `params`, and its processors
    (`make_processors`) for its constraint, adjustments and Φ."""
    return RowSampling(params, Sampler(params), constraint,
                       make_processors(adjust=adjust, width=width, prompt_len=prompt_len,
                                       constrained=constraint is not None, phi=phi),
                       phi=phi, gate=gate, logprobs=logprobs, token_bytes=token_bytes)


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

    def row_masks(self, constraint, states: list[int], drafts: list[int], remaining: int) -> list[mx.array]:
        """Masks of rows along the drafts (`states[i]`: the request's grammar state before row
        i), the budget's restriction ANDed in while the block is open. Fewer masks than states
        when a draft is one the budget's grammar refuses (the rows after it are not used)."""
        out, b = [], self.state
        for i, s in enumerate(states):
            if not self.budget.is_open(b):
                out.append(constraint.mask(s, remaining - i - 1))
            else:
                words = self.grammar.token_bitmask_within(s, remaining - i - 1)
                if not words.any():
                    words = self.grammar.token_bitmask(s)
                out.append(mask_to_mlx(self.budget.restrict(words, b, self.used + i), self.width))
            if i < len(drafts):
                try:
                    b = self.budget.advance(b, drafts[i])
                except ValueError:
                    break
        return out
