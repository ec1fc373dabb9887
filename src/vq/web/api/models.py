"""Request and response models of the ``/api/v1`` job and queue routes.

Request bodies forbid unknown fields, so a typo is a 422 naming it (``body.cpu``) instead
of a silently ignored value. Response models describe the stable top-level shape; the
job rows and status views inside are documented in ``docs/json.md`` (the same JSON as
``vq list --json`` and ``vq status --json``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vq.domain.text import refuse_surrogates
from vq.protocol.submit_fields import constraints

__all__ = [
    "CleanupRequest",
    "CleanupResult",
    "DrainRequest",
    "DrainResult",
    "JobDetail",
    "JobPage",
    "KillRequest",
    "KillResult",
    "PauseResult",
    "ResubmitRequest",
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _unicode(cls, data: Any) -> Any:
        refuse_surrogates(data)
        return data


class KillRequest(_Body):
    resubmit: bool = Field(False, description="Also resubmit a copy of the job as a new job.")


class ResubmitRequest(_Body):
    """Overrides for the copy; omitted fields keep the old job's values.

    The fields are the submit fields declared ``override=True``
    (:mod:`vq.protocol.submit_fields`), with their limits and help.
    """

    cpus: int | None = Field(**constraints("cpus", optional=True))
    mem_mb: int | None = Field(**constraints("mem_mb", optional=True))
    wall_time_seconds: int | None = Field(**constraints("wall_time_seconds", optional=True))
    priority: int | None = Field(**constraints("priority", optional=True))
    job_name: str | None = Field(**constraints("job_name", optional=True))

    def overrides(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class DrainRequest(_Body):
    full: bool = Field(False, description="Also pause the running jobs until undrain.")
    reject_submits: bool = Field(False, description="Refuse new submissions meanwhile.")
    reason: str | None = Field(None, max_length=500)


class CleanupRequest(_Body):
    dry_run: bool = Field(True, description="List what would be done; change nothing.")
    older_than: str | None = Field(
        "14d",
        max_length=32,
        description='Only jobs ended this long ago; null, "0" or "0s" means any age.',
    )
    states: list[str] | None = Field(
        None, max_length=16, description="Narrow to these failed states (default: all)."
    )
    archive: bool = Field(
        True, description="Archive to .tar.bz2 and remove the workspace; else sweep workdirs."
    )


class JobPage(BaseModel):
    jobs: list[dict[str, Any]] = Field(description="`vq list --json` rows of this page.")
    total: int = Field(description="How many jobs matched the filters (all pages).")
    limit: int
    offset: int
    counts: dict[str, int] = Field(description="Every job's state, counted (not filtered).")
    quarantined: list[dict[str, Any]] = Field(description="Spec files that cannot be read.")


class JobDetail(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    state: str
    events: list[dict[str, Any]] = Field(description="The last 20 timeline events.")
    resource_usage: dict[str, Any] | None = Field(
        None, description="The terminal resource-usage receipt, when written."
    )


class KillResult(BaseModel):
    id: str
    previous_state: str
    state: str
    already_killed: bool
    signaled: bool
    resubmitted: str | None = Field(None, description="The new job's id when resubmitted.")


class PauseResult(BaseModel):
    id: str
    state: str
    changed: bool


class DrainResult(BaseModel):
    model_config = ConfigDict(extra="allow")

    mode: str


class CleanupResult(BaseModel):
    dry_run: bool
    jobs: list[dict[str, Any]]
