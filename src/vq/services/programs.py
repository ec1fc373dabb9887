"""Probing the program registry (§3.4) and the submit-time program gate.

Contract:

* every external command (``git``, an interpreter) runs through a
  :class:`~vq.transport.runner.Runner` (``LocalRunner``) with a :data:`PROBE_TIMEOUT`
  deadline; a probe never raises, it reports an unavailable
  :class:`~vq.domain.programs.ProgramStatus`;
* ``binary``: the path (absolute, or a bare name looked up on ``PATH`` now) exists, is a
  regular file and is executable. ``import``: ``module`` imports under ``python`` and has
  every listed symbol. ``venv``: ``python`` runs, ``import_check`` (if any) imports and
  its ``__version__`` is reported, and ``git -C git_dir rev-parse HEAD`` gives the SHA of
  the checkout whose top is ``git_dir`` — a venv whose SHA cannot be read is unavailable;
* :func:`probe` judges configured pins unless ``pins=False`` (dispatch compares against
  the submitted snapshot instead, see :func:`vq.domain.programs.dispatch_refusal`);
* :func:`submit_pin` is the submit gate: an unregistered name is NotFound (listing the
  registered ones); a ``venv`` must be available and match its configured pins
  (InvalidInput naming expected vs actual). ``binary``/``import`` availability is not a
  submit gate; dispatch re-checks every kind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from typing import Any

from vq.config.programs import BinaryProgram, ImportProgram, ProgramSettings, VenvProgram
from vq.domain.programs import (
    ProgramStatus,
    pin_mismatches,
    runtime_pin,
    sha_matches,
    with_pins,
)
from vq.domain.spec import ProgramRuntimePin
from vq.errors import InvalidInput, NotFound, TransportError
from vq.transport.local import LocalRunner
from vq.transport.runner import Runner

__all__ = ["PROBE_TIMEOUT", "probe", "probe_all", "submit_pin"]

#: Deadline of each subprocess a probe runs (git, the interpreter).
PROBE_TIMEOUT = 5.0

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

# Run by the program's interpreter: import the module, report version and missing symbols.
# The answer is the last stdout line, so an import that prints does not confuse it.
_IMPORT_SCRIPT = """\
import importlib, json, sys
out = {"python_version": sys.version.split()[0]}
if len(sys.argv) > 1:
    try:
        module = importlib.import_module(sys.argv[1])
    except BaseException as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    else:
        version = getattr(module, "__version__", None)
        out["import_version"] = None if version is None else str(version)
        out["missing"] = [name for name in sys.argv[2:] if not hasattr(module, name)]
