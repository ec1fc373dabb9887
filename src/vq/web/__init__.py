"""The web console and HTTP API (``vq web serve``, ``vq daemon run --web``).

One FastAPI app serves the HTML pages at ``/``, the versioned JSON API under
``/api/v1`` and the unauthenticated health routes. It calls the same services the CLI
uses (through :mod:`vq.web.backend`), never the daemon's internals.
"""
