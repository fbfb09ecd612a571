"""The engine's scheduler: every caller's generations decode together, in one batch, on one
thread.

`Engine.generate` / `chat` (from any number of threads), `Engine.generate_many`, the server and
`onyx chat` all hand their requests to `Scheduler.submit`. One worker thread owns the model: it
admits queued requests at step boundaries, runs `onyx.decoding.batch.Batch.step` (one forward
for every active sequence), turns each sequence's committed tokens into text (stop strings,
UTF-8) and hands the pieces to the request's `on_event` callback, from the worker thread.

Admission, first come first served, when
- the batch has room: at most `max_batch` sequences decode together (an `n > 1` request brings
  n of them, forks of one prompt);
- the KV pool can hold the request's worst case: each sequence reserves the blocks of its
  prompt plus `max_tokens` plus a round of drafts, and the reservations of the running
  sequences never exceed the pool's block limit (blocks only the prefix cache holds are
  evicted on demand). So a running sequence never finds the pool full; a new request waits
  instead (or is refused at once when it alone could never fit).

A request cancelled while queued is dropped; one cancelled while running leaves the batch at the
next step boundary and its blocks are freed then. When the batch empties, the KV pool is
evaluated, so another thread may use the model (MLX streams are per thread).
"""

from __future__ import annotations

import atexit
import collections
import itertools
import logging
import os
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Callable

from onyx.decoding.batch import Batch
from onyx.decoding.generation import Generation
from onyx.decoding.runner import PREFILL_CHUNK
from onyx.errors import QueueFullError, RequestError
from onyx.options import GenerateOptions
from onyx.text import TextBuilder

log = logging.getLogger("onyx.scheduler")

DEFAULT_MAX_BATCH = 8

# When the interpreter exits, every live scheduler's worker (a daemon thread) is parked: it
# finishes its step and blocks, never to be woken. It must not be frozen mid-step, and it must not
# exit either: an exiting thread runs its thread-local destructors after `join()` has returned, and
# MLX's compile cache takes the GIL in them; once the interpreter is finalizing, that kills the
# thread inside C++ and aborts the process ("terminate called without an active exception").
_live: "weakref.WeakSet[Scheduler]" = weakref.WeakSet()


@atexit.register
def _park_all() -> None:
    for s in list(_live):
        s.park(timeout=10.0)


def _wait_until_gone(thread: threading.Thread, timeout: float) -> None:
    """Waits for a joined thread's OS thread to end: it outlives `join()` while it runs its
    thread-local destructors (see `_park_all`). Only where the OS lists threads (Linux /proc)."""
    task = f"/proc/self/task/{thread.native_id}"
    deadline = time.monotonic() + timeout
    while os.path.exists(task) and time.monotonic() < deadline:
        time.sleep(0.002)


