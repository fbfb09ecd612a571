"""The generation queue: a FIFO served by one worker thread (the engine runs one generation at
a time), so the event loop never blocks on the model.

A `Job` wraps a prepared (not yet started) engine generator, its cancel event, and the asyncio
queue it reports to: the worker drives the generator and forwards each chunk with
`call_soon_threadsafe`. The worker closes the generator however it ends, which frees the
request's KV blocks; a job cancelled while still queued is dropped without running.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import threading
import time
import traceback
from typing import Any, AsyncIterator

from onyx.server.errors import APIError, is_client_error

log = logging.getLogger("onyx.server")


class Job:
    """One generation: its engine generator, cancel event, and the asyncio queue it reports to."""

    _ids = itertools.count(1)

    def __init__(self, gen, cancel: threading.Event, loop: asyncio.AbstractEventLoop) -> None:
        self.id = next(self._ids)
        self.gen = gen
        self.cancel = cancel
        self.loop = loop
        self.events: asyncio.Queue = asyncio.Queue()
        self.enqueued_at = time.perf_counter()
        self.started_at: float | None = None
        self.finished = False

    def post(self, kind: str, value: Any = None) -> None:
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))
        except RuntimeError:  # the event loop is gone (shutdown): nobody is listening
            self.cancel.set()

    async def events_until_end(self) -> AsyncIterator[tuple[str, Any]]:
        """The job's events ("chunk", "error", "cancelled") until the worker is done with it."""
        while True:
            kind, value = await self.events.get()
            if kind == "end":
                self.finished = True
                return
            yield kind, value

    @property
    def queue_s(self) -> float | None:
        return None if self.started_at is None else self.started_at - self.enqueued_at


class Scheduler:
    """A FIFO queue of generations served by one worker thread."""

    def __init__(self, max_queue: int) -> None:
        self.max_queue = max_queue
        self._queue: collections.deque[Job] = collections.deque()
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.active: Job | None = None
        self.served = 0
        self.cancelled = 0
        self.failed = 0

    @property
    def queued(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        with self._cv:
            if self._thread is None or not self._thread.is_alive():
                self._stopping = False
                self._thread = threading.Thread(target=self._worker, name="onyx-generate", daemon=True)
                self._thread.start()

    def submit(self, job: Job) -> None:
        """Queues a job; a full queue is a 503."""
        self.start()
        with self._cv:
            if len(self._queue) >= self.max_queue:
                raise APIError(503, f"the server is busy: {len(self._queue)} requests are already "
                                    f"waiting (limit {self.max_queue}); retry later",
                               type="server_error", code="server_overloaded")
            self._queue.append(job)
            self._cv.notify()

    def stop(self, timeout: float = 10.0) -> None:
        """Cancels everything queued or running and ends the worker."""
        with self._cv:
            self._stopping = True
            for job in self._queue:
                job.cancel.set()
            if self.active is not None:
                self.active.cancel.set()
            self._cv.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _worker(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stopping:
                    self._cv.wait()
                if not self._queue:
                    return
                job = self._queue.popleft()
                self.active = job
            try:
                self._drive(job)
            finally:
                with self._cv:
                    self.active = None

    def _drive(self, job: Job) -> None:
        gen = job.gen
        try:
            if job.cancel.is_set():
                self.cancelled += 1
                job.post("cancelled")
                return
            job.started_at = time.perf_counter()
            final = None
            for chunk in gen:
                job.post("chunk", chunk)
                if chunk.result is not None:
                    final = chunk.result
            if final is not None and final.finish_reason == "cancelled":
                self.cancelled += 1
            else:
                self.served += 1
        except BaseException as e:  # reported to the request; the worker lives on
            self.failed += 1
            if not is_client_error(e):
                log.error("generation failed:\n%s", traceback.format_exc())
            job.post("error", e)
        finally:
            gen.close()  # frees the KV sequence if the generator did not finish
            job.post("end")
