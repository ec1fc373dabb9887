"""``env`` on ``POST /api/v1/jobs``: names checked, values private, added to the daemon's."""

from __future__ import annotations

import pytest

from tests.conftest import wait_until
from tests.inprocess.web.test_agent_api import submit
from tests.web.conftest import Web


@pytest.fixture
def admin(web: Web) -> dict[str, str]:
    web.vq.start_daemon()
    return web.admin()


def test_env_reaches_the_job_and_is_never_echoed(web: Web, admin: dict[str, str]) -> None:
    body = {
        "command": ["sh", "-c", 'echo "basis=$MYBASIS"'],
        "idempotency_key": "env-1",
        "env": {"MYBASIS": "s3cret-basis"},
    }
    answer = submit(web, body, admin)
    assert answer.status_code == 201, answer.text
    job_id = answer.json()["id"]
    assert "s3cret-basis" not in answer.text
    wait_until(lambda: web.vq.state(job_id) == "COMPLETED")
    assert web.vq.run("logs", job_id).stdout == "basis=s3cret-basis\n"
    detail = web.http.get(f"/api/v1/jobs/{job_id}", headers=admin)
    assert detail.status_code == 200 and "s3cret-basis" not in detail.text
    repeat = submit(web, body, admin)  # an idempotent repeat is the same job
    assert repeat.status_code == 200 and repeat.json()["id"] == job_id


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"1BAD": "val-one"}, "'1BAD' is not a variable name"),
        ({"VQ_JOB_ID": "val-two"}, "VQ_JOB_ID is reserved"),
        ({"OK": "val-three\u0000x"}, "the value of OK contains a NUL byte"),
    ],
)
def test_bad_env_is_refused_without_echoing_values(
    web: Web, admin: dict[str, str], env: dict[str, str], named: str
) -> None:
    body = {"command": ["true"], "idempotency_key": "env-bad", "env": env}
    answer = submit(web, body, admin)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert named in error["message"] and error["message"].startswith("body.env")
    for value in env.values():
        assert value.split("\x00")[0] not in answer.text
    assert not list((web.vq.root / "queue").glob("*.json"))
