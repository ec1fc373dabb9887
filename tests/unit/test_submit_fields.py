"""Every model that accepts submit fields agrees with their one declaration.

:data:`vq.protocol.submit_fields.SUBMIT_FIELDS` names each field once; the RPC params,
the profile presets, the web API's submit body and resubmit overrides, ``vq submit``'s
options and ``vq resubmit``'s options must carry exactly the declared fields with the
declared limits.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from vq.cli.control import resubmit
from vq.cli.submit import submit
from vq.cli.submit_options import PARAM_OPTION, SUBMIT_OPTIONS
from vq.config.settings import ProfileSettings
from vq.protocol.messages import SubmitParams
from vq.protocol.submit_fields import SUBMIT_FIELDS, SubmitField, field
from vq.web.api.models import ResubmitRequest
from vq.web.api.submit import JobRequest

#: SubmitParams fields that are not submit options (set by the CLI or the web itself).
NOT_OPTIONS = {
    "command",
    "source",
    "source_label",
    "not_before_requested",
    "environment",  # built from --export/--env (CLI-only options below)
    "submitter",  # stamped by the HTTP API
}
#: Fields of the web API's submit body that are not submit fields.
WEB_ONLY = {"command", "inputs", "host", "env"}
#: vq submit options that are no submit field of their own.
CLI_ONLY = ("--mem", "--source-tar", "--submitter", "--export", "--env", "--json")


def _limits(model: type[BaseModel], name: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in model.model_fields[name].metadata:
        for key in ("ge", "le", "min_length", "max_length", "pattern"):
            if getattr(item, key, None) is not None:
                found[key] = getattr(item, key)
    return found


def _declared(f: SubmitField) -> dict[str, Any]:
    pairs = {"ge": f.minimum, "le": f.maximum, "min_length": f.min_length}
    pairs["max_length"], pairs["pattern"] = f.max_length, f.pattern
    return {key: value for key, value in pairs.items() if value is not None}


@pytest.mark.parametrize(
    ("model", "selected"),
    [
        (SubmitParams, SUBMIT_FIELDS),
        (ProfileSettings, tuple(f for f in SUBMIT_FIELDS if f.profile)),
        (ResubmitRequest, tuple(f for f in SUBMIT_FIELDS if f.override)),
    ],
    ids=["rpc", "profile", "web-resubmit"],
)
def test_models_carry_the_declared_fields_and_limits(
    model: type[BaseModel], selected: tuple[SubmitField, ...]
) -> None:
    names = set(model.model_fields) - NOT_OPTIONS
    assert names == {f.name for f in selected}
    for f in selected:
        assert _limits(model, f.name) == _declared(f), f.name
        assert model.model_fields[f.name].description == f.help


def test_the_web_submit_body_takes_every_field_not_declared_off_http() -> None:
    names = set(JobRequest.model_fields) - WEB_ONLY
    missing = {f.name for f in SUBMIT_FIELDS} - names
    assert missing == {f.name for f in SUBMIT_FIELDS if f.not_over_http}, (
        "a declared submit field is missing from POST /api/v1/jobs without a reason"
    )
    assert names <= {f.name for f in SUBMIT_FIELDS}
    for f in SUBMIT_FIELDS:
        if f.name in names:
            assert _limits(JobRequest, f.name) == _declared(f), f.name
            assert JobRequest.model_fields[f.name].description == f.help
    # absent means "not given" (a profile fills it), except the key the API requires
    required = {name for name, info in JobRequest.model_fields.items() if info.is_required()}
    assert required == {"command", "idempotency_key"}


def test_a_field_off_http_says_why() -> None:
    for f in SUBMIT_FIELDS:
        assert f.not_over_http is None or f.not_over_http.strip(), f.name


def test_submit_options_are_the_declared_flags_in_order() -> None:
    flags = [o.flag for o in SUBMIT_OPTIONS if o.flag not in CLI_ONLY]
    assert flags == [f.flag for f in SUBMIT_FIELDS]
    click_flags = [p.opts[0] for p in submit.params if p.opts[0].startswith("--")]
    assert [flag for flag in click_flags if flag not in CLI_ONLY][: len(flags)] == flags
    assert set(PARAM_OPTION) == {f.name for f in SUBMIT_FIELDS if f.profile}


def test_resubmit_options_are_the_override_fields() -> None:
    flags = {p.opts[0] for p in resubmit.params if p.opts[0].startswith("--")}
    # --json shapes the answer and --uid names the job's owner (multi-user): neither
    # is a field of the clone.
    assert flags - {"--json", "--uid"} == {f.flag for f in SUBMIT_FIELDS if f.override}


def test_a_declared_limit_reaches_every_model() -> None:
    cpus = field("cpus")
    too_many = cpus.maximum + 1  # type: ignore[operator]
    for model in (SubmitParams, ProfileSettings, ResubmitRequest, JobRequest):
        data: dict[str, Any] = {"cpus": too_many}
        if model in (SubmitParams, JobRequest):
            data["command"] = ["true"]
        if model is JobRequest:
            data["idempotency_key"] = "k"
        with pytest.raises(ValueError, match="cpus"):
            model.model_validate(data)
