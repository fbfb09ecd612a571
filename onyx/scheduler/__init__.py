"""The engine's scheduler, by role.

- `results.py`: the public result types, `Result` and `Chunk`;
- `output.py`: `SampleOutput`, one sample's output assembled from its committed tokens (text,
  stop strings, logprob entries, the chat output parser);
- `text.py`: `TextBuilder`, token ids to text (exact bytes, incremental UTF-8, stop strings);
- `worker.py`: `Scheduler` and `Request`: the queue, admission against the batch and the KV
  pool, and the one worker thread that runs the batched steps.
"""

from onyx.scheduler.results import Chunk, Result
from onyx.scheduler.worker import Request, Scheduler

__all__ = ["Chunk", "Request", "Result", "Scheduler"]
