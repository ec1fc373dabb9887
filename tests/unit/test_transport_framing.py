"""The SSH output framing and ssh's failure wording, without any process."""

from __future__ import annotations

import re
import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vq.transport.framing import MarkerStripper, new_nonce, quote_argv, unframe, wrap_command
from vq.transport.ssh_diagnose import Failure, classify

NONCE = "0123456789abcdef0123456789abcdef"


def framed(payload: bytes, rc: int = 0, noise: bytes = b"motd\nno newline") -> bytes:
    return (
        noise
        + f"VQ-BEGIN-{NONCE} 4242\n".encode()
        + payload
        + f"\nVQ-END-{NONCE} {rc}\n".encode()
        + b"logout noise"
    )


@given(st.binary(max_size=3000), st.integers(0, 255), st.integers(1, 50))
def test_payload_survives_any_chunking(payload: bytes, rc: int, step: int) -> None:
    raw = framed(payload, rc)
    stripper = MarkerStripper(NONCE)
    out = b"".join(stripper.feed(raw[i : i + step]) for i in range(0, len(raw), step))
    assert (out, stripper.rc, stripper.remote_pgid) == (payload, rc, 4242)


def test_missing_trailer_means_unknown_outcome() -> None:
    got = unframe(f"VQ-BEGIN-{NONCE} 7\npartial".encode(), NONCE)
    assert (got.began, got.rc) == (True, None)
    assert not unframe(b"only noise", NONCE).began


def test_other_nonces_are_payload() -> None:
    payload = b"VQ-BEGIN-ffff 1\n\nVQ-END-ffff 3\n"
    assert unframe(framed(payload, 5), NONCE).payload == payload


def test_nonces_are_fresh_128_bit() -> None:
    assert len({new_nonce() for _ in range(100)}) == 100
    assert len(new_nonce()) == 32


def test_each_word_is_quoted_once() -> None:
    argv = ["a b", "it's", "$(x)", b"\xff"]
    assert shlex.split(quote_argv(argv[:3])) == argv[:3]
    assert quote_argv(["plain"]) == "plain"
    assert wrap_command(["true"], NONCE).count("VQ-BEGIN-" + NONCE) == 2


@pytest.mark.parametrize(
    ("stderr", "want"),
    [
        (
            b"@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
            b"Host key for [127.0.0.1]:2222 has changed and you have requested strict "
            b"checking.\nHost key verification failed.\n",
            Failure.HOST_KEY_CHANGED,
        ),
        (
            b"No ED25519 host key is known for [127.0.0.1]:2222 and you have requested "
            b"strict checking.\nHost key verification failed.\n",
            Failure.HOST_KEY_UNKNOWN,
        ),
        (b"vqtest@127.0.0.1: Permission denied (publickey).\n", Failure.AUTH),
        (b"mux_client_read_packet: read header failed: Broken pipe\n", Failure.MUX),
        (b"ssh: connect to host 10.200.1.2 port 22: Connection timed out\n", Failure.UNREACHABLE),
        (b"ssh: connect to host 127.0.0.1 port 2: Connection refused\n", Failure.UNREACHABLE),
        (b"Timeout, server 10.200.1.2 not responding.\n", Failure.UNREACHABLE),
        (
            b"ssh: Could not resolve hostname nowhere: Name or service not known\n",
            Failure.UNREACHABLE,
        ),
        (b"something else entirely\n", Failure.OTHER),
    ],
)
def test_ssh_failures_are_classified_from_openssh_wording(stderr: bytes, want: Failure) -> None:
    assert classify(stderr) is want


def test_the_ssh_command_line_is_the_documented_one() -> None:
    import shutil
    import tempfile
    from pathlib import Path

    from vq.transport.ssh import SshRunner

    short = Path(tempfile.mkdtemp(prefix="vqcm-", dir="/tmp"))  # a socket path must be short
    control = short / "cm"
    try:
        runner = SshRunner("me@gpu1", ssh_options=("-p", "2222"), control_dir=control)
        argv = runner.ssh_argv("echo hi")
        assert argv[:2] == ["ssh", "-T"]
        assert argv[-5:] == ["-p", "2222", "me@gpu1", "--", "echo hi"]
        assert [argv[i + 1] for i, word in enumerate(argv) if word == "-o"] == [
            "BatchMode=yes",
            "ControlMaster=auto",
            f"ControlPath={runner.control_path}",
            "ControlPersist=60",
            "ConnectTimeout=5",
            "ServerAliveInterval=5",
            "ServerAliveCountMax=3",
            "StrictHostKeyChecking=yes",
        ]
        assert runner.control_path.parent == control
        assert re.fullmatch(r"cm-[0-9a-f]{40}", runner.control_path.name)
        assert "-F" not in argv  # ~/.ssh/config applies unless the host names another file
        new = SshRunner("h", host_key_policy="accept-new", control_dir=control).ssh_argv("x")
        assert "StrictHostKeyChecking=accept-new" in new
        assert control.stat().st_mode & 0o777 == 0o700
    finally:
        shutil.rmtree(short)
