"""Onyx's OpenAI-compatible HTTP server (FastAPI + uvicorn).

    python -m onyx.server [--model M] [--host 127.0.0.1] [--port 8000] [--api-key K]
    onyx serve ...                                   # the same, from the CLI

    from onyx.server import create_app, ServerConfig # the app, for any ASGI server
    app = create_app(onyx.Engine(), ServerConfig(api_key="..."))

See `onyx.server.app` for its parts and `onyx.server.routes` for the request flow. Importing
`onyx.server` (or `onyx.server.serve`, for its command-line options) stays light: FastAPI loads
with `onyx.server.app`.
"""
import onyx.cpu  # noqa: F401,I001 - OpenBLAS preloaded before MLX (Linux)

from onyx.server.config import ServerConfig

__all__ = ["ServerConfig", "create_app"]


def __getattr__(name: str):
    if name == "create_app":
        from onyx.server.app import create_app

        return create_app
    raise AttributeError(f"module 'onyx.server' has no attribute {name!r}")
