"""The FastAPI application factory: pages, ``/api/v1``, health, static files.

``create_app(config)`` is the only constructor; it does no I/O beyond building the
routers, so tests and ``vq web serve`` build identical apps. OpenAPI is served at
``/api/v1/openapi.json`` with interactive docs at ``/api/v1/docs``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from vq import __version__
from vq.web import health
from vq.web.api import agent, jobs, queue, submit, uploads
from vq.web.auth import routes as auth_routes
from vq.web.context import WebConfig
from vq.web.errors import install_error_handlers
from vq.web.limits import BodyLimitMiddleware
from vq.web.pages import actions as page_actions
from vq.web.pages import routes as page_routes

__all__ = ["create_app"]

STATIC_DIR = Path(__file__).parent / "pages" / "static"


def create_app(config: WebConfig) -> FastAPI:
    app = FastAPI(
        title="vq",
        version=__version__,
        summary="The vq job queue: web console and /api/v1",
        docs_url="/api/v1/docs",
        redoc_url=None,
        openapi_url="/api/v1/openapi.json",
    )
    app.state.vq = config
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware)
    app.include_router(health.router)
    for module in (jobs, queue, submit, uploads, agent):
        app.include_router(module.router, prefix="/api/v1")
    app.include_router(auth_routes.router)
    app.include_router(page_routes.router)
    app.include_router(page_actions.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
