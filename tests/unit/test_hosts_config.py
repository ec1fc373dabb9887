"""``[hosts.NAME]`` and ``default_host`` (§2.2): accepted shapes and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from vq.config import load_settings
from vq.errors import ConfigError
from vq.hosts_config import is_local_name


def _load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    cfg = tmp_path / "cfg"
    cfg.mkdir(exist_ok=True)
    (cfg / "config.toml").write_text(text)
    return load_settings({"VQ_CONFIG_DIR": str(cfg)}, site_config=tmp_path / "none.toml")


def test_a_host_with_defaults(tmp_path: Path) -> None:
    settings = _load(tmp_path, 'default_host = "h1"\n[hosts.h1]\nssh = "vq@node1"\n')
    host = settings.hosts["h1"]
    assert (host.ssh, host.vq_command, host.host_key_policy) == ("vq@node1", ["vq"], "strict")
    assert (host.scheduler, host.down, host.ssh_timeout) == ("local", False, 10.0)
    assert settings.default_host == "h1"


def test_every_key(tmp_path: Path) -> None:
    settings = _load(
        tmp_path,
        '[hosts.gpu-2]\nssh = "gpu2"\nvq_command = ["/opt/vq/bin/vq"]\nssh_timeout = 3\n'
        'ssh_options = ["-F", "/x/config"]\nhost_key_policy = "accept-new"\ndown = true\n',
    )
    host = settings.hosts["gpu-2"]
    assert host.vq_command == ["/opt/vq/bin/vq"] and host.ssh_options == ["-F", "/x/config"]
    assert host.down and host.host_key_policy == "accept-new" and host.ssh_timeout == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[hosts.H1]\nssh = "a"\n', "hosts: host name 'H1' must match"),
        ('[hosts.-a]\nssh = "a"\n', "host name '-a' must match"),
        ('[hosts."a_b"]\nssh = "a"\n', "host name 'a_b' must match"),
        ("[hosts." + "a" * 64 + ']\nssh = "a"\n', "must match"),
        ('[hosts.localhost]\nssh = "a"\n', "reserved for this queue"),
        ('[hosts.h1]\nssh = "-oProxyCommand=x"\n', "hosts.h1.ssh: must be an SSH alias"),
        ("[hosts.h1]\n", "hosts.h1.ssh: Field required"),
        ('[hosts.h1]\nssh = "a"\nflavour = 1\n', "hosts.h1.flavour: unknown key"),
        ('[hosts.h1]\nssh = "a"\nscheduler = "slurm"\n', "hosts.h1.scheduler"),
        ('[hosts.h1]\nssh = "a"\nscheduler_dialect = "slurm"\n', "not supported yet"),
        ('[hosts.h1]\nssh = "a"\nssh_options = ["-o", "StrictHostKeyChecking=no"]\n', "refused"),
        ('[hosts.h1]\nssh = "a"\nvq_command = []\n', "hosts.h1.vq_command"),
        ('default_host = "h9"\n[hosts.h1]\nssh = "a"\n', "default_host: default_host 'h9'"),
    ],
)
def test_refusals_name_the_key(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, text)
    assert expected in caught.value.message
    assert "Value error" not in caught.value.message


def test_localhost_is_always_a_valid_default(tmp_path: Path) -> None:
    assert _load(tmp_path, 'default_host = "localhost"\n').default_host == "localhost"
    assert is_local_name("localhost") and not is_local_name("h1")
