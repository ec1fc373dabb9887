"""``POST /api/v1/jobs``: submit one job over HTTP (§10.2), idempotently (§4.8).

Body (JSON; unknown fields are refused with 422 naming them): ``command`` (argv list,
required), the submit fields under their JobSpec names — every field of
:data:`vq.protocol.submit_fields.SUBMIT_FIELDS` but those declared ``not_over_http``
(today ``cpus``, ``mem_mb``, ``wall_time_seconds``, ``priority``, ``not_before``,
``job_name``, ``tags``, ``depends_on`` (= ``vq submit --after``), ``depends_on_any``
(= ``--after-any``), ``retry_max``, ``retry_backoff_seconds``,
``rerun_until_file_exists``, ``rerun_max``, ``clean_workdir_on_terminal``,
``recover_on_reboot`` (= ``--auto-resume``), ``profile``, ``program``, ``expected_sha``),
with their declared limits and help — the required ``idempotency_key``,
and optional ``host``, ``env`` and ``inputs``: ``{"files": {relpath: base64}}`` or
``{"upload_token": "..."}``.

Answers the ``vq submit --json`` object (the spec, ``capacity_warnings``, and
``idempotent_replay: true`` on a repeat): 201 for a new job, 200 when the key and the
canonical intent match an earlier submit (same id), 409 when the key was used for a
different intent. A body declared as anything but JSON (a form, ``text/plain``) is
refused with 415 (no Content-Type at all is read as JSON). The body may be at most
``inline_max_bytes`` × 4/3 + 64 KiB (413 otherwise; the route reads it itself, capped,
before parsing). Scoped tokens are held to their profiles/programs (403) and their daily
quota (429 with ``Retry-After``); a repeat of an existing key is not charged, and
concurrent first submits of one key are charged once (the usage file records the
charged key hashes). Inline files count against the token's daily upload byte quota
(``--max-upload-bytes-per-day``) as an upload does: charged before anything is written,
given back when the submit is refused.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from starlette.concurrency import run_in_threadpool

from vq.config.settings import Settings
from vq.domain.environment import BadEnvironment, CapturedEnvironment
from vq.domain.text import refuse_surrogates
from vq.errors import ProtocolError
from vq.protocol.submit_fields import SUBMIT_FIELDS, constraints
from vq.services.idempotency import key_hash
from vq.web.auth.principal import Principal
from vq.web.auth.quota import (
    charge_submission,
    charge_upload,
    check_submit_allowed,
    check_within_profile,
    refund_submission,
    refund_upload,
)
from vq.web.context import WebConfig
from vq.web.deps import need, web_config
from vq.web.errors import ApiError
from vq.web.submission import (
    Submission,
    claim_exists,
    load_web_settings,
    refuse_root_submit,
    resolve_target,
    submit_request,
    to_params,
)
from vq.web.uploads_store import UploadStore

__all__ = ["API_FIELDS", "KEY_REQUIRED", "Inputs", "JobRequest", "body_cap", "router"]

router = APIRouter(tags=["submit"])


class Inputs(BaseModel):
    """The job's workspace content: inline files or one earlier upload (not both)."""

    model_config = ConfigDict(extra="forbid")

    files: dict[str, str] | None = Field(
        default=None, description="relative path → file content, base64 (standard, padded)"
    )
    upload_token: str | None = Field(default=None, description="from POST /api/v1/uploads")

    @model_validator(mode="after")
    def _one(self) -> Inputs:
        if self.files is not None and self.upload_token is not None:
            raise ValueError("give inputs.files or inputs.upload_token, not both")
        return self


#: Python types of the submit fields' value kinds (all optional: absent means "not
#: given", so a profile fills the field exactly as for ``vq submit --profile``).
_KIND_TYPES: dict[str, Any] = {
    "int": int | None,
    "str": str | None,
    "bool": bool | None,
    "str_list": list[str] | None,
    "int_list": list[int] | None,
    "datetime": datetime | None,
}

#: The submit fields this body takes: every declared one unless it says why not.
API_FIELDS = tuple(f for f in SUBMIT_FIELDS if f.not_over_http is None)


