"""The decoding loop: prompt → (grammar-masked) tokens, one at a time.

`ModelRunner` is the only code that calls a model: it owns the model's paged KV pool, runs the
prompt (reusing cached prefix blocks) and single steps. `decode` is the loop: at every step the
grammar mask (budget-aware when `max_tokens` bounds the output) is applied to the logits before
temperature, top-k, top-p and min-p; the grammar state advances only on emitted tokens.

Grammar work overlaps the model: with nothing to verify (γ = 0) the next forward is queued
(`mx.async_eval`) as soon as the token is known, so the CPU looks up the next mask while the
forward runs. (Queuing it on the still-lazy token, as mlx-lm does, measured no faster here.)
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Iterator

import mlx.core as mx
from mlx.utils import tree_flatten

from onyx.models import LoadedModel
from onyx.paged_cache import PagedKVPool, PagedSequence
import onyx._grammar as _g
from onyx.drafts import DraftModel, ForcedTokens, GammaController, Proposal, lookup
from onyx.sampling import MaskCache, Sampler, SamplingParams, apply_mask, distribution

PREFILL_CHUNK = 256


class ModelRunner:
    """A loaded model and its paged KV pool."""

    def __init__(self, loaded: LoadedModel, *, block_size: int = 16) -> None:
        self.loaded = loaded
        self.model = loaded.model
        self.pool = PagedKVPool.for_model(loaded.model, block_size=block_size)
        # Bytes of weights one decode step reads: the relative cost of a step (decoding is
        # memory-bound), used to price a draft model's steps against the target's.
        self.weight_bytes = sum(v.nbytes for _, v in tree_flatten(loaded.model.parameters()))

    def logits(self, tokens: mx.array, seq: PagedSequence, *, last_only: bool = False) -> mx.array:
        """Runs `tokens` (shape (n,)) through the model, appending to `seq`'s KV. Returns float32
        logits (n, V), or (V,) for the last position when `last_only` (the vocabulary head is then
        applied to that position alone, which matters for long prompts)."""
        x = tokens.reshape(1, -1)
        caches = seq.layer_caches()
        inner = getattr(self.model, "model", None)
        if last_only and inner is not None:
            hidden = inner(x, caches)[:, -1:, :]
            out = _head(self.model, hidden)
            return out[0, -1].astype(mx.float32)
        out = self.model(x, cache=caches)[0]
        return (out[-1] if last_only else out).astype(mx.float32)

    def prefill(self, prompt_ids: list[int], *, leave_last: bool = True) -> tuple[PagedSequence, mx.array | None, int]:
        """Runs the prompt, reusing cached KV blocks of an earlier prompt with the same prefix.
        Returns the sequence, the last position's logits (evaluated; None when every token was
        cached and `leave_last` is False) and the cached token count."""
        seq, cached = self.pool.lookup_prefix(prompt_ids, leave_last=leave_last)
        try:
            rest = prompt_ids[cached:]
            logits = None
            for i in range(0, len(rest), PREFILL_CHUNK):
                logits = self.logits(mx.array(rest[i:i + PREFILL_CHUNK]), seq, last_only=True)
                mx.eval(logits)
            self.pool.register_prefix(prompt_ids, seq)
        except BaseException:
            seq.free()
            raise
        return seq, logits, cached


def _head(model, hidden: mx.array) -> mx.array:
    """The vocabulary projection of an mlx-lm model (tied embeddings or `lm_head`)."""
    args = getattr(model, "args", None)
    tied = getattr(model, "tie_word_embeddings", getattr(args, "tie_word_embeddings", False))
    head = getattr(model, "lm_head", None)
    if head is not None and not tied:
        out = head(hidden)
    else:
        out = model.model.embed_tokens.as_linear(hidden)
    softcap = getattr(args, "final_logit_softcapping", None)
    if softcap:
        out = mx.tanh(out / softcap) * softcap
    return out


@dataclass
class DecodeStats:
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    target_forwards: int = 0
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        tok_s = self.completion_tokens / self.decode_s if self.decode_s > 0 else 0.0
        return {
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "prefill_s": round(self.prefill_s, 6),
            "ttft_s": round(self.prefill_s, 6),
            "decode_s": round(self.decode_s, 6),
            "tokens_per_s": round(tok_s, 3),
            "target_forwards": self.target_forwards,
            **{k: v for k, v in self.extra.items() if k != "grammar_state"},
        }


@dataclass
class Finish:
    """The loop's last event: why it stopped, and where the grammar ended."""

    reason: str  # "stop" (EOS, or nothing but EOS left), "length", or "cancelled"
    state: int | None
    stats: DecodeStats


