"""The read verbs' CLI modules load without pydantic (the gateway's import-cost contract).

``vq list --json`` with a daemon up decodes the daemon's answer and prints it: nothing
on that path validates a model, and pydantic (with the configuration models built on
it) costs about 100 ms of interpreter start-up on this machine kind. ``vq.gateway``
promises "only the stdlib client, errors and paths at import time"; a top-level import
of a pydantic model anywhere under these modules breaks that promise and this test.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pydantic", "pydantic_core", "vq.config.settings", "vq.config.hosts", "vq.domain.spec")


@pytest.mark.parametrize("module", ["vq.gateway", "vq.cli.common", "vq.cli.inspect"])
def test_read_verb_modules_do_not_import_pydantic(module: str) -> None:
    probe = (
        f"import sys, {module}\n"
        f"print(' '.join(name for name in {HEAVY!r} if name in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.strip() == "", f"importing {module} loaded: {proc.stdout.strip()}"


#: The modules a well-formed ``vq submit`` loads (``vq.cli.submit_fast`` and its config
#: readers): the stdlib's ``typing`` alone costs ~2 ms of the ~10 ms the path spends in
#: Python, so they name types under ``TYPE_CHECKING = False`` only.
FAST_SUBMIT = (
    "vq.cli.main",
    "vq.cli.submit_fast",
    "vq.cli.submit_env",
    "vq.cli.fast_daemon",
    "vq.config.raw",
    "vq.config.roots",
    "vq.config.multi_user_root",
)


@pytest.mark.parametrize("module", FAST_SUBMIT)
def test_the_fast_submit_path_does_not_import_typing(module: str) -> None:
    probe = f"import sys, {module}\nprint('typing' in sys.modules)\n"
    proc = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.strip() == "False", f"importing {module} loaded typing"
