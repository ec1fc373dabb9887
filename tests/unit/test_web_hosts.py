"""The Host header check (DNS rebinding): pure parsing and the allow rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vq.errors import UsageError
from vq.web.binding import check_bind
from vq.web.hosts import host_allowed, host_name


@pytest.mark.parametrize(
    "header",
    [
        "localhost",
        "localhost:8477",
        "127.0.0.1",
        "127.0.0.1:8477",
        "127.1.2.3:80",
        "[::1]",
        "[::1]:8477",
        "LOCALHOST:1",
        "localhost.",
    ],
)
def test_loopback_names_are_allowed(header: str) -> None:
    assert host_allowed(header, ())


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "evil.example",
        "evil.example:8477",
        "127.0.0.1.evil.example",
        "localhost.evil",
        "10.0.0.1:8477",
        "[::2]:1",
        "localhost:80x",
        "[::1",
        "a b",
        "localhost@evil",
        "[::1]x",
    ],
)
def test_other_hosts_are_refused(header: str | None) -> None:
    assert not host_allowed(header, ())


def test_configured_names_are_allowed_with_any_port() -> None:
    allowed = ("queue.lab.example", "[fd00::5]")
    assert host_allowed("Queue.Lab.Example:8477", allowed)
    assert host_allowed("[fd00::5]:8477", allowed)
    assert not host_allowed("queue.lab.example.evil:8477", allowed)


@given(st.text(max_size=40))
def test_host_name_never_raises(header: str) -> None:
    host_name(header)


def test_allow_remote_requires_naming_the_hosts() -> None:
    with pytest.raises(UsageError, match="host names"):
        check_bind("0.0.0.0", 8477, True)
    assert check_bind("0.0.0.0", 8477, True, ("queue.lab.example",))