@dataclass
class SpecConfig:
    """How the loop drafts. `baseline` never drafts (γ = 0); `blind` drafts ignore the grammar;
    `aware` drafts are constrained by it and may use grammar-forced spans (jump-forward)."""

    mode: str = "aware"
    gamma: int | str = "auto"  # draft tokens per round, or "auto" (adaptive)
    draft: ModelRunner | None = None  # draft model; None: model-free drafts (prompt lookup)
    jump_forward: bool = True
    tokenizer: object = None  # the target's tokenizer, for jump-forward
    vocab: object = None  # the grammar core's Vocabulary (token bytes), for jump-forward
    # Future-validity reweighting (onyx/phi.py): the verifier's target becomes p·Φ normalised.
    # An object with prepare(runner, seq, context, grammar, params) and
    # log_weights(context, state, masked_logits_row, raw_logits_row) -> (V,) log Φ or None; its
    # `stats` dict (if any) joins the request's stats after prepare.
    phi: object = None

    def __post_init__(self) -> None:
        if self.mode not in ("baseline", "blind", "aware"):
            raise ValueError(f"speculative must be 'baseline', 'blind' or 'aware', got {self.mode!r}")
        if self.gamma != "auto" and (isinstance(self.gamma, bool) or not isinstance(self.gamma, int)
                                     or not 0 <= self.gamma <= 32):
            raise ValueError(f"num_draft_tokens must be an integer from 0 to 32 or 'auto', got {self.gamma!r}")


def decode(
    runner: ModelRunner,
    prompt_ids: list[int],
    *,
    grammar=None,
    masks: MaskCache | None = None,
    params: SamplingParams = SamplingParams(),
    max_tokens: int = 256,
    cancel: threading.Event | None = None,
    stats: DecodeStats | None = None,
    spec: SpecConfig | None = None,
) -> Iterator[int | Finish]:
    """Yields generated token ids, then a `Finish`.

    Each round drafts up to γ tokens, runs the target once on the pending token plus the drafts,
    and verifies them position by position against the target's masked distribution: exact
    match to the masked argmax at temperature 0, Leviathan accept/reject with resampling from the
    residual (p - q)+ otherwise, so the output law is the target's whatever the drafts. The
    grammar's main state advances only on accepted tokens; drafts use throw-away int states.
    Both KV sequences roll back the rejected tail in O(1) and are freed when the generator
    finishes or is closed (a client that goes away frees its blocks)."""
    spec = spec or SpecConfig(mode="baseline")
    eos = set(runner.loaded.eos_token_ids)
    if grammar is not None and masks is None:
        masks = MaskCache(grammar, runner.loaded.vocab_size)
    stats = stats if stats is not None else DecodeStats()
    stats.prompt_tokens = len(prompt_ids)
    drafting = spec.mode != "baseline"
    counts = {src: [0, 0] for src in ("model", "lookup", "forced")}  # drafted, accepted
    sampler = Sampler(params)
    forced = ForcedTokens(grammar, spec.tokenizer, spec.vocab) if (
        grammar is not None and drafting and spec.mode == "aware" and spec.jump_forward
        and spec.tokenizer is not None and spec.vocab is not None) else None
    draft = DraftModel(spec.draft, params, params.seed) if (drafting and spec.draft is not None) else None
    gamma = GammaController(spec.gamma if drafting else 0, device=runner.loaded.device,
                            draft_cost=spec.draft.weight_bytes / runner.weight_bytes if draft is not None else 0.0)

    t0 = time.perf_counter()
    seq, cached = _prefill_all_but_last(runner, prompt_ids)
    stats.cached_prompt_tokens = cached
    if draft is not None:
        draft.start(prompt_ids)
    stats.prefill_s = time.perf_counter() - t0
    context = list(prompt_ids)  # committed tokens; the last one is not yet in the target's KV
    if spec.phi is not None and grammar is not None:
        spec.phi.prepare(runner, seq, context, grammar, params)
        stats.extra.update(getattr(spec.phi, "stats", None) or {})
    state = grammar.initial_state if grammar is not None else None
    stats.extra["grammar_state"] = state
    reason = "length"
    produced = 0
    prefetched = None  # baseline: the next round's logits, queued while the token was lazy
    t_start = time.perf_counter()
    try:
        while produced < max_tokens:
            if cancel is not None and cancel.is_set():
                reason = "cancelled"
                break
            room = max_tokens - produced - 1  # drafts that still fit after this round's own token
            proposal = Proposal()
            if drafting and room > 0:
                _propose(proposal, gamma.next(), gamma.forced_limit(), min(room, gamma.cap), context, grammar,
                         masks, state, spec, forced, draft, eos, max_tokens - produced, stats)
            drafts = proposal.tokens
            if prefetched is not None and not drafts:
                logits = prefetched[None]
            else:
                logits = runner.logits(mx.array([context[-1]] + drafts), seq)
            prefetched = None
            stats.target_forwards += 1
            accepted, new_token, states = _verify(logits, proposal, grammar, masks, state, params, sampler,
                                                  max_tokens - produced, spec.phi, context)
            for src, acc in zip(proposal.sources, [True] * accepted + [False] * (len(drafts) - accepted)):
                counts[src][0] += 1
                counts[src][1] += acc
            n_forced = proposal.sources.count("forced")  # forced drafts come first
            gamma.update(len(drafts) - n_forced, accepted - n_forced, n_forced, min(accepted, n_forced))
            # Emit the accepted drafts, then the target's own token.
            finished = False
            for i, token in enumerate(drafts[:accepted] + [new_token]):
                if token in eos:
                    reason, finished = "stop", True
                    break
                if grammar is not None:
                    if forced is not None:
                        forced.observe(state, token)
                    state = states[i + 1] if i < accepted else grammar.advance(state, token)
                    stats.extra["grammar_state"] = state
                context.append(token)
                produced += 1
                stats.completion_tokens += 1
                yield token
                if grammar is not None and masks.only_eos(state):
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
        stats.extra.update(_spec_stats(spec, counts))
        yield Finish(reason, state, stats)
    finally:
        stats.decode_s = time.perf_counter() - t_start
        seq.free()
        runner.pool.materialize()
        if draft is not None:
            draft.close()
            spec.draft.pool.materialize()


