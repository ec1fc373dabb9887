"""One HTTP submit, exactly as ``vq submit`` does it (§10.2, §4.8).

:func:`submit_request` turns a validated request into
:class:`~vq.protocol.messages.SubmitParams` — only the fields the caller gave, so a
``profile`` fills the rest exactly as it does for ``vq submit --profile`` — with the
inputs as SOURCE: a private staging directory for inline files (a directory source, as
``vq submit DIR``) or the claimed upload archive (as ``vq submit inputs.tar.gz``). It then
submits through the daemon's ``submit`` RPC when a daemon answers, else through the same
service in-process, and returns the ``vq submit --json`` payload. The idempotency intent
digest covers the inputs' *content*, so the same key, fields and files from the CLI or
from HTTP name the same job.

In multi-user mode root's console serves the whole system root, and a local submit is
refused there exactly as root's ``vq submit`` is (:func:`refuse_root_submit`: 403,
``permission-denied``), before anything is charged, staged or written.

More than ``upload_max_members`` inline files is a 413 (each one becomes a file on
disk, however small). Errors leave with server paths replaced (staging and uploads
become ``inputs``; the state and config roots become placeholders). The staging
directory is always removed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from vq.config.host_names import LOCAL_NAMES, is_local_name
from vq.config.settings import Settings, load_settings
from vq.domain.archive_rules import Member, MemberKind, check_members
from vq.errors import UnsafeArchive, VqError
from vq.gateway import Gateway
from vq.gateway.fallback import root_does_not_submit
from vq.paths import MultiUserLayout
from vq.protocol.answers import SubmitAnswer
from vq.protocol.messages import SubmitParams
from vq.services.idempotency import key_hash
from vq.web.context import WebConfig
from vq.web.errors import ApiError
from vq.web.uploads_store import UploadStore, decode_inline

if TYPE_CHECKING:
    from vq.remote.submit import RemoteSubmitAnswer

__all__ = [
    "Submission",
    "Target",
    "claim_exists",
    "load_web_settings",
    "refuse_root_submit",
    "resolve_target",
    "scrubbed",
    "submit_request",
    "to_params",
]


@dataclass(frozen=True)
class Submission:
    """What the route hands over: the submit fields (as given) and the inputs."""

    fields: dict[str, Any]
    idempotency_key: str
    files: dict[str, str] | None = None
    upload_token: str | None = None
    host: str | None = None  # a configured remote daemon host: delegated over SSH


@dataclass(frozen=True)
class Target:
    """Where a submit naming ``host`` goes: ``remote``, the configured vq daemon host it is
    delegated to over SSH (None: this queue), and ``lane``, the scheduler lane the job runs
    through (its ``scheduler_target``; None: no lane)."""

    remote: str | None
    lane: str | None


def resolve_target(settings: Settings, host: str | None) -> Target:
    """The :class:`Target` of the body's ``host``, exactly as ``vq submit HOST`` routes it.

    No host or ``localhost``/``local``: this queue. A scheduler lane (``[hosts.NAME]``
    with ``scheduler_dialect``): this queue with ``scheduler_target`` = the lane when its
    ``scheduler_driver`` is this queue, else delegated to the driver host with the lane as
    its ``scheduler_target`` (the driver drives the lane). Any other name is a remote
    daemon host (an unconfigured one is refused when the submit is delegated: 404).
    """
    if host is None or host in LOCAL_NAMES:
        return Target(None, None)
    configured = settings.hosts.get(host)
    if configured is None or configured.scheduler_dialect is None:
        return Target(host, None)
    driver = configured.scheduler_driver
    return Target(None if is_local_name(driver) else driver, host)


def load_web_settings(config: WebConfig) -> Settings:
    """The layered settings as this web process's config root resolves them (a broken
    config file is a ConfigError naming ``<config-root>``, never the server path)."""
    with scrubbed(config):
        return load_settings({**os.environ, "VQ_CONFIG_DIR": str(config.config_root)})


#: ``workspace_source`` of jobs whose inputs came over HTTP (never the staging path).
INLINE_LABEL = "api: inline files"
UPLOAD_LABEL = "api: upload"


def to_params(
    fields: dict[str, Any], key: str, source: str | None = None, label: str | None = None
) -> SubmitParams:
    """Validate into SubmitParams; a refusal is a 422 naming ``body.<field>``.

    ``source`` is the private staging path the job's workspace is filled from; ``label``
    is what the job records as its ``workspace_source`` instead (no path, no token).
    """
    from fastapi.exceptions import RequestValidationError

    data = {**fields, "idempotency_key": key}
    if source is not None:
        data["source"] = source
        data["source_label"] = label
    try:
        return SubmitParams.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**err, "loc": ("body", *err["loc"])} for err in exc.errors()]
        ) from None


def refuse_root_submit(config: WebConfig, host: str | None) -> None:
    """Multi-user mode: a console serving the whole system root (root's) submits no local
    job, as root's ``vq submit`` does not (PermissionDenied: 403). A submit delegated to a
    remote host is that host's to judge."""
    if isinstance(config.state, MultiUserLayout) and (host is None or host in LOCAL_NAMES):
        raise root_does_not_submit()


def claim_exists(config: WebConfig, key: str) -> bool:
    """Whether ``key`` already names a job (a replay or a conflict, never a new job)."""
    return config.state.idempotency_claim(key_hash(key)).exists()


def _check_names(files: dict[str, str]) -> None:
    try:
        check_members(Member(name, MemberKind.FILE) for name in files)
    except UnsafeArchive as exc:
        raise ApiError(400, "unsafe-path", f"inputs.files: {exc.message}", hint=exc.hint) from None


def _bad_base64(names: list[str]) -> None:
    from fastapi.exceptions import RequestValidationError

    raise RequestValidationError(
        [
            {
                "loc": ("body", "inputs", "files", name),
                "msg": "not valid base64 (standard alphabet, padded)",
                "type": "value_error",
            }
            for name in names
        ]
    )


@contextmanager
def scrubbed(config: WebConfig, *inputs: Path) -> Iterator[None]:
    """Re-raise a VqError with server paths replaced (``inputs`` become "inputs")."""
    try:
        yield
    except VqError as exc:
        replacements = [(str(p), "inputs") for p in inputs]
        replacements += [
            (str(config.state.uploads_dir), "<uploads>"),
            (str(config.state.root), "<state-root>"),
            (str(config.config_root), "<config-root>"),
        ]
        for attr in ("message", "hint"):
            text = getattr(exc, attr)
            if text:
                for old, new in replacements:
                    text = text.replace(old, new)
                setattr(exc, attr, text)
        exc.args = (exc.message,)
        raise


def _submit(
    config: WebConfig, params: SubmitParams, request: Submission | None = None
) -> SubmitAnswer | RemoteSubmitAnswer:
    if request is not None and request.host is not None and request.host not in LOCAL_NAMES:
        return _submit_remote(config, params, request)
    gateway = Gateway(config.state, {**os.environ, "VQ_CONFIG_DIR": str(config.config_root)})
    return gateway.submit(params.model_dump(mode="json", exclude_unset=True))


def _submit_remote(
    config: WebConfig, params: SubmitParams, request: Submission
) -> RemoteSubmitAnswer:
    """Delegate to ``request.host`` exactly as ``vq submit HOST`` does (vq.remote.submit)."""
    from vq.remote.fleet import load_fleet
    from vq.remote.submit import delegate_submit, options_from_fields

    fleet = load_fleet({**os.environ, "VQ_CONFIG_DIR": str(config.config_root)})
    host = fleet.host(str(request.host))
    options = [*options_from_fields(request.fields), "--idempotency-key", request.idempotency_key]
    source = Path(params.source) if params.source else None
    command = list(request.fields.get("command") or params.command)
    return delegate_submit(host, options, command, source, idempotency_key=request.idempotency_key)


def submit_request(
    config: WebConfig, settings: Settings, request: Submission
) -> SubmitAnswer | RemoteSubmitAnswer:
    """Stage the inputs, submit, clean up; the ``vq submit --json`` payload."""
    store = UploadStore(config.state.uploads_dir, settings.web.upload_ttl_seconds)
    key = request.idempotency_key
    if request.files:
        if len(request.files) > settings.web.upload_max_members:
            cap = settings.web.upload_max_members
            raise ApiError(
                413,
                "too-large",
                f"inputs.files has more than {cap} entries (web.upload_max_members)",
                hint="upload a tar.gz with POST /api/v1/uploads, or pack the files into fewer",
            )
        _check_names(request.files)
        decoded, bad = decode_inline(request.files, settings.web.inline_max_bytes)
        if bad:
            _bad_base64(bad)
        to_params(request.fields, key)  # refuse bad fields before writing anything
        staging = store.stage_inline(decoded)
        try:
            with scrubbed(config, staging):
                params = to_params(request.fields, key, str(staging), INLINE_LABEL)
                return _submit(config, params, request)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    if request.upload_token is not None:
        to_params(request.fields, key)
        archive = store.claim(request.upload_token, key_hash(key))
        with scrubbed(config, archive):
            return _submit(
                config, to_params(request.fields, key, str(archive), UPLOAD_LABEL), request
            )
    with scrubbed(config):
        return _submit(config, to_params(request.fields, key), request)
