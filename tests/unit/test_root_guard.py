"""The root start policy (§7.1): who may start a daemon as root, decided before anything runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vq.config.multi_user import multi_user_root, system_config_path
from vq.config.settings import Settings, load_settings
from vq.errors import ConfigError
from vq.services.root_guard import ROOT_SINGLE_USER_WARNING, start_mode


def settings(**multi_user: object) -> Settings:
    return Settings.model_validate({"multi_user": multi_user} if multi_user else {})


def broken() -> Settings:
    raise ConfigError("config.toml:3: daemon.max_jobs: unknown key", hint="fix it")


def test_an_ordinary_user_starts_a_single_user_daemon() -> None:
    mode = start_mode(1000, False, settings, env={})
    assert mode.kind == "user" and mode.warning is None


def test_root_without_policy_or_flag_is_refused_naming_the_system_config() -> None:
    with pytest.raises(ConfigError) as refused:
        start_mode(0, False, settings, env={"VQ_CONFIG_DIR": "/srv/cfg"})
    assert "needs [multi_user] enabled = true in /srv/cfg/config.toml" in refused.value.message
    assert "--allow-root" in (refused.value.hint or "")


def test_root_with_allow_root_runs_single_user_with_a_warning() -> None:
    mode = start_mode(0, True, settings, env={})
    assert mode.kind == "root_single_user" and mode.warning == ROOT_SINGLE_USER_WARNING


def test_root_refuses_an_invalid_configuration_even_with_allow_root() -> None:
    with pytest.raises(ConfigError, match=r"needs a valid configuration: config\.toml:3"):
        start_mode(0, False, broken, env={})
    with pytest.raises(ConfigError, match=r"^config\.toml:3: daemon\.max_jobs: unknown key"):
        start_mode(0, True, broken, env={})


def test_an_enabled_policy_without_a_built_drop_fails_closed() -> None:
    enabled = lambda: settings(enabled=True, privilege_drop="systemd")  # noqa: E731
    for allow_root in (False, True):  # the policy beats the flag
        with pytest.raises(ConfigError, match="refuses to start rather than run jobs as root"):
            start_mode(0, allow_root, enabled, env={})


@pytest.mark.skipif(os.geteuid() != 0, reason="the system root is checked and repaired as root")
def test_an_enabled_collector_policy_starts_the_multi_user_daemon(tmp_path: Path) -> None:
    enabled = lambda: settings(enabled=True, privilege_drop="collector")  # noqa: E731
    env = {"VQ_MULTI_USER_ROOT": str(tmp_path / "system")}
    for allow_root in (False, True):  # the policy beats the flag
        mode = start_mode(0, allow_root, enabled, env=env)
        assert mode.kind == "multi_user" and mode.warning is None
    assert (tmp_path / "system" / "users").is_dir()


def test_enabled_needs_an_explicit_privilege_drop() -> None:
    with pytest.raises(ValueError, match='needs privilege_drop = "systemd" or "collector"'):
        settings(enabled=True)
    with pytest.raises(ValueError, match="POSIX group name"):
        settings(admin_group="vq admins")
    assert settings(enabled=True, privilege_drop="systemd").multi_user.min_uid == 1000


def test_system_config_and_root_follow_the_variables() -> None:
    assert system_config_path({}) == Path("/etc/vq/config.toml")
    assert system_config_path({"VQ_CONFIG_DIR": "/srv/cfg"}) == Path("/srv/cfg/config.toml")
    assert multi_user_root({}) == Path("/var/lib/vq")
    assert multi_user_root({"VQ_MULTI_USER_ROOT": "/srv/vq"}) == Path("/srv/vq")


def test_a_personal_config_cannot_set_the_policy(tmp_path: Path) -> None:
    personal = tmp_path / "home" / ".config" / "vq"
    personal.mkdir(parents=True)
    (personal / "config.toml").write_text(
        "[daemon]\nmax_jobs = 2\n\n[multi_user]\nenabled = false\n"
    )
    env = {"HOME": str(tmp_path / "home")}
    with pytest.raises(ConfigError, match=r"config.toml:4: multi_user: is system policy"):
        load_settings(env, site_config=tmp_path / "absent.toml")


def test_the_system_config_sets_the_policy(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        '[multi_user]\nenabled = true\nprivilege_drop = "collector"\nmin_uid = 1500\n'
    )
    loaded = load_settings({"VQ_CONFIG_DIR": str(tmp_path)}, site_config=tmp_path / "absent")
    assert loaded.multi_user.enabled and loaded.multi_user.min_uid == 1500


def test_doctor_reports_the_multi_user_mode_and_why() -> None:
    from vq.services.doctor import check_multi_user

    assert check_multi_user(settings).status == "ok"
    enabled = check_multi_user(lambda: settings(enabled=True, privilege_drop="collector"))
    assert enabled.status == "ok" and "privilege_drop = collector" in enabled.message
    unbuilt = check_multi_user(lambda: settings(enabled=True, privilege_drop="systemd"))
    assert unbuilt.status == "fail" and "only the collector drop" in unbuilt.message
    assert check_multi_user(broken).status == "warn"
