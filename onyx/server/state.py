"""What the endpoints share: the engine (whose scheduler batches every request), the settings,
the server's counters, and the conversations of recent Responses API answers."""

from __future__ import annotations

import collections
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

from onyx.server.config import RESPONSE_STORE_SIZE, ServerConfig


PREPARE_WORKERS = 2  # threads that tokenize requests and compile their grammars

class ServerState:
    def __init__(self, engine, config: ServerConfig) -> None:
        self.engine = engine
        self.config = config
        self.model_name = str(engine.model_name)
        self.aliases = [a for a in dict.fromkeys(config.aliases) if a != self.model_name]
        engine.configure(max_queue=config.max_queue)  # more waiting requests get 503
        # Preparing a request (tokenizing, compiling its grammar) runs here, off the event loop.
        self.prepare_pool = ThreadPoolExecutor(max_workers=PREPARE_WORKERS, thread_name_prefix="onyx-prepare")
        self.started = time.time()
        self.in_flight = 0
        self.requests_total = 0
        self.errors: collections.Counter = collections.Counter()
        self.description = engine.describe()
        self.context_length = served_context(self.description["context_length"], config.context_length)
        self.response_store = ResponseStore(RESPONSE_STORE_SIZE)  # for /v1/responses' previous_response_id

    def model_names(self) -> list[str]:
        return [self.model_name, *self.aliases]


def served_context(model: int | None, limit: int | None) -> int | None:
    """The context requests may fill: the model's, or the server's limit when that is smaller."""
    if limit is None or (model is not None and model <= limit):
        return model
    return int(limit)


class ResponseStore:
    """Conversations of recent responses by id: the messages before the answer (without the
    request's instructions, which a follow-up does not inherit) and the answer's message."""

    def __init__(self, size: int = RESPONSE_STORE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[str, list[dict]] = OrderedDict()

    def put(self, response_id: str, messages: list[dict]) -> None:
        self._items[response_id] = messages
        self._items.move_to_end(response_id)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def get(self, response_id: str) -> list[dict] | None:
        return self._items.get(response_id)
