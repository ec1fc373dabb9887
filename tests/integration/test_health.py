"""``vq daemon health`` (§6.5): the lifecycle check a monitor can rely on."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Vq, wait_until
from tests.health_support import check_named, failing_health


def test_a_main_loop_stuck_in_a_pass_fails_the_loopcheck_named(vq: Vq, tmp_path: Path) -> None:
    held = tmp_path / "holds"
    held.mkdir()
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True)
    (config / "config.toml").write_text("[daemon]\ntick_seconds = 0.1\n")
    vq.env["VQ_TEST_HOLD"] = f"loop_pass:{held}"
    vq.start_daemon()
    wait_until(lambda: (held / "loop_pass.held").exists())
    answer = failing_health(vq, "loop")
    assert "no loop pass for" in check_named(answer, "loop")["detail"]
    assert "(bound 10s)" in check_named(answer, "loop")["detail"]
    assert all(c["ok"] for c in answer["checks"] if c["name"] != "loop"), answer
    (held / "loop_pass.go").touch()  # the pass goes on: healthy again
    wait_until(lambda: vq.run("daemon", "health", check=False).returncode == 0)
