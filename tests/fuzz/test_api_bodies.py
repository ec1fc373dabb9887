"""Every API body model, fed generated JSON, answers a 4xx JSON error or success — never a
500 (the real `vq web serve` over a temp state root, without a daemon: the disk path)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from tests.web.conftest import Web
from vq.web.api.models import CleanupRequest, DrainRequest, KillRequest, ResubmitRequest
from vq.web.api.submit import Inputs, JobRequest

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(
        [
            "0001-01-01T00:00:00",
            "9999-12-31T23:59:59",
            "99999999999999d",
            "0",
            "../../x",
            "\x1b[2J",
            "a" * 300,
            "/etc/passwd",
            "1e9",
            "١",
        ]
    ),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


def bodies(model: type[BaseModel], extra: dict[str, Any] | None = None) -> Any:
    """Objects keyed by the model's own fields (plus a stray key now and then)."""
    fields = sorted(model.model_fields)
    keys = st.one_of(st.sampled_from(fields), st.text(max_size=8))
    return st.dictionaries(keys, JSON, max_size=6).map(lambda d: {**(extra or {}), **d})


INPUT_FILES = st.dictionaries(
    st.one_of(
        st.text(max_size=20), st.sampled_from(["a" * 300, "/".join(["d"] * 200), "../x", "./a", ""])
    ),
    st.one_of(st.sampled_from(["", "eA==", "!!"]), st.text(max_size=8)),
    max_size=3,
)
JOB_BODIES = st.one_of(
    bodies(JobRequest, {"command": ["true"], "idempotency_key": "k"}),
    bodies(JobRequest),
    st.builds(
        lambda files, key: {
            "command": ["true"],
            "idempotency_key": key,
            "inputs": {"files": files},
        },
        INPUT_FILES,
        st.text(min_size=1, max_size=8),
    ),
    bodies(Inputs).map(
        lambda inputs: {"command": ["true"], "idempotency_key": "i", "inputs": inputs}
    ),
)
ROUTES = st.one_of(
    st.tuples(st.just("/api/v1/jobs"), JOB_BODIES),
    st.tuples(st.just("/api/v1/jobs/cleanup"), bodies(CleanupRequest)),
    st.tuples(st.just("/api/v1/queue/drain"), bodies(DrainRequest)),
    st.tuples(st.just("/api/v1/jobs/0123456789ab/kill"), bodies(KillRequest)),
    st.tuples(st.just("/api/v1/jobs/0123456789ab/resubmit"), bodies(ResubmitRequest)),
    st.tuples(st.sampled_from(["/api/v1/jobs", "/api/v1/jobs/cleanup"]), JSON),
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(route=ROUTES)
def test_no_body_makes_the_api_answer_500(web: Web, route: tuple[str, Any]) -> None:
    path, body = route
    answer = web.http.post(path, json=body, headers=_admin(web))
    assert answer.status_code < 500, (path, body, answer.status_code, answer.text)
    if answer.status_code >= 400:
        error = answer.json()["error"]
        assert error["message"] and "Traceback" not in error["message"]
    web.http.post("/api/v1/queue/undrain", headers=_admin(web))  # keep submits possible


_TOKENS: dict[int, dict[str, str]] = {}


def _admin(web: Web) -> dict[str, str]:
    key = id(web)
    if key not in _TOKENS:
        _TOKENS[key] = web.admin()
    return _TOKENS[key]
