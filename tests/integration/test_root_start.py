"""A daemon started as root (§7.1): refused before it leaves anything behind, unless it is
told ``--allow-root`` (or ``VQ_ALLOW_ROOT=1``), which it then reports in its log and in
``vq doctor``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import Vq

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="starts a daemon as root")


def without_allow_root(vq: Vq) -> Vq:
    env = {key: value for key, value in vq.env.items() if key != "VQ_ALLOW_ROOT"}
    return Vq(vq.root, env)


def test_a_root_daemon_without_policy_refuses_and_leaves_nothing(vq: Vq) -> None:
    bare = without_allow_root(vq)
    for verb in ("start", "run"):
        refused = bare.run("daemon", verb, check=False, timeout=60)
        assert refused.returncode == 9, refused.stderr
        assert refused.stderr.startswith(
            "vq: error: a daemon run as root serves every user and needs [multi_user] "
            f"enabled = true in {vq.env['VQ_CONFIG_DIR']}/config.toml"
        ), refused.stderr
        assert "hint:" in refused.stderr and "Traceback" not in refused.stderr
        assert not vq.root.exists()  # no state tree, daemon.log or daemon.pid


def test_an_enabled_policy_this_build_cannot_serve_fails_closed(vq: Vq) -> None:
    """The systemd drop is not built: refused, never a root daemon running jobs as root
    (the collector drop starts a multi-user daemon: tests/system/test_multi_user_daemon.py)."""
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir()
    (config / "config.toml").write_text(
        '[multi_user]\nenabled = true\nprivilege_drop = "systemd"\n'
    )
    refused = vq.run("daemon", "start", "--allow-root", check=False, timeout=60)
    assert refused.returncode == 9
    assert "rather than run jobs as root" in refused.stderr
    assert not (vq.root / "daemon.pid").exists()
    refused = without_allow_root(vq).run("daemon", "start", check=False, timeout=60)
    assert refused.returncode == 9 and "rather than run jobs as root" in refused.stderr
    half = "[multi_user]\nenabled = true\n"  # no privilege_drop: the operator must choose
    (config / "config.toml").write_text(half)
    refused = without_allow_root(vq).run("daemon", "run", check=False, timeout=60)
    assert refused.returncode == 9
    assert "needs a valid configuration" in refused.stderr
    assert 'privilege_drop = "systemd" or "collector"' in refused.stderr
    assert not (vq.root / "daemon.pid").exists()


def test_allow_root_starts_a_single_user_daemon_with_warnings(vq: Vq) -> None:
    flagged = without_allow_root(vq)
    flagged.run("daemon", "start", "--allow-root")
    try:
        log = (vq.root / "daemon.log").read_text()
        assert "WARNING vq.daemon: running a single-user daemon as root" in log
        doctor = json.loads(flagged.run("doctor", "--json", check=False).stdout)
        checks = doctor["checks"] if isinstance(doctor, dict) else doctor
        root = [check for check in checks if check["name"] == "root"]
        assert root and root[0]["status"] == "warn", checks
        job = flagged.submit("--", "true")
        assert job
    finally:
        flagged.stop_daemon()
