"""`Generation`: one sequence being decoded, as a batched step sees it.

A generation goes through three phases:
- **waiting**: admitted but has no KV yet; a sample of an `n > 1` request waits here for its
  first sibling's prompt, then forks its KV (copy-on-write: the prompt's blocks are shared);
- **prefill**: its prompt (all but the last token) is fed in chunks, at most one chunk's worth
  of prompt tokens per batched step over all prefilling generations;
- **decode**: each round feeds the pending token (the last committed one) plus up to γ drafts,
  and commits the verified tokens.

Everything that turns this sequence's logits into its tokens (sampling parameters, random
stream, constraint, logits processors, Φ) is in `sampling` (`onyx.decoding.sampling.RowSampling`),
so per-row logit processing has one home; where its drafts come from is `drafter`
(`onyx.decoding.drafts.Drafter`). Events for the caller (tokens, finish) are collected
in `emitted` and `finish` by `commit`; the batch reads them after each step.
"""

from __future__ import annotations

import threading
import time

from onyx.decoding.drafts import DraftModel, Drafter, ForcedTokens, Proposal
from onyx.decoding.gamma import GammaController, cost_profile
from onyx.decoding.phi import make_phi
from onyx.decoding.processors import ReasoningGate, row_sampling
from onyx.decoding.stats import DecodeStats, DraftCounts
from onyx.decoding.verify import Check, prepare
from onyx.grammar.constraint import Constraint
from onyx.kv.pool import PagedSequence
from onyx.options import GenerateOptions, SamplingParams

