"""Typed parameters of the RPC methods that change state, validated daemon-side.

These models are the one definition of what a submit may carry, shared by the RPC
server and the CLI's no-daemon path. Unknown fields are refused.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from vq.domain.durations import MAX_MOMENT, MIN_MOMENT
from vq.domain.names import name_problem
from vq.domain.text import refuse_surrogates
from vq.domain.validation_words import Vocabulary, first_problem
from vq.errors import InvalidInput

from .submit_fields import constraints

__all__ = ["SubmitParams", "parse_params"]

M = TypeVar("M", bound=BaseModel)

_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,63}$")


class SubmitParams(BaseModel):
    """One submission. ``source`` is an absolute path resolved by the caller."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] = Field(min_length=1)
    source: str | None = None
    #: What the job records as ``workspace_source`` instead of the ``source`` path, for
    #: sources that are private staging files (the HTTP API's inline files and uploads).
    source_label: str | None = Field(default=None, min_length=1, max_length=256)
    # The submit fields (vq.protocol.submit_fields): defaults, limits and help from there.
    cwd: str | None = Field(**constraints("cwd"))
    cpus: int = Field(**constraints("cpus"))
    mem_mb: int | None = Field(**constraints("mem_mb"))
    wall_time_seconds: int | None = Field(**constraints("wall_time_seconds"))
    priority: int = Field(**constraints("priority"))
    not_before: datetime | None = Field(**constraints("not_before"))
    #: The ``--not-before`` text as the user gave it when it was a delay (``1h``): the
    #: idempotency intent (§4.8) holds this rather than the time it resolved to.
    not_before_requested: str | None = Field(default=None, min_length=1, max_length=64)
    job_name: str | None = Field(**constraints("job_name"))
    tags: list[str] = Field(**constraints("tags"))
    retry_max: int = Field(**constraints("retry_max"))
    retry_backoff_seconds: int | None = Field(**constraints("retry_backoff_seconds"))
    depends_on: list[str] = Field(**constraints("depends_on"))
    depends_on_any: list[str] = Field(**constraints("depends_on_any"))
    rerun_until_file_exists: str | None = Field(**constraints("rerun_until_file_exists"))
    rerun_max: int | None = Field(**constraints("rerun_max"))
    clean_workdir_on_terminal: bool = Field(**constraints("clean_workdir_on_terminal"))
    #: ``--auto-resume``: ``JobSpec.recover_on_reboot`` (§4.7)
    recover_on_reboot: bool = Field(**constraints("recover_on_reboot"))
    idempotency_key: str | None = Field(**constraints("idempotency_key"))
    #: array element indices (``--array 0-99``); each becomes its own job
    array: list[int] | None = Field(**constraints("array"))
    #: one parameter line per element (``--array-from FILE``), exported as VQ_ARRAY_VALUE
    array_values: list[str] | None = Field(**constraints("array_values"))
    max_parallel: int | None = Field(**constraints("max_parallel"))
    #: ``--chain N``: N sequential segments, each after the previous one's success
    chain: int | None = Field(**constraints("chain"))
    #: ``--profile NAME``: presets from ``[profile.NAME]``; explicit fields win
    profile: str | None = Field(**constraints("profile"))
    #: ``--program NAME``: a ``[programs.NAME]`` entry, checked at submit and dispatch
    program: str | None = Field(**constraints("program"))
    #: ``--expected-sha SHA``: an explicit git pin for a venv ``program`` (§3.4), beside
    #: the configured ones; enforced at submit and again before dispatch
    expected_sha: str | None = Field(**constraints("expected_sha"))
    #: the captured environment (``vq.domain.environment``): stored in the workspace as
    #: ``_vq/environment``, never in the spec; excluded from reprs and idempotency intents
    environment: dict[str, Any] | None = Field(default=None, repr=False)
    #: who submitted: the HTTP API records its principal (an agent token's or an
    #: account's name); not part of the idempotency intent
    submitter: str | None = Field(default=None, min_length=1, max_length=128)

    #: ``vq submit LANE``: the scheduler lane (``[hosts.LANE]`` with ``scheduler_dialect``)
    #: this queue's daemon submits the job to (§2.2)
    runtime_root: str | None = Field(**constraints("runtime_root"))
    runtime_artifact: str | None = Field(**constraints("runtime_artifact"))
    scheduler_target: str | None = Field(**constraints("scheduler_target"))
    #: ``--pack NAME``: the array's elements share allocations of ``[packing.NAME]``
    scheduler_pack: str | None = Field(**constraints("scheduler_pack"))

    @field_validator("environment")
    @classmethod
    def _environment(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        from vq.domain.environment import BadEnvironment, CapturedEnvironment

        try:
            return CapturedEnvironment.from_json(value).to_json()
        except BadEnvironment as exc:
            raise ValueError(str(exc)) from None

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        if not value[0]:
            raise ValueError("the command's program name is empty")
        if any("\x00" in part for part in value):
            raise ValueError("the command contains a NUL byte")
        return value

    @field_validator("job_name")
    @classmethod
    def _job_name(cls, value: str | None) -> str | None:
        problem = None if value is None else name_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="before")
    @classmethod
    def _text_is_unicode(cls, data: object) -> object:
        refuse_surrogates(data)
        return data

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        for tag in value:
            if not _TAG.match(tag):
                raise ValueError(f"tag {tag!r} must be 1-64 of letters, digits and ._:+-")
        return list(dict.fromkeys(value))

    @field_validator("rerun_until_file_exists")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith("/") or ".." in value.split("/")):
            raise ValueError("must be a path relative to the job's directory, without '..'")
        return value

    @model_validator(mode="after")
    def _combinations(self) -> SubmitParams:
        groups = [self.array is not None, self.array_values is not None, self.chain is not None]
        if sum(groups) > 1:
            raise ValueError("--array, --array-from and --chain cannot be combined")
        if self.max_parallel is not None and self.array is None and self.array_values is None:
            raise ValueError("--max-parallel applies to arrays only")
        if self.idempotency_key is not None and any(groups):
            raise ValueError("arrays and chains do not accept an idempotency key yet")
        if self.array is not None and len(set(self.array)) != len(self.array):
            raise ValueError("array indices repeat")
        if self.rerun_max is not None and self.rerun_until_file_exists is None:
            raise ValueError("--rerun-max needs --rerun-until-file-exists")
        if self.expected_sha is not None and self.program is None:
            raise ValueError("--expected-sha needs --program (a venv program)")
        if (self.runtime_root is None) != (self.runtime_artifact is None):
            raise ValueError("--runtime-root and --runtime-artifact go together")
        if self.runtime_root is not None and any(groups):
            raise ValueError("arrays and chains cannot be bound to a runtime generation yet")
        return self

    @field_validator("source", "cwd")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("must be an absolute path")
        return value

    @field_validator("not_before")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        if value is not None and not MIN_MOMENT <= value < MAX_MOMENT:
            raise ValueError("must be between 1970-01-01 and 8999-12-31")
        return value


_PARAMETER_WORDS = Vocabulary(unknown="unknown parameter", mapping="an object", sequence="an array")


def parse_params(model: type[M], params: object, *, hint: str = "see `vq submit --help`") -> M:
    """Validate ``params`` into ``model`` or raise InvalidInput naming the field.

    The message is the first problem found, in vq's words (``field: what is wrong``),
    without pydantic's wording (``Value error, ...``) or a link to its documentation.
    """
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        where, message = first_problem(exc, "params", _PARAMETER_WORDS)
        raise InvalidInput(f"{where}: {message}", hint=hint) from None
