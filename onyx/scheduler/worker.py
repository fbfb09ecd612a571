"""The engine's scheduler: the queue, admission, and the one worker thread that decodes every
caller's generations together, in one batch.

`Engine.generate` / `chat` (from any number of threads), `Engine.generate_many`, the server and
`onyx chat` all hand their requests to `Scheduler.submit`. One worker thread owns the model: it
admits queued requests at step boundaries, runs `onyx.decoding.batch.Batch.step` (one forward
for every active sequence), has each sample's `onyx.scheduler.output.SampleOutput` turn its
committed tokens into chunks (text, stop strings, the output parser) and hands them to the
request's `on_event` callback, from the worker thread.

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
from dataclasses import dataclass
from typing import Callable

from onyx.decoding.batch import Batch
from onyx.decoding.generation import Generation
from onyx.decoding.runner import PREFILL_CHUNK
from onyx.errors import QueueFullError, RequestError
from onyx.options import COMPILE_SHARE, DEFAULT_MAX_BATCH, PREFILL_SHARE, GenerateOptions
from onyx.scheduler.output import SampleOutput
from onyx.scheduler.results import cancelled

log = logging.getLogger("onyx.scheduler")


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


@dataclass(eq=False)
class Sample:
    """Sample `index` of a request: the generation decoding it and its output."""

    request: "Request"
    index: int
    generation: Generation
    output: SampleOutput


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
        self.samples: list[Sample] = []
        self._open = 0

    @property
    def gens(self) -> list[Generation]:
        """The generations of the request's samples (once it runs)."""
        return [s.generation for s in self.samples]

    @property
    def queue_s(self) -> float | None:
        return None if self.started is None else self.started - self.submitted


class Scheduler:
    """The queue and the batch of one engine (see the module docstring)."""

    def __init__(self, runner, draft_runner=None, *, vocab, max_batch: int = DEFAULT_MAX_BATCH,
                 max_queue: int | None = None, prefill_chunk: int = PREFILL_CHUNK,
                 prefill_share: float = PREFILL_SHARE, compile_share: float = COMPILE_SHARE) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.runner = runner
        self.draft_runner = draft_runner
        self.vocab = vocab
        self.max_batch = int(max_batch)
        self.max_queue = max_queue
        self.batch = Batch(runner, prefill_chunk=prefill_chunk, prefill_share=prefill_share,
                           compile_share=compile_share)
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
        self._samples: dict[Generation, Sample] = {}
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
                touched = self.batch.fail_all(e)
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
        logprobs = r.options.logprobs is not None
        for i, constraint in enumerate(r.constraints):
            g = Generation(self.runner, r.prompt_ids, r.options, constraint=constraint, draft_runner=self.draft_runner,
                           cancel=r.cancel, sample_index=i, fork_of=leader, budget=r.budget)
            leader = leader or g
            output = SampleOutput(i, self.vocab, r.options.stop, r.output() if r.output is not None else None, logprobs,
                                  constraint)
            sample = Sample(r, i, g, output)
            r.samples.append(sample)
            self._samples[g] = sample
            self.batch.add(g)

    def _drop(self, r: Request) -> None:
        """A request cancelled before it ran (or at shutdown)."""
        self.cancelled += 1
        for i in range(r.n):
            self._post(r, i, cancelled(i))
        self._end(r)

    def _deliver(self, touched: list[Generation]) -> None:
        for g in touched:
            sample = self._samples[g]
            for chunk in sample.output.push(g.emitted, g.emitted_logprobs):
                self._post(sample.request, sample.index, chunk)
            if sample.output.stopped and not g.done:
                self.batch.end(g, "stop")
            if g.done:
                self._finished(sample)

    def _finished(self, sample: Sample) -> None:
        r, g = sample.request, sample.generation
        del self._samples[g]
        if g.error is not None:
            self.failed += 1
            self._post(r, sample.index, g.error)
        else:
            chunk = sample.output.finish(g, r.submitted, r.queue_s)
            self.last_stats = chunk.result.stats
            if g.finish == "cancelled":
                self.cancelled += 1
            else:
                self.served += 1
            self._post(r, sample.index, chunk)
        r._open -= 1
        if r._open == 0:
            self._release(r)
            self._end(r)

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
