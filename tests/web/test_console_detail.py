"""Console job pages: malformed or unknown job paths get the HTML 404 page.

Over a real `vq web serve`.
"""

from __future__ import annotations

from tests.conftest import Vq
from tests.web.conftest import Web


def test_malformed_or_unknown_job_paths_get_the_html_404_page(vq: Vq, web: Web) -> None:
    for path in (
        "/jobs/..%2F..%2Fetc",
        "/jobs/zzz",
        "/jobs/0123456789ab",
        "/jobs/0123456789ab/nope/deeper",
        "/jobs/..%2F..%2Fetc/logs/stdout",
    ):
        response = web.http.get(path)
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("text/html"), path
        assert "<!doctype html>" in response.text.lower(), path
        assert "content-security-policy" in response.headers
    fragment = web.http.get("/fragments/jobs/..%2F..%2Fx/live", headers={"HX-Request": "true"})
    assert fragment.status_code == 404 and "<html" not in fragment.text
    api = web.http.get("/api/v1/jobs/..%2F..%2Fetc")
    assert api.status_code == 404 and api.headers["content-type"] == "application/json"
