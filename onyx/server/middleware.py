"""Checks made before a request reaches the app, as a plain ASGI middleware: the API key on
/v1/* (401; `Authorization: Bearer` or Anthropic's `x-api-key`), the request-body limit (413),
and values no field may hold (400): a lone surrogate in a string (JSON can spell one, but it is
not a character, and nothing past the edge can encode it) or a non-finite number (`NaN`,
`Infinity`, `1e400`: not JSON numbers).

The body is read here (at most the limit) and replayed to the app; later `receive` calls go to
the server, so the app still sees `http.disconnect`. An exception that escapes the app is answered
here with a typed 500 and logged; the connection stays open for the client's next request.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import re

from onyx.server.errors import error_bytes
from onyx.server.state import ServerState

log = logging.getLogger("onyx.server")
# What a body needs to hold a lone surrogate or a non-finite number: most bodies have none of
# these, and are not parsed here.
_SUSPECT = re.compile(rb"\\u[dD][89a-fA-F]|NaN|Infinity|[eE][+-]?[0-9]{3}|[0-9]{309}")


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
        loop = asyncio.get_running_loop()
        deadline = loop.time() + st.config.body_timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                st.errors[408] += 1
                return await _send_error(send, 408, f"the request body was not received within "
                                                    f"{st.config.body_timeout_s:g} s", "invalid_request_error",
                                         "request_timeout", headers=[(b"connection", b"close")], path=path)
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
        body = b"".join(chunks)
        problem = bad_value(body)
        if problem is not None:
            st.errors[400] += 1
            param, message = problem
            return await _send_error(send, 400, message, "invalid_request_error", "invalid_value", path=path,
                                     param=param)
        replay = [{"type": "http.request", "body": body, "more_body": False}]

        async def replay_receive():
            if replay:
                return replay.pop()
            return await receive()

        started = False

        async def tracked_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            return await self.app(scope, replay_receive, tracked_send)
        except Exception:
            # A bug, not the client's fault: logged with its traceback; the client gets the
            # generic error (when no answer has started) and keeps its connection.
            st.errors[500] += 1
            log.exception("unhandled error on %s %s", scope.get("method"), path)
            if not started:
                await _send_error(send, 500, "the server had an error while processing the request",
                                  "server_error", "internal_error", path=path)


class _NonFinite:
    """A number JSON cannot hold, kept where it stood so its field can be named."""

    def __init__(self, text: str) -> None:
        self.text = text


def _float(text: str):
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


def bad_value(body: bytes) -> tuple[str, str] | None:
    """(field, message) for the first value no request field may hold, or None. A body that is
    not JSON is left to the app (its 422 says why)."""
    if not _SUSPECT.search(body):
        return None
    try:
        doc = json.loads(body, parse_constant=_NonFinite, parse_float=_float)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[object, tuple]] = [(doc, ())]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            problem = _surrogate(value)
        elif isinstance(value, _NonFinite):
            problem = f"is not a finite number ({value.text}); JSON numbers are finite"
        else:
            problem = None
            if isinstance(value, dict):
                for key, item in value.items():
                    if _surrogate(key) is not None:
                        return ".".join(map(str, where)) or "body", f"has a key that {_surrogate(key)}"
                    stack.append((item, (*where, key)))
            elif isinstance(value, list):
                stack.extend((item, (*where, i)) for i, item in enumerate(value))
        if problem is not None:
            field = ".".join(map(str, where)) or "body"
            return field, f"{field} {problem}"
    return None


def _surrogate(text: str) -> str | None:
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError as e:
        return (f"is not valid Unicode: a lone surrogate (U+{ord(text[e.start]):04X}) at character {e.start}")


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


async def _send_error(send, status: int, message: str, type_: str, code: str, headers=(), path: str = "",
                      param: str | None = None) -> None:
    body = error_bytes(status, message, type_, code, param=param, path=path)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})
