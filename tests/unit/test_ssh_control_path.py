"""The SSH master socket is keyed on everything that shapes the connection
(:func:`vq.transport.ssh_control.control_path`), never on the resolved host alone."""

from __future__ import annotations

import os
from pathlib import Path

from vq.transport.ssh_control import MAX_CONTROL_PATH, config_files, control_path

DIR = Path("/run/user/1000/vq")


def _path(destination: str = "vq-h3", options: tuple[str, ...] = (), policy: str = "yes") -> Path:
    return control_path(
        DIR, ssh_program="ssh", destination=destination, host_key_policy=policy,
        ssh_options=options,
    )  # fmt: skip


def test_the_same_shape_shares_a_master_and_any_difference_gets_its_own() -> None:
    base = ("-F", "/etc/vq/ssh_config")
    same = _path(options=base)
    assert same == _path(options=base)  # the daemon's and the CLI's calls share one master
    others = [
        _path(options=(*base, "-o", "ProxyCommand=nc -X 5 -x proxy:1080 %h %p")),
        _path(options=(*base, "-p", "2222")),
        _path(options=(*base, "-l", "alice")),
        _path(options=(*base, "-i", "/home/a/.ssh/other")),
        _path(options=(*base, "-J", "bastion")),
        _path(options=("-F", "/etc/vq/other_config")),
        _path("alice@vq-h3", base),
        _path("vq-h3-alias", base),
        _path(options=base, policy="accept-new"),  # a strict host never rides a laxer master
    ]
    assert len({same, *others}) == len(others) + 1
    for path in (same, *others):
        assert path.parent == DIR and path.name.startswith("cm-") and len(path.name) == 43
        assert len(os.fsencode(path)) <= MAX_CONTROL_PATH


def test_an_edited_config_file_gets_a_master_of_its_own(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host vq-h3\n  Port 22\n")
    before = _path(options=("-F", str(config)))
    assert before == _path(options=("-F", str(config)))
    config.write_text("Host vq-h3\n  Port 2222\n")
    assert _path(options=("-F", str(config))) != before


def test_the_config_files_are_the_ones_ssh_reads() -> None:
    home = config_files(())
    assert home[0].endswith("/.ssh/config") and home[1] == "/etc/ssh/ssh_config"
    assert config_files(("-F", "/a")) == ["/a"]
    assert config_files(("-F/a", "-F", "/b")) == ["/b"]  # the last -F wins
    assert config_files(("-vF", "/a")) == ["/a"]  # bundled flags
    assert config_files(("-o", "-F", "-p", "22")) == home  # -F as -o's value is not -F
    assert config_files(("-F", "none")) == []
