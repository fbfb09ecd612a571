"""One map from what went wrong to OpenAI's error body `{"error": {message, type, param, code}}`.

Engine errors carry what the answer needs: a `RequestError` names its field in `param`; grammar
errors are typed (a bad regex has an offset, an unsupported schema keyword its name). The
constraint's field (`regex` or `response_format`) is the request's, so the caller passes it.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from fastapi.responses import JSONResponse
from pydantic import BaseModel

from onyx import errors as E

RETRY_AFTER_S = 1  # seconds a client is asked to wait after a 503


class APIError(Exception):
    """An error answered as OpenAI's `{"error": {message, type, param, code}}`."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.extra = extra

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code, **self.extra}}

    def headers(self, extra: dict | None = None) -> dict | None:
        """The answer's headers: `Retry-After` on a 503 (the server is busy, not broken)."""
        if self.status == 503:
            return {"Retry-After": str(RETRY_AFTER_S), **(extra or {})}
        return extra

    def response(self, headers: dict | None = None) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers(headers))


class _ErrorDetail(BaseModel):
    message: str
    type: str
    param: Optional[str] = None
    code: Optional[str] = None


class ErrorBody(BaseModel):
    """Every error answer's body (Anthropic's endpoints: `{"type": "error", "error": {type,
    message}}`)."""

    error: _ErrorDetail


# The error statuses every endpoint may answer, for the OpenAPI document.
OPENAPI_ERRORS: dict = {status: {"model": ErrorBody, "description": what} for status, what in (
    (400, "a bad value: `param` names the field"), (401, "the API key is missing or wrong"),
    (404, "no such model or endpoint"), (405, "the method is not allowed"), (408, "the body came too slowly"),
    (413, "the body is over the limit"), (422, "the body does not have the request's shape"),
    (500, "a server bug (logged)"), (503, "busy: retry after `Retry-After` seconds"))}


def error_bytes(status: int, message: str, type_: str, code: str | None, param=None, path: str = "") -> bytes:
    """An error body as bytes, for answers sent below FastAPI (the middleware)."""
    if path in ANTHROPIC_PATHS:
        return json.dumps(anthropic_body(status, message, param)).encode()
    return json.dumps({"error": {"message": message, "type": type_, "param": param, "code": code}}).encode()


# Anthropic's error types by status (its Messages API answers errors in its own shape).
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 413: "request_too_large", 422: "invalid_request_error",
                    429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error"}
ANTHROPIC_PATHS = ("/v1/messages",)  # endpoints that answer errors in Anthropic's shape


def anthropic_body(status: int, message: str, param: str | None = None) -> dict:
    """Anthropic's error body `{"type": "error", "error": {type, message}}` (with `param`, an
    addition its clients ignore)."""
    return {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message,
                                       "param": param}}


def shaped(path: str, err: APIError, headers: dict | None = None) -> JSONResponse:
    """`err` as the endpoint at `path` answers errors: Anthropic's shape on its endpoints (a
    malformed body is a 400 there), OpenAI's elsewhere."""
    if path in ANTHROPIC_PATHS:
        status = 400 if err.status == 422 else err.status
        return JSONResponse(anthropic_body(status, err.message, err.param), status_code=status,
                            headers=err.headers(headers))
    return err.response(headers=headers)


def internal_error() -> APIError:
    return APIError(500, "the server had an error while processing the request", type="server_error",
                    code="internal_error")


def cancelled_before_running() -> APIError:
    return APIError(503, "the request was cancelled before it ran", type="server_error", code="cancelled")


def cancelled() -> APIError:
    return APIError(503, "the request was cancelled (the server is shutting down)", type="server_error",
                    code="cancelled")


def is_client_error(e: BaseException) -> bool:
    """The request's own fault (answered 400, not logged as a server failure)."""
    return isinstance(e, (E.RequestError, E.GrammarError))


def from_engine(e: BaseException, constraint_param: str | None) -> APIError:
    """An engine or grammar exception as an APIError (400 for the client's mistakes, 503 when the
    KV cache is full, 500 otherwise). `constraint_param` is the request field that carried the
    constraint; a grammar error that names its own field (`param`, set where one request field
    of several was compiled on its own: a custom tool's grammar) keeps it."""
    msg = str(e)
    if isinstance(e, E.GrammarError) and getattr(e, "param", None):
        constraint_param = e.param
    if isinstance(e, E.InvalidRegexError):
        offset = getattr(e, "offset", None)
        where = f" (offset {offset})" if offset is not None else ""
        return APIError(400, f"{msg}{where}", param=getattr(e, "param", None) or "regex", code="invalid_regex",
                        offset=offset)
    if isinstance(e, E.UnsupportedRegexError):
        return APIError(400, msg, param=getattr(e, "param", None) or "regex", code="unsupported_regex",
                        offset=getattr(e, "offset", None))
    if isinstance(e, E.UnsupportedSchemaError):
        return APIError(400, msg, param=constraint_param, code="unsupported_schema_keyword",
                        keyword=getattr(e, "keyword", None))
    if isinstance(e, E.InvalidSchemaError):
        return APIError(400, msg, param=constraint_param, code="invalid_schema")
    if isinstance(e, E.GrammarTooLargeError):
        return APIError(400, msg, param=constraint_param, code="grammar_too_large")
    if isinstance(e, E.EmptyLanguageError):
        return APIError(400, msg, param=constraint_param, code="empty_language")
    if isinstance(e, E.InvalidGrammarError):
        return APIError(400, msg, param=constraint_param, code="invalid_grammar", line=getattr(e, "line", None),
                        column=getattr(e, "column", None), rule=getattr(e, "rule", None))
    if isinstance(e, E.GrammarError):
        return APIError(400, msg, param=constraint_param, code="grammar_error")
    if isinstance(e, E.RequestError):
        return APIError(400, msg, param=e.param, code="invalid_parameter")
    if isinstance(e, E.QueueFullError):
        return APIError(503, f"the server is busy: {e}; retry later", type="server_error", code="server_overloaded")
    if isinstance(e, E.CacheFullError):
        return APIError(503, "the KV cache is full; retry later", type="server_error", code="server_overloaded")
    return internal_error()


def from_validation(errors: list[dict]) -> APIError:
    """A request body that does not have the right shape (pydantic's errors) as a 422."""
    parts, param = [], None
    for err in errors[:5]:
        if err.get("type") == "json_invalid":
            ctx = err.get("ctx") or {}
            return APIError(422, f"the request body is not valid JSON ({ctx.get('error', 'decode error')} "
                                 f"at position {err.get('loc', ('', '?'))[-1]})", code="invalid_json")
        loc = [str(x) for x in err.get("loc", ()) if x != "body"]
        if param is None and loc:
            param = ".".join(loc)
        parts.append(f"{'.'.join(loc) or 'body'}: {err.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return APIError(422, "invalid request body: " + "; ".join(parts) + more, param=param,
                    code="invalid_request_body")
