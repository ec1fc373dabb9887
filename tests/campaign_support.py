"""Shared builders for the campaign tests: a four-node campaign and journal records."""

from __future__ import annotations

import copy
from typing import Any

from vq.campaign.journal import attempt_key
from vq.campaign.model import Campaign, campaign_sha256, parse_campaign

BASE: dict[str, Any] = {
    "schema_name": "vq.campaign/1",
    "campaign_id": "h2o-pipeline",
    "nodes": [
        {
            "id": "calculate",
            "kind": "compute",
            "command": ["python", "run.py"],
            "cpus": 2,
            "outputs": [{"name": "result", "path": "out", "kind": "directory"}],
        },
        {
            "id": "validate",
            "kind": "validate",
            "command": ["python", "check_scf.py", "in"],
            "inputs": [{"name": "result", "source": "calculate.result", "path": "in"}],
            "outputs": [{"name": "verdict", "path": "verdict.json", "kind": "file"}],
        },
        {
            "id": "render",
            "kind": "render",
            "command": ["render", "in"],
            "inputs": [{"name": "result", "source": "calculate.result", "path": "in"}],
            "after": [{"node": "validate", "on": "success"}],
            "outputs": [{"name": "figure", "path": "figure.png", "kind": "file"}],
        },
        {
            "id": "cleanup",
            "kind": "other",
            "command": ["true"],
            "after": [{"node": "calculate", "on": "completion"}],
        },
    ],
}

MANIFEST_A = "a" * 64
MANIFEST_B = "b" * 64


def raw() -> dict[str, Any]:
    """A fresh, mutable copy of the base campaign."""
    return copy.deepcopy(BASE)


def node(data: dict[str, Any], node_id: str) -> dict[str, Any]:
    return next(n for n in data["nodes"] if n["id"] == node_id)


def campaign() -> tuple[Campaign, str]:
    parsed = parse_campaign(raw())
    return parsed, campaign_sha256(parsed)


def record(
    digest: str,
    node_id: str,
    number: int,
    state: str,
    *,
    job: bool | None = None,
    inputs: list[dict[str, Any]] | None = None,
    outputs: list[dict[str, Any]] | None = None,
    retry_of: int | None = None,
    key: str | None = None,
) -> dict[str, Any]:
    """One journal attempt; it has a job id unless submitting (or ``job`` says otherwise)."""
    has_job = state != "submitting" if job is None else job
    out: dict[str, Any] = {
        "node": node_id,
        "attempt": number,
        "state": state,
        "key": key or attempt_key(digest, node_id, number),
        "host": "localhost",
        "inputs": inputs or [],
        "outputs": outputs or [],
    }
    if has_job:
        out["job_id"] = f"{number:012x}"
    if retry_of is not None:
        out["retry_of"] = retry_of
    return out


def bound(name: str, producer: str, attempt: int, output: str, manifest: str) -> dict[str, Any]:
    return {
        "name": name,
        "producer": producer,
        "attempt": attempt,
        "output": output,
        "manifest_sha256": manifest,
    }


def verified(name: str, manifest: str) -> dict[str, Any]:
    return {"name": name, "status": "verified", "manifest_sha256": manifest}


def journal(digest: str, *attempts: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema_name": "vq.campaign-journal/1",
        "campaign_sha256": digest,
        "campaign_id": "h2o-pipeline",
        "attempts": list(attempts),
    }


def calculate_succeeded(digest: str) -> dict[str, Any]:
    return record(digest, "calculate", 1, "succeeded", outputs=[verified("result", MANIFEST_A)])


def validate_bound(digest: str, state: str, number: int = 1) -> dict[str, Any]:
    outputs = [verified("verdict", MANIFEST_B)] if state == "succeeded" else []
    return record(
        digest,
        "validate",
        number,
        state,
        inputs=[bound("result", "calculate", 1, "result", MANIFEST_A)],
        outputs=outputs,
    )
