"""Onyx's OpenAI-compatible HTTP server (FastAPI + uvicorn).

    python -m server [--model M] [--host 127.0.0.1] [--port 8000] [--api-key K]
    onyx serve ...                                   # the same, from the CLI

    from server import create_app                   # the app, for any ASGI server
    app = create_app(onyx.Engine(), api_key="...")

See `server.app` for the request flow, limits and cancellation. Importing `server` (or
`server.serve`, for its command-line options) stays light: FastAPI loads with `server.app`.
"""

__all__ = ["APIError", "create_app"]


def __getattr__(name: str):
    if name in __all__:
        from server import app

        return getattr(app, name)
    raise AttributeError(f"module 'server' has no attribute {name!r}")
