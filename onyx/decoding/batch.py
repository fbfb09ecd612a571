"""`Batch`: the generations decoding together, and the step that advances them all with one
forward.

One step:
1. Generations that were cancelled leave (their KV blocks are freed at once); samples waiting
   for a sibling's prompt fork its KV when it is in.
2. Every decoding generation proposes its round: the pending token plus its drafts
   (`Generation.propose`: grammar-forced spans, prompt lookup or a draft model, γ priced
   against the batch's marginal row cost, `gamma.batch_row_cost`). When no prompt rows come
   along, the step keeps the drafts most likely to be accepted, as many as pay for the width
   they add to the step (`gamma.fit_rows`: the measured step cost against rows, which on the
   CPU steps up past 32 rows).
3. Prefilling generations take up to `prefill_chunk` prompt tokens in all, first come first
   served. While other generations decode, fewer, shortest prompt first, paid from a credit
   that grows by `prefill_share` of a decode step's time each step and shrinks by what the
   prompt tokens actually added (both measured as the batch runs): a long prompt arriving
   slows the running streams by a share of a step on average, not by a whole chunk, and
   short requests are not held behind it. A prompt token that costs more than the share (one
   whose history is long) goes in every few steps, in a step without drafts; every few steps
   one feeds no prompt, which keeps the decode-step average current. A generation whose
   prompt ends within the chunk also brings its first round in the same rows.
4. One forward over all rows (`ModelRunner.forward`: ragged rows, attention per sequence),
   queued at once; while it runs, each generation's verification is prepared (grammar walk
   along the drafts, budget-aware row masks).
5. Exact verification of every generation's drafts, evaluated together (`verify_many`), then
   each generation commits its tokens and rolls its own KV back past its rejected drafts.
6. Grammar compilations running beside a step that decodes are held during it
   (`onyx._grammar.hold_compiles`: they pause at their next pause point) and get
   `compile_share` of a plain decode step per step while this thread sleeps, paid after the
   steps that ran short (`Batch._compile_turn`): on a machine of
   few cores a compilation running beside a step slows it far more than its share of the
   cores (it takes the caches and memory bandwidth the step's products need). When a prompt
   and a compilation both wait, the prompt gets half of its share.

Faults stay with their generation: an exception in a generation's own work (drafting,
verification, committing) ends that generation with the error; an exception in the shared
forward rolls every sequence back to where the step began and runs the generations one by one,
so only the one that fails again ends.
"""

from __future__ import annotations

import collections
import logging
import time
from dataclasses import dataclass, field

import mlx.core as mx
import numpy as np

from onyx._grammar import compiles_running, hold_compiles, release_compiles
from onyx.decoding.gamma import batch_row_cost, cost_profile, fit_rows, row_limit
from onyx.decoding.generation import Generation
from onyx.decoding.runner import PREFILL_CHUNK
from onyx.decoding.verify import verify_many
from onyx.kv.ragged import BATCHED_ROWS
from onyx.options import COMPILE_SHARE, PREFILL_SHARE

log = logging.getLogger("onyx.batch")

PROBE_PREFILL = 4  # prompt tokens a step takes while others decode, before a prefill is measured
_EMA = 0.2  # weight of the newest step in the step-time averages
# While a prompt goes in beside decoding generations, at least one step in this many feeds no
# prompt token, so the decode-step average the prompt's budget is priced against stays current.
PLAIN_EVERY = 8
PLAIN_KEPT = 16  # plain steps whose median is the decode step's price
# Turns running compilations may be owed after long steps before one is paid regardless.
COMPILE_OWED_TURNS = 16


@dataclass
class StepInfo:
    """What one step did (kept in `Batch.log`, for tests and /health)."""

    index: int
    sequences: int = 0  # generations with rows in the forward
    rows: int = 0  # tokens fed
    logit_rows: int = 0
    prefill_tokens: int = 0
    prefill_segments: int = 0
    emitted: dict = field(default_factory=dict)  # id(generation) -> tokens committed
    started: float = 0.0  # time.perf_counter() when the step began
    seconds: float = 0.0
    run_seconds: float = 0.0  # of which the forward and the verification (`_run`)