def _submit_fields_model() -> type[BaseModel]:
    """A model of :data:`API_FIELDS`, each optional with its declared limits and help."""
    fields: dict[str, Any] = {
        f.name: (_KIND_TYPES[f.kind], Field(**constraints(f.name, optional=True)))
        for f in API_FIELDS
    }
    return create_model("SubmitFields", __config__=ConfigDict(extra="forbid"), **fields)


if TYPE_CHECKING:
    _SubmitFields = BaseModel
else:
    _SubmitFields = _submit_fields_model()


class JobRequest(_SubmitFields):
    """A submit: the command, the submit fields of :data:`API_FIELDS` (derived from
    their one declaration, :mod:`vq.protocol.submit_fields`), the idempotency key and
    the inputs. Limits are checked here and again by ``SubmitParams``, exactly as for
    ``vq submit``."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _unicode(cls, data: Any) -> Any:
        refuse_surrogates(data)  # inputs too: file names and contents are text
        return data

    command: list[str] = Field(min_length=1, description="argv, e.g. ['bash', 'run.sh']")
    idempotency_key: str = Field(**constraints("idempotency_key", required=True))
    inputs: Inputs | None = None
    host: str | None = Field(
        default=None,
        description="where the job runs, as `vq submit HOST` names it: a configured remote "
        "daemon host ([hosts.NAME]: delegated there over SSH), a scheduler lane ([hosts.NAME] "
        "with scheduler_dialect: submitted through it by the queue that drives it), or "
        "localhost",
    )

    env: dict[str, str] | None = Field(
        default=None,
        description=(
            "variables added to the daemon's environment for this job, like "
            "`vq submit --export NONE --env NAME=value`; names are checked (VQ_* is "
            "reserved), values are stored privately and never echoed"
        ),
    )

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None:
            captured = {"base": "daemon", "variables": value}
            try:
                CapturedEnvironment.from_json(captured)
            except BadEnvironment as exc:
                raise ValueError(str(exc)) from None
        return value

    def submit_fields(self) -> dict[str, Any]:
        """The submit fields the caller gave (so a profile fills only the others)."""
        given = self.model_fields_set - {"idempotency_key", "inputs", "host", "env"}
        fields = {name: getattr(self, name) for name in given}
        if self.env:
            fields["environment"] = {"base": "daemon", "variables": dict(self.env)}
        return fields


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its local ``$defs`` inlined (for the hand-declared request body)."""
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(defs[ref.rsplit("/", 1)[-1]])
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(value) for value in node]
        return node

    result: dict[str, Any] = resolve(schema)
    return result


_BODY_DOC = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": _inline_refs(JobRequest.model_json_schema())}},
    }
}


def body_cap(inline_max_bytes: int) -> int:
    """The largest accepted body: the inline cap as base64 (4/3) plus 64 KiB of fields."""
    return inline_max_bytes * 4 // 3 + 4 + 64 * 1024


def _check_media_type(request: Request) -> None:
    """415 unless the body is declared JSON (``application/json`` or ``*/*+json``) or not
    declared at all: a form or ``text/plain`` post is refused, so a page elsewhere cannot
    make a browser submit a job with a "simple" cross-site request."""
    declared = request.headers.get("content-type")
    if declared is None:
        return
    media = declared.split(";", 1)[0].strip().lower()
    if media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    ):
        return
    raise ApiError(
        415,
        "unsupported-media-type",
        "send the job as a JSON object with Content-Type: application/json",
        hint="curl -H 'Content-Type: application/json' -d @job.json ...",
    )


async def _read_capped(request: Request, cap: int, inline_max: int) -> bytes:
    refusal = ApiError(
        413,
        "too-large",
        f"the request body exceeds {cap} bytes (inline files are capped at {inline_max} "
        "bytes by web.inline_max_bytes)",
        hint="upload a tar.gz with POST /api/v1/uploads and submit with inputs.upload_token",
    )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise refusal
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > cap:
            raise refusal
    return bytes(body)


