"""Browser fixtures for the console's system tests: Debian's Chromium through Playwright.

The browser is ``/usr/bin/chromium`` (installed by ``scripts/install-test-deps.sh``;
Playwright's own browser downloads are never used). When it is missing or cannot start,
the tests are skipped on a developer machine and FAIL under ``CI=true``.

``console`` is a fresh browser context (1280×900) on the ``web`` fixture's server whose
page records console errors and uncaught exceptions in ``console.errors`` (a CSP
violation shows up there), with helpers to sign in and take full-page screenshots into
``build/screenshots/``; :func:`open_console` makes one on any other server (a fleet
console the test starts itself). ``fleet`` is the testbed's namespace hosts with their
daemons for one module (``fresh_fleet_config`` writes its config afresh for a test).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    ViewportSize,
    sync_playwright,
)
from playwright.sync_api import Error as PlaywrightError

from tests.system.remote_fleet import RemoteFleet, remote_fleet_of
from tests.system.slurm_lane import fresh_remote_dir
from tests.testbed import SshTestbed, ssh_runner_factory, testbed  # noqa: F401 - fixtures, re-exported
from tests.web.conftest import Web, web  # noqa: F401 - the fixture, re-exported here

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"
DESKTOP: ViewportSize = {"width": 1280, "height": 900}
PHONE: ViewportSize = {"width": 390, "height": 844}


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the browser tests need Chromium: {reason}")
    pytest.skip(f"Chromium unavailable: {reason}")


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """One Chromium per test module.

    Module scope, not session scope: Playwright's sync API keeps an asyncio loop running
    in this thread while it is open, which would break ``asyncio.run`` in later tests.
    """
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"{CHROMIUM} is not installed (scripts/install-test-deps.sh)")
    args = ["--disable-dev-shm-usage", "--disable-gpu"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")
    with sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=args, timeout=60_000
            )
        except PlaywrightError as exc:
            _unavailable(f"{CHROMIUM} did not start: {exc.message.splitlines()[0]}")
        yield browser
        browser.close()


@dataclass
class Console:
    web: Web
    context: BrowserContext
    page: Page
    errors: list[str] = field(default_factory=list)

    def url(self, path: str) -> str:
        return self.web.base_url + path

    def goto(self, path: str) -> None:
        self.page.goto(self.url(path), wait_until="load")

    def sign_in(self, username: str, password: str, then: str = "/") -> None:
        self.goto(f"/login?next={then}")
        form = self.page.locator("form:has(input[name=username])")
        form.locator("input[name=username]").fill(username)
        form.locator("input[name=password]").fill(password)
        form.locator("button[type=submit]").click()
        self.page.wait_for_url(self.url(then))

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@contextlib.contextmanager
def open_console(chromium: Browser, served: Web) -> Iterator[Console]:
    """A fresh desktop browser context on ``served``'s server (closed on exit), whose page
    records console errors and uncaught exceptions in ``Console.errors``."""
    context = chromium.new_context(viewport=DESKTOP)
    context.set_default_timeout(20_000)
    page = context.new_page()
    session = Console(served, context, page)

    def console_message(msg: ConsoleMessage) -> None:
        if msg.type == "error":
            session.errors.append(msg.text)

    def page_error(exc: PlaywrightError) -> None:
        session.errors.append(str(exc))

    page.on("console", console_message)
    page.on("pageerror", page_error)
    try:
        yield session
    finally:
        context.close()


@pytest.fixture
def console(chromium: Browser, web: Web) -> Iterator[Console]:  # noqa: F811 - the fixture
    with open_console(chromium, web) as session:
        yield session


@pytest.fixture(scope="module")
def fleet(testbed: SshTestbed) -> Iterator[RemoteFleet]:  # noqa: F811 - the fixture
    """The testbed's namespace hosts, each with its own daemon started over SSH
    (:func:`tests.system.remote_fleet.remote_fleet_of`), for one test module."""
    with remote_fleet_of(testbed) as made:
        yield made


@pytest.fixture
def fresh_fleet_config(fleet: RemoteFleet) -> None:
    """The fleet's own config, written afresh (what a test changed in it is gone)."""
    fleet.write_config()


@pytest.fixture
def remote_root(slurm_testbed: SshTestbed) -> Iterator[str]:
    """A fresh directory on the Slurm host (``vq-local``), removed after the test: the
    packing profile's root in the lane tests (their module imports ``slurm_testbed``)."""
    yield from fresh_remote_dir(slurm_testbed)
