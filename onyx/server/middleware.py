"""Checks made before a request reaches the app, as a plain ASGI middleware: the API key on
/v1/* (401; `Authorization: Bearer` or Anthropic's `x-api-key`) and the request-body limit (413).

The body is read here (at most the limit) and replayed to the app; later `receive` calls go to
the server, so the app still sees `http.disconnect`.
"""

from __future__ import annotations

import hmac

from onyx.server.errors import error_bytes
from onyx.server.state import ServerState


class LimitsMiddleware:
    """API key on /v1/* (401) and the request-body limit (413), as a plain ASGI middleware. The
    body is read here (at most the limit) and replayed to the app; later `receive` calls go to the
    server, so the app still sees `http.disconnect`."""

    def __init__(self, app, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        st = self.state
        path = scope.get("path", "")
        if st.config.api_key is not None and (path == "/v1" or path.startswith("/v1/")):
            if not _authorized(scope, st.config.api_key):
                st.errors[401] += 1
                return await _send_error(send, 401, "invalid or missing API key: send 'Authorization: "
                                                    "Bearer <key>' (or 'x-api-key: <key>')", "invalid_request_error",
                                         "invalid_api_key", headers=[(b"www-authenticate", b"Bearer")], path=path)
        limit = st.config.max_body_bytes
        length = _header(scope, b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                declared = -1
            if declared < 0:
                return await _send_error(send, 400, "invalid Content-Length", "invalid_request_error",
                                         "invalid_request", path=path)
            if declared > limit:
                st.errors[413] += 1
                return await _send_error(send, 413, f"request body of {declared} bytes is over the limit of "
                                                    f"{limit} bytes", "invalid_request_error",
                                         "request_too_large", path=path)
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                st.errors[413] += 1
                return await _send_error(send, 413, f"request body is over the limit of {limit} bytes",
                                         "invalid_request_error", "request_too_large", path=path)
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replay = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay_receive():
            if replay:
                return replay.pop()
            return await receive()

        return await self.app(scope, replay_receive, send)


def _header(scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k.lower() == name:
            return v.decode("latin-1")
    return None


def _authorized(scope, key: str) -> bool:
    """`Authorization: Bearer <key>` (OpenAI's clients), or `x-api-key: <key>` (Anthropic's)."""
    api_key = _header(scope, b"x-api-key")
    if api_key is not None:
        return hmac.compare_digest(api_key.strip().encode(), key.encode())
    value = _header(scope, b"authorization") or ""
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(token.strip().encode(), key.encode())


async def _send_error(send, status: int, message: str, type_: str, code: str, headers=(), path: str = "") -> None:
    body = error_bytes(status, message, type_, code, path=path)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})
