"""Which submits a user's CLI hands to their submit socket (vq._owner_socket.served)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vq._owner_socket import NOT_SERVED, personal_config, served, submit_socket


def test_a_plain_submit_is_served_when_the_system_config_is_the_only_one(tmp_path: Path) -> None:
    env = {"VQ_CONFIG_DIR": str(tmp_path / "etc"), "HOME": str(tmp_path)}
    params = {"command": ["true"], "cpus": 1, "source": None, "environment": {"PATH": "/bin"}}
    assert personal_config(env) is None
    assert served(params, env)


@pytest.mark.parametrize("key", sorted(NOT_SERVED))
def test_anything_from_the_users_files_or_configuration_is_not_served(key: str) -> None:
    env = {"VQ_CONFIG_DIR": "/etc/vq"}
    assert not served({"command": ["true"], key: "x"}, env)


def test_a_personal_config_file_keeps_the_submit_in_the_cli(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert served({"command": ["true"]}, env)
    personal = tmp_path / ".config" / "vq" / "config.toml"
    assert personal_config(env) == str(personal)
    personal.parent.mkdir(parents=True)
    personal.write_text("[profile.big]\ncpus = 8\n")
    assert not served({"command": ["true"]}, env)


def test_the_socket_is_in_the_owners_tree() -> None:
    assert submit_socket("/var/lib/vq", 1003) == "/var/lib/vq/users/1003/submit.sock"
