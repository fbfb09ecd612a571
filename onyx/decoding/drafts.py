"""Where draft tokens come from, and how many to ask for.

Three sources, tried in this order each round:
- **forced** (jump-forward): the bytes every valid continuation starts with
  (`grammar.forced_bytes`), tokenized by the model's own tokenizer, minus a last token that
  could merge with what follows. A structure's forced bytes may hold marker bytes that stand
  for special tokens (`onyx.grammar.structure.pieces`): those become the special token's id, and only
  the text between them is tokenized. Free to propose; still verified by the target.
- **model**: a small draft model sharing the target's tokenizer, sampling with the same
  settings (masked by the grammar in `aware` mode, unmasked in `blind` mode).
- **lookup**: prompt lookup, the continuation of the latest n-gram's previous occurrence in the
  prompt or the output so far, or in a predicted output the request gave (OpenAI's
  `prediction`) (filtered through the grammar in `aware` mode).

A proposal carries, per token, the draft's probability vector `q` (model drafts) or None for a
deterministic proposal (a point mass), which is what exact verification needs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import mlx.core as mx
import numpy as np

import onyx._grammar as _g
from onyx.grammar import structure as st
from onyx.decoding.gamma import GammaController
from onyx.decoding.sampling import Sampler, apply_mask, distribution
from onyx.grammar.constraint import Constraint
from onyx.options import SamplingParams


@dataclass
class Proposal:
    tokens: list[int] = field(default_factory=list)
    probs: list[mx.array | None] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    match: int | None = None  # lookup drafts: the length of the n-gram they continue

    def add(self, token: int, prob: mx.array | None, source: str) -> None:
        self.tokens.append(token)
        self.probs.append(prob)
        self.sources.append(source)


class ForcedTokens:
    """Jump-forward: tokens that spell the grammar's forced bytes at a state.

    The spelling is the model tokenizer's, corrected by what the target itself committed earlier
    in the request: a model often spells a literal its own way (SmolLM2 writes `{` `"` where its
    tokenizer writes `{"`, and `":` `"` for `":"`), and it does so again at the next key. So
    each step takes the tokenizer's first token for the remaining forced bytes, or the token the
    target committed the last time that was the tokenizer's first token. A last tokenizer token
    that a longer allowed token starts with is left out (it could merge with what follows the
    span) unless the target has been seen to commit it. Cached per state."""

    MAX_CHAIN = 32

    def __init__(self, grammar, tokenizer, vocab) -> None:
        self.grammar = grammar
        self.tokenizer = tokenizer
        self.vocab = vocab
        self._cache: dict[int, list[int]] = {}
        self._spelling: dict[int, list[int]] = {}  # state -> tokenizer's tokens for its forced bytes
        self._choice: dict[int, int] = {}  # tokenizer's token -> the token the target committed

    def at(self, state: int) -> list[int]:
        hit = self._cache.get(state)
        if hit is None:
            hit = self._compute(state)
            self._cache[state] = hit
        return hit

    def observe(self, state: int, token: int) -> None:
        """Learns from the token the target committed at `state`."""
        spelled = self.spell(state)
        if spelled and self._choice.get(spelled[0]) != token:
            self._choice[spelled[0]] = token
            self._cache.clear()

    def spell(self, state: int) -> list[int]:
        """The model tokenizer's tokens for the forced bytes at `state`, as far as the grammar
        allows them."""
        hit = self._spelling.get(state)
        if hit is not None:
            return hit
        hit, s = [], state
        for t in self._tokens(self.grammar.forced_bytes(state)):
            try:
                s = self.grammar.advance(s, t)
            except _g.GrammarError:
                break
            hit.append(t)
        self._spelling[state] = hit
        return hit

    def _tokens(self, data: bytes) -> list[int]:
        """The tokenizer's tokens for forced bytes, a special token's id for its marker byte."""
        out: list[int] = []
        for piece in st.pieces(self.grammar, data) if data else ():
            if isinstance(piece, int):
                out.append(piece)
                continue
            text = piece.decode("utf-8", errors="ignore")
            if text:
                out.extend(self.tokenizer.encode(text, add_special_tokens=False))
        return out

    def _compute(self, state: int) -> list[int]:
        tokens, s = [], state
        while len(tokens) < self.MAX_CHAIN:
            spelled = self.spell(s)
            if not spelled:
                break
            t = self._choice.get(spelled[0])
            if t is None:
                if len(spelled) == 1 and self._could_merge(s, spelled[0]):
                    break
                t = spelled[0]
            try:
                s = self.grammar.advance(s, t)
            except _g.GrammarError:
                break
            tokens.append(t)
        return tokens

    def _could_merge(self, state: int, token: int) -> bool:
        """Whether a longer token allowed at `state` starts with `token`'s bytes."""
        head = self.vocab.token_bytes(token)
        for other in self.grammar.allowed_token_ids(state).tolist():
            if other != token:
                b = self.vocab.token_bytes(other)
                if len(b) > len(head) and b.startswith(head):
                    return True
        return False


