"""The FastAPI application factory: pages, ``/api/v1``, health, static files.

``create_app(config)`` is the only constructor; it does no I/O beyond building the
routers, so tests and ``vq web serve`` build identical apps. OpenAPI is served at
``/api/v1/openapi.json`` with interactive docs at ``/api/v1/docs`` (Swagger UI vendored,
no CDN). Every POST under ``/api/v1`` and ``/actions`` is recorded in the audit trail
(:mod:`vq.web.audit`). In fleet mode (``config.fleet``) the fleet pages and
``/api/v1/fleet`` are mounted too (:mod:`vq.web.fleet`); the health routes are the same.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from vq import __version__
from vq.web import health
from vq.web.api import agent, fallback, jobs, queue, submit, uploads
from vq.web.audit import AuditMiddleware
from vq.web.auth import routes as auth_routes
from vq.web.context import WebConfig
from vq.web.errors import install_error_handlers
from vq.web.headers import SecurityHeadersMiddleware, docs_csp
from vq.web.hosts import HostCheckMiddleware
from vq.web.limits import BodyLimitMiddleware
from vq.web.pages import actions as page_actions
from vq.web.pages import routes as page_routes
from vq.web.redact import RedactPathsMiddleware
from vq.web.waits import WaitSlots

__all__ = ["create_app"]

STATIC_DIR = Path(__file__).parent / "pages" / "static"


def create_app(config: WebConfig) -> FastAPI:
    app = FastAPI(
        title="vq",
        version=__version__,
        summary="The vq job queue: web console and /api/v1",
        docs_url=None,  # served below from the vendored Swagger UI (no CDN)
        redoc_url=None,
        openapi_url="/api/v1/openapi.json",
    )
    app.state.vq = config
    per_token, per_peer, total = config.wait_caps  # long-poll caps ([web] wait_max_*)
    app.state.waits = WaitSlots(per_token=per_token, per_peer=per_peer, total=total)
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware)
    app.add_middleware(AuditMiddleware, log_path=config.state.fleet_audit_log)
    app.add_middleware(
        RedactPathsMiddleware,
        roots=(
            (config.state.archive_dir, "<archive-dir>"),
            (config.state.root, "<state-root>"),
            (config.config_root, "<config-root>"),
        ),
    )
    app.add_middleware(SecurityHeadersMiddleware)
    app.add_middleware(HostCheckMiddleware, allowed_hosts=config.allowed_hosts)  # outermost
    app.include_router(health.router)
    for module in (jobs, queue, submit, uploads, agent):
        app.include_router(module.router, prefix="/api/v1")
    app.include_router(auth_routes.router)
    app.include_router(page_routes.router)
    app.include_router(page_actions.router)
    if config.fleet:
        from vq.web.fleet import mount

        mount(app, config)
    app.include_router(fallback.router)  # last: only paths nothing else serves
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/api/v1/docs", include_in_schema=False)
    def api_docs() -> HTMLResponse:
        """Interactive OpenAPI docs, from files this package ships (works offline)."""
        page = get_swagger_ui_html(
            openapi_url="/api/v1/openapi.json",
            title="vq API",
            swagger_js_url="/static/vendor/swagger-ui-bundle.js",
            swagger_css_url="/static/vendor/swagger-ui.css",
            swagger_favicon_url="/static/favicon.svg",
        )
        page.headers["Content-Security-Policy"] = docs_csp(bytes(page.body).decode())
        return page

    return app
