"""``vq queue --all``'s table: ``vq queue``'s escaping and its ELAPSED and EXIT columns.

The fleet form over real remote hosts is exercised in tests/system/test_remote_protocol.py;
this queue's own rows take the same path (:func:`vq.cli.remote_fleet.run_fleet`).
"""

from __future__ import annotations

from tests.conftest import Vq


def test_the_fleet_table_escapes_like_vq_queue_and_shows_elapsed_and_exit(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--job-name", "esc", "--", "sh", "-c", "echo '\x1b[31mred\nline'; exit 3")
    vq.wait_state(job, "FAILED")
    every = vq.run("queue", "--all").stdout
    lines = every.splitlines()
    assert lines[0].split() == ["HOST", "ID", "STATE", "NAME", "ELAPSED", "EXIT", "COMMAND"]
    row = next(line for line in lines if job in line)
    assert "\x1b" not in every and "\\x1b[31mred\\x0aline" in row  # one line, escaped
    assert row == next(line for line in every.splitlines() if line.startswith("localhost"))
    cells = row.split()
    assert cells[:4] == ["localhost", job, "FAILED", "esc"]
    assert cells[4].endswith("s") and cells[5] == "3"  # ELAPSED, EXIT
    listed = vq.run("queue").stdout
    own = next(line for line in listed.splitlines() if job in line)
    assert own.endswith(row[row.index("sh -c") :])  # the same escaped command as vq queue
