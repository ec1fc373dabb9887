"""Event records (§6.1): state names are written in lower case and read either way."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from vq.domain.events import make_event, transition_event
from vq.paths import StatePaths
from vq.store.events import append_event, read_events

NOW = datetime(2026, 5, 9, 19, 42, 1, tzinfo=UTC)
JOB = "1a2b3c4d5e6f"


def test_a_transition_record_carries_lower_case_state_names() -> None:
    record = transition_event(JOB, NOW, "RUNNING", "OOM_KILLED", reason="watchdog: rss")
    assert record == {
        "ts": NOW.isoformat(),
        "kind": "state_transition",
        "jobid": JOB,
        "from": "running",
        "to": "oom_killed",
        "reason": "watchdog: rss",
    }
    assert make_event("kill_requested", JOB, NOW, state="RUNNING")["state"] == "running"
    assert make_event("submitted", JOB, NOW, state=None) == {
        "ts": NOW.isoformat(),
        "kind": "submitted",
        "jobid": JOB,
    }


def test_old_upper_case_and_new_lower_case_lines_read_alike(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    events = paths.events(JOB)
    events.parent.mkdir(parents=True)
    old = {"ts": NOW.isoformat(), "kind": "state_transition", "jobid": JOB}
    events.write_text(json.dumps({**old, "from": "PENDING", "to": "RUNNING"}) + "\n")
    assert append_event(paths, transition_event(JOB, NOW, "RUNNING", "COMPLETED"))
    written = events.read_text().splitlines()[-1]
    assert '"from":"running","to":"completed"' in written
    moves = [(e["from"], e["to"]) for e in read_events(paths, JOB)]
    assert moves == [("pending", "running"), ("running", "completed")]
