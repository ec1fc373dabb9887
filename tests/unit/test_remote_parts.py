"""The pure parts of remote hosts: backoff, health files, argument routing, discovery."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from vq.cli.host_words import first_positional
from vq.errors import (
    Conflict,
    HostUnavailable,
    NotFound,
    SshUnreachable,
    UnsupportedSpecVersion,
)
from vq.hosts.health import (
    backoff_seconds,
    read_health,
    record_failure,
    record_ok,
)
from vq.remote.discovery import Discovery
from vq.remote.host import check_spec_versions, remote_error
from vq.transport.runner import RunResult


def test_backoff_doubles_from_two_seconds_up_to_five_minutes() -> None:
    assert [backoff_seconds(n) for n in range(11)] == [
        0,
        2,
        4,
        8,
        16,
        32,
        64,
        128,
        256,
        300,
        300,
    ]


def test_health_file_records_failures_then_recovery(tmp_path: Path) -> None:
    assert read_health(tmp_path, "h1").status == "unknown"
    record_failure(tmp_path, "h1", SshUnreachable("no route"))
    failed = record_failure(tmp_path, "h1", SshUnreachable("no route"))
    assert (failed.status, failed.consecutive_failures, failed.last_error) == (
        "unreachable",
        2,
        "no route",
    )
    assert failed.next_probe_at is not None
    due = datetime.fromisoformat(failed.next_probe_at)
    assert not failed.probe_due(due - timedelta(seconds=1)) and failed.probe_due(due)
    invalid = record_failure(tmp_path, "h1", "answered nonsense")
    assert invalid.status == "invalid"
    ok = record_ok(tmp_path, "h1", 12.34, vq_version="0.1.0")
    assert (ok.status, ok.consecutive_failures, ok.rtt_ms) == ("ok", 0, 12.3)
    again = read_health(tmp_path, "h1")
    assert again.last_ok_at is not None and again.vq_version == "0.1.0"
    assert again.probe_due(datetime.now(UTC))


def test_a_corrupt_health_file_reads_as_unknown(tmp_path: Path) -> None:
    (tmp_path / "hosts").mkdir()
    (tmp_path / "hosts" / "h1.json").write_text("{not json")
    assert read_health(tmp_path, "h1").status == "unknown"


@pytest.mark.parametrize(
    ("verb", "rest", "expected"),
    [
        ("status", ["h1", "abc"], 0),
        ("status", ["--json", "h1", "abc"], 1),
        ("logs", ["--tail", "5", "h1", "abc"], 2),
        ("wait", ["--timeout", "1m", "abc"], 2),
        ("kill", ["--group", "g"], None),
        ("submit", ["--cpus", "2", "h1", "--", "echo"], 2),
        ("submit", ["--clean-workdir", "src", "--", "x"], 1),
        ("submit", ["--", "h1"], None),
        ("nosuchverb", ["h1"], None),
    ],
)
def test_first_positional_skips_option_values(
    verb: str, rest: list[str], expected: int | None
) -> None:
    assert first_positional(verb, rest) == expected


def test_discovery_outcomes() -> None:
    job = "abcdef012345"
    assert Discovery(job, owners=["h2"]).owner() == "h2"
    with pytest.raises(Conflict, match="h1, h2"):
        Discovery(job, owners=["h1", "h2"]).owner()
    with pytest.raises(HostUnavailable, match=f"job {job} not found; h3 unavailable"):
        Discovery(job, unavailable={"h3": "down"}).owner()
    with pytest.raises(NotFound):
        Discovery(job).owner()
    # a match of a full id elsewhere is enough even while another host is unavailable
    assert Discovery(job, owners=["h1"], unavailable={"h3": "x"}).owner() == "h1"


def test_a_newer_remote_spec_version_is_refused() -> None:
    check_spec_versions("h1", {"jobs": [{"spec_version": 2}]})
    with pytest.raises(UnsupportedSpecVersion, match="host h1 answered with spec_version 99"):
        check_spec_versions("h1", {"jobs": [{"id": "x", "spec_version": 99}]})


def test_remote_error_keeps_the_remote_exit_code_and_words() -> None:
    said = b"vq: error: no job abc\nhint: check the id\n"
    error = remote_error("h1", RunResult(3, b"", said, where="vq-h1"))
    assert isinstance(error, NotFound)
    assert (error.message, error.hint) == ("on h1: no job abc", "check the id")
    other = remote_error("h1", RunResult(2, b"", b"boom\n", where="vq-h1"))
    assert other.exit_code == 11 and "boom" in other.message


def test_every_http_submit_field_can_be_delegated_to_a_remote_host() -> None:
    from vq.remote.submit import options_from_fields
    from vq.web.api.submit import API_FIELDS

    assert options_from_fields({"recover_on_reboot": True, "expected_sha": "abc1"}) == [
        "--auto-resume",
        "--expected-sha",
        "abc1",
    ]
    assert options_from_fields({"recover_on_reboot": False}) == []
    samples = {"int": 1, "str": "x", "bool": True, "str_list": ["a"], "int_list": [1]}
    for spec in API_FIELDS:
        if spec.name == "idempotency_key":
            continue  # forwarded once, on its own (delegate_submit's idempotency_key)
        value = samples.get(spec.kind, datetime(2030, 1, 1, tzinfo=UTC))
        assert options_from_fields({spec.name: value}), spec.name  # never "cannot delegate"


def test_a_keyed_answer_settles_only_the_same_host_and_key(tmp_path: Path) -> None:
    from vq.remote.outbox import Staged, resolve, stage, unresolved

    def request(host: str, key: str | None) -> dict[str, object]:
        return {"host": host, "argv": ["submit"], "idempotency_key": key}

    def ended(staged: Staged) -> Path:
        staged.release()  # its call ended without an answer: the entry is kept
        return staged.path

    earlier = ended(stage(tmp_path, "h1", request("h1", "k"), b"tar"))
    other_host = ended(stage(tmp_path, "h2", request("h2", "k"), None))
    unkeyed = ended(stage(tmp_path, "h1", request("h1", None), None))
    other_key = ended(stage(tmp_path, "h1", request("h1", "k2"), None))
    sibling = stage(tmp_path, "h1", request("h1", "k"), None)  # its call still runs
    answered = ended(stage(tmp_path, "h1", request("h1", "k"), None))
    assert {h: len(e) for h, e in unresolved(tmp_path).items()} == {"h1": 4, "h2": 1}
    settled = resolve(tmp_path, "h1", "k", keep=answered)
    assert [entry.path for entry in settled] == [earlier]
    assert not earlier.exists()
    assert all(p.exists() for p in (other_host, unkeyed, other_key, answered, sibling.path))
    assert resolve(tmp_path, "h1", "k", keep=answered) == []
    # once the sibling's call ended without an answer, the next keyed answer settles it
    sibling.release()
    assert [entry.path for entry in resolve(tmp_path, "h1", "k", keep=answered)] == [sibling.path]


def test_a_missing_vq_and_output_that_is_not_json_are_protocol_errors(tmp_path: Path) -> None:
    from vq.config.hosts import HostSettings
    from vq.errors import RemoteProtocolError
    from vq.protocol.remote_answers import ListAnswer
    from vq.remote.host import RemoteHost
    from vq.transport.local import LocalRunner

    def host_running(vq_command: list[str]) -> RemoteHost:
        host = RemoteHost("h1", HostSettings(ssh="h1", vq_command=vq_command), tmp_path)
        host._runner = LocalRunner()  # type: ignore[assignment]  # the host, run here
        return host

    with pytest.raises(RemoteProtocolError, match="was not found") as missing:
        # what a remote login shell does when vq_command names no program: status 127
        host_running(["sh", "-c", '/nonexistent/vq "$@"', "sh"]).run(["--version"])
    assert not missing.value.transient
    assert read_health(tmp_path, "h1").status == "invalid"
    with pytest.raises(RemoteProtocolError, match="not a valid vq answer"):
        host_running(["echo", "not json"]).run_json(["list", "--json"], ListAnswer)
    assert read_health(tmp_path, "h1").status == "invalid"


def test_a_short_id_names_one_job_fleet_wide_or_fails_closed() -> None:
    from vq.errors import AmbiguousId

    one = Discovery("abcd", owners=["h2"], matched={"h2": ["abcd12345678"]})
    assert one.owner() == "h2" and one.full_id("h2") == "abcd12345678"
    two_hosts = Discovery(
        "abcd", owners=["h1", "h2"], matched={"h1": ["abcd00000000"], "h2": ["abcd11111111"]}
    )
    with pytest.raises(AmbiguousId, match="abcd00000000 on h1, abcd11111111 on h2"):
        two_hosts.owner()
    one_host = Discovery("abcd", owners=["h1"], matched={"h1": ["abcd00000000", "abcd1"]})
    with pytest.raises(AmbiguousId):
        one_host.owner()
    # an unread listing could hold another match: a prefix is not guessed
    partial = Discovery(
        "abcd", owners=["h1"], matched={"h1": ["abcd00000000"]}, unavailable={"h3": "x"}
    )
    with pytest.raises(HostUnavailable, match="h3 could not be read"):
        partial.owner()
    full = Discovery(
        "abcd00000000", owners=["h1"], matched={"h1": ["abcd00000000"]}, unavailable={"h3": "x"}
    )
    assert full.owner() == "h1"


def test_a_row_on_an_unconfigured_scheduler_target_fails_closed(tmp_path: Path) -> None:
    from vq.remote.discovery import discover
    from vq.remote.fleet import Fleet

    job = "abcdef012345"

    def listing() -> dict[str, object]:
        return {"jobs": [{"id": job, "scheduler_target": "cluster"}, {"id": "abcdef999999"}]}

    fleet = Fleet({}, None, tmp_path)
    found = discover(fleet, job, listing, lanes={"cluster": "localhost"})
    assert found.owner() == "localhost" and found.full_id("localhost") == job
    for lanes in ({}, {"cluster": "h1"}):  # not configured, or driven by another authority
        with pytest.raises(Conflict, match="scheduler target 'cluster'"):
            discover(fleet, job, listing, lanes=lanes).owner()
    # a prefix is matched against the same rows: two ids here are ambiguous
    from vq.errors import AmbiguousId

    with pytest.raises(AmbiguousId, match="abcdef012345 on localhost, abcdef999999"):
        discover(fleet, "abcdef", listing, lanes={"cluster": "localhost"}).owner()
    assert discover(fleet, "ABCDEF9", listing).full_id("localhost") == "abcdef999999"
