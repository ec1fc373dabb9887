"""``POST /api/v1/uploads``: stream a tar.gz in, get a single-use upload token (§10.2).

The body is the archive itself (``Content-Type: application/gzip``, ``application/x-tar``
or ``application/octet-stream``) or a ``multipart/form-data`` form with one file part
(``curl -F file=@inputs.tar.gz``), read in chunks and written to a private file; it is
never held in memory whole. Over ``[web] upload_max_bytes``, or an archive that unpacks
to more than ``upload_max_unpacked_bytes`` or ``upload_max_members`` entries → 413
naming the cap, nothing kept; an
archive ``vq submit`` would refuse (traversal, absolute paths, links leaving the tree,
devices) → 400 naming the member, nothing kept. Success: 201
``{"upload_token", "size_bytes", "expires_at"}``; submit with
``inputs.upload_token``. Expired uploads are swept on each upload (see
:mod:`vq.web.uploads_store`).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from pathlib import Path

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from vq.web.auth.principal import Principal
from vq.web.auth.quota import charge_upload, upload_bytes_left, upload_quota_error
from vq.web.deps import need, web_config
from vq.web.errors import ApiError
from vq.web.multipart_upload import FilePartStream, is_multipart
from vq.web.submission import load_web_settings
from vq.web.uploads_store import UnpackLimits, UploadStore

__all__ = ["router"]

router = APIRouter(tags=["submit"])

_TYPES = (
    "application/gzip",
    "application/x-gzip",
    "application/x-tar",
    "application/octet-stream",
)
#: Bytes gathered before one write to disk (each write runs off the event loop).
_FLUSH = 1024 * 1024
#: What a form's boundaries, part headers and small fields may add to the file's size.
_FORM_ENVELOPE = 128 * 1024


@router.post(
    "/uploads",
    status_code=201,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/gzip": {"schema": {"type": "string", "format": "binary"}},
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {"file": {"type": "string", "format": "binary"}},
                    }
                },
            },
        }
    },
)
async def upload(
    request: Request,
    principal: Principal = Depends(need("submit")),  # noqa: B008 - FastAPI dependency
) -> JSONResponse:
    content_type = request.headers.get("content-type", "")
    media = content_type.split(";", 1)[0].strip().lower()
    form = FilePartStream(content_type) if is_multipart(content_type) else None
    if form is None and media not in _TYPES:
        raise ApiError(
            415,
            "unsupported-media-type",
            "send the tar.gz as the raw body with Content-Type: application/gzip, "
            "or as the one file of a multipart/form-data form",
            hint="curl --data-binary @inputs.tar.gz -H 'Content-Type: application/gzip' ...",
        )
    config = web_config(request)
    settings = await run_in_threadpool(load_web_settings, config)
    cap = settings.web.upload_max_bytes
    store = UploadStore(config.state.uploads_dir, settings.web.upload_ttl_seconds)
    declared = request.headers.get("content-length")
    envelope = _FORM_ENVELOPE if form is not None else 0
    if declared is not None and declared.isdigit() and int(declared) > cap + envelope:
        raise ApiError(
            413,
            "too-large",
            f"the upload exceeds the {cap}-byte cap (web.upload_max_bytes)",
            hint="split the inputs or ask the operator to raise web.upload_max_bytes",
        )
    now = datetime.now(UTC)
    left = await run_in_threadpool(upload_bytes_left, config.config_root, principal, now)
    if left is not None:  # a token's daily upload quota caps this body too
        if left == 0 or (
            declared is not None and declared.isdigit() and int(declared) > left + envelope
        ):
            raise upload_quota_error(principal, left, now)
        cap = min(cap, left)
    part, out = await run_in_threadpool(store.open_incoming)
    received = 0
    pending = bytearray()
    try:
        try:
            async for body_chunk in request.stream():
                chunk = form.feed(body_chunk) if form is not None else body_chunk
                received += len(chunk)
                if received > cap:
                    if left is not None and cap == left:
                        await run_in_threadpool(_discard, part)
                        raise upload_quota_error(principal, left, now)
                    raise await run_in_threadpool(store.too_large, part, cap)
                pending += chunk
                if len(pending) >= _FLUSH:
                    await run_in_threadpool(out.write, bytes(pending))
                    pending.clear()
            if form is not None:
                form.finish()
            await run_in_threadpool(out.write, bytes(pending))
        finally:
            await asyncio.shield(run_in_threadpool(out.close))
    except BaseException:
        await asyncio.shield(run_in_threadpool(_discard, part))
        raise
    if received == 0:
        await run_in_threadpool(_discard, part)
        raise ApiError(400, "invalid-archive", "the upload body is empty")
    try:
        await run_in_threadpool(charge_upload, config.config_root, principal, now, received)
    except BaseException:
        await run_in_threadpool(_discard, part)
        raise
    limits = UnpackLimits(settings.web.upload_max_unpacked_bytes, settings.web.upload_max_members)
    stored = await run_in_threadpool(store.publish, part, limits)
    return JSONResponse(stored.as_dict(), status_code=201)


def _discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
