"""Two host entries for one machine never share an SSH master connection.

``[hosts.p3]`` reaches the testbed's vq-h3 through a ProxyCommand (a small relay this test
can SIGSTOP), ``[hosts.d3]`` reaches the same machine directly, with the same user and
port: ssh's own ``%C`` is the same for both. Once p3's master exists, a stalled proxy must
leave d3 reachable: the control path is keyed on everything that shapes the connection
(:func:`vq.transport.ssh_control.control_path`), so d3 opens its own master.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from tests.system.remote_fleet import SSH_TIMEOUT, RemoteFleet, wait_until
from tests.testbed import SshTestbed, testbed  # noqa: F401 - the fixture

#: A byte relay between ssh's stdin/stdout and HOST:PORT (the ProxyCommand).
RELAY = """\
import os, selectors, socket, sys
sock = socket.create_connection((sys.argv[1], int(sys.argv[2])))
sel = selectors.DefaultSelector()
sel.register(0, selectors.EVENT_READ)
sel.register(sock, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        if key.fileobj == 0:
            data = os.read(0, 65536)
            if not data:
                sock.shutdown(socket.SHUT_WR)
                sel.unregister(0)
            else:
                sock.sendall(data)
        else:
            data = sock.recv(65536)
            if not data:
                sys.exit(0)
            while data:
                data = data[os.write(1, data):]
"""


def _relays(relay: Path) -> list[int]:
    """The pids of live relay processes started from ``relay``."""
    found = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if entry.isdigit() and str(relay).encode() in argv:
                found.append(int(entry))
    return found


def _listed(fleet: RemoteFleet, host: str) -> tuple[int, float, str]:
    """(exit code, seconds taken, stderr) of ``vq list HOST --json``."""
    started = time.monotonic()
    done = fleet.vq("list", host, "--json", timeout=SSH_TIMEOUT * 6)
    if done.returncode == 0:
        json.loads(done.stdout)
    return done.returncode, time.monotonic() - started, done.stderr


def test_a_stalled_proxy_of_one_host_leaves_the_same_machine_reachable_directly(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    relay = tmp_path / "relay.py"
    relay.write_text(RELAY)
    proxy = f"ProxyCommand={sys.executable} {relay} 10.200.3.2 22"
    p3 = fleet.host_table("h3", ssh_options=["-F", str(fleet.ssh_config), "-o", proxy])
    d3 = fleet.host_table("h3")
    fleet.write_config(
        p3.replace("[hosts.h3]", "[hosts.p3]") + d3.replace("[hosts.h3]", "[hosts.d3]")
    )
    stopped: list[int] = []
    try:
        code, _, err = _listed(fleet, "p3")  # p3's master, through the relay, persists
        assert code == 0, err
        relays = _relays(relay)
        assert len(relays) == 1, relays  # the master's proxy, still running
        os.kill(relays[0], signal.SIGSTOP)
        stopped.append(relays[0])
        wait_until(lambda: Path(f"/proc/{relays[0]}/stat").read_text().split()[2] == "T", 5)
        code, took, err = _listed(fleet, "d3")
        assert code == 0, f"d3 unreachable while p3's proxy is stopped ({took:.1f}s): {err}"
        assert took < SSH_TIMEOUT, took
        assert len(_relays(relay)) == 1  # d3 went direct: no second relay
        sockets = sorted(p.name for p in (fleet.runtime / "vq").iterdir())
        assert len(sockets) == 2, sockets  # one master per host entry
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGCONT)
        fleet.write_config()