def _prefill_all_but_last(runner: ModelRunner, prompt_ids: list[int]):
    """Runs the prompt except its last token, which becomes the first round's input."""
    if len(prompt_ids) > 1:
        seq, _, cached = runner.prefill(prompt_ids[:-1], leave_last=False)
        return seq, cached
    return runner.pool.sequence(), 0


def _propose(out: Proposal, k: int, forced_limit: int | None, room: int, context, grammar, masks, state,
             spec: SpecConfig, forced, draft, eos, remaining: int, stats: DecodeStats) -> None:
    """Fills `out` with drafts, at most `room`: forced tokens first, then up to `k` model or
    lookup drafts. With `forced_limit` None (a fixed γ) forced tokens count toward `k`;
    otherwise up to `forced_limit` of them come on top of it."""
    aware = spec.mode == "aware" and grammar is not None
    s = state
    if forced is not None:
        for t in forced.at(s)[:min(room, k if forced_limit is None else forced_limit)]:
            out.add(t, None, "forced")
            s = grammar.advance(s, t)
    k = min(k - len(out.tokens) if forced_limit is None else k, room - len(out.tokens))
    if k <= 0 or (aware and masks.only_eos(s)):
        return
    if draft is not None:
        t = time.perf_counter()
        draft.propose(context, k, out, grammar=grammar if aware else None, masks=masks if aware else None,
                      state=s, budget=remaining - len(out.tokens), eos=eos)
        stats.extra["draft_s"] = stats.extra.get("draft_s", 0.0) + time.perf_counter() - t
        return
    for t in lookup(context + out.tokens, k):
        if t in eos:
            break
        if aware:
            try:
                s = grammar.advance(s, t)
            except _g.GrammarError:
                break
        out.add(t, None, "lookup")


def _verify(logits: mx.array, proposal: Proposal, grammar, masks, state, params: SamplingParams,
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


def _spec_stats(spec: SpecConfig, counts: dict) -> dict:
    drafted = sum(c[0] for c in counts.values())
    accepted = sum(c[1] for c in counts.values())
    out = {
        "speculative": spec.mode,
        "drafted": drafted,
        "accepted": accepted,
        "acceptance_rate": round(accepted / drafted, 4) if drafted else 0.0,
    }
    for src, (d, a) in counts.items():
        if d:
            out[f"drafted_{src}"] = d
            out[f"accepted_{src}"] = a
            out[f"acceptance_rate_{src}"] = round(a / d, 4)
    return out
