"""Resolving a lane's registered program on the cluster (the target program registry,
§3.4): one bounded SSH call to the lane's login host reports the checkout's commit and
the runtime's version; :func:`parse_probe` (pure) turns the answer into a
:class:`ProbedRuntime` or a :class:`TargetUnavailable` naming what is missing.

The remote script takes ``python``, ``git_dir`` and ``import_check`` as positional
arguments (never spliced into the script) and prints ``key=value`` lines:

* ``python=missing`` (not an executable file), ``git_dir=missing`` (not a directory);
* ``git_sha=<40 or 64 hex>`` or ``git_sha=unreadable``;
* ``version=<text>`` (the module's ``__version__`` with ``import_check``, else the
  interpreter's ``python X.Y.Z``) or ``version=unreadable``.

The call is bounded in time (a multiple of the lane's ``ssh_timeout``) and output
(:data:`PROBE_MAX_OUTPUT`); a transport failure is a :class:`TargetUnavailable` too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vq.config.hosts import LaneProgramSettings, LaneSettings
from vq.errors import TransportError, VqError
from vq.transport.runner import Runner

__all__ = [
    "PROBE_MAX_OUTPUT",
    "PROBE_SCRIPT",
    "ProbedRuntime",
    "TargetUnavailable",
    "parse_probe",
    "probe_lane_program",
    "ssh_runner_for",
]

PROBE_MAX_OUTPUT = 8192
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_VERSION = re.compile(r"[\x20-\x7e]{1,128}")
_VERSION_CODE = (
    "import sys\n"
    "name = sys.argv[1]\n"
    "if name:\n"
    "    import importlib\n"
    '    print(getattr(importlib.import_module(name), "__version__", "") or "unknown")\n'
    "else:\n"
    '    print("python %d.%d.%d" % sys.version_info[:3])\n'
)
#: ``sh -c PROBE_SCRIPT sh PYTHON GIT_DIR MODULE`` (see the module docstring).
PROBE_SCRIPT = f"""py=$1 dir=$2 mod=$3
[ -f "$py" ] && [ -x "$py" ] || {{ echo python=missing; exit 0; }}
[ -d "$dir" ] || {{ echo git_dir=missing; exit 0; }}
sha=$(git -c safe.directory="$dir" -C "$dir" rev-parse --verify 'HEAD^{{commit}}' \\
\t2>/dev/null </dev/null) || sha=unreadable
echo "git_sha=$sha"
version=$(cd / && "$py" -c '{_VERSION_CODE}' "$mod" 2>/dev/null </dev/null | head -n 1) \\
\t&& [ -n "$version" ] || version=unreadable
echo "version=$version"
"""


@dataclass(frozen=True)
class ProbedRuntime:
    """What the lane reported of a registered program's runtime."""

    git_sha: str
    version: str


class TargetUnavailable(Exception):
    """The program's identity cannot be resolved on the lane; the message says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_probe(program: LaneProgramSettings, rc: int, stdout: bytes) -> ProbedRuntime:
    """The probe's answer as a :class:`ProbedRuntime` (pure); :class:`TargetUnavailable`
    when it says something is missing or unreadable, or is not a probe's answer."""
    fields: dict[str, str] = {}
    for line in stdout.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("python", "git_dir", "git_sha", "version"):
            fields.setdefault(key, value.strip())
    if fields.get("python") == "missing":
        raise TargetUnavailable(f"its python {program.python} is not an executable file there")
    if fields.get("git_dir") == "missing":
        raise TargetUnavailable(f"its checkout {program.git_dir} is not a directory there")
    if rc != 0 or "git_sha" not in fields or "version" not in fields:
        raise TargetUnavailable(f"the runtime probe gave no answer (exit code {rc})")
    sha = fields["git_sha"].lower()
    if not _SHA.fullmatch(sha):
        raise TargetUnavailable(f"the commit of {program.git_dir} cannot be read there")
    version = fields["version"]
    if version == "unreadable" or not _VERSION.fullmatch(version):
        what = f"module {program.import_check}" if program.import_check else program.python
        raise TargetUnavailable(f"the version of {what} cannot be read there")
    return ProbedRuntime(git_sha=sha, version=version)


def ssh_runner_for(lane: LaneSettings) -> Runner:
    """The lane's own SSH runner (its destination, options and host-key policy)."""
    from vq.transport.ssh import SshRunner

    return SshRunner(lane.ssh, ssh_options=lane.ssh_options, host_key_policy=lane.host_key_policy)


def probe_lane_program(
    runner: Runner, lane: LaneSettings, program: LaneProgramSettings
) -> ProbedRuntime:
    """Resolve ``program`` on ``lane`` with one bounded call through ``runner``."""
    argv = ["sh", "-c", PROBE_SCRIPT, "sh", program.python, program.git_dir]
    argv.append(program.import_check or "")
    try:
        done = runner.run(
            argv, deadline_s=min(lane.ssh_timeout * 3, 90.0), max_output_bytes=PROBE_MAX_OUTPUT
        )
    except TransportError as exc:
        raise TargetUnavailable(f"lane {lane.name} could not be reached: {exc.message}") from None
    except VqError as exc:  # the answer was too large
        raise TargetUnavailable(f"the runtime probe failed: {exc.message}") from None
    return parse_probe(program, done.rc, done.stdout)
