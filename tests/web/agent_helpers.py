"""Small helpers shared by the agent-API tests."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import Vq
from tests.web.conftest import Web


def submit(web: Web, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    return web.http.post("/api/v1/jobs", json=body, headers=headers)


def queue_ids(vq: Vq) -> list[str]:
    directory = vq.root / "queue"
    return sorted(p.stem for p in directory.glob("*.json")) if directory.exists() else []


def write_config(web: Web, text: str) -> None:
    web.config_dir.mkdir(parents=True, exist_ok=True)
    (web.config_dir / "config.toml").write_text(text)
