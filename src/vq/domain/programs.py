"""Program registry decisions without I/O (§3.4): pins, dispatch checks, job environment.

A probe (:mod:`vq.services.programs`, the only place that runs ``git`` or an interpreter)
observes a registered program and reports a :class:`ProgramStatus`. This module compares
such an observation with what the configuration pinned (at submit) or with what the
submitted JobSpec recorded (at dispatch), and turns it into the payload's ``VQ_PROGRAM_*``
variables. Contract:

* a ``venv`` program whose Git SHA cannot be read is never available: absence of an
  identity must not masquerade as provenance;
* ``expected_git_sha`` matches a full SHA by prefix (an abbreviated pin is allowed),
  case-insensitively; ``expected_import_version`` must equal the module's ``__version__``;
* at dispatch only *enforced* pins refuse a job (``enforce_git_sha`` against the SHA seen
  at submit, ``expected_import_version``); an observational SHA lets a queued job cross a
  runtime rollout, and the SHA that will actually run is exported as ``VQ_PROGRAM_GIT_SHA``.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace
from typing import TypedDict

from vq.domain.spec import ProgramRuntimePin

__all__ = [
    "PROGRAM_VARIABLES",
    "ProgramStatus",
    "dispatch_refusal",
    "pin_mismatches",
    "program_environment",
    "resolved_pin",
    "runtime_pin",
    "sha_matches",
    "with_pins",
]

#: Every variable :func:`program_environment` may set (cleared from inherited envs first).
PROGRAM_VARIABLES = (
    "VQ_PROGRAM",
    "VQ_PROGRAM_EXE",
    "VQ_PROGRAM_BIN",
    "VQ_PROGRAM_PYTHON",
    "VQ_PROGRAM_GIT_DIR",
    "VQ_PROGRAM_BRANCH",
    "VQ_PROGRAM_GIT_SHA",
)


class ProgramStatusJSON(TypedDict):
    """A :class:`ProgramStatus` in ``vq programs --json``."""

    name: str
    kind: str
    available: bool
    reason: str | None
    executable: str | None
    python: str | None
    git_dir: str | None
    branch: str | None
    git_sha: str | None
    import_version: str | None


@dataclass(frozen=True)
class ProgramStatus:
    """What one probe of ``[programs.NAME]`` observed; ``reason`` says why it is unavailable."""

    name: str
    kind: str
    available: bool
    reason: str | None = None
    executable: str | None = None
    python: str | None = None
    git_dir: str | None = None
    branch: str | None = None
    git_sha: str | None = None
    import_version: str | None = None

    def as_dict(self) -> ProgramStatusJSON:
        return {
            "name": self.name,
            "kind": self.kind,
            "available": self.available,
            "reason": self.reason,
            "executable": self.executable,
            "python": self.python,
            "git_dir": self.git_dir,
            "branch": self.branch,
            "git_sha": self.git_sha,
            "import_version": self.import_version,
        }


def sha_matches(expected: str, actual: str | None) -> bool:
    """A (possibly abbreviated) expected SHA against a full one; unreadable never matches."""
    return actual is not None and actual.lower().startswith(expected.strip().lower())


def pin_mismatches(
    expected_git_sha: str | None,
    expected_import_version: str | None,
    git_sha: str | None,
    import_version: str | None,
) -> list[str]:
    """One sentence per pin that does not hold, naming expected and actual."""
    problems = []
    if expected_git_sha and not sha_matches(expected_git_sha, git_sha):
        problems.append(
            f"git SHA is {git_sha or 'unreadable'}, expected_git_sha is {expected_git_sha}"
        )
    if expected_import_version is not None and import_version != expected_import_version:
        problems.append(
            f"import version is {import_version or 'unknown'}, "
            f"expected_import_version is {expected_import_version}"
        )
    return problems


def with_pins(
    status: ProgramStatus, expected_git_sha: str | None, expected_import_version: str | None
) -> ProgramStatus:
    """``status`` judged against the configured pins (``vq programs``, ``vq doctor``)."""
    if not status.available:
        return status
    problems = pin_mismatches(
        expected_git_sha, expected_import_version, status.git_sha, status.import_version
    )
    if not problems:
        return status
    return replace(status, available=False, reason="pin mismatch: " + "; ".join(problems))


def runtime_pin(
    status: ProgramStatus, expected_git_sha: str | None, expected_import_version: str | None
) -> ProgramRuntimePin:
    """The submit-time snapshot stored as ``JobSpec.program_runtime_pin``."""
    return ProgramRuntimePin(
        program=status.name,
        kind=status.kind,
        executable=status.executable,
        python=status.python,
        git_dir=status.git_dir,
        branch=status.branch,
        git_sha=status.git_sha,
        enforce_git_sha=bool(expected_git_sha),
        expected_import_version=expected_import_version,
        import_version=status.import_version,
    )


def resolved_pin(status: ProgramStatus, pin: ProgramRuntimePin | None) -> ProgramRuntimePin:
    """``pin`` completed at dispatch with the SHA that will actually run."""
    resolved = pin.model_copy() if pin is not None else ProgramRuntimePin(program=status.name)
    resolved.kind = resolved.kind or status.kind
    resolved.resolved_git_sha = status.git_sha
    return resolved


def dispatch_refusal(
    name: str, pin: ProgramRuntimePin | None, status: ProgramStatus | None
) -> str | None:
    """Why a job naming program ``name`` must not launch now (a dispatch failure), or None.

    ``status`` is the dispatch-time observation *without* configured pins (None: the
    name is no longer registered); ``pin`` is the snapshot taken at submit.
    """
    if status is None:
        return f"program {name!r} is no longer registered ([programs.{name}] is gone)"
    if not status.available:
        return f"program {name!r} is unavailable at dispatch: {status.reason}"
    if status.kind == "venv" and status.git_sha is None:  # never launch without identity
        return f"program {name!r} is unavailable at dispatch: its git SHA cannot be read"
    if pin is None:
        return None
    if pin.enforce_git_sha and pin.git_sha and status.git_sha != pin.git_sha:
        return (
            f"program {name!r} runtime pin no longer holds: git SHA is {status.git_sha}, "
            f"the job was submitted pinned to {pin.git_sha}"
        )
    if (
        pin.expected_import_version is not None
        and status.import_version != pin.expected_import_version
    ):
        return (
            f"program {name!r} runtime pin no longer holds: import version is "
            f"{status.import_version or 'unknown'}, expected {pin.expected_import_version}"
        )
    return None


def program_environment(name: str, status: ProgramStatus | None) -> dict[str, str]:
    """The ``VQ_PROGRAM*`` variables of a job naming ``name`` (from the dispatch probe)."""
    env = {"VQ_PROGRAM": name}
    if status is None:
        return env
    if status.kind == "binary" and status.executable:
        env["VQ_PROGRAM_EXE"] = status.executable
    elif status.kind == "venv" and status.python:
        env["VQ_PROGRAM_BIN"] = posixpath.dirname(status.python)
        env["VQ_PROGRAM_PYTHON"] = status.python
        if status.git_dir:
            env["VQ_PROGRAM_GIT_DIR"] = status.git_dir
        if status.branch:
            env["VQ_PROGRAM_BRANCH"] = status.branch
        if status.git_sha:
            env["VQ_PROGRAM_GIT_SHA"] = status.git_sha
    elif status.kind == "import" and status.python:
        env["VQ_PROGRAM_PYTHON"] = status.python
    return env
