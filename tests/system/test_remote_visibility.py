"""What the fleet tells the caller (issue 30, items 6 and 7), over real SSH to the
testbed's namespace hosts, each with its own real daemon, through the real ``vq`` CLI.

- A host whose daemon is stopped: ``vq submit HOST`` passes the host's "no daemon is
  running" notice on (exit 0, as a local submit without a daemon), and ``vq hosts
  --probe`` tells "ssh ok, no daemon" from "ok".
- A short id asked on the wrong queue names where it is (``found on h2: `vq logs h2
  PREFIX```); a prefix matching locally while a host cannot be read still fails closed,
  naming the exact command (``vq status localhost PREFIX``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.system.remote_fleet import (
    MEASURED_SSH_TIMEOUT,
    RemoteFleet,
    wait_until,
)
from tests.testbed import SshTestbed, testbed  # noqa: F401 - the fixture

#: every test starts from the fleet's own config (tests/system/conftest.py)
pytestmark = pytest.mark.usefixtures("fresh_fleet_config")


@pytest.fixture
def h3_without_daemon(fleet: RemoteFleet) -> Iterator[None]:
    stopped = fleet.remote_vq("h3", "daemon", "stop")
    assert stopped.returncode == 0, stopped.stderr
    try:
        yield
    finally:
        started = fleet.remote_vq("h3", "daemon", "start")
        assert started.returncode == 0, started.stderr


def test_submit_to_a_host_without_a_daemon_passes_its_notice_on(
    fleet: RemoteFleet, h3_without_daemon: None
) -> None:
    done = fleet.vq("submit", "h3", "--", "true")
    assert done.returncode == 0, done.stderr  # accepted there, as a local submit would be
    job_id = done.stdout.strip()
    assert len(job_id) == 12
    assert (
        "vq: on h3: the job is PENDING; no daemon is running: it will start when one does"
        in done.stderr
    )
    assert fleet.remote_spec("h3", job_id)["state"] == "PENDING"
    as_json = fleet.vq("submit", "h3", "--json", "--", "true")
    assert as_json.returncode == 0, as_json.stderr
    assert any("no daemon is running" in n for n in json.loads(as_json.stdout)["host_notices"])
    # the submit recorded it: `vq hosts` (no probe) says so already
    listed = fleet.vq("hosts")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("h3"))
    assert "ssh ok, no daemon" in row


def test_hosts_probe_tells_a_host_without_a_daemon_from_an_ok_one(
    fleet: RemoteFleet, h3_without_daemon: None
) -> None:
    probe = fleet.vq("hosts", "--probe", "--force", "--json")
    assert probe.returncode == 0, probe.stderr
    rows = {row["name"]: row for row in json.loads(probe.stdout)["hosts"]}
    assert rows["h1"]["status"] == "ok" and rows["h1"]["daemon"] == "running"
    assert rows["h3"]["status"] == "ok" and rows["h3"]["daemon"] == "not_running"
    text = fleet.vq("hosts", "--probe", "--force")
    assert text.returncode == 0, text.stderr
    lines = {line.split()[0]: line for line in text.stdout.splitlines() if line[:2] in ("h1", "h3")}
    assert "ssh ok, no daemon" in lines["h3"]
    assert "no daemon" not in lines["h1"] and " ok " in lines["h1"]


def test_a_prefix_asked_on_the_wrong_host_says_where_it_is(fleet: RemoteFleet) -> None:
    job_id = fleet.submit("h2", "--", "sh", "-c", "echo on-h2")
    wait_until(lambda: fleet.remote_spec("h2", job_id)["state"] == "COMPLETED", 30)
    prefix = job_id[:6]
    # asked on h1 (a remote verb, answered by h1's "not found")
    on_h1 = fleet.vq("logs", "h1", prefix)
    assert on_h1.returncode == 3, on_h1.stderr
    assert f"found on h2: `vq logs h2 {prefix}`" in on_h1.stderr
    status = fleet.vq("status", "h1", prefix)
    assert status.returncode == 3, status.stderr
    assert f"found on h2: `vq status h2 {prefix}`" in status.stderr
    # asked on this queue (the default when unset: direct, no fan-out for logs)
    here = fleet.vq("logs", prefix)
    assert here.returncode == 3, here.stderr
    assert f"found on h2: `vq logs h2 {prefix}`" in here.stderr
    # and the hint's command works
    followed = fleet.vq("logs", "h2", prefix)
    assert followed.returncode == 0 and followed.stdout == "on-h2\n", followed.stderr


def test_a_look_elsewhere_never_fails_because_a_host_is_down(fleet: RemoteFleet) -> None:
    job_id = fleet.submit("h2", "--", "true")
    prefix = job_id[:6]
    fleet.write_config(h3={"ssh_timeout": MEASURED_SSH_TIMEOUT})
    with fleet.partition("h3"):
        done = fleet.vq("status", "h1", prefix)
    assert done.returncode == 3, done.stderr  # h1's answer, whatever h3 does
    assert f"found on h2: `vq status h2 {prefix}`" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unreadable_host_and_a_local_match_fail_closed_naming_the_command(
    fleet: RemoteFleet,
) -> None:
    local = fleet.vq("submit", "--", "true")
    assert local.returncode == 0, local.stderr
    prefix = local.stdout.strip()[:6]
    fleet.write_config(h3={"ssh_timeout": MEASURED_SSH_TIMEOUT})
    with fleet.partition("h3"):
        done = fleet.vq("status", prefix)
    assert done.returncode == 13, done.stderr  # fails closed (§2.2)
    assert f"`vq status localhost {prefix}`" in done.stderr
    named = fleet.vq("status", "localhost", prefix, "--json")
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout)["id"] == local.stdout.strip()