print()
print(json.dumps(out))
"""


def _resolve(command: str) -> tuple[str | None, str | None]:
    """(usable path, None) or (the path if known, why it is unusable)."""
    path = command if "/" in command else shutil.which(command)
    if path is None:
        return None, f"{command!r} is not found on PATH"
    if not os.path.exists(path):
        return path, f"{path} does not exist"
    if not os.path.isfile(path):
        return path, f"{path} is not a regular file"
    if not os.access(path, os.X_OK):
        return path, f"{path} is not executable"
    return path, None


def _interpreter(
    runner: Runner, python: str, module: str | None, symbols: list[str]
) -> tuple[dict[str, Any] | None, str | None]:
    """The import script's answer, or None and why the interpreter could not answer."""
    argv = [python, "-c", _IMPORT_SCRIPT] + ([module, *symbols] if module else [])
    try:
        result = runner.run(argv, deadline_s=PROBE_TIMEOUT)
    except TransportError as exc:
        return None, f"{python} does not run: {exc.message}"
    if not result.ok:
        return None, f"{python} does not run: {result.first_line()}"
    try:
        answer = json.loads(result.stdout.decode(errors="replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, f"{python} gave no answer to the import probe"
    if not isinstance(answer, dict):
        return None, f"{python} gave no answer to the import probe"
    if "error" in answer:
        return answer, f"import {module} failed: {answer['error']}"
    missing = answer.get("missing") or []
    if missing:
        return answer, f"{module} lacks {', '.join(map(str, missing))}"
    return answer, None


def _git_sha(runner: Runner, git_dir: str) -> tuple[str | None, str | None]:
    """HEAD of the checkout *at* ``git_dir`` (never of a repository that encloses it)."""
    argv = ["git", "-C", git_dir, "rev-parse", "--show-toplevel", "HEAD"]
    try:
        result = runner.run(argv, deadline_s=PROBE_TIMEOUT)
    except TransportError as exc:
        return None, f"git SHA of {git_dir} cannot be read: {exc.message}"
    lines = result.stdout.decode(errors="replace").strip().splitlines()
    if not result.ok or len(lines) != 2 or not _SHA.fullmatch(lines[1].strip().lower()):
        why = result.first_line() if not result.ok else "unexpected git output"
        return None, f"git SHA of {git_dir} cannot be read: {why}"
    if os.path.realpath(lines[0].strip()) != os.path.realpath(git_dir):
        return None, f"git SHA of {git_dir} cannot be read: it is inside {lines[0].strip()}"
    return lines[1].strip().lower(), None


def _binary(name: str, settings: BinaryProgram) -> ProgramStatus:
    path, why = _resolve(settings.path)
    return ProgramStatus(name, "binary", why is None, why, executable=path)


def _import(name: str, settings: ImportProgram, runner: Runner) -> ProgramStatus:
    python, why = _resolve(settings.python)
    answer = None
    if why is None and python is not None:
        answer, why = _interpreter(runner, python, settings.module, settings.symbols)
    version = answer.get("import_version") if answer else None
    return ProgramStatus(name, "import", why is None, why, python=python, import_version=version)


def _venv(name: str, settings: VenvProgram, runner: Runner) -> ProgramStatus:
    problems: list[str] = []
    python, why = _resolve(settings.python)
    answer = None
    if why is None and python is not None:
        answer, why = _interpreter(runner, python, settings.import_check, [])
    if why is not None:
        problems.append(why)
    sha, sha_why = _git_sha(runner, settings.git_dir)
    if sha_why is not None:
        problems.append(sha_why)
    return ProgramStatus(
        name,
        "venv",
        not problems,
        "; ".join(problems) or None,
        python=python,
        git_dir=settings.git_dir,
        branch=settings.branch,
        git_sha=sha,
        import_version=answer.get("import_version") if answer else None,
    )


def probe(
    name: str, settings: ProgramSettings, runner: Runner, *, pins: bool = True
) -> ProgramStatus:
    """Observe one registered program (bounded; never raises)."""
    if isinstance(settings, BinaryProgram):
        return _binary(name, settings)
    if isinstance(settings, ImportProgram):
        return _import(name, settings, runner)
    status = _venv(name, settings, runner)
    if not pins:
        return status
    return with_pins(status, settings.expected_git_sha, settings.expected_import_version)


def probe_all(
    programs: Mapping[str, ProgramSettings], runner: Runner | None = None
) -> list[ProgramStatus]:
    """Every registered program in name order, judged against its configured pins."""
    runner = runner or LocalRunner()
    return [probe(name, programs[name], runner) for name in sorted(programs)]


def submit_pin(
    programs: Mapping[str, ProgramSettings],
    name: str,
    runner: Runner | None = None,
    expected_sha: str | None = None,
) -> ProgramRuntimePin:
    """The runtime snapshot for ``vq submit --program NAME``, or the refusal (§4.1 item 1).

    ``expected_sha`` (``--expected-sha``) is an explicit git pin beside the configured
    ones: only a venv program takes it, it must match the checkout now, and the snapshot
    then enforces the SHA at dispatch like a configured ``expected_git_sha``.
    """
    settings = programs.get(name)
    if settings is None:
        known = ", ".join(sorted(programs)) or "none are configured"
        raise NotFound(
            f"unknown program {name!r}",
            hint=f"`vq programs` lists the registered programs ({known})",
        )
    if expected_sha is not None and not isinstance(settings, VenvProgram):
        raise InvalidInput(
            f"--expected-sha applies to venv programs only; {name!r} is {settings.kind!r}",
            hint='drop --expected-sha, or name a [programs.NAME] with kind = "venv"',
        )
    runner = runner or LocalRunner()
    if isinstance(settings, ImportProgram):  # not a submit gate: no interpreter run here
        python, _ = _resolve(settings.python)
        return runtime_pin(ProgramStatus(name, "import", True, python=python), None, None)
    status = probe(name, settings, runner, pins=False)
    if not isinstance(settings, VenvProgram):
        return runtime_pin(status, None, None)
    if not status.available:
        raise InvalidInput(
            f"program {name!r} is unavailable: {status.reason}",
            hint="`vq programs` shows every registered program and why it is unavailable",
        )
    problems = pin_mismatches(
        settings.expected_git_sha,
        settings.expected_import_version,
        status.git_sha,
        status.import_version,
    )
    if expected_sha is not None and not sha_matches(expected_sha, status.git_sha):
        problems.append(f"git SHA is {status.git_sha}, --expected-sha is {expected_sha}")
    if problems:
        raise InvalidInput(
            f"program {name!r} does not match its pins: " + "; ".join(problems),
            hint=f"update the checkout, or the pins in [programs.{name}] or --expected-sha",
        )
    return runtime_pin(
        status, expected_sha or settings.expected_git_sha, settings.expected_import_version
    )
