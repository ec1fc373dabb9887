"""The fuzz suite reuses the web tests' real-server fixture."""

from tests.web.conftest import web

__all__ = ["web"]
