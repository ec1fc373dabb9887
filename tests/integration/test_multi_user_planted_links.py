"""Root never follows a link its job's owner planted in their own tree (real users).

The owner's command swaps a file or directory the root daemon later writes or reads
(``_vq/``, ``stderr.log``) for a symlink to a root-owned canary, then exits. The daemon's
appends and reads go through ``vq._safe_open``: the canary stays byte-for-byte untouched,
nothing of it reaches the job's spec, the planted link is left in place (never deleted,
never followed) and the daemon log names the refusal.
"""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.multi_user_support import TERMINAL, System, make_system, needs_multi_user

pytestmark = needs_multi_user

SECRET = "root-only-secret-line"


@pytest.fixture
def system() -> Iterator[System]:
    yield from make_system(("vqa",))


@pytest.fixture
def canary(system: System) -> Path:
    """A root-owned directory any user can name: ``events.jsonl`` (0644) and ``secret``
    (0600, which no user can read)."""
    directory = system.base / "canary"
    directory.mkdir(mode=0o755)
    (directory / "events.jsonl").write_text("canary\n")
    (directory / "secret").write_text(f"{SECRET}\n")
    (directory / "secret").chmod(0o600)
    return directory


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_a_stderr_log_swapped_for_a_link_never_leaks_into_the_failure_tail(
    system: System, canary: Path
) -> None:
    before = _snapshot(canary)
    job = system.submit(
        "vqa", "--", "sh", "-c", f"rm -f stderr.log; ln -s {canary}/secret stderr.log; exit 3"
    )
    assert system.wait_state("vqa", job, *TERMINAL) == "FAILED"
    spec = system.spec("vqa", job)
    assert SECRET not in (spec.get("failure_tail") or "")
    assert SECRET not in system.as_user("vqa", "status", job, "--json").stdout
    assert _snapshot(canary) == before
    assert (system.tree("vqa") / "jobs" / job / "stderr.log").is_symlink()


def test_a_meta_directory_swapped_for_a_link_is_never_written_through(
    system: System, canary: Path
) -> None:
    before = _snapshot(canary)
    job = system.submit("vqa", "--", "sh", "-c", f"mv _vq _vq.moved && ln -s {canary} _vq")
    system.wait_state("vqa", job, *TERMINAL)
    meta = system.tree("vqa") / "jobs" / job / "_vq"
    log = system.root / "daemon.log"
    wait_until(lambda: "refused: '_vq' is a symlink" in log.read_text(), timeout=30)
    assert _snapshot(canary) == before
    assert meta.is_symlink() and os.readlink(meta) == str(canary)


def _quarantined(system: System) -> dict[str, str]:
    listing = json.loads(system.admin("list", "--json").stdout)
    return {item["name"]: item["reason"] for item in listing.get("quarantined", [])}


def test_specs_planted_while_the_daemon_runs_are_quarantined_and_left_in_place(
    system: System, canary: Path
) -> None:
    vqa, vqb = pwd.getpwnam("vqa"), pwd.getpwnam("vqb")
    before = _snapshot(canary)
    waiting = system.submit("vqa", "--not-before", "1h", "--", "touch", "ran")
    queue = system.tree("vqa") / "queue"
    # A spec that is a link to a root-only file, planted by the owner.
    linked = queue / "a1b2c3d4e5f6.json"
    linked.symlink_to(canary / "secret")
    os.lchown(linked, vqa.pw_uid, vqa.pw_gid)
    # A spec whose content passes every rule, but whose file another user owns.
    foreign = queue / "0123456789ab.json"
    spec = {**system.spec("vqa", waiting), "id": "0123456789ab", "not_before": None}
    foreign.write_text(json.dumps(spec))
    os.chown(foreign, vqb.pw_uid, vqb.pw_gid)
    planted = foreign.read_bytes()

    reasons = wait_until(
        lambda: (
            (found := _quarantined(system)).keys() >= {"a1b2c3d4e5f6", "0123456789ab"} and found
        ),
        timeout=20,
    )
    assert "cannot be read" in reasons["a1b2c3d4e5f6"]
    assert f"owned by uid {vqb.pw_uid}" in reasons["0123456789ab"]
    # Never followed, never deleted, never run; the owner's other job is untouched.
    assert _snapshot(canary) == before
    assert linked.is_symlink() and os.readlink(linked) == str(canary / "secret")
    assert foreign.read_bytes() == planted and foreign.stat().st_uid == vqb.pw_uid
    assert not (system.tree("vqa") / "jobs" / "0123456789ab").exists()
    assert SECRET not in system.admin("list", "--json").stdout
    assert system.state("vqa", waiting) == "PENDING"
