"""The decoding loop: one loop for every mode, from plain decoding (γ = 0) to speculative.

Each round drafts up to γ tokens (`drafts.propose`: grammar-forced spans, a draft model, or
prompt lookup; none in `baseline`), runs the target once over the pending token plus the drafts
(`runner.ModelRunner`), verifies them exactly (`verify.verify`), emits the accepted drafts and
the target's own token, and rolls both KV sequences back past the rejected tail in O(1).

The grammar mask (budget-aware when `max_tokens` bounds the output) is applied to the logits
before temperature, top-k, top-p and min-p; the request's grammar state advances only on
committed tokens. With nothing to verify (γ = 0) the next forward is queued (`mx.async_eval`) as
soon as the token is known, so the CPU looks up the next mask while the forward runs. (Queuing
it on the still-lazy token, as mlx-lm does, measured no faster here.)
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Iterator

import mlx.core as mx

from onyx.constraint import Constraint
from onyx.decoding.drafts import DraftModel, ForcedTokens, Proposal, propose
from onyx.decoding.gamma import GammaController
from onyx.decoding.phi import make_phi
from onyx.decoding.runner import ModelRunner
from onyx.decoding.sampling import Sampler
from onyx.decoding.stats import DecodeStats, DraftCounts
from onyx.decoding.verify import verify
from onyx.options import GenerateOptions


@dataclass
class Finish:
    """The loop's last event: why it stopped, and where the grammar ended."""

    reason: str  # "stop" (EOS, or nothing but EOS left), "length", or "cancelled"
    state: int | None
    stats: DecodeStats


def decode(
    runner: ModelRunner,
    prompt_ids: list[int],
    options: GenerateOptions = GenerateOptions(),
    *,
    constraint: Constraint | None = None,
    draft_runner: ModelRunner | None = None,
    cancel: threading.Event | None = None,
    stats: DecodeStats | None = None,
) -> Iterator[int | Finish]:
    """Yields generated token ids, then a `Finish`.

    `constraint` (None: unconstrained) advances as tokens are committed. `draft_runner` is a
    draft model sharing the target's vocabulary; without one, drafts are model-free. Both KV
    sequences are freed when the generator finishes or is closed (a client that goes away frees
    its blocks), and the statistics are complete however the loop ends."""
    params = options.sampling
    spec = options.speculation
    max_tokens = options.max_tokens
    loaded = runner.loaded
    eos = set(loaded.eos_token_ids)
    grammar = constraint.grammar if constraint is not None else None
    masks = constraint.masks if constraint is not None else None
    stats = stats if stats is not None else DecodeStats()
    stats.prompt_tokens = len(prompt_ids)
    drafting = spec.drafting
    counts = DraftCounts()
    sampler = Sampler(params)
    forced = ForcedTokens(grammar, loaded.tokenizer, loaded.vocabulary) if (
        grammar is not None and spec.mode == "aware" and spec.jump_forward) else None
    draft = DraftModel(draft_runner, params, params.seed) if (drafting and draft_runner is not None) else None
    gamma = GammaController(spec.num_draft_tokens if drafting else 0, device=loaded.device,
                            draft_cost=draft_runner.weight_bytes / runner.weight_bytes if draft is not None else 0.0)
    phi = make_phi(options.phi) if grammar is not None else None

    t0 = time.perf_counter()
    seq, cached = runner.prefill_all_but_last(prompt_ids)
    stats.cached_prompt_tokens = cached
    reason = "length"
    produced = 0
    prefetched = None  # baseline: the next round's logits, queued while the token was lazy
    t_start = time.perf_counter()
    try:
        if draft is not None:
            draft.start(prompt_ids)
        stats.prefill_s = time.perf_counter() - t0
        context = list(prompt_ids)  # committed tokens; the last one is not yet in the target's KV
        if phi is not None:
            phi.prepare(runner, seq, context, grammar, params)
            stats.extra.update(getattr(phi, "stats", None) or {})
        t_start = time.perf_counter()
        while produced < max_tokens:
            if cancel is not None and cancel.is_set():
                reason = "cancelled"
                break
            state = constraint.state if constraint is not None else None
            room = max_tokens - produced - 1  # drafts that still fit after this round's own token
            proposal = Proposal()
            if drafting and room > 0:
                propose(proposal, gamma.next(), gamma.forced_limit(), min(room, gamma.cap), context, grammar,
                        masks, state, aware=spec.mode == "aware", forced=forced, draft=draft, eos=eos,
                        remaining=max_tokens - produced, timings=stats.extra)
            drafts = proposal.tokens
            if prefetched is not None and not drafts:
                logits = prefetched[None]
            else:
                logits = runner.logits(mx.array([context[-1]] + drafts), seq)
            prefetched = None
            stats.target_forwards += 1
            accepted, new_token, states = verify(logits, proposal, grammar, masks, state, params, sampler,
                                                 max_tokens - produced, phi, context)
            counts.add(proposal.sources, accepted)
            n_forced = proposal.sources.count("forced")  # forced drafts come first
            gamma.update(len(drafts) - n_forced, accepted - n_forced, n_forced, min(accepted, n_forced))
            # Emit the accepted drafts, then the target's own token.
            finished = False
            for i, token in enumerate(drafts[:accepted] + [new_token]):
                if token in eos:
                    reason, finished = "stop", True
                    break
                if constraint is not None:
                    if forced is not None:
                        forced.observe(constraint.state, token)
                    if i < accepted:
                        constraint.state = states[i + 1]
                    else:
                        constraint.advance(token)
                context.append(token)
                produced += 1
                stats.completion_tokens += 1
                yield token
                if constraint is not None and constraint.done:
                    reason, finished = "stop", True
                    break
            if finished:
                break
            if len(drafts) > accepted:
                seq.rollback(len(drafts) - accepted)
            if not drafting and produced < max_tokens:
                # γ = 0: queue the next forward now; the grammar work for the next mask then
                # overlaps it.
                prefetched = runner.logits(mx.array([context[-1]]), seq, last_only=True)
                mx.async_eval(prefetched)
        _finish_stats(stats, t_start, counts, spec.mode)
        yield Finish(reason, constraint.state if constraint is not None else None, stats)
    finally:
        _finish_stats(stats, t_start, counts, spec.mode)
        seq.free()
        runner.pool.materialize()
        if draft is not None:
            draft.close()
            draft_runner.pool.materialize()


def _finish_stats(stats: DecodeStats, t_start: float, counts: DraftCounts, mode: str) -> None:
    """Fills the decode time and the drafting counts (however the loop ended: a stop string or a
    client going away closes the generator before `Finish`)."""
    stats.decode_s = time.perf_counter() - t_start
    stats.extra.update(counts.as_dict(mode))
