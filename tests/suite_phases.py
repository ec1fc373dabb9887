"""Which tests may run side by side under pytest-xdist, and which share the testbed.

Most tests run on a private temp state root with their own daemon, web server (a free
loopback port) and browser, so any number of them may run at once. The tests of
``tests/system``, every test that uses the ``testbed`` fixture and every test marked
``testbed`` (one that requests the fixture at run time) share one machine-wide testbed
instead (one Slurm queue, the netns links of vq-h1..vq-h3, one sshd per host): two of them
at once would see each other's jobs and partitions.

So every shared test is put in one ``xdist_group``: under ``-n N --dist loadgroup``
(``scripts/run-tests.sh``) they all run on one worker, one at a time and in collection
order, while the other workers take the hermetic tests. Without xdist the group is inert.

``--suite-phase`` keeps one side of whatever was collected (``all``, the default, keeps
both; ``hermetic`` needs no root and no testbed); the other side is reported as
deselected.
"""

from __future__ import annotations

from pathlib import Path

import pytest

PHASES = ("all", "hermetic", "testbed")

#: The xdist group of the tests on the shared testbed.
TESTBED_GROUP = "testbed"

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


# tryfirst: xdist's worker reads the ``xdist_group`` marks in its own hook of this name.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    phase = config.getoption("suite_phase")
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        shared = uses_shared_testbed(item)
        if shared:
            item.add_marker(pytest.mark.xdist_group(TESTBED_GROUP))
        if phase == "all" or shared == (phase == "testbed"):
            kept.append(item)
        else:
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