#: What a submit without its key is told (the 422's message: ``body.idempotency_key: …``).
KEY_REQUIRED = (
    'is required: every submit names a key of your choosing (e.g. "water-sto3g-1"); '
    "a repeat with the same key and fields returns the same job instead of a second one"
)


def _in_vq_words(error: Any) -> Any:
    """One validation problem of the body, located under ``body``; a missing
    ``idempotency_key`` says what the key is for (:data:`KEY_REQUIRED`)."""
    if error.get("type") == "missing" and tuple(error["loc"]) == ("idempotency_key",):
        error = {**error, "type": "value_error", "ctx": {"error": KEY_REQUIRED}}
    return {**error, "loc": ("body", *error["loc"])}


def _parse(raw: bytes) -> JobRequest:
    try:
        return JobRequest.model_validate_json(raw)
    except ValidationError as exc:
        raise RequestValidationError([_in_vq_words(err) for err in exc.errors()]) from None


def _inline_bytes(inputs: Inputs) -> int:
    """The decoded size of the inline files (base64: 3 bytes per 4 characters)."""
    return sum(len(text) * 3 // 4 for text in (inputs.files or {}).values())


def _submit(
    config: WebConfig, settings: Settings, principal: Principal, body: JobRequest
) -> JSONResponse:
    target = resolve_target(settings, body.host)
    refuse_root_submit(config, target.remote)  # before any charge, staging or write
    fields = body.submit_fields()
    if target.lane is not None:  # `vq submit LANE`: run through that scheduler lane
        fields["scheduler_target"] = target.lane
    if principal.kind != "anonymous":  # the token's or the account's name, kept when delegated
        fields["submitter"] = principal.name
    key = body.idempotency_key
    params = to_params(fields, key)  # 422 before any side effect
    program = params.program
    if program is None and params.profile in settings.profile:
        program = settings.profile[params.profile].program
    check_submit_allowed(principal, params.profile, program)
    profile = settings.profile.get(params.profile) if params.profile else None
    check_within_profile(principal, fields, profile.model_dump() if profile else None)
    inputs = body.inputs or Inputs()
    if inputs.upload_token is not None:
        store = UploadStore(config.state.uploads_dir, settings.web.upload_ttl_seconds)
        store.peek(inputs.upload_token, key_hash(key))
    charged = False
    inline = 0
    if not claim_exists(config, key):  # charged once per key, even when first submits race
        inline = _inline_bytes(inputs)  # inline files are uploads: the byte quota counts them
        if inline:
            charge_upload(config.config_root, principal, datetime.now(UTC), inline)
        try:
            charged = charge_submission(
                config.config_root, principal, datetime.now(UTC), key_hash=key_hash(key)
            )
        except Exception:
            refund_upload(config.config_root, principal, datetime.now(UTC), inline)
            raise
    try:
        payload = submit_request(
            config,
            settings,
            Submission(
                fields,
                key,
                files=inputs.files,
                upload_token=inputs.upload_token,
                host=target.remote,
            ),
        )
    except ProtocolError:
        raise  # the daemon may have written the job: the charge stands
    except Exception:
        if charged:  # refused before any job existed: only jobs that exist count
            refund_submission(
                config.config_root, principal, datetime.now(UTC), key_hash=key_hash(key)
            )
        refund_upload(config.config_root, principal, datetime.now(UTC), inline)
        raise
    status = 200 if payload.get("idempotent_replay") else 201
    return JSONResponse(payload, status_code=status)


@router.post(
    "/jobs",
    status_code=201,
    summary="Submit a job",
    openapi_extra=_BODY_DOC,
    responses={200: {"description": "an idempotent repeat: the earlier job"}},
)
async def submit_job(
    request: Request,
    principal: Principal = Depends(need("submit")),  # noqa: B008 - FastAPI dependency
) -> JSONResponse:
    _check_media_type(request)
    config = web_config(request)
    settings = await run_in_threadpool(load_web_settings, config)
    inline_max = settings.web.inline_max_bytes
    body = _parse(await _read_capped(request, body_cap(inline_max), inline_max))
    return await run_in_threadpool(_submit, config, settings, principal, body)
