"""Every error Onyx raises, in one module that any layer may import.

- `RequestError`: a bad argument to a request (an option out of range, a malformed message). It
  names the offending field in `param`, so the server answers a 400 that points at it without
  reading the message.
- `ModelError`: a model spec cannot be resolved or loaded.
- `PhiError`, `PhiTooLargeError`: Φ reweighting cannot be prepared for a request (a
  `RequestError`: the request asked for something its constraint does not allow).
- `CacheFullError`: the KV pool cannot hold another block.
- `QueueFullError`: the engine's queue of waiting requests is at its limit.
- The grammar core's errors (`GrammarError` and its subclasses, raised by the Rust extension)
  are re-exported here, so callers need one import for all of them.
"""

from __future__ import annotations

from onyx._grammar import (
    EmptyLanguageError,
    GrammarError,
    GrammarTooLargeError,
    InvalidRegexError,
    InvalidSchemaError,
    InvalidStateError,
    InvalidGrammarError,
    InvalidStructureError,
    NotCompletableError,
    TokenNotAllowedError,
    UnsupportedRegexError,
    UnsupportedSchemaError,
    VocabularyError,
)

__all__ = [
    "CacheFullError",
    "EmptyLanguageError",
    "GrammarError",
    "GrammarTooLargeError",
    "InvalidRegexError",
    "InvalidSchemaError",
    "InvalidStateError",
    "InvalidGrammarError",
    "InvalidStructureError",
    "ModelError",
    "NotCompletableError",
    "PhiError",
    "PhiTooLargeError",
    "QueueFullError",
    "RequestError",
    "TokenNotAllowedError",
    "UnsupportedRegexError",
    "UnsupportedSchemaError",
    "VocabularyError",
]


class RequestError(ValueError):
    """A bad argument to generate/chat (the server answers 400). `param` names the field (as the
    API spells it: `max_tokens`, `messages`, `num_draft_tokens`, ...), or is None."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class ModelError(RuntimeError):
    """A model spec cannot be resolved or loaded (unknown name, missing file, bad GGUF, download
    failure). The message says which spec and why."""


class PhiError(RequestError):
    """Φ cannot be prepared for this request."""

    def __init__(self, message: str, *, param: str | None = "phi") -> None:
        super().__init__(message, param=param)


class PhiTooLargeError(PhiError):
    """The language's token trie is infinite or larger than the limit."""


class CacheFullError(RuntimeError):
    """The KV pool is at its block limit and nothing can be evicted."""


class QueueFullError(RuntimeError):
    """The engine's queue of requests waiting for the batch is at its limit (`max_queue`)."""
