"""Console URLs take short ids: /jobs/<prefix> redirects to the job's full id."""

from __future__ import annotations

from tests.conftest import Vq
from tests.inprocess.integration.test_short_ids import _twin
from tests.web.conftest import Web


def test_prefix_redirects_and_ambiguity_is_explained(vq: Vq, web: Web) -> None:
    job = vq.submit("--job-name", "short-page", "--", "true")
    moved = web.http.get(f"/jobs/{job[:5]}", follow_redirects=False)
    assert moved.status_code == 307 and moved.headers["location"] == f"/jobs/{job}"
    assert "short-page" in web.http.get(f"/jobs/{job[:5]}", follow_redirects=True).text
    twin = _twin(vq, job)
    ambiguous = web.http.get(f"/jobs/{job[:4]}")
    assert ambiguous.status_code == 409
    assert "ambiguous: matches" in ambiguous.text and twin in ambiguous.text
    assert web.http.get("/jobs/not-a-job").status_code == 404
    assert web.http.get(f"/jobs/{job[:3]}").status_code == 404
