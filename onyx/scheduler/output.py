"""One sample's output as its caller sees it, assembled from the tokens its generation commits.

A `SampleOutput` turns committed token ids into text (`onyx.scheduler.text.TextBuilder`: exact
token bytes, incremental UTF-8, stop strings), keeps the token ids and logprob entries, runs the
chat output parser when the request has one (reasoning, content, tool calls), and makes the
`Chunk`s the caller receives, the last one carrying the sample's `Result`.
"""

from __future__ import annotations

import time
from typing import Any

from onyx.scheduler.results import Chunk, Result
from onyx.scheduler.text import TextBuilder


class SampleOutput:
    """The output of sample `index` of a request."""

    def __init__(self, index: int, vocab: Any, stop: tuple[str, ...] | list[str], parser: Any = None,
                 logprobs: bool = False, constraint: Any = None) -> None:
        self.index = index
        # under a constraint, a stop string ends the text only where the text is complete
        complete = None if constraint is None else (lambda text: bool(constraint.grammar.validate(text)))
        self.text = TextBuilder(vocab, stop, complete)
        self.parser = parser
        self.tokens: list[int] = []
        self.logprobs: list[dict] | None = [] if logprobs else None
        self._pending: list[dict] = []  # logprob entries of tokens not posted yet

    @property
    def stopped(self) -> bool:
        """A stop string ended the text."""
        return self.text.stopped

    def push(self, tokens: list[int], entries: list[dict] | None) -> list[Chunk]:
        """The chunks for tokens a step committed (with their logprob entries); stops at a stop
        string (`stopped`), ignoring the tokens after it."""
        out = []
        for k, token in enumerate(tokens):
            self.tokens.append(token)
            if self.logprobs is not None and entries is not None:
                self.logprobs.append(entries[k])
                self._pending.append(entries[k])
            delta = self.text.push(token)
            if self.text.stopped:
                break
            if delta:
                out.append(Chunk(delta, [token], index=self.index, deltas=self._read(delta),
                                 logprobs=self._take_logprobs()))
        return out

    def finish(self, gen: Any, submitted: float, queue_s: float | None) -> Chunk:
        """The last chunk: the text held back and the sample's `Result` (`gen`: its ended
        generation; `submitted`: when the request was submitted, `perf_counter` time)."""
        tail = self.text.flush()
        deltas = self._read(tail, final=True)
        constraint = gen.constraint
        if constraint is None:
            valid = None
        elif self.text.stopped:
            valid = bool(constraint.grammar.validate(self.text.text))
        else:
            valid = constraint.accepting
        stats = gen.stats.as_dict()
        stats["total_s"] = round(time.perf_counter() - submitted, 6)
        stats["queue_s"] = round(queue_s or 0.0, 6)
        if gen.t_first is not None:
            stats["ttft_s"] = round(gen.t_first - submitted, 6)
        stats["batch_steps"] = gen.steps
        reason = gen.finish
        if reason == "length" and valid and not self.text.stopped and (self.parser is None or self.parser.closed):
            # Cut at max_tokens exactly where the output is complete under its constraint (a
            # budget-aware mask closes a call or a value in time): nothing was cut.
            reason = "stop"
        result = Result(self.text.text, self.tokens, reason, valid, stats, content=self.text.text,
                        logprobs=self.logprobs, stop_string=self.text.stopped_by)
        if self.parser is not None:
            parsed = self.parser.result
            result.content, result.tool_calls = parsed.content, parsed.tool_calls
            result.reasoning_content = parsed.reasoning_content
            if parsed.finish_reason == "tool_calls" and reason == "stop":
                result.finish_reason = "tool_calls"
        return Chunk(tail, [], result.finish_reason, result, self.index, deltas,
                     self._take_logprobs() if self.logprobs is not None else None)

    def _read(self, text: str, final: bool = False) -> list[dict]:
        """The output parser's deltas for a piece of text (one content delta without a parser)."""
        if self.parser is None:
            return [{"content": text}] if text else []
        out = self.parser.feed(text) if text else []
        return out + self.parser.finish() if final else out

    def _take_logprobs(self) -> list[dict] | None:
        out, self._pending = self._pending, []
        return out or None