def lookup(context: list[int], k: int, *, max_ngram: int = 3, min_ngram: int = 1) -> tuple[int, list[int]]:
    """Prompt lookup: the longest suffix n-gram of `context` (n from `max_ngram` down to
    `min_ngram`) that occurred earlier, and up to `k` tokens that followed its most recent
    earlier occurrence; (0, []) when no suffix repeats.

    Vectorised (it runs for every sequence every step): the earlier places of the last token,
    then how far back each one agrees with the suffix, in one pass over the context each."""
    assert min_ngram >= 1, "a match is at least one token (0 means none)"
    n_ctx = len(context)
    if n_ctx < 2 or k <= 0:
        return 0, []
    tokens = np.asarray(context, dtype=np.int64)
    ends = np.flatnonzero(tokens[:-1] == tokens[-1])  # where an earlier occurrence would end
    agree = np.ones(len(ends), dtype=np.int64)  # how many tokens each agrees with the suffix
    alive = np.ones(len(ends), dtype=bool)
    for back in range(1, min(max_ngram, n_ctx - 1)):
        at = ends - back
        alive &= at >= 0
        alive[alive] = tokens[at[alive]] == tokens[n_ctx - 1 - back]
        agree += alive
    for n in range(min(max_ngram, n_ctx - 1), min_ngram - 1, -1):
        hits = ends[agree >= n]
        if len(hits):
            start = int(hits[-1]) + 1
            return n, context[start:start + k]
    return 0, []


class DraftModel:
    """A draft model with its own paged KV sequence, kept in step with the committed tokens."""

    def __init__(self, runner, params: SamplingParams, seed: int | None) -> None:
        self.runner = runner
        self.params = params
        self.sampler = Sampler(SamplingParams(params.temperature, params.top_p, params.top_k, params.min_p,
                                              None if seed is None else seed + 7919))
        self.seq = None

    def start(self, prompt_ids: list[int]) -> None:
        self.seq, _, _ = self.runner.prefill(prompt_ids[:-1]) if len(prompt_ids) > 1 else (self.runner.pool.sequence(), None, 0)

    def close(self) -> None:
        if self.seq is not None:
            self.seq.free()
            self.seq = None

    def propose(self, context: list[int], k: int, out: Proposal, *, constraint: Constraint | None = None,
                state: int | None = None, budget: int = 1 << 30, eos: set[int] = frozenset()) -> None:
        """Appends up to `k` sampled tokens to `out`, continuing `context + out.tokens`; with a
        `constraint`, masked by it from `state` (budget-aware: `budget` tokens remain)."""
        full = context + out.tokens
        # Feed what the draft cache lacks (the pending token, and drafts accepted last round).
        if self.seq.length > len(full) - 1:
            self.seq.rollback(self.seq.length - (len(full) - 1))
        feed = full[self.seq.length:]
        logits = self.runner.logits(mx.array(feed), self.seq, last_only=True)
        for i in range(k):
            mask = constraint.mask(state, budget - i - 1) if constraint is not None else None
            masked = apply_mask(logits, mask)
            q = distribution(masked, self.params)
            token = int((mx.argmax(masked) if self.params.greedy else self.sampler.draw(q)).item())
            out.add(token, q, "model")
            if token in eos:
                break
            if constraint is not None:
                state = constraint.grammar.advance(state, token)
                if constraint.only_eos(state):
                    break
            if i + 1 < k:
                logits = self.runner.logits(mx.array([token]), self.seq, last_only=True)


class Drafter:
    """One sequence's drafting: its sources (grammar-forced spans, a draft model, prompt
    lookup) and how many drafts to ask for (`gamma`). `aware` drafts stay inside the grammar;
    time spent in the draft model is added to `timings["draft_s"]`."""

    def __init__(self, gamma: GammaController, *, aware: bool, forced: ForcedTokens | None = None,
                 draft: DraftModel | None = None, eos: set[int] = frozenset(), timings: dict | None = None,
                 reference: list[int] | None = None) -> None:
        self.gamma = gamma
        # Tokens the output is expected to repeat (a predicted output): searched by the lookup
        # before the context, so the context's own occurrences, being later, come first.
        self.reference = list(reference or [])
        self.aware = aware
        self.forced = forced
        self.draft = draft
        self.eos = eos
        self.timings = timings if timings is not None else {}

    def propose(self, out: Proposal, context: list[int], constraint: Constraint | None, room: int,
                remaining: int) -> None:
        """Fills `out` with one round's drafts, at most `room`, continuing `context` from the
        constraint's committed state (`remaining`: tokens the sequence may still produce): forced
        tokens first, then as many model or lookup drafts as `gamma` asks for (`gamma.next`, for
        lookup drafts given the length of the n-gram they continue). With a fixed γ
        (`forced_limit()` None) forced tokens count toward it; otherwise up to `forced_limit()` of
        them come on top."""
        gamma = self.gamma
        aware = self.aware and constraint is not None
        forced_limit = gamma.forced_limit()
        s = constraint.state if constraint is not None else None
        if self.forced is not None:
            for t in self.forced.at(s)[:min(room, gamma.next() if forced_limit is None else forced_limit)]:
                out.add(t, None, "forced")
                s = constraint.grammar.advance(s, t)

        def after_forced(k: int) -> int:
            return min(k - len(out.tokens) if forced_limit is None else k, room - len(out.tokens))

        if room - len(out.tokens) <= 0 or (forced_limit is None and after_forced(gamma.next()) <= 0) or (
                aware and constraint.only_eos(s)):
            return  # no room, forced tokens filled a fixed γ, or only the end may follow
        if self.draft is not None:
            k = after_forced(gamma.next())
            if k <= 0:
                return
            t0 = time.perf_counter()
            self.draft.propose(context, k, out, constraint=constraint if aware else None, state=s,
                               budget=remaining - len(out.tokens), eos=self.eos)
            self.timings["draft_s"] = self.timings.get("draft_s", 0.0) + time.perf_counter() - t0
            return
        match, follow = lookup(self.reference + context + out.tokens, room - len(out.tokens))
        k = after_forced(gamma.next(match)) if follow else 0
        for t in follow[:max(k, 0)]:
            if t in self.eos:
                break
            if aware:
                try:
                    s = constraint.grammar.advance(s, t)
                except _g.GrammarError:
                    break
            out.add(t, None, "lookup")
            out.match = match
