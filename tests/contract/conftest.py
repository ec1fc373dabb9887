"""Fixtures of the contract suites: the SSH testbed for the Runner contract."""

from tests.testbed import ssh_runner_factory, testbed  # noqa: F401 - fixtures, re-exported
