"""`create_app(engine)`: the FastAPI app serving an `onyx.Engine`, wired from its parts.

    routes.py      the endpoints          translate.py   request body → GenerateOptions
    jobs.py        engine events → loop   responses.py   JSON and SSE answers
    errors.py      the one error map      middleware.py  API key and body limit
    state.py       what endpoints share   config.py      the settings and their defaults
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from onyx.server import errors
from onyx.server.config import ServerConfig
from onyx.server.errors import APIError
from onyx.server.middleware import LimitsMiddleware
from onyx.server.routes import router
from onyx.server.state import ServerState

def create_app(engine, config: ServerConfig | None = None) -> FastAPI:
    """The app serving `engine` (an `onyx.Engine`, already loaded) with `config`'s settings."""
    state = ServerState(engine, config or ServerConfig())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        try:
            yield
        finally:
            # the engine outlives the app: stop what this app queued, keep the engine usable
            await asyncio.get_running_loop().run_in_executor(None, state.engine.cancel_all)
            state.prepare_pool.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="Onyx", version=_version(), lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.onyx = state
    app.include_router(router)
    app.add_exception_handler(APIError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_middleware(LimitsMiddleware, state=state)
    return app


def _count(request: Request, status: int) -> None:
    request.app.state.onyx.errors[status] += 1


async def _api_error(request: Request, exc: APIError):
    _count(request, exc.status)
    return errors.shaped(request.url.path, exc)


async def _validation_error(request: Request, exc: RequestValidationError):
    _count(request, 422)
    return errors.shaped(request.url.path, errors.from_validation(exc.errors()))


async def _http_error(request: Request, exc: StarletteHTTPException):
    _count(request, exc.status_code)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
    message = exc.detail if isinstance(exc.detail, str) else "request failed"
    if exc.status_code == 404:
        message = f"no such endpoint: {request.method} {request.url.path}"
    return errors.shaped(request.url.path, APIError(exc.status_code, message, code=code),
                         headers=getattr(exc, "headers", None))


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("onyx")
    except Exception:
        return "0"
