"""The suite's two phases: hermetic tests (side by side) and tests on the shared testbed.

Most tests run on a private temp state root with their own daemon (a process, or a thread
of the test process in ``tests/inprocess``), web server (a free loopback port, or the app
in-process) and browser, so any number of them may run at once under pytest-xdist. The
tests of ``tests/system``, every test that uses the ``testbed`` fixture and every test
marked ``testbed`` (one that requests the fixture at run time) share one machine-wide
testbed instead (one Slurm queue, the netns links of vq-h1..vq-h3, one sshd per host): two
of them at once would see each other's jobs and partitions, so they run one at a time.

``--suite-phase`` keeps one phase of whatever was collected (``all``, the default, keeps
both; ``hermetic`` needs no root and no testbed); the other phase is reported as
deselected. ``scripts/run-tests.sh`` runs ``hermetic`` under ``-n`` and ``testbed`` in a
single process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

PHASES = ("all", "hermetic", "testbed")

#: Tests under this directory share the testbed whether or not they name its fixture.
SHARED_DIR = Path(__file__).resolve().parent / "system"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--suite-phase",
        choices=PHASES,
        default="all",
        help="run only the hermetic tests or only those on the shared testbed; default: all",
    )


def uses_shared_testbed(item: pytest.Item) -> bool:
    """Whether ``item`` touches the machine-wide testbed (so it must not run beside another)."""
    return (
        item.path.is_relative_to(SHARED_DIR)
        or "testbed" in getattr(item, "fixturenames", ())
        or item.get_closest_marker("testbed") is not None
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    phase = config.getoption("suite_phase")
    if phase == "all":
        return
    want_shared = phase == "testbed"
    kept = [item for item in items if uses_shared_testbed(item) == want_shared]
    dropped = [item for item in items if uses_shared_testbed(item) != want_shared]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
