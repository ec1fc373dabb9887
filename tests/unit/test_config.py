"""Layered TOML settings (§9.1): defaults, files, overrides, refusal, host caps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vq.config.settings import (
    DaemonSettings,
    Settings,
    host_logical_cpus,
    host_memory_mb,
    load_settings,
)
from vq.domain.admission import Caps
from vq.errors import ConfigError


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "cfg"
    directory.mkdir()
    return directory


def env_for(config_dir: Path) -> dict[str, str]:
    return {"VQ_CONFIG_DIR": str(config_dir)}


def none_site(tmp_path: Path) -> Path:
    return tmp_path / "none.toml"


def test_defaults_without_any_file(tmp_path: Path, config_dir: Path) -> None:
    settings = load_settings(env_for(config_dir), site_config=none_site(tmp_path))
    assert settings == Settings()
    d = settings.daemon
    assert d.max_jobs is None
    assert d.max_cpus is None
    assert d.max_mem_mb is None
    assert d.default_job_mem_mb is None
    assert d.tick_seconds == 1.0


def test_user_config_sets_max_jobs(tmp_path: Path, config_dir: Path) -> None:
    (config_dir / "config.toml").write_text("[daemon]\nmax_jobs = 3\ndefault_job_mem_mb = 256\n")
    settings = load_settings(env_for(config_dir), site_config=none_site(tmp_path))
    assert settings.daemon.max_jobs == 3
    assert settings.daemon.default_job_mem_mb == 256
    assert settings.daemon.tick_seconds == 1.0  # untouched keys keep defaults


def test_config_root_falls_back_to_xdg(tmp_path: Path) -> None:
    (tmp_path / "xdg" / "vq").mkdir(parents=True)
    (tmp_path / "xdg" / "vq" / "config.toml").write_text("[daemon]\nmax_jobs = 7\n")
    settings = load_settings(
        {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, site_config=none_site(tmp_path)
    )
    assert settings.daemon.max_jobs == 7


def test_user_file_overrides_site_file_key_by_key(tmp_path: Path, config_dir: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text("[daemon]\nmax_jobs = 2\nmax_cpus = 16\n")
    (config_dir / "config.toml").write_text("[daemon]\nmax_jobs = 5\n")
    settings = load_settings(env_for(config_dir), site_config=site)
    assert settings.daemon.max_jobs == 5  # user wins
    assert settings.daemon.max_cpus == 16  # site value survives the merge


def test_unknown_key_names_dotted_key_and_file(tmp_path: Path, config_dir: Path) -> None:
    path = config_dir / "config.toml"
    path.write_text("[daemon]\nmax_job = 3\n")  # typo
    with pytest.raises(ConfigError) as info:
        load_settings(env_for(config_dir), site_config=none_site(tmp_path))
    err = info.value
    assert err.exit_code == 9
    assert "daemon.max_job" in err.message
    assert str(path) in err.message
    assert "unknown key" in err.message
    assert err.hint


def test_unknown_section_is_refused(tmp_path: Path, config_dir: Path) -> None:
    path = config_dir / "config.toml"
    path.write_text("[deamon]\nmax_jobs = 3\n")
    with pytest.raises(ConfigError, match="deamon") as info:
        load_settings(env_for(config_dir), site_config=none_site(tmp_path))
    assert str(path) in info.value.message


def test_unknown_key_in_site_file_names_the_site_file(tmp_path: Path, config_dir: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text("[daemon]\nbogus = 1\n")
    with pytest.raises(ConfigError) as info:
        load_settings(env_for(config_dir), site_config=site)
    assert str(site) in info.value.message
    assert "daemon.bogus" in info.value.message


def test_invalid_value_names_key_and_file(tmp_path: Path, config_dir: Path) -> None:
    path = config_dir / "config.toml"
    path.write_text("[daemon]\nmax_jobs = 0\n")
    with pytest.raises(ConfigError) as info:
        load_settings(env_for(config_dir), site_config=none_site(tmp_path))
    assert "daemon.max_jobs" in info.value.message
    assert str(path) in info.value.message


def test_bad_toml_names_the_file(tmp_path: Path, config_dir: Path) -> None:
    path = config_dir / "config.toml"
    path.write_text("[daemon\nmax_jobs = = 3\n")
    with pytest.raises(ConfigError) as info:
        load_settings(env_for(config_dir), site_config=none_site(tmp_path))
    assert str(path) in info.value.message
    assert info.value.exit_code == 9
    assert info.value.hint


def test_unreadable_config_is_config_error(tmp_path: Path, config_dir: Path) -> None:
    (config_dir / "config.toml").mkdir()  # a directory: reading it fails with an OSError
    with pytest.raises(ConfigError, match=r"config\.toml"):
        load_settings(env_for(config_dir), site_config=none_site(tmp_path))


def test_overrides_win_over_files(tmp_path: Path, config_dir: Path) -> None:
    (config_dir / "config.toml").write_text("[daemon]\nmax_jobs = 2\nmax_cpus = 4\n")
    settings = load_settings(
        env_for(config_dir),
        overrides={"daemon": {"max_jobs": 9}},
        site_config=none_site(tmp_path),
    )
    assert settings.daemon.max_jobs == 9
    assert settings.daemon.max_cpus == 4  # not overridden, kept from the file


def test_invalid_override_is_config_error(tmp_path: Path, config_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"daemon\.tick_seconds"):
        load_settings(
            env_for(config_dir),
            overrides={"daemon": {"tick_seconds": 0}},
            site_config=none_site(tmp_path),
        )


def test_caps_fill_cpus_and_memory_from_host() -> None:
    caps = DaemonSettings(max_jobs=4, default_job_mem_mb=100).caps()
    assert isinstance(caps, Caps)
    assert caps.max_jobs == 4
    assert caps.default_job_mem_mb == 100
    assert caps.max_cpus == host_logical_cpus() == (os.cpu_count() or 1)
    assert caps.max_cpus >= 1
    expected_mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    assert caps.max_mem_mb == host_memory_mb() == expected_mem
    assert caps.max_mem_mb is not None
    assert caps.max_mem_mb > 0


def test_caps_keep_configured_values() -> None:
    caps = DaemonSettings(max_cpus=2, max_mem_mb=1024).caps()
    assert caps.max_cpus == 2
    assert caps.max_mem_mb == 1024
    assert caps.max_jobs is None
    assert caps.default_job_mem_mb is None


def test_non_utf8_config_is_config_error_with_file_and_line(
    tmp_path: Path, config_dir: Path
) -> None:
    path = config_dir / "config.toml"
    path.write_bytes(b"[daemon]\nmax_jobs = 2\n# caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        load_settings(env_for(config_dir), site_config=none_site(tmp_path))
    assert info.value.message.startswith(f"{path}:3: ")
    assert "UTF-8" in info.value.message and info.value.hint


def test_fifo_config_is_config_error_without_blocking(tmp_path: Path, config_dir: Path) -> None:
    os.mkfifo(config_dir / "config.toml")  # no writer: a blocking open would wait forever
    with pytest.raises(ConfigError, match=r"config\.toml.*FIFO"):
        load_settings(env_for(config_dir), site_config=none_site(tmp_path))
