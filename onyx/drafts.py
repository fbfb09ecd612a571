"""Where draft tokens come from, and how many to ask for.

Three sources, tried in this order each round:
- **forced** (jump-forward): the bytes every valid continuation starts with
  (`grammar.forced_bytes`), tokenized by the model's own tokenizer, minus a last token that
  could merge with what follows. Free to propose; still verified by the target.
- **model**: a small draft model sharing the target's tokenizer, sampling with the same
  settings (masked by the grammar in `aware` mode, unmasked in `blind` mode).
- **lookup**: prompt lookup, the continuation of the latest n-gram's previous occurrence in the
  prompt or the output so far (filtered through the grammar in `aware` mode).

A proposal carries, per token, the draft's probability vector `q` (model drafts) or None for a
deterministic proposal (a point mass), which is what exact verification needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mlx.core as mx

import onyx._grammar as _g
from onyx.sampling import MaskCache, Sampler, SamplingParams, apply_mask, distribution


@dataclass
class Proposal:
    tokens: list[int] = field(default_factory=list)
    probs: list[mx.array | None] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

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
        text = self.grammar.forced_bytes(state).decode("utf-8", errors="ignore")
        for t in self.tokenizer.encode(text, add_special_tokens=False) if text else ():
            try:
                s = self.grammar.advance(s, t)
            except _g.GrammarError:
                break
            hit.append(t)
        self._spelling[state] = hit
        return hit

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


def lookup(context: list[int], k: int, *, max_ngram: int = 3, min_ngram: int = 1) -> list[int]:
    """Prompt lookup: up to `k` tokens that followed the most recent earlier occurrence of the
    longest suffix n-gram of `context`."""
    n_ctx = len(context)
    for n in range(min(max_ngram, n_ctx - 1), min_ngram - 1, -1):
        tail = context[n_ctx - n:]
        for start in range(n_ctx - n - 1, -1, -1):
            if context[start:start + n] == tail:
                follow = context[start + n:start + n + k]
                if follow:
                    return follow
    return []


class DraftModel:
    """A draft model with its own paged KV sequence, kept in step with the committed tokens."""

    def __init__(self, runner, params: SamplingParams, seed: int | None) -> None:
        self.runner = runner
        self.params = params
        self.sampler = Sampler(SamplingParams(params.temperature, params.top_p, params.top_k, params.min_p,
                                              None if seed is None else seed + 7919))
        self.seq = None
        self.masks: MaskCache | None = None

    def start(self, prompt_ids: list[int]) -> None:
        self.seq, _, _ = self.runner.prefill(prompt_ids[:-1]) if len(prompt_ids) > 1 else (self.runner.pool.sequence(), None, 0)

    def close(self) -> None:
        if self.seq is not None:
            self.seq.free()
            self.seq = None

    def propose(self, context: list[int], k: int, out: Proposal, *, grammar=None, masks: MaskCache | None = None,
                state: int | None = None, budget: int = 1 << 30, eos: set[int] = frozenset()) -> None:
        """Appends up to `k` sampled tokens to `out`, continuing `context + out.tokens`."""
        full = context + out.tokens
        # Feed what the draft cache lacks (the pending token, and drafts accepted last round).
        if self.seq.length > len(full) - 1:
            self.seq.rollback(self.seq.length - (len(full) - 1))
        feed = full[self.seq.length:]
        logits = self.runner.logits(mx.array(feed), self.seq, last_only=True)
        for i in range(k):
            mask = masks.within(state, budget - i - 1) if grammar is not None else None
            masked = apply_mask(logits, mask)
            q = distribution(masked, self.params)
            token = int((mx.argmax(masked) if self.params.greedy else self.sampler.draw(q)).item())
            out.add(token, q, "model")
            if token in eos:
                break
            if grammar is not None:
                state = grammar.advance(state, token)
                if masks.only_eos(state):
                    break
            if i + 1 < k:
                logits = self.runner.logits(mx.array([token]), self.seq, last_only=True)


class GammaController:
    """Chooses the number of draft tokens per round.

    A fixed `gamma`, or adaptive (`"auto"`): with the recent acceptance rate a (an exponential
    average), a round with g drafts yields (1 - a^(g+1)) / (1 - a) tokens on average and costs
    one target forward, wider by `width_cost` of a step per draft, plus g draft steps
    (`draft_cost`: a draft step's cost in target steps, from the models' weight bytes since
    decoding is memory-bound; 0 for model-free drafts). It picks the g that maximises tokens per
    unit cost, so a poor or expensive draft source drives g to 0, i.e. plain decoding. The costs
    are fixed per device, not timed, so a seeded request draws the same output every run.

    Width cost, measured with `bench/spec_bench.py`'s forward timings: on the CPU (float32,
    OpenBLAS, the few-row kernel) a forward over 1 + g tokens costs about 1 + 0.12 g single
    steps (2 tokens 1.1x, 4 tokens 1.3x, 8 tokens 2x); on Metal, verifying a few more tokens is
    nearly free."""

    WIDTH_COST = {"cpu": 0.12, "gpu": 0.03}

    def __init__(self, gamma: int | str, *, max_gamma: int = 7, device: str = "cpu",
                 draft_cost: float = 0.0) -> None:
        self.adaptive = gamma == "auto"
        self.fixed = 0 if self.adaptive else int(gamma)
        # Adaptive rounds draft at most max_gamma tokens in all: 1 + 7 rows is the widest
        # forward the CPU's few-row matmul kernel takes (onyx/platform.py); wider costs 2x.
        self.max_gamma = max_gamma
        self.cap = max_gamma if self.adaptive else self.fixed
        self.width_cost = self.WIDTH_COST.get(device, self.WIDTH_COST["cpu"])
        self.acceptance = 0.6  # of model / lookup drafts
        # Grammar-forced drafts (jump-forward) fail mostly at a span's first token, where the
        # target may spell the bytes its own way; past it they are nearly always taken. So
        # two rates: the first forced token's, and each later one's given the one before.
        self.forced_first = 0.9
        self.forced_rest = 0.9
        self.draft_cost = draft_cost
        self.idle_rounds = 0

    def next(self) -> int:
        """Model or lookup drafts to ask for this round."""
        if not self.adaptive:
            return self.fixed
        best = self._best(min(max(self.acceptance, 0.0), 0.99))
        if best == 0 and self._best(0.99) > 0:
            # Probe again now and then: the text may have become predictable (never when even
            # near-perfect acceptance would not pay for the drafts).
            self.idle_rounds += 1
            if self.idle_rounds % 16 == 0:
                return 1
        return best

    def forced_limit(self) -> int | None:
        """How many grammar-forced drafts may come on top of `next()`'s (None with a fixed γ:
        they count toward it). They cost no draft steps, only width; the i-th is taken with
        probability forced_first * forced_rest^(i-1)."""
        if not self.adaptive:
            return None
        return self._best(self.forced_first, self.forced_rest, draft_cost=0.0)

    def _best(self, first: float, rest: float | None = None, draft_cost: float | None = None) -> int:
        """The g with the most tokens per unit cost (0: drafting does not pay) when the first
        draft is taken with probability `first` and each later one, given the one before, with
        `rest` (default: `first`). A round yields 1 + first (1 + rest + ... + rest^(g-1)) tokens."""
        rest = first if rest is None else rest
        draft_cost = self.draft_cost if draft_cost is None else draft_cost
        best, best_rate = 0, 1.0
        tokens, taken = 1.0, first  # taken: probability that draft g is accepted
        for g in range(1, self.max_gamma + 1):
            tokens += taken
            taken *= rest
            cost = 1.0 + self.width_cost * g + draft_cost * g
            if tokens / cost > best_rate:
                best, best_rate = g, tokens / cost
        return best

    def update(self, drafted: int, accepted: int, forced_drafted: int = 0, forced_accepted: int = 0) -> None:
        """Counts of one round. Model / lookup drafts after a rejected forced one were never
        tested: call with drafted <= 0 then (nothing is learnt about them)."""
        if drafted > 0 and accepted >= 0:
            self.acceptance = 0.8 * self.acceptance + 0.2 * (accepted / drafted)
        if forced_drafted:
            self.forced_first = 0.8 * self.forced_first + 0.2 * (forced_accepted > 0)
            tested = min(forced_drafted, forced_accepted + 1) - 1  # later forced tokens verified
            if forced_accepted > 0 and tested > 0:
                self.forced_rest = 0.8 * self.forced_rest + 0.2 * ((forced_accepted - 1) / tested)
