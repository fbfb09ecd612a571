"""From the engine's scheduler to the event loop: a `Job` is one HTTP request's view of its
generation.

The engine batches every request (`onyx.scheduler`: one worker thread, continuous batching);
the server only submits (`Engine.submit`, from the prepare pool) and reads. The engine calls
`Job.on_event` / `Job.on_end` from its worker thread; they hop onto the event loop with
`call_soon_threadsafe` and never block. Cancelling (a client that goes away) sets the job's
event: the request leaves the batch at the next step boundary and its KV blocks are freed then.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import traceback
from typing import Any, AsyncIterator

from onyx.server.errors import is_client_error

log = logging.getLogger("onyx.server")


class Job:
    """One request's events ("chunk" or "error", with the sample's index) on the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, cancel: threading.Event) -> None:
        self.loop = loop
        self.cancel = cancel
        self.events: asyncio.Queue = asyncio.Queue()
        self.request = None  # the engine's `onyx.scheduler.Request`, once submitted
        self.finished = False

    def on_event(self, index: int, item: Any) -> None:
        if isinstance(item, BaseException):
            if not is_client_error(item):
                log.error("generation failed:\n%s", "".join(traceback.format_exception(item)))
            self._post(("error", index, item))
        else:
            self._post(("chunk", index, item))

    def on_end(self) -> None:
        self._post(("end", None, None))

    def _post(self, event: tuple) -> None:
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)
        except RuntimeError:  # the event loop is gone (shutdown): nobody is listening
            self.cancel.set()

    async def events_until_end(self) -> AsyncIterator[tuple[str, int, Any]]:
        """The job's events until every sample has ended."""
        while True:
            kind, index, value = await self.events.get()
            if kind == "end":
                self.finished = True
                return
            yield kind, index, value

    @property
    def queue_s(self) -> float | None:
        return None if self.request is None else self.request.queue_s