class Batch:
    """Generations decoding together on one runner (one thread drives it)."""

    def __init__(self, runner, *, prefill_chunk: int = PREFILL_CHUNK, prefill_share: float = PREFILL_SHARE,
                 compile_share: float = COMPILE_SHARE, log_size: int = 4096) -> None:
        self.runner = runner
        loaded = getattr(runner, "loaded", None)  # (None: a batch the tests drive without a model)
        # the step costs drafts are priced with
        self.profile = "cpu" if loaded is None else cost_profile(loaded.device, loaded.dtype)
        self.prefill_chunk = max(1, int(prefill_chunk))
        if not prefill_share > 0:
            raise ValueError(f"prefill_share must be above 0, got {prefill_share}")
        if not compile_share >= 0:
            raise ValueError(f"compile_share must be 0 or more, got {compile_share}")
        self.prefill_share = float(prefill_share)
        self.compile_share = float(compile_share)
        # the last steps with one decode row per generation and no prompt rows: what a step costs
        # without drafts or prompts (their median prices the prompt's and the compilations' turns)
        self._plain: collections.deque[float] = collections.deque(maxlen=PLAIN_KEPT)
        self._decode_any_s: float | None = None  # average of the steps without prompt rows
        self._decode_step_s: float | None = None  # the plain steps' median (else that average)
        self._prefill_token_s: float | None = None  # what one prompt token adds to a step (average)
        self._credit = 0.0  # seconds prompt tokens may still add to steps (see `_prefill_budget`)
        self._since_plain = 0  # steps in a row that fed prompt tokens beside decoding ones
        self._compile_owed = 0.0  # seconds of turns running compilations are still owed (see `_compile_turn`)
        self.gens: list[Generation] = []
        self.steps = 0
        self.log: collections.deque[StepInfo] = collections.deque(maxlen=log_size)

    def __len__(self) -> int:
        return len(self.gens)

    def add(self, gen: Generation) -> None:
        """Admits a generation: it takes its cached prompt prefix now (or the part of its prompt
        that another generation holds or is prefilling, `_share_prompt`) and its rows from the
        next step on."""
        try:
            gen.admit()
            if gen.phase == "prefill":
                self._share_prompt(gen)
        except Exception as e:  # noqa: BLE001 - the generation's own failure
            gen.fail(e)
        self.gens.append(gen)

    def make_room(self, sequences: int) -> None:
        """Working-view slots for `sequences` generations at once (the scheduler calls this before
        admitting several). Only a saving: if the arrays cannot grow now, each sequence asks for
        its slot when it needs one, as without this call."""
        try:
            self.runner.pool.views.make_room(sequences)
        except Exception:  # noqa: BLE001 - e.g. out of memory: a sequence that needs a slot fails alone
            log.debug("could not grow the view arrays for %d sequences", sequences, exc_info=True)

    def end(self, gen: Generation, reason: str) -> None:
        """Ends a generation now (a stop string, a caller going away): its KV is freed."""
        gen.close(reason)
        if gen in self.gens:
            self.gens.remove(gen)

    def fail_all(self, error: BaseException) -> list[Generation]:
        """Ends every generation with `error` (a fault in the step itself) and frees their KV;
        returns them."""
        failed = list(self.gens)
        for g in failed:
            g.fail(error)
        self._collect(failed)
        return failed

    def step(self) -> list[Generation]:
        """One forward for every generation. Returns the generations that took part or ended;
        each has `emitted` (the tokens it committed) and `done` when it ended (then it has left
        the batch and its KV is freed)."""
        t0 = time.perf_counter()
        info = StepInfo(self.steps, started=t0)
        self.steps += 1
        touched = []
        for g in list(self.gens):
            g.clear_emitted()
            if g.done:
                touched.append(g)
            elif g.cancel is not None and g.cancel.is_set():
                g.close("cancelled")
                touched.append(g)
            elif g.phase == "waiting":
                self._guard(g, self._fork_when_ready, g)
                if g.done:
                    touched.append(g)
        live = [g for g in self.gens if not g.done]
        decoding = [g for g in live if g.phase == "decode"]
        prefilling = [g for g in live if g.phase == "prefill"]
        # Drafts are priced at the first extra row of a step (its cheapest); `_fit` then keeps
        # the ones that pay at the step's actual width.
        sequences = len(decoding) + sum(1 for g in prefilling if g.prompt_rest <= self.prefill_chunk)
        row_cost = batch_row_cost(sequences, sequences, self.profile)

        # Rows: (generation, tokens, logit rows, prompt tokens fed, length before the step)
        entries: list[tuple[Generation, list[int], int, int, int]] = []
        for g in decoding:
            tokens = self._guard(g, g.propose, row_cost)
            if tokens is not None:
                entries.append((g, tokens, len(tokens), 0, g.seq.length))
        compiling = bool(decoding) and self.compile_share > 0 and compiles_running() > 0
        budget = self._prefill_budget(bool(decoding), bool(prefilling), compiling)
        if decoding:
            # Under a small budget the shortest prompts first: a short request does not wait
            # for a long prompt to finish (FIFO among prompts of equal length).
            prefilling.sort(key=lambda g: g.prompt_rest)
        for g in prefilling:
            if decoding and not g.seq.views_ready:
                continue  # its view arrays are being allocated (PagedSequence.expect): no stall
            rest = g.prompt_rest
            n = min(budget, rest)
            if n < rest:
                if n > 0:
                    entries.append((g, g.prompt_ids[g.fed:g.fed + n], 0, n, g.seq.length))
                    budget -= n
                continue
            budget -= n
            chunk = g.prompt_ids[g.fed:g.fed + n]
            if g.sampling.phi is not None and n > 0:
                entries.append((g, chunk, 0, n, g.seq.length))  # Φ reads the prompt's KV first
                continue
            round_tokens = self._guard(g, self._begin, g, row_cost)
            if round_tokens is not None:
                entries.append((g, chunk + round_tokens, len(round_tokens), n, g.seq.length))
        if not entries:
            self._collect(touched)
            return touched
        self._fit(entries)

        info.sequences = len(entries)
        info.rows = sum(len(e[1]) for e in entries)
        info.logit_rows = sum(e[2] for e in entries)
        info.prefill_tokens = sum(e[3] for e in entries)
        info.prefill_segments = sum(1 for e in entries if e[3])

        hold = bool(decoding) and self.compile_share > 0
        if hold:
            hold_compiles()
        t_run = time.perf_counter()
        try:
            results = self._run(entries)
        finally:
            if hold:
                release_compiles()
        info.run_seconds = time.perf_counter() - t_run
        for (g, tokens, k, fed, _), res in zip(entries, results):
            touched.append(g)
            if g.done:
                continue
            g.steps += 1
            g.fed += fed
            if fed and g.prompt_rest == 0:
                if k == 0:
                    self._guard(g, self._prompt_in, g)
                else:
                    self._guard(g, g.runner.pool.register_prefix, g.prompt_ids[:-1], g.seq)
            if k and res is not None:
                self._guard(g, g.commit, *res)
            info.emitted[id(g)] = len(g.emitted)
        info.seconds = time.perf_counter() - t0
        self._measure(info, decoding=any(e[2] and not e[3] for e in entries))
        self.log.append(info)
        self._collect(touched)
        if compiling:
            time.sleep(self._compile_turn(info.seconds))
        else:
            self._compile_owed = 0.0  # nothing runs to be owed a turn
        return list(dict.fromkeys(touched))

    # -- internals ---------------------------------------------------------------------------

    def _compile_turn(self, seconds: float) -> float:
        """How long running compilations get after a decoding step that took `seconds` (see the
        module docstring): each step owes them `compile_share` of a plain decode step, paid by
        padding the step to `1 + compile_share` plain steps, so a step that ran long (wide
        drafts, a prompt token) adds nothing to the streams' longest gaps. What long steps left
        unpaid is paid after later short ones, and once more than `COMPILE_OWED_TURNS` turns
        are owed, one turn is paid whatever the step took: compilations are never starved."""
        if self._decode_step_s is None:
            return 0.0
        turn = self.compile_share * self._decode_step_s
        self._compile_owed += turn
        pause = min(self._compile_owed, max(0.0, self._decode_step_s + turn - seconds))
        if self._compile_owed > COMPILE_OWED_TURNS * turn:
            pause = max(pause, turn)
        self._compile_owed -= pause
        return pause

    def _prefill_budget(self, others_decoding: bool, waiting: bool, compiling: bool) -> int:
        """Prompt tokens this step may feed: a whole chunk when nothing else decodes. Else what
        the credit pays for: each step a prompt waits adds `prefill_share` of a decode step's
        time (half of it while compilations take their share too), up to one step's worth,
        and each step's measured prompt cost is taken off it (`_measure`); a full credit
        always pays for one token, so a token dearer than the share goes in every few steps
        (the credit then runs below zero and refills)."""
        if not others_decoding:
            return self.prefill_chunk
        if not waiting:
            self._credit = 0.0
            return 0
        if self._decode_step_s is None or self._prefill_token_s is None:
            return min(self.prefill_chunk, PROBE_PREFILL)
        if self._since_plain >= PLAIN_EVERY - 1:
            return 0
        share = self.prefill_share * self._decode_step_s / (2 if compiling else 1)
        self._credit = min(self._credit + share, share)
        n = max(0, int(self._credit / max(self._prefill_token_s, 1e-9)))
        return min(self.prefill_chunk, max(n, 1) if self._credit >= share else n)

    def _measure(self, info: StepInfo, decoding: bool) -> None:
        """Updates the averages and the credit `_prefill_budget` reads from a finished step."""
        def ema(old: float | None, new: float) -> float:
            return new if old is None else (1 - _EMA) * old + _EMA * new

        if info.prefill_tokens == 0:
            self._since_plain = 0
            if decoding:
                self._decode_any_s = ema(self._decode_any_s, info.seconds)
                if info.rows == info.sequences == info.logit_rows:
                    self._plain.append(info.seconds)
                self._decode_step_s = float(np.median(self._plain)) if self._plain else self._decode_any_s
            return
        if not decoding or self._decode_step_s is None:
            self._prefill_token_s = ema(self._prefill_token_s, info.seconds / info.prefill_tokens)
            return
        self._since_plain += 1
        extra = max(info.seconds - self._decode_step_s, 0.0)
        self._credit -= extra
        self._prefill_token_s = ema(self._prefill_token_s, extra / info.prefill_tokens)

    def _fork_when_ready(self, g: Generation) -> None:
        """A waiting generation forks its leader's KV once the shared tokens are in. When the
        leader ended first (cancelled mid-prefill), it takes its own cached prefix and looks for
        another live generation to share the prompt with: a burst whose first request goes
        away still computes the prompt once."""
        leader = g.fork_of
        g.try_fork()
        if leader is not None and leader.done and g.phase == "prefill":
            self._share_prompt(g)

    def _share_prompt(self, gen: Generation) -> None:
        """When another generation's prompt starts with more of this one's than the prefix cache
        gave it, this one forks that generation's KV for the shared tokens (`share_prompt_of`),
        at once or after the other's prefill reaches them. The cache holds full blocks of
        finished prompts only; this covers prompts arriving together (a burst of the same
        request, a long system prompt) and the partial last block."""
        ids = np.asarray(gen.prompt_ids[:-1])
        best, best_n = None, gen.fed
        for other in self.gens:
            if other is gen or other.done or other.phase not in ("prefill", "decode") or other.seq is None:
                continue
            m = min(len(ids), len(other.prompt_ids) - 1)
            if m <= best_n:
                continue
            differ = np.flatnonzero(ids[:m] != np.asarray(other.prompt_ids[:m]))
            n = int(differ[0]) if len(differ) else m
            if n > best_n:
                best, best_n = other, n
        if best is not None:
            gen.share_prompt_of(best, best_n)

    @staticmethod
    def _guard(g: Generation, fn, *args):
        """Runs one generation's own work; an exception ends that generation alone."""
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - reported to that generation's caller
            g.fail(e)
            return None

    def _fit(self, entries: list) -> None:
        """Chooses the drafts a decode-only step of several sequences runs (`gamma.fit_rows`):
        the ones most likely to be accepted, as many as pay for the rows they add to everyone's
        step, within the device's row limit (on the CPU, past 32 rows the few-row kernels run
        in pieces that each read the weights again). A lone sequence keeps its own
        pricing (`GammaController`) under the row limit; a step with a prompt chunk is wide
        anyway, and one with a few prompt tokens beside decoding generations (the prompt's
        share, `_prefill_budget`) takes no drafts, so that it does not add both."""
        fed_rows = sum(fed for _, _, _, fed, _ in entries)
        if fed_rows > BATCHED_ROWS:
            return
        if fed_rows:  # a few prompt tokens beside decoding ones: the step carries no drafts too
            for i, (g, tokens, k, fed, length) in enumerate(entries):
                if k > 1 and not fed:
                    tokens = g.keep_drafts(0)
                    entries[i] = (g, tokens, len(tokens), fed, length)
            return
        device = self.profile
        odds = [g.gamma.odds(g.proposal.sources, g.proposal.match) for g, *_ in entries]
        if len(entries) > 1:
            keep = fit_rows(odds, len(entries), device)
        else:
            limit = row_limit(device)
            keep = [len(odds[0]) if limit is None else min(len(odds[0]), limit - 1)]
        for i, ((g, tokens, k, fed, length), n) in enumerate(zip(entries, keep)):
            if n < len(tokens) - 1:
                tokens = g.keep_drafts(n)
                entries[i] = (g, tokens, len(tokens), fed, length)

    @staticmethod
    def _begin(g: Generation, row_cost: float) -> list[int]:
        """A generation whose prompt is in (or will be by the end of this forward) starts
        decoding: its first round's rows."""
        g.start_decoding(register=False)
        return g.propose(row_cost)

    @staticmethod
    def _prompt_in(g: Generation) -> None:
        g.start_decoding(register=True)

    def _run(self, entries) -> list:
        """The forward and the verification of every entry; per entry (accepted, token, states)
        or None (a prefill chunk, or a generation that failed)."""
        segments = [(g.seq, tokens, k) for g, tokens, k, _, _ in entries]
        try:
            logits = self.runner.forward(segments)
            if logits is not None:
                mx.async_eval(logits)
            checks, owners, offset = [], [], 0
            for i, (g, _, k, _, _) in enumerate(entries):
                if k:
                    check = self._guard(g, g.check, offset)
                    if check is not None:
                        checks.append(check)
                        owners.append(i)
                    offset += k
            out = [None] * len(entries)
            for i, res in zip(owners, verify_many(logits, checks) if checks else []):
                out[i] = res
            return out
        except Exception:  # noqa: BLE001 - isolate the generation at fault
            return self._one_by_one(entries)

    def _one_by_one(self, entries) -> list:
        """After a failed shared forward: every sequence back to where the step began, then each
        generation's rows alone; the ones that fail again end with their error."""
        for g, _, _, _, length in entries:
            try:
                g.seq.discard_failed_write(length)
            except Exception as e:  # noqa: BLE001 - a sequence in a bad state: its generation fails
                g.fail(e)
        out = []
        for g, tokens, k, _, length in entries:
            if g.done:
                out.append(None)
                continue
            try:
                logits = self.runner.forward([(g.seq, tokens, k)])
                out.append(verify_many(logits, [g.check(0)])[0] if k else None)
            except Exception as e:  # noqa: BLE001 - this generation's failure
                g.fail(e)
                out.append(None)
        return out

    def _collect(self, touched: list[Generation]) -> None:
        """Closes the generations that ended (frees their KV) and drops them from the batch."""
        for g in touched:
            if g.done:
                g.close()
        self.gens = [g for g in self.gens if not g.done]
