"""Console accounts and the admin token file: scrypt, validation, permissions."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from vq.errors import ConfigError, Conflict, InvalidInput, NotFound
from vq.web.auth import accounts, tokens
from vq.web.auth.accounts import hash_password, verify_password


def test_scrypt_hash_verifies_only_the_right_password() -> None:
    stored = hash_password("correct horse")
    assert stored["alg"] == "scrypt" and (stored["n"], stored["r"], stored["p"]) == (2**14, 8, 1)
    assert len(__import__("base64").b64decode(stored["salt"])) == 16
    assert verify_password("correct horse", stored)
    assert not verify_password("correct horsE", stored)
    assert not verify_password("", stored)


def test_same_password_gets_a_different_salt() -> None:
    assert hash_password("same password")["hash"] != hash_password("same password")["hash"]


def test_damaged_hash_records_never_verify() -> None:
    good = hash_password("password1")
    for broken in (None, {}, {**good, "alg": "md5"}, {**good, "salt": "***"}, {**good, "n": 3}):
        assert not verify_password("password1", broken)


@pytest.mark.parametrize("name", ["alice", "a.b-c_d", "A" * 64, "0"])
def test_valid_usernames(name: str) -> None:
    assert accounts.validate_username(name) == name


@pytest.mark.parametrize("name", ["", "a b", "a/b", "é", "A" * 65, "x@y", "../x"])
def test_invalid_usernames(name: str) -> None:
    with pytest.raises(InvalidInput):
        accounts.validate_username(name)


def test_accounts_file_holds_no_password_and_is_private(tmp_path: Path) -> None:
    accounts.add_account(tmp_path, "alice", "operator", "s3cret-pass")
    path = tmp_path / "web-users.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "s3cret-pass" not in path.read_text()
    assert json.loads(path.read_text())["users"]["alice"]["role"] == "operator"
    assert accounts.authenticate(tmp_path, "alice", "s3cret-pass") is not None
    assert accounts.authenticate(tmp_path, "alice", "wrong-pass") is None
    assert accounts.authenticate(tmp_path, "nobody", "s3cret-pass") is None
    assert accounts.authenticate(tmp_path, "bad name!", "s3cret-pass") is None


def test_add_existing_needs_force_and_remove_unknown_is_not_found(tmp_path: Path) -> None:
    accounts.add_account(tmp_path, "alice", "viewer", "password-1")
    with pytest.raises(Conflict):
        accounts.add_account(tmp_path, "alice", "admin", "password-2")
    accounts.add_account(tmp_path, "alice", "admin", "password-2", force=True)
    assert accounts.current_role(tmp_path, "alice") == "admin"
    assert accounts.authenticate(tmp_path, "alice", "password-1") is None
    accounts.remove_account(tmp_path, "alice")
    assert accounts.current_role(tmp_path, "alice") is None
    assert not accounts.any_accounts(tmp_path)
    with pytest.raises(NotFound):
        accounts.remove_account(tmp_path, "alice")


def test_bad_role_and_short_password_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        accounts.add_account(tmp_path, "alice", "root", "password-1")
    with pytest.raises(InvalidInput):
        accounts.add_account(tmp_path, "alice", "viewer", "short")
    assert not (tmp_path / "web-users.json").exists()


def test_admin_token_is_created_once_and_compared(tmp_path: Path) -> None:
    root = tmp_path / "config"
    token = tokens.init_token(root)
    assert len(token) >= 43
    assert stat.S_IMODE(os.stat(root / "web-token").st_mode) == 0o600
    with pytest.raises(Conflict):
        tokens.init_token(root)
    assert tokens.read_admin_token(root) == token
    assert tokens.matches_admin_token(root, token)
    assert not tokens.matches_admin_token(root, token + "x")
    rotated = tokens.init_token(root, force=True)
    assert rotated != token and not tokens.matches_admin_token(root, token)


def test_admin_token_file_readable_by_others_is_refused_without_leaking(tmp_path: Path) -> None:
    token = tokens.init_token(tmp_path)
    os.chmod(tmp_path / "web-token", 0o644)
    with pytest.raises(ConfigError) as caught:
        tokens.read_admin_token(tmp_path)
    text = f"{caught.value.message} {caught.value.hint}"
    assert "chmod 600" in text
    assert token not in text and str(tmp_path) not in text


def test_missing_admin_token_matches_nothing(tmp_path: Path) -> None:
    assert tokens.read_admin_token(tmp_path) is None
    assert not tokens.matches_admin_token(tmp_path, "")