class Generation:
    """One sequence: its prompt, options, constraint, KV sequence, drafting state and output."""

    def __init__(self, runner, prompt_ids: list[int], options: GenerateOptions = GenerateOptions(), *,
                 constraint: Constraint | None = None, draft_runner=None, cancel: threading.Event | None = None,
                 sample_index: int = 0, fork_of: "Generation | None" = None, budget=None) -> None:
        self.runner = runner
        self.prompt_ids = list(prompt_ids)
        self.options = options
        self.constraint = constraint
        self.cancel = cancel
        self.fork_of = fork_of
        self.fork_at = len(self.prompt_ids) - 1  # prompt tokens whose KV comes from fork_of
        self.stats = DecodeStats(prompt_tokens=len(prompt_ids))
        self.counts = DraftCounts()
        params = options.sampling
        if sample_index and params.seed is not None:  # the samples of one request: seeds in a row
            params = SamplingParams(params.temperature, params.top_p, params.top_k, params.min_p,
                                    (params.seed + sample_index) % 2**64)
        spec = options.speculation
        loaded = runner.loaded
        self.eos = set(loaded.eos_token_ids)
        width = loaded.vocab_size
        phi = make_phi(options.phi) if constraint is not None else None
        self.sampling = row_sampling(
            params, constraint, phi=phi, adjust=options.adjust, width=width, prompt_len=len(prompt_ids),
            gate=ReasoningGate(budget, constraint.grammar, width) if budget is not None and constraint is not None else None,
            logprobs=options.logprobs, token_bytes=loaded.vocabulary.token_bytes)
        self.drafting = spec.drafting
        forced = ForcedTokens(constraint.grammar, loaded.tokenizer, loaded.vocabulary) if (
            constraint is not None and spec.mode == "aware" and spec.jump_forward) else None
        draft = DraftModel(draft_runner, params, params.seed) if (
            self.drafting and draft_runner is not None) else None
        self.gamma = GammaController(spec.num_draft_tokens if self.drafting else 0,
                                     device=cost_profile(loaded.device, loaded.dtype),
                                     draft_cost=draft_runner.weight_bytes / runner.weight_bytes
                                     if draft is not None else 0.0)
        reference = loaded.tokenizer.encode(options.prediction, add_special_tokens=False) if (
            options.prediction and self.drafting) else None
        self.drafter = Drafter(self.gamma, aware=spec.mode == "aware", forced=forced, draft=draft, eos=self.eos,
                               timings=self.stats.extra, reference=reference)
        self.seq: PagedSequence | None = None
        self.fed = 0  # prompt tokens (of all but the last) in the KV
        self.context = list(prompt_ids)  # committed tokens; the last one is not yet in the KV
        self.produced = 0
        self.phase = "waiting"
        self.finish: str | None = None  # "stop", "length", "cancelled" or "error"
        self.error: BaseException | None = None
        self.emitted: list[int] = []  # tokens committed by the last step
        self.emitted_logprobs: list[dict] | None = [] if options.logprobs is not None else None
        self.proposal: Proposal | None = None
        self._check: Check | None = None
        self.t_admit = self.t_first = None
        self.t_decode = None
        self.steps = 0  # batched steps this generation took part in

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def max_tokens(self) -> int:
        return self.options.max_tokens

    @property
    def done(self) -> bool:
        return self.finish is not None

    @property
    def prompt_rest(self) -> int:
        """Prompt tokens still to feed before decoding."""
        return max(0, len(self.prompt_ids) - 1 - self.fed)

    def admit(self) -> None:
        """Takes the longest cached prefix of the prompt (or waits for a sibling to fork from)."""
        if self.t_admit is None:
            self.t_admit = time.perf_counter()
        if self.fork_of is not None and not self.fork_of.done:
            return  # waiting: `try_fork` once the sibling's prompt is in
        self.fork_of = None
        self.seq, cached = self.runner.pool.lookup_prefix(self.prompt_ids[:-1], leave_last=False)
        self.seq.expect(len(self.prompt_ids))
        self.fed = self.stats.cached_prompt_tokens = cached
        self.phase = "prefill"

    def share_prompt_of(self, leader: "Generation", length: int) -> None:
        """Takes the KV of the first `length` prompt tokens from `leader`, whose prompt starts
        the same way and which holds them or is prefilling them, instead of computing them
        again: at once when they are in, otherwise when they are (`try_fork`)."""
        if self.seq is not None:
            self.seq.free()
            self.seq = None
        self.fork_of, self.fork_at, self.phase = leader, length, "waiting"
        self.try_fork()

    def try_fork(self) -> bool:
        """A waiting generation (a sample of a request with n > 1, or a prompt that starts like
        another's): forks the other's KV once its first `fork_at` prompt tokens are in (or takes
        its own cached prefix when the other ended first). Returns True when it is no longer
        waiting."""
        leader = self.fork_of
        if self.phase != "waiting":
            return True
        if leader is None or leader.done:
            self.fork_of = None
            self.admit()
            return True
        if leader.seq is None or (leader.phase != "decode" and leader.fed < self.fork_at):
            return False
        self.seq = leader.seq.fork()
        self.seq.truncate(self.fork_at)
        self.seq.expect(len(self.prompt_ids))
        self.fed = self.stats.cached_prompt_tokens = self.fork_at
        self.fork_of = None
        self.phase = "prefill"
        return True

    def start_decoding(self, register: bool = True) -> None:
        """The prompt is in (or goes in with this step's rows: `register` False, the caller
        registers it after the forward): its blocks become reusable, the draft model and Φ
        start, and the next rounds decode."""
        if register:
            self.runner.pool.register_prefix(self.prompt_ids[:-1], self.seq)
        if self.drafter.draft is not None:
            self.drafter.draft.start(self.prompt_ids)
        phi = self.sampling.phi
        if phi is not None:
            phi.prepare(self.runner, self.seq, self.context, self.constraint.grammar, self.sampling.params)
            self.stats.extra.update(getattr(phi, "stats", None) or {})
        self.phase = "decode"
        self.t_decode = time.perf_counter()
        self.stats.prefill_s = self.t_decode - self.t_admit

    def close(self, reason: str | None = None) -> None:
        """Ends the generation (when not ended yet) and frees its KV. Idempotent."""
        if self.finish is None:
            self.finish = reason or "cancelled"
        if self.seq is not None:
            self.seq.free()
            self.seq = None
        if self.drafter.draft is not None:
            self.drafter.draft.close()
        self._finish_stats()
        self.phase = "done"

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.close("error")

    def _finish_stats(self) -> None:
        if self.t_decode is not None:
            self.stats.decode_s = time.perf_counter() - self.t_decode
        self.stats.extra.update(self.counts.as_dict(self.options.speculation.mode))

    # -- one round ---------------------------------------------------------------------------

    def propose(self, row_cost: float | None) -> list[int]:
        """This round's rows: the pending token and the drafts (priced at `row_cost`, the
        batch's marginal cost of a row relative to this sequence's share of a step)."""
        proposal = Proposal()
        room = self.max_tokens - self.produced - 1  # drafts that still fit after this round's own token
        if self.drafting and room > 0:
            self.gamma.price(row_cost)
            self.drafter.propose(proposal, self.context, self.constraint, min(room, self.gamma.cap),
                                 self.max_tokens - self.produced)
        self.proposal = proposal
        return [self.context[-1]] + proposal.tokens

    def keep_drafts(self, n: int) -> list[int]:
        """Drops this round's drafts past the first `n` (a batched step with more rows than it
        takes); returns the round's rows."""
        p = self.proposal
        del p.tokens[n:], p.probs[n:], p.sources[n:]
        return [self.context[-1]] + p.tokens

    def clear_emitted(self) -> None:
        """Forgets the tokens (and logprob entries) the last step committed."""
        self.emitted = []
        if self.emitted_logprobs is not None:
            self.emitted_logprobs = []

    def check(self, offset: int) -> Check:
        """The verification of this round's drafts, its rows starting at `offset`."""
        self._check = prepare(self.proposal, self.sampling, self.max_tokens - self.produced, offset=offset,
                              context=self.context)
        return self._check

    def commit(self, accepted: int, new_token: int, states: list) -> None:
        """Emits the accepted drafts and the target's token, stopping at EOS, a complete output or
        max_tokens; rolls the KV back past the rejected drafts."""
        drafts = self.proposal.tokens
        self.stats.target_forwards += 1
        self.counts.add(self.proposal.sources, accepted)
        n_forced = self.proposal.sources.count("forced")  # forced drafts come first
        self.gamma.update(len(drafts) - n_forced, accepted - n_forced, n_forced, min(accepted, n_forced),
                          match=self.proposal.match)
        constraint = self.constraint
        emitted = self.emitted
        entries = self._check.logprob_out if self._check is not None else None
        gate = self.sampling.gate
        for i, token in enumerate(drafts[:accepted] + [new_token]):
            if token in self.eos:
                self.finish = "stop"
                break
            if gate is not None:
                gate.advance(token)
            if self.emitted_logprobs is not None and entries is not None:
                self.emitted_logprobs.append(entries[i])
            if constraint is not None:
                if self.drafter.forced is not None:
                    self.drafter.forced.observe(constraint.state, token)
                constraint.advance(token, states[i + 1] if i < accepted else None)
            self.context.append(token)
            self.produced += 1
            self.stats.completion_tokens += 1
            emitted.append(token)
            if constraint is not None and constraint.done:
                self.finish = "stop"
                break
        if self.finish is None and self.produced >= self.max_tokens:
            self.finish = "length"
        if self.finish is None and len(drafts) > accepted:
            self.seq.rollback(len(drafts) - accepted)
        if emitted and self.t_first is None:
            self.t_first = time.perf_counter()
        self.proposal = None
        self._check = None
