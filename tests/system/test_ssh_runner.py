"""SshRunner against the real testbed: host keys, credentials, partitions, a dead master,
and the per-host environment of the namespace hosts."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.testbed import SshRunnerFactory, SshTestbed
from vq.errors import (
    AuthFailed,
    CommandNotStarted,
    HostKeyChanged,
    HostKeyUnknown,
    RemoteProtocolError,
    SshUnreachable,
    TransportError,
)
from vq.transport.ssh import SshRunner


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def test_unknown_host_key_is_refused_and_nothing_is_written(
    ssh_runner_factory: SshRunnerFactory, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    known.write_bytes(b"")
    runner = ssh_runner_factory(options=("-o", f"UserKnownHostsFile={known}"))
    with pytest.raises(HostKeyUnknown) as caught:
        runner.run(["true"])
    assert not caught.value.transient
    assert "ssh-keyscan" in (caught.value.hint or "")
    assert known.read_bytes() == b""


def test_accept_new_is_an_explicit_opt_in(
    ssh_runner_factory: SshRunnerFactory, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    known.write_bytes(b"")
    runner = ssh_runner_factory(
        options=("-o", f"UserKnownHostsFile={known}"), host_key_policy="accept-new"
    )
    assert runner.run(["true"]).rc == 0
    assert b"[127.0.0.1]:2222 ssh-ed25519 " in known.read_bytes()


def test_changed_host_key_is_refused(
    ssh_runner_factory: SshRunnerFactory, testbed: SshTestbed, tmp_path: Path
) -> None:
    other = _keygen(tmp_path / "other_host_key")
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:2222 {other.with_suffix('.pub').read_text()}")
    runner = ssh_runner_factory(options=("-o", f"UserKnownHostsFile={known}"))
    with pytest.raises(HostKeyChanged) as caught:
        runner.run(["true"])
    assert not caught.value.transient
    assert "ssh-keygen -R" in (caught.value.hint or "")


def test_strict_host_key_checking_no_is_refused(testbed: SshTestbed) -> None:
    with pytest.raises(CommandNotStarted, match="StrictHostKeyChecking=no"):
        SshRunner("vq-local", ssh_options=("-o", "StrictHostKeyChecking=no"))


def test_missing_key_is_auth_failed(
    ssh_runner_factory: SshRunnerFactory, testbed: SshTestbed, tmp_path: Path
) -> None:
    stranger = _keygen(tmp_path / "stranger")
    config = tmp_path / "config"
    config.write_text(
        "Host stranger\n  HostName 127.0.0.1\n  Port 2222\n"
        f"  User {testbed.user}\n  IdentityFile {stranger}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {testbed.known_hosts}\n  StrictHostKeyChecking yes\n"
    )
    runner = ssh_runner_factory("stranger", config=config)
    with pytest.raises(AuthFailed, match="Permission denied") as caught:
        runner.run(["true"])
    assert not caught.value.transient


def test_partitioned_host_is_unreachable_within_the_deadline(
    ssh_runner_factory: SshRunnerFactory, testbed: SshTestbed
) -> None:
    if not testbed.netns_hosts:
        pytest.skip("the testbed has no namespace hosts (VQ_TESTBED_NETNS_HOSTS=0)")
    host = testbed.netns_hosts[0]
    link = f"vqh{host.removeprefix('vq-h')}-ns"
    warm = ssh_runner_factory(host)
    assert warm.run(["true"]).rc == 0  # a master connection exists before the partition
    subprocess.run(["ip", "-n", host, "link", "set", link, "down"], check=True)
    try:
        for runner, deadline in ((warm, 3.0), (ssh_runner_factory(host), 8.0)):
            started = time.monotonic()
            with pytest.raises(SshUnreachable) as caught:
                runner.run(["true"], deadline_s=deadline)
            assert time.monotonic() - started < deadline + 1.5
            assert caught.value.transient
    finally:
        subprocess.run(["ip", "-n", host, "link", "set", link, "up"], check=True)
    healed = ssh_runner_factory(host)
    wait_until(lambda: _answers(healed), timeout=15.0)


def _answers(runner: SshRunner) -> bool:
    try:
        return runner.run(["true"], deadline_s=5.0).rc == 0
    except TransportError:
        return False


def _master_pid(runner: SshRunner) -> int:
    check = subprocess.run(
        runner.ssh_argv(None, "-O", "check"), capture_output=True, text=True, check=False
    )
    found = re.search(r"Master running \(pid=(\d+)\)", check.stderr)
    assert found, check.stderr
    return int(found.group(1))


def test_killed_master_mid_call_then_next_call_succeeds(
    ssh_runner_factory: SshRunnerFactory,
) -> None:
    runner = ssh_runner_factory()
    assert runner.run(["true"]).rc == 0
    master = _master_pid(runner)
    failure: list[BaseException] = []
    marker = f"5.{secrets.randbelow(10**6):06d}"

    def long_call() -> None:
        try:
            runner.run(["sleep", marker], deadline_s=10.0)
        except BaseException as exc:
            failure.append(exc)

    call = threading.Thread(target=long_call)
    call.start()
    wait_until(lambda: _running(marker), timeout=5.0)  # the call is in flight on the master
    os.kill(master, signal.SIGKILL)
    call.join(timeout=15)
    assert failure and isinstance(failure[0], RemoteProtocolError | SshUnreachable)
    assert runner.run(["echo", "again"]).stdout == b"again\n"
    assert _master_pid(runner) != master


def test_stale_master_socket_is_replaced(ssh_runner_factory: SshRunnerFactory) -> None:
    runner = ssh_runner_factory()
    assert runner.run(["true"]).rc == 0
    master = _master_pid(runner)
    os.kill(master, signal.SIGKILL)
    wait_until(lambda: not Path(f"/proc/{master}").exists() or _zombie(master), 5.0)
    assert list(runner.control_dir.iterdir())  # the dead master's socket is still there
    assert runner.run(["echo", "fresh"]).stdout == b"fresh\n"


def _running(marker: str) -> bool:
    """A `sleep MARKER` process exists (the remote command itself, not the ssh client)."""
    for pid in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if pid.isdigit() else []
            if argv[:2] == [b"sleep", marker.encode()]:
                return True
        except OSError:
            continue
    return False


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def test_namespace_hosts_have_their_own_vq_state(
    ssh_runner_factory: SshRunnerFactory, testbed: SshTestbed
) -> None:
    seen = {}
    for host in testbed.hosts:
        result = ssh_runner_factory(host).run(
            ["sh", "-c", 'printf "%s\\n%s\\n" "$VQ_STATE_DIR" "$VQ_CONFIG_DIR"; vq --version']
        )
        state, config, version = result.stdout.decode().splitlines()
        assert state and config and version.startswith("vq, version")
        seen[host] = (state, config)
    assert len({s for s, _ in seen.values()}) == len(testbed.hosts)
    assert len({c for _, c in seen.values()}) == len(testbed.hosts)


def test_control_dir_must_be_private_and_short(testbed: SshTestbed) -> None:
    short = Path(tempfile.mkdtemp(prefix="vqcm-", dir="/tmp"))
    try:
        loose = short / "loose"
        loose.mkdir()
        loose.chmod(0o755)
        SshRunner("vq-local", control_dir=loose)
        assert loose.stat().st_mode & 0o777 == 0o700
        foreign = short / "foreign"
        foreign.mkdir()
        os.chown(foreign, 1, 1)
        with pytest.raises(TransportError, match="not a directory owned by"):
            SshRunner("vq-local", control_dir=foreign)
        deep = short / ("d" * 60)
        with pytest.raises(TransportError, match="control socket path"):
            SshRunner("vq-local", control_dir=deep)
        assert not deep.exists()
    finally:
        shutil.rmtree(short)
