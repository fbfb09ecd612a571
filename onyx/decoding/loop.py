"""The decoding loop: one loop for every mode, from plain decoding (γ = 0) to speculative.

Each round drafts up to γ tokens (`drafts.propose`: grammar-forced spans, a draft model, or
prompt lookup; none in `baseline`), runs the target once over the pending token plus the drafts
(`runner.ModelRunner`), verifies them exactly (`verify.verify_many`), emits the accepted drafts
and the target's own token, and rolls both KV sequences back past the rejected tail in O(1).

The grammar mask (budget-aware when `max_tokens` bounds the output) is applied to the logits
before temperature, top-k, top-p and min-p; the request's grammar state advances only on
committed tokens. The forward is queued (`mx.async_eval`) as soon as its rows are known, so the
CPU walks the grammar along the drafts and fetches the row masks while it runs.

A round is a step of `batch.Batch`, which runs the rounds of many sequences in one forward (the
engine's scheduler, `onyx.scheduler`, drives one for every caller). `decode` runs one sequence
alone, in the calling thread: a batch of one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Iterator

from onyx.grammar.constraint import Constraint
from onyx.decoding.batch import Batch
from onyx.decoding.generation import Generation
from onyx.decoding.runner import ModelRunner
from onyx.decoding.stats import DecodeStats
from onyx.options import GenerateOptions


@dataclass
class Finish:
    """The loop's last event: why it stopped, and the generation's statistics (the constraint,
    when given, holds where the grammar ended)."""

    reason: str  # "stop" (EOS, or nothing but EOS left), "length", or "cancelled"
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
    its blocks), and the statistics are complete however the loop ends. A failure inside the
    loop is raised here."""
    gen = Generation(runner, prompt_ids, options, constraint=constraint, draft_runner=draft_runner, cancel=cancel)
    if stats is not None:
        gen.stats = stats
        stats.prompt_tokens = len(prompt_ids)
    batch = Batch(runner)
    batch.add(gen)
    try:
        while not gen.done:
            batch.step()
            yield from gen.emitted
        if gen.error is not None:
            raise gen.error
        yield Finish(gen.finish, gen.stats)
    finally:
        batch.end(gen, "cancelled")
        runner.pool.materialize()
        if draft_runner is not None:
            draft_runner.pool.materialize()
