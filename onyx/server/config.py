"""The server's settings, with their defaults (kept apart so the CLI can show them without
loading FastAPI)."""

from __future__ import annotations

from dataclasses import dataclass

from onyx.options import (  # noqa: F401 (CLI defaults)
    COMPILE_NICE, COMPILE_SHARE, DEFAULT_MAX_BATCH, DEFAULT_MAX_TOKENS, GRAMMAR_CACHE_BYTES, PREFILL_SHARE)

DEFAULT_HOST = "127.0.0.1"  # this machine only
DEFAULT_PORT = 8000
DEFAULT_ALIASES = ("onyx", "default")  # names a request's `model` may use besides the model's own
DEFAULT_MAX_BODY_BYTES = 1 << 20  # 1 MiB; larger bodies get 413
DEFAULT_MAX_TOKENS_LIMIT = 2048  # largest max_tokens a request may ask for; above: 400
DEFAULT_MAX_QUEUE = 128  # generations waiting for the model; more: 503
DEFAULT_BODY_TIMEOUT_S = 30.0  # a request body not received whole within this: 408
MAX_STOP_STRINGS = 16
RESPONSE_STORE_SIZE = 256  # /v1/responses answers kept in memory for previous_response_id
REPAIR_DEADLINE_MS = 1000.0  # /v1/repair's default deadline
REPAIR_MAX_DEADLINE_MS = 10_000.0
REPAIR_MAX_COST = 1 << 31  # /v1/repair's largest max_cost (no repair costs more)


@dataclass(frozen=True)
class ServerConfig:
    """api_key: when set, /v1/* needs `Authorization: Bearer <api_key>` (401 otherwise); /health
    stays open. max_body_bytes: larger request bodies get 413. max_tokens_limit: the largest
    max_tokens a request may ask for (400 above). default_max_tokens: used when a request gives
    none. max_queue: generations that may wait for the model (503 above). aliases: names a
    request's `model` may use besides the engine's model name. body_timeout_s: seconds a
    request body may take to arrive (408 after). context_length: the longest prompt plus
    max_tokens a request may ask for (400 above), at most the model's own (None: the model's)."""

    api_key: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_tokens_limit: int = DEFAULT_MAX_TOKENS_LIMIT
    default_max_tokens: int = DEFAULT_MAX_TOKENS
    max_queue: int = DEFAULT_MAX_QUEUE
    aliases: tuple[str, ...] = DEFAULT_ALIASES
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    context_length: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_tokens_limit", "default_max_tokens", "max_queue"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be positive")
        if not self.body_timeout_s > 0:
            raise ValueError("body_timeout_s must be positive")
        if self.context_length is not None and int(self.context_length) < 1:
            raise ValueError("context_length must be positive")
        object.__setattr__(self, "api_key", self.api_key or None)
        object.__setattr__(self, "default_max_tokens", min(int(self.default_max_tokens), int(self.max_tokens_limit)))
        object.__setattr__(self, "aliases", tuple(self.aliases))
