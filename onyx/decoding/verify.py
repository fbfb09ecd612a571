"""Exact verification of a round's drafts against the target's logits.

One target forward scores the pending token and every draft. Each row is masked by the grammar
(budget-aware: a row's mask only allows tokens after which a valid completion still fits in the
tokens left), optionally reweighted by Φ, and the drafts are checked position by position:

- temperature 0: a draft is accepted while it equals the masked argmax;
- otherwise Leviathan accept/reject: accept draft d with probability min(1, p(d) / q(d)) (q is
  the draft's law, a point mass for deterministic drafts), and on a rejection resample from the
  normalised residual (p - q)+, so the committed tokens follow the target's masked law whatever
  the drafts were.
"""

from __future__ import annotations

import mlx.core as mx

import onyx._grammar as _g
from onyx.decoding.drafts import Proposal
from onyx.decoding.sampling import Sampler, apply_mask, distribution
from onyx.options import SamplingParams


def verify(logits: mx.array, proposal: Proposal, grammar, masks, state, params: SamplingParams,
           sampler: Sampler, remaining: int, phi=None, context: list[int] | None = None) -> tuple[int, int, list]:
    """Verifies the drafts against the target's logits (one row per position). Returns how many
    drafts were accepted, the target's own next token, and the grammar states along the drafts."""
    drafts = proposal.tokens
    states = [state]
    usable = len(drafts)  # drafts the grammar allows (blind drafts may leave it)
    if grammar is not None:
        for i, t in enumerate(drafts):
            try:
                states.append(grammar.advance(states[-1], t))
            except _g.GrammarError:
                usable = i
                break
    rows = min(usable, len(drafts)) + 1
    logits = logits[:rows]
    if grammar is not None:
        raw = logits
        logits = apply_mask(logits, mx.stack([masks.within(states[i], remaining - i - 1) for i in range(rows)]))
        if phi is not None:
            rows_w = [phi.log_weights(context + drafts[:i], states[i], logits[i], raw[i]) for i in range(rows)]
            if any(w is not None for w in rows_w):
                logits = logits + mx.stack([w if w is not None else mx.zeros_like(logits[i]) for i, w in enumerate(rows_w)])
    if params.greedy:
        target = mx.argmax(logits, axis=-1).tolist()
        m = 0
        while m < len(drafts) and m < rows - 1 and target[m] == drafts[m]:
            m += 1
        return m, target[m], states
    p = distribution(logits, params)
    m = 0
    while m < len(drafts):
        d, q = drafts[m], proposal.probs[m]
        if m < rows - 1:  # otherwise the grammar refuses this draft: p(d) = 0, a sure reject
            pd = p[m, d].item()
            qd = 1.0 if q is None else q[d].item()
            if qd > 0 and sampler.uniform().item() < min(1.0, pd / qd):
                m += 1
                continue
        # Rejected: resample from the normalised residual (p - q)+.
        point = mx.zeros_like(p[m]).at[d].add(1.0) if q is None else q
        residual = mx.maximum(p[m] - point, 0.0)
        total = mx.sum(residual).item()
        return m, int(sampler.draw(residual / total if total > 0 else p[m]).item()), states
    return m, int(sampler.draw(p[m]).item()), states
