"""``POST /api/v1/jobs``: its body is the declared submit fields, in the OpenAPI document
and in its refusals (JSON errors in vq's words, never the validation library's)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import Web
from vq.protocol.submit_fields import SUBMIT_FIELDS, field
from vq.web.api.submit import JobRequest

LIBRARY_WORDING = ("Value error", "Extra inputs", "pydantic", "errors.pydantic.dev")


def _body_schema(web: Web) -> dict[str, Any]:
    document = web.http.get("/api/v1/openapi.json").json()
    post = document["paths"]["/api/v1/jobs"]["post"]
    schema: dict[str, Any] = post["requestBody"]["content"]["application/json"]["schema"]
    return schema


def test_the_openapi_body_is_the_declared_fields(web: Web) -> None:
    schema = _body_schema(web)
    assert set(schema["properties"]) == set(JobRequest.model_fields)
    assert {"command", "idempotency_key"} <= set(schema["required"])
    assert "$ref" not in str(schema)  # inlined: readable without the components
    over_http = {f.name for f in SUBMIT_FIELDS if f.not_over_http is None}
    assert over_http <= set(schema["properties"])
    cpus = schema["properties"]["cpus"]
    assert cpus["description"] == field("cpus").help
    bounds = next(option for option in cpus["anyOf"] if option.get("type") == "integer")
    assert (bounds["minimum"], bounds["maximum"]) == (field("cpus").minimum, field("cpus").maximum)
    key = schema["properties"]["idempotency_key"]
    assert key["maxLength"] == field("idempotency_key").max_length


def _refusal(web: Web, **fields: Any) -> dict[str, Any]:
    body = {"command": ["true"], "idempotency_key": "refused", **fields}
    answer = web.http.post("/api/v1/jobs", json=body, headers=web.admin())
    assert answer.status_code == 422, answer.text
    error: dict[str, Any] = answer.json()["error"]
    assert error["code"] == "validation-error" and error["hint"]
    for wording in LIBRARY_WORDING:
        assert wording not in answer.text, wording
    return error


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cpu": 2}, "body.cpu: unknown field"),
        ({"cwd": "/tmp"}, "body.cwd: unknown field"),  # declared off HTTP: a server path
        ({"cpus": 0}, "body.cpus: must be at least 1"),
        (
            {"tags": ["t"] * 33},
            "body.tags: must have at most 32 entries",
        ),
        (
            {"env": {"1BAD": "x"}},
            "body.env: '1BAD' is not a variable name (letters, digits and _, not starting "
            "with a digit)",
        ),
        (
            {"inputs": {"files": {}, "upload_token": "t"}},
            "body.inputs: give inputs.files or inputs.upload_token, not both",
        ),
    ],
)
def test_a_refused_body_is_a_json_error_in_vq_words(
    web: Web, fields: dict[str, Any], message: str
) -> None:
    error = _refusal(web, **fields)
    assert error["message"] == message
    assert not list((web.vq.root / "queue").glob("*.json"))  # nothing was submitted
