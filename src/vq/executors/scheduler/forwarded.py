"""The variables a lane job's batch script exports: the ones its submit named.

A submit to a scheduler lane captures only what ``--export NAME``/``--env`` (or the
API's ``env``) name, stored like any capture in the job's ``_vq/environment``
(:mod:`vq.store.environment`). That file never travels to the cluster; its variables
are exported by the batch script instead (``ScriptRequest.user_environment``, quoted),
after vq's own tools are checked and before the prologues. Values are secrets as far as
vq knows: no message here carries one.
"""

from __future__ import annotations

import json

from vq._safe_open import read_regular_beneath
from vq.domain.environment import BASE_DAEMON, MAX_BYTES, BadEnvironment, CapturedEnvironment
from vq.paths import StatePaths

__all__ = ["UnreadableEnvironment", "forwarded_variables"]

#: The largest file read: the capture's own limit, with room for JSON's escapes.
_READ_LIMIT = 8 * MAX_BYTES


class UnreadableEnvironment(Exception):
    """The job's ``_vq/environment`` exists but cannot be used (the message says why,
    never with a value): the job must not run without what it asked for."""


def forwarded_variables(paths: StatePaths, job_id: str) -> dict[str, str]:
    """The variables ``job_id``'s submit named ({} when it named none)."""
    try:
        data = read_regular_beneath(paths.tree_of(job_id), paths.environment(job_id), _READ_LIMIT)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UnreadableEnvironment(
            f"its captured environment cannot be read: {exc.strerror or exc}"
        ) from None
    try:
        captured = CapturedEnvironment.from_json(json.loads(data))
    except BadEnvironment as exc:
        raise UnreadableEnvironment(f"its captured environment is unusable: {exc}") from None
    except ValueError:  # not UTF-8 or not JSON
        raise UnreadableEnvironment("its captured environment is not JSON") from None
    if captured.base != BASE_DAEMON:
        # A whole shell (``--export ALL``), as lane submits captured before they
        # defaulted to NONE: another host's paths differ, so none of it is forwarded.
        return {}
    return dict(captured.variables)
