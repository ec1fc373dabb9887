"""The last route of ``/api/v1/jobs/...``: a JSON 404 (or 405) for paths no route serves.

Included after every other router (see :func:`vq.web.app.create_app`), so malformed ids
and traversal attempts (``/api/v1/jobs/..%2F..%2Fetc``) get the API's error body with
its hint instead of a bare framework 404.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from vq.web.backend import Backend

__all__ = ["other_methods", "router"]

router = APIRouter(include_in_schema=False)


def other_methods(request: Request) -> bool:
    """Whether some route serves this path with another method (then 405, not 404)."""
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)
        if match is Match.PARTIAL:
            return True
    return False


@router.api_route("/api/v1/jobs/{rest:path}", methods=["GET", "POST"])
def api_job_unmatched(request: Request, rest: str) -> Response:
    """A JSON 404 with the API's hint (the id is malformed or the resource unknown)."""
    if other_methods(request):
        raise StarletteHTTPException(405)
    raise Backend.no_route()
