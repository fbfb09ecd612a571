"""The server's default limits (kept apart so the CLI can show them without loading FastAPI)."""

DEFAULT_HOST = "127.0.0.1"  # this machine only
DEFAULT_PORT = 8000
DEFAULT_ALIASES = ("onyx", "default")  # names a request's `model` may use besides the model's own
DEFAULT_MAX_BODY_BYTES = 1 << 20  # 1 MiB; larger bodies get 413
DEFAULT_MAX_TOKENS_LIMIT = 2048  # largest max_tokens a request may ask for; above: 400
DEFAULT_MAX_TOKENS = 256  # when a request gives none (capped by the limit)
DEFAULT_MAX_QUEUE = 128  # generations waiting for the model; more: 503
MAX_STOP_STRINGS = 16
