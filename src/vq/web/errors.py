"""The one place HTTP errors are shaped: ``{"error": {"code", "message", "hint"}}``.

Contract (stable, part of ``/api/v1``):

* ``code`` is a kebab-case identifier safe to match on (``not-found``, ``invalid-input``,
  ``unauthorized``, ``forbidden``, ``conflict``, ``validation-error``, ``too-large``,
  ``rate-limited``, ``daemon-not-running``, ``internal-error``...).
* ``message`` is one line; ``hint`` says what to do, or is null.
* 422 answers also carry ``details``: a list of ``{"loc": "body.cpus", "message": ...}``;
  messages are vq's words, without the validation library's prefixes ("Value error,
  …"): an unknown field reads "unknown field".
* No token, password or server-side path appears in any error body.

Every :class:`vq.errors.VqError` raised by a service maps to a status by its class; a
route raises :class:`ApiError` for HTTP-only conditions (401, 403, 413, 429).
"""

from __future__ import annotations

import logging
from typing import Any, NotRequired, TypedDict

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from vq import errors as vq_errors
from vq.domain.validation_words import JSON_WORDS, describe

__all__ = ["RETRY_AFTER_SECONDS", "ApiError", "error_body", "install_error_handlers", "status_for"]

#: ``Retry-After`` of a 503 for a request refused at a cap (busy daemon, too many waits).
RETRY_AFTER_SECONDS = 5

log = logging.getLogger("vq.web")

#: HTTP status of each VqError class name (subclasses inherit through the MRO walk).
_STATUS_BY_CLASS: dict[str, int] = {
    "NotFound": 404,
    "PermissionDenied": 403,
    "UnsafeArchive": 400,
    "InvalidInput": 422,
    "UsageError": 400,
    "Conflict": 409,
    "AmbiguousId": 409,
    "DaemonNotRunning": 503,
    "DaemonBusy": 503,
    "CorruptSpec": 409,
    "ConfigError": 500,
    "StorageError": 507,
    "ProtocolError": 502,
    "WaitTimeout": 504,
    "TransportError": 502,
    "OutcomeUnknown": 504,
    "HostUnavailable": 503,
}

_HTTP_CODES: dict[int, str] = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    409: "conflict",
    413: "too-large",
    415: "unsupported-media-type",
    422: "validation-error",
    429: "rate-limited",
    503: "unavailable",
    507: "no-space",
}


class ApiError(Exception):
    """An HTTP-level refusal with the standard body (and optional headers)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        hint: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
        self.headers = headers or {}


def status_for(exc: vq_errors.VqError) -> int:
    """The HTTP status of a service error (by the nearest known class in its MRO)."""
    for cls in type(exc).__mro__:
        status = _STATUS_BY_CLASS.get(cls.__name__)
        if status is not None:
            return status
    return 500


class FieldProblem(TypedDict):
    """One refused field of a validation error: where, and why in vq's words."""

    loc: str
    message: str


class ErrorDetail(TypedDict):
    code: str
    message: str
    hint: str | None
    details: NotRequired[list[FieldProblem]]


class ErrorBody(TypedDict):
    """Every API error answer: ``{"error": {"code", "message", "hint"}}`` (a validation
    error adds ``details``)."""

    error: ErrorDetail


def error_body(
    code: str, message: str, hint: str | None = None, *, details: list[FieldProblem] | None = None
) -> ErrorBody:
    error: ErrorDetail = {"code": code, "message": message, "hint": hint}
    if details is not None:
        error["details"] = details
    return {"error": error}


def _loc(parts: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(p) for p in parts)


def _validation_message(item: dict[str, Any]) -> str:
    """One validation problem in vq's words (no library prefix, no library jargon)."""
    return describe(item, JSON_WORDS)


def install_error_handlers(app: FastAPI) -> None:
    """Route every failure through :func:`error_body` (no HTML error pages on the API)."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(
            error_body(exc.code, exc.message, exc.hint), status_code=exc.status, headers=exc.headers
        )

    @app.exception_handler(vq_errors.VqError)
    async def _vq_error(_: Request, exc: vq_errors.VqError) -> JSONResponse:
        busy = isinstance(exc, vq_errors.DaemonBusy)
        return JSONResponse(
            error_body(exc.reference, exc.message, exc.hint),
            status_code=status_for(exc),
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)} if busy else None,
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        details: list[FieldProblem] = [
            {"loc": _loc(item.get("loc", ())), "message": _validation_message(item)}
            for item in exc.errors()
        ]
        first: FieldProblem = details[0] if details else {"loc": "", "message": "invalid request"}
        return JSONResponse(
            error_body(
                "validation-error",
                f"{first['loc']}: {first['message']}" if first["loc"] else first["message"],
                "see details for every field that was refused",
                details=details,
            ),
            status_code=422,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http-error")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("-", " ")
        return JSONResponse(
            error_body(code, message), status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        full = vq_errors.storage_error(exc, _disk_of(request, exc))
        if full is not None:  # a write the disk refused: that request's error (507)
            return JSONResponse(
                error_body(full.reference, full.message, full.hint), status_code=507
            )
        log.error("unexpected error: %s", type(exc).__name__, exc_info=exc)
        return JSONResponse(
            error_body("internal-error", "the server failed to answer this request", None),
            status_code=500,
        )


def _disk_of(request: Request, exc: Exception) -> str:
    """Where a failed write was, as a placeholder (no server path in a body: this
    handler answers outside the path-redacting middleware)."""
    filename = getattr(exc, "filename", None)
    config = getattr(request.app.state, "vq", None)
    if isinstance(filename, str) and config is not None:
        for root, shown in (
            (config.state.archive_dir, "<archive-dir>"),
            (config.state.root, "<state-root>"),
            (config.config_root, "<config-root>"),
        ):
            if filename == str(root) or filename.startswith(str(root).rstrip("/") + "/"):
                return shown
    return "the server's disk"
