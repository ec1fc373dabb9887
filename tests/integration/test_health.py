"""``vq daemon health`` (§6.5): the lifecycle check a monitor can rely on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Vq, wait_until


def _check(answer: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in answer["checks"] if c["name"] == name)
    return found


def _failing(vq: Vq, name: str) -> dict[str, Any]:
    """The health answer once check ``name`` fails (exit 1), polled."""
    result = wait_until(
        lambda: (
            (r := vq.run("daemon", "health", "--json", check=False)).returncode == 1
            and not _check(json.loads(r.stdout), name)["ok"]
            and r
        ),
        timeout=30,
    )
    answer: dict[str, Any] = json.loads(result.stdout)
    assert answer["ok"] is False
    return answer


def test_a_main_loop_stuck_in_a_pass_fails_the_loop_check(vq: Vq, tmp_path: Path) -> None:
    held = tmp_path / "holds"
    held.mkdir()
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True)
    (config / "config.toml").write_text("[daemon]\ntick_seconds = 0.1\n")
    vq.env["VQ_TEST_HOLD"] = f"loop_pass:{held}"
    vq.start_daemon()
    wait_until(lambda: (held / "loop_pass.held").exists())
    answer = _failing(vq, "loop")
    assert "no loop pass for" in _check(answer, "loop")["detail"]
    assert "(bound 10s)" in _check(answer, "loop")["detail"]
    assert all(c["ok"] for c in answer["checks"] if c["name"] != "loop"), answer
    (held / "loop_pass.go").touch()  # the pass goes on: healthy again
    wait_until(lambda: vq.run("daemon", "health", check=False).returncode == 0)
