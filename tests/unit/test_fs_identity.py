"""Per-thread filesystem identity (vq.daemon.fs_identity): real credentials, as root."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from vq.daemon.fs_identity import FsIdentity, IdentityError, acting_as, supported


def _user() -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam("vqa")
    except KeyError:
        return None


pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or _user() is None or not supported(),
    reason="needs root, the testbed user vqa and a known per-thread setgroups",
)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory under /tmp the user can reach (root's pytest tmp_path is 0700)."""
    base = Path(tempfile.mkdtemp(prefix="vq-fsid-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_thread_acts_as_the_owner_and_only_that_thread(shared_dir: Path) -> None:
    who = _user()
    assert who is not None
    tmp_path = shared_dir
    own = tmp_path / "own"
    own.mkdir()
    os.chown(own, who.pw_uid, who.pw_gid)
    secret = tmp_path / "root-only"
    secret.write_text("root's\n")
    secret.chmod(0o600)
    inside = threading.Event()
    release = threading.Event()
    seen: dict[str, object] = {}

    def body() -> None:
        with acting_as(FsIdentity.of_uid(who.pw_uid)):
            made = own / "made"
            os.close(os.open(made, os.O_CREAT | os.O_WRONLY, 0o644))
            try:
                secret.read_text()
                seen["read"] = True
            except PermissionError:
                seen["read"] = False
            inside.set()
            release.wait(10)
        seen["after"] = secret.read_text()

    thread = threading.Thread(target=body)
    thread.start()
    assert inside.wait(10)
    try:
        assert secret.read_text() == "root's\n"  # this thread is still root meanwhile
    finally:
        release.set()
        thread.join(10)
    made = (own / "made").stat()
    assert (made.st_uid, made.st_gid) == (who.pw_uid, who.pw_gid)
    assert seen == {"read": False, "after": "root's\n"}


def test_uid_0_is_refused() -> None:
    with pytest.raises(IdentityError), acting_as(FsIdentity(0, 0, (0,))):
        raise AssertionError("the body must not run")
