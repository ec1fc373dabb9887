"""What the `vq daemon health` tests of both tiers (subprocess and in-process) read of
its answer."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Vq, wait_until


def check_named(answer: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in answer["checks"] if c["name"] == name)
    return found


def failing_health(vq: Vq, name: str) -> dict[str, Any]:
    """The health answer once check ``name`` fails (exit 1), polled."""
    result = wait_until(
        lambda: (
            (r := vq.run("daemon", "health", "--json", check=False)).returncode == 1
            and not check_named(json.loads(r.stdout), name)["ok"]
            and r
        ),
        timeout=30,
    )
    answer: dict[str, Any] = json.loads(result.stdout)
    assert answer["ok"] is False
    return answer
