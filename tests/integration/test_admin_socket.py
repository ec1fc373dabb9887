"""The multi-user control socket (§7.1): root:vq-admins 0660, reads for the admin group,
writes only with the admin token (constant-time, 0600 file). Real users connect through
``runuser`` with Debian's world-executable /usr/bin/python3."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vq.daemon.rpc import Route, RpcServer, SocketAccess
from vq.protocol.methods import EmptyParams, Result
from vq.services.admin_token import require_admin_token


class Answer(Result):
    done: bool


def _usable() -> bool:
    try:
        pwd.getpwnam("vqa")
        pwd.getpwnam("vqadm")
        grp.getgrnam("vq-admins")
    except KeyError:
        return False
    return os.geteuid() == 0 and os.access("/usr/bin/python3", os.X_OK)


pytestmark = pytest.mark.skipif(not _usable(), reason="needs root and the testbed users")

CLIENT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print(json.dumps({"connect_error": exc.strerror}))
    sys.exit(0)
s.sendall(sys.argv[2].encode() + b"\\n")
print(s.makefile().readline().strip())
"""

TOKEN = "s3cret-admin-token"


@pytest.fixture
def server() -> Iterator[tuple[Path, Path]]:
    base = Path(tempfile.mkdtemp(prefix="vq-sock-", dir="/tmp"))
    base.chmod(0o755)
    token = base / "web-token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    answer = Route(EmptyParams, Answer, lambda params: Answer(done=True))
    routes = {"ping": answer, "drain": answer}
    access = SocketAccess(
        grp.getgrnam("vq-admins").gr_gid,
        lambda method, params: require_admin_token(method, params, token),
    )
    rpc = RpcServer(base / "daemon.sock", routes, access=access)
    thread = threading.Thread(target=rpc.serve_forever, daemon=True)
    thread.start()
    yield base / "daemon.sock", token
    rpc.shutdown()
    rpc.server_close()
    shutil.rmtree(base, ignore_errors=True)


def call(user: str, sock: Path, method: str, **params: Any) -> dict[str, Any]:
    request = json.dumps({"id": 1, "method": method, "params": params})
    out = subprocess.run(
        ["runuser", "-u", user, "--", "/usr/bin/python3", "-c", CLIENT, str(sock), request],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    answer: dict[str, Any] = json.loads(out.stdout)
    return answer


def test_the_socket_is_root_admins_0660(server: tuple[Path, Path]) -> None:
    sock, _ = server
    info = sock.stat()
    assert (info.st_uid, info.st_gid) == (0, grp.getgrnam("vq-admins").gr_gid)
    assert stat.S_IMODE(info.st_mode) == 0o660


def test_an_ordinary_user_cannot_connect(server: tuple[Path, Path]) -> None:
    sock, _ = server
    assert call("vqa", sock, "ping") == {"connect_error": "Permission denied"}


def test_admins_read_but_write_only_with_the_token(server: tuple[Path, Path]) -> None:
    sock, token = server
    assert call("vqadm", sock, "ping")["result"] == {"done": True}
    for given in (None, "wrong", TOKEN[:-1]):
        params = {} if given is None else {"admin_token": given}
        error = call("vqadm", sock, "drain", **params)["error"]
        assert error["code"] == 15 and error["message"] == "drain needs the admin token"
        assert TOKEN not in json.dumps(error)
    assert call("vqadm", sock, "drain", admin_token=TOKEN)["result"] == {"done": True}
    token.chmod(0o640)  # group-readable: every write is refused until it is fixed
    error = call("vqadm", sock, "drain", admin_token=TOKEN)["error"]
    assert error["code"] == 15 and "group or other permissions (0640)" in error["message"]
    assert error["hint"] == f"chmod 600 {token}"