@dataclass
class Result:
    """A finished generation. `text` is the whole output (a tool call's or a thinking block's
    markup included); a chat answer read by an output parser also has it apart: `content`,
    `tool_calls` (OpenAI's shape) and `reasoning_content`."""

    text: str
    token_ids: list[int]
    finish_reason: str  # "stop", "length" or "tool_calls" ("cancelled" when the caller stopped it)
    valid: bool | None  # does the text match the constraint? None when unconstrained
    stats: dict = field(default_factory=dict)
    content: str | None = None
    tool_calls: list[dict] = field(default_factory=list)
    reasoning_content: str | None = None
    logprobs: list[dict] | None = None  # one entry per token of `token_ids` (`onyx.decoding.row_logits`)

    def message(self) -> dict:
        """As an OpenAI assistant message."""
        msg: dict = {"role": "assistant", "content": self.content if self.content or not self.tool_calls else None}
        if self.reasoning_content is not None:
            msg["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        return msg


@dataclass
class Chunk:
    """A piece of a streamed generation. The last chunk of a sample has `finish_reason` and
    `result` set; `index` is the sample's (0 unless the request asked for n > 1). `deltas` are
    the piece read by the output parser, shaped like OpenAI's `choices[].delta`
    (`{"content": …}`, `{"reasoning_content": …}`, `{"tool_calls": [...]}`); without a parser,
    one content delta of `text`. `logprobs` has an entry per token of the piece."""

    text: str
    token_ids: list[int]
    finish_reason: str | None = None
    result: Result | None = None
    index: int = 0
    deltas: list[dict] = field(default_factory=list)
    logprobs: list[dict] | None = None


class Request:
    """One call: a prompt, its options and `n` samples. `on_event(index, item)` receives each
    sample's `Chunk`s, ending with the one that carries its `Result`, or the exception that
    ended it; `on_end()` runs once every sample has ended. Both are called from the scheduler's
    thread and must not block."""

    _ids = itertools.count(1)

    def __init__(self, prompt_ids: list[int], options: GenerateOptions, constraints: list, *,
                 cancel: threading.Event | None = None, on_event: Callable, on_end: Callable | None = None,
                 output: Callable | None = None, budget=None) -> None:
        self.id = next(self._ids)
        self.prompt_ids = prompt_ids
        self.options = options
        self.constraints = constraints  # one per sample (each has its own grammar state)
        self.n = len(constraints)
        self.cancel = cancel if cancel is not None else threading.Event()
        self.on_event = on_event
        self.on_end = on_end
        self.output = output  # makes each sample's output parser (None: all content)
        self.budget = budget  # `onyx.chat.reasoning.ReasoningBudget` (None: thinking unbounded)
        self.submitted = time.perf_counter()
        self.started: float | None = None
        self.ended = threading.Event()
        self.reserved = 0  # KV blocks reserved while running
        self.gens: list[Generation] = []
        self._texts: list[TextBuilder] = []
        self._tokens: list[list[int]] = []
        self._parsers: list = []
        self._logprobs: list[list[dict]] = []
        self._pending: list[list[dict]] = []  # logprob entries of tokens not posted yet
        self._open = 0

    @property
    def queue_s(self) -> float | None:
        return None if self.started is None else self.started - self.submitted


class Scheduler:
    """The queue and the batch of one engine (see the module docstring)."""

    def __init__(self, runner, draft_runner=None, *, vocab, max_batch: int = DEFAULT_MAX_BATCH,
                 max_queue: int | None = None, prefill_chunk: int = PREFILL_CHUNK) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.runner = runner
        self.draft_runner = draft_runner
        self.vocab = vocab
        self.max_batch = int(max_batch)
        self.max_queue = max_queue
        self.batch = Batch(runner, prefill_chunk=prefill_chunk)
        self._queue: collections.deque[Request] = collections.deque()
        self._running: list[Request] = []
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._parking = False
        self._parked = threading.Event()
        _live.add(self)
        self.reserved_blocks = 0
        self.max_kv_blocks: int | None = None  # the reservations' limit (None: the pool's max_blocks)
        self.served = self.cancelled = self.failed = 0
        self.last_stats: dict = {}

    # -- callers' side -----------------------------------------------------------------------

    def blocks_needed(self, prompt_len: int, options: GenerateOptions) -> int:
        """The KV blocks one sequence of this request may hold at most."""
        bs = self.runner.pool.block_size
        draft_room = 1 + 32  # the pending token and one round of drafts
        return -(-(prompt_len + options.max_tokens + draft_room) // bs)

    @property
    def kv_limit(self) -> int:
        pool_max = self.runner.pool.max_blocks
        return pool_max if self.max_kv_blocks is None else min(self.max_kv_blocks, pool_max)

    def submit(self, request: Request) -> None:
        """Queues a request. Raises `QueueFullError` when `max_queue` requests already wait, and
        `RequestError` when the request could never run (more samples than `max_batch`, or more
        KV than the pool may ever hold)."""
        if request.n > self.max_batch:
            raise RequestError(f"n={request.n} is more than this engine's max_batch ({self.max_batch})", param="n")
        need = request.n * self.blocks_needed(len(request.prompt_ids), request.options)
        limit = self.kv_limit
        if need > limit:
            raise RequestError(f"this request may need {need} KV blocks and the pool holds at most {limit}; "
                               f"lower max_tokens", param="max_tokens")
        with self._cv:
            if self._stopping or self._parking:
                raise RuntimeError("the engine is closed")
            if self.max_queue is not None and len(self._queue) >= self.max_queue:
                raise QueueFullError(f"{len(self._queue)} requests are already waiting (limit {self.max_queue})")
            self._queue.append(request)
            self._start()
            self._cv.notify()

    def cancel(self, request: Request, wait: bool = False, timeout: float = 30.0) -> None:
        """Stops a request (queued or running). With `wait`, returns once it has left the batch
        and its KV blocks are free (unless called from the scheduler's own thread)."""
        request.cancel.set()
        with self._cv:
            self._cv.notify()
        if wait and threading.current_thread() is not self._thread:
            request.ended.wait(timeout)

    def stats(self) -> dict:
        pool = self.runner.pool
        with self._cv:
            queued = len(self._queue)
            running = len(self._running)
        return {"active_rows": len(self.batch), "running_requests": running, "queued_requests": queued,
                "max_batch": self.max_batch, "max_queue": self.max_queue, "steps": self.batch.steps,
                "kv_reserved_blocks": self.reserved_blocks, "kv_used_blocks": pool.num_used_blocks,
                "kv_max_blocks": self.kv_limit, "served": self.served, "cancelled": self.cancelled,
                "failed": self.failed}

    def cancel_all(self, timeout: float = 10.0) -> None:
        """Cancels every queued and running request and waits (up to `timeout`) until they have
        ended; the scheduler stays usable."""
        with self._cv:
            requests = self._cancel_everything()
        deadline = time.monotonic() + timeout
        for r in requests:
            if threading.current_thread() is self._thread:
                break
            r.ended.wait(max(0.0, deadline - time.monotonic()))

    def close(self, timeout: float = 30.0) -> None:
        """Cancels everything queued or running and stops the worker thread."""
        with self._cv:
            self._stopping = True
            self._parking = False
            self._cancel_everything()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if not thread.is_alive():
                _wait_until_gone(thread, timeout)

    def park(self, timeout: float = 10.0) -> None:
        """For interpreter exit: cancels everything and waits (up to `timeout`) until the worker
        has finished its step and blocked for good (see `_park_all`)."""
        with self._cv:
            self._parking = True
            self._cancel_everything()
            thread = self._thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            self._parked.wait(timeout)

    def _cancel_everything(self) -> list[Request]:
        """Sets the cancel flag of every queued and running request and wakes the worker (the
        caller holds `_cv`)."""
        requests = list(self._queue) + list(self._running)
        for r in requests:
            r.cancel.set()
        self._cv.notify_all()
        return requests

    # -- the worker --------------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._work, name="onyx-scheduler", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self.batch.gens and not self._stopping and not self._parking:
                    self._cv.wait()
                if self._parking:
                    self._parked.set()
                    while self._parking:  # for good at exit; `close` may still end it
                        self._cv.wait()
                    continue
                if self._stopping and not self.batch.gens:
                    for r in list(self._queue):
                        self._drop(r)
                    self._queue.clear()
                    return
                admitted = self._admit()
            arriving = sum(r.n for r in admitted)
            if arriving > 1:  # several sequences at once: their view slots in one growth
                self.batch.make_room(len(self.batch.gens) + arriving)
            for r in admitted:
                self._begin(r)
            if not self.batch.gens:
                continue
            try:
                touched = self.batch.step()
            except Exception as e:  # noqa: BLE001 - a bug in the step itself: every request fails
                log.exception("batched step failed")
                for g in list(self.batch.gens):
                    g.fail(e)
                touched = list(self.batch.gens)
                self.batch._collect(touched)
            self._deliver(touched)
            if not self.batch.gens:
                self._idle()

    def _admit(self) -> list[Request]:
        """Moves queued requests into the running set while the batch and the KV pool have room
        (first come first served: a request that does not fit blocks the ones behind it)."""
        out = []
        limit = self.kv_limit
        rows = len(self.batch.gens)
        while self._queue:
            r = self._queue[0]
            if r.cancel.is_set():
                self._queue.popleft()
                self._drop(r)
                continue
            need = r.n * self.blocks_needed(len(r.prompt_ids), r.options)
            if rows + r.n > self.max_batch or self.reserved_blocks + need > limit:
                break
            self._queue.popleft()
            r.reserved = need
            self.reserved_blocks += need
            rows += r.n
            self._running.append(r)
            out.append(r)
        return out

    def _begin(self, r: Request) -> None:
        r.started = time.perf_counter()
        r._open = r.n
        leader = None
        for i, constraint in enumerate(r.constraints):
            g = Generation(self.runner, r.prompt_ids, r.options, constraint=constraint, draft_runner=self.draft_runner,
                           cancel=r.cancel, sample_index=i, fork_of=leader, budget=r.budget)
            g.request, g.index = r, i
            leader = leader or g
            r.gens.append(g)
            r._texts.append(TextBuilder(self.vocab, r.options.stop))
            r._tokens.append([])
            r._parsers.append(r.output() if r.output is not None else None)
            r._logprobs.append([])
            r._pending.append([])
            self.batch.add(g)

    def _drop(self, r: Request) -> None:
        """A request cancelled before it ran (or at shutdown)."""
        self.cancelled += 1
        for i in range(r.n):
            self._post(r, i, Chunk("", [], "cancelled", Result("", [], "cancelled", None, {"queue_s": None}), i))
        self._end(r)

    def _deliver(self, touched: list[Generation]) -> None:
        for g in touched:
            r, i = g.request, g.index
            text = r._texts[i]
            entries = g.emitted_logprobs
            for k, token in enumerate(g.emitted):
                r._tokens[i].append(token)
                if entries is not None:
                    r._logprobs[i].append(entries[k])
                    r._pending[i].append(entries[k])
                delta = text.push(token)
                if text.stopped:
                    self.batch.end(g, "stop")
                    break
                if delta:
                    self._post(r, i, Chunk(delta, [token], index=i, deltas=self._read(r, i, delta),
                                           logprobs=self._take_logprobs(r, i)))
            if g.done:
                self._finished(r, i, g)

    def _finished(self, r: Request, i: int, g: Generation) -> None:
        if g.error is not None:
            self.failed += 1
            self._post(r, i, g.error)
        else:
            text = r._texts[i]
            tail = text.flush()
            deltas = self._read(r, i, tail, final=True)
            constraint = g.constraint
            if constraint is None:
                valid = None
            elif text.stopped:
                valid = bool(constraint.grammar.validate(text.text))
            else:
                valid = constraint.accepting
            stats = g.stats.as_dict()
            now = time.perf_counter()
            stats["total_s"] = round(now - r.submitted, 6)
            stats["queue_s"] = round(r.queue_s or 0.0, 6)
            if g.t_first is not None:
                stats["ttft_s"] = round(g.t_first - r.submitted, 6)
            stats["batch_steps"] = g.steps
            self.last_stats = stats
            if g.finish == "cancelled":
                self.cancelled += 1
            else:
                self.served += 1
            result = Result(text.text, r._tokens[i], g.finish, valid, stats, content=text.text,
                            logprobs=r._logprobs[i] if g.emitted_logprobs is not None else None)
            parser = r._parsers[i]
            if parser is not None:
                parsed = parser.result
                result.content, result.tool_calls = parsed.content, parsed.tool_calls
                result.reasoning_content = parsed.reasoning_content
                if parsed.finish_reason == "tool_calls" and g.finish == "stop":
                    result.finish_reason = "tool_calls"
            self._post(r, i, Chunk(tail, [], result.finish_reason, result, i, deltas,
                                   self._take_logprobs(r, i) if result.logprobs is not None else None))
        r._open -= 1
        if r._open == 0:
            self._release(r)
            self._end(r)

    @staticmethod
    def _read(r: Request, i: int, text: str, final: bool = False) -> list[dict]:
        """The output parser's deltas for a piece of text (one content delta without a parser)."""
        parser = r._parsers[i]
        if parser is None:
            return [{"content": text}] if text else []
        out = parser.feed(text) if text else []
        return out + parser.finish() if final else out

    @staticmethod
    def _take_logprobs(r: Request, i: int) -> list[dict] | None:
        out, r._pending[i] = r._pending[i], []
        return out or None

    def _release(self, r: Request) -> None:
        with self._cv:
            self.reserved_blocks -= r.reserved
            r.reserved = 0
            if r in self._running:
                self._running.remove(r)

    def _end(self, r: Request) -> None:
        if r.on_end is not None:
            try:
                r.on_end()
            except Exception:  # noqa: BLE001 - a caller's callback must not stop the worker
                log.exception("on_end callback failed")
        r.ended.set()

    def _post(self, r: Request, index: int, item) -> None:
        try:
            r.on_event(index, item)
        except Exception:  # noqa: BLE001 - a caller's callback must not stop the worker
            log.exception("on_event callback failed")
            r.cancel.set()

    def _idle(self) -> None:
        """Nothing is running: keep the pools evaluated so any thread may use the model, and drop
        view arrays grown for a burst that ended before using them."""
        self.runner.pool.views.drop_if_unused()
        self.runner.pool.materialize()
        if self.draft_runner is not None:
            self.draft_runner.pool.materialize()
