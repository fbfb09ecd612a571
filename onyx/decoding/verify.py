"""Exact verification of drafts against the target's logits, for one sequence or many at once.

One target forward scores each sequence's pending token and its drafts (a group of rows; in a
batched step the groups of every sequence lie in one logits matrix). Each row is masked by the
sequence's grammar (budget-aware: a row's mask only allows tokens after which a valid
completion still fits in the tokens left), optionally reweighted by Φ, and the drafts are
checked position by position:

- temperature 0: a draft is accepted while it equals the masked argmax;
- otherwise Leviathan accept/reject: accept draft d with probability min(1, p(d) / q(d)) (q is
  the draft's law, a point mass for deterministic drafts), and on a rejection resample from the
  normalised residual (p - q)+, so the committed tokens follow the target's masked law whatever
  the drafts were.

Everything a sequence needs is built lazily for all sequences (masks, distributions, one uniform
per draft, and one candidate per position drawn from that position's residual, or from p at the
last position) and evaluated once for the whole batch; the accept/reject walk then runs on plain
numbers. The candidate drawn at position m is independent of the uniforms, and only the one at
the first rejection is used, so the committed tokens follow the same law as drawing the residual
after the rejection. Each sequence consumes two keys of its own random stream per round,
whatever the other sequences do.

Before they become a law, a sequence's rows go through its logits processors in order
(`onyx.decoding.processors`: bias and penalties, the grammar mask, Φ); its reasoning budget
restricts its row masks; and when it asks for logprobs, the log-softmax of its processed rows is
read back with the rest (`onyx.decoding.logprobs`), kept on the `Check` for the committed tokens.

`prepare` (the grammar walk and the row masks: CPU work) is separate from `verify_many` so that
a batched step runs it while the forward computes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mlx.core as mx

from onyx.decoding.drafts import Proposal
from onyx.decoding.logprobs import logprob_arrays, logprob_entries
from onyx.decoding.sampling import RowSampling, distribution


@dataclass
class Check:
    """One sequence's verification: its drafts, its sampling (`RowSampling`: parameters, random
    stream, constraint, processors), where its rows start in the logits, the committed context,
    and what the grammar says about each row: `states[i]` is the state before row i, `row_masks[i]`
    its mask, and `usable` how many drafts the grammar allows (blind drafts may leave it)."""

    proposal: Proposal
    sampling: RowSampling
    offset: int = 0  # first row of this sequence in the logits
    context: list[int] = field(default_factory=list)
    states: list = field(default_factory=list)
    usable: int = 0
    row_masks: list = field(default_factory=list)
    unmasked: mx.array | None = None  # the rows before the grammar mask (set by the mask, read by Φ)
    logprob_out: list[dict] | None = None  # entries of the committed tokens, after `verify_many`

    @property
    def rows(self) -> int:
        return self.usable + 1

    @property
    def params(self):
        return self.sampling.params


def prepare(proposal: Proposal, sampling: RowSampling, remaining: int, *, offset: int = 0,
            context: list[int] | None = None) -> Check:
    """The grammar states along the drafts and each verified row's budget-aware mask (restricted
    by the sequence's reasoning budget while its block is open). `remaining`: tokens the
    sequence may still produce, this round's own included."""
    check = Check(proposal, sampling, offset, context if context is not None else [])
    constraint = sampling.constraint
    drafts = proposal.tokens
    if constraint is None:
        check.usable = len(drafts)
        return check
    states = check.states = constraint.walk(drafts)
    usable = len(states) - 1
    if sampling.gate is not None:
        check.row_masks = sampling.gate.row_masks(constraint, states[:usable + 1], drafts, remaining)
        usable = len(check.row_masks) - 1
    else:
        check.row_masks = constraint.row_masks(states, remaining)
    check.usable = usable
    return check


def _target_logits(logits: mx.array, c: Check) -> mx.array:
    """The rows the target's law is read from: this sequence's rows through its processors."""
    rows = logits[c.offset:c.offset + c.rows]
    for processor in c.sampling.processors:
        rows = processor(rows, c)
    return rows


def _sampled(target: mx.array, c: Check) -> list[mx.array]:
    """Lazy arrays for one sampled sequence: p(d) and q(d) per draft, a uniform per draft, and a
    candidate token per row (from the residual (p - q)+ where a draft can be rejected, from p at
    the last row)."""
    p = distribution(target, c.params)  # (rows, V)
    drafts = c.proposal.tokens
    n = len(drafts)
    tested = min(n, c.rows)  # drafts that meet a row (the one past `usable` is a sure reject)
    width = p.shape[-1]
    residual_rows = []
    qd = []
    for m in range(c.rows):
        if m < tested:
            d, q = drafts[m], c.proposal.probs[m]
            point = (mx.arange(width) == d).astype(p.dtype) if q is None else q
            r = mx.maximum(p[m] - point, 0.0)
            r = mx.where(mx.sum(r) > 0, r, p[m])
            residual_rows.append(r)
            qd.append(1.0 if q is None else q[d])
        else:
            residual_rows.append(p[m])
    sampler = c.sampling.sampler
    candidates = mx.random.categorical(mx.log(mx.stack(residual_rows)), key=sampler.next_key())
    uniforms = mx.random.uniform(shape=(max(tested, 1),), key=sampler.next_key())
    checked = min(tested, c.rows - 1)  # drafts whose p(d) is read (past them: p(d) = 0)
    pd = p[mx.arange(checked), mx.array(drafts[:checked])] if checked else mx.zeros((0,), p.dtype)
    qd_arr = mx.stack([mx.array(x, dtype=p.dtype) if isinstance(x, float) else x.astype(p.dtype)
                       for x in qd]) if qd else mx.zeros((0,), p.dtype)
    return [pd, qd_arr, uniforms, candidates]


def verify_many(logits: mx.array, checks: list[Check]) -> list[tuple[int, int, list]]:
    """Verifies every sequence's drafts against its rows of `logits` (evaluating all of them at
    once). Returns, per check, how many drafts were accepted, the target's own next token, and
    the grammar states along the drafts."""
    pending: list[list[mx.array]] = []
    read: list[list[mx.array] | None] = []
    for c in checks:
        target = _target_logits(logits, c)
        if c.params.greedy:
            pending.append([mx.argmax(target, axis=-1)])
        else:
            pending.append(_sampled(target, c))
        k = c.sampling.logprobs
        read.append(logprob_arrays(target, k) if k is not None else None)
    mx.eval([a for arrs in pending + [r for r in read if r is not None] for a in arrs])
    out = []
    for c, arrs, lps in zip(checks, pending, read):
        out.append(_walk(c, arrs))
        if lps is not None:
            m, token, _ = out[-1]
            c.logprob_out = logprob_entries(lps, c.proposal.tokens[:m] + [token], c.sampling.token_bytes)
    return out


def _walk(c: Check, arrs: list[mx.array]) -> tuple[int, int, list]:
    """The accept/reject walk of one sequence's drafts over its evaluated arrays."""
    drafts = c.proposal.tokens
    if c.params.greedy:
        target = arrs[0].tolist()
        m = 0
        while m < len(drafts) and m < c.rows - 1 and target[m] == drafts[m]:
            m += 1
        return m, target[m], c.states
    pd, qd, uniforms, candidates = (a.tolist() for a in arrs)
    m = 0
    while m < len(drafts) and m < c.rows:
        if m < c.rows - 1 and qd[m] > 0 and uniforms[m] < min(1.0, pd[m] / qd[m]):
            m += 1
            continue
        break
    return m, int(candidates[min(m, c.rows - 1)]), c.states
