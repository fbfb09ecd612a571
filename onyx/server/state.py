"""What the endpoints share: the engine (whose scheduler batches every request), the settings,
and the server's counters."""

from __future__ import annotations

import collections
import time
from concurrent.futures import ThreadPoolExecutor

from onyx.server.config import ServerConfig


class ServerState:
    def __init__(self, engine, config: ServerConfig) -> None:
        self.engine = engine
        self.config = config
        self.model_name = str(engine.model_name)
        self.aliases = [a for a in dict.fromkeys(config.aliases) if a != self.model_name]
        engine.configure(max_queue=config.max_queue)  # more waiting requests get 503
        # Preparing a request (tokenizing, compiling its grammar) runs here, off the event loop.
        self.prepare_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="onyx-prepare")
        self.started = time.time()
        self.in_flight = 0
        self.requests_total = 0
        self.errors: collections.Counter = collections.Counter()
        self.description = engine.describe()
        self.context_length = self.description["context_length"]

    def model_names(self) -> list[str]:
        return [self.model_name, *self.aliases]
