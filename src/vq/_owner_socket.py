"""A user's submit socket in multi-user mode: where it is and what it serves (stdlib only).

The root daemon listens on ``<system-root>/users/<uid>/submit.sock`` for each owner tree,
``<uid>:<primary gid>`` mode 0600, so only that user (and root) can connect; it also
refuses a peer whose uid is not the tree's. ``vq submit`` as that user hands a plain job
to it, and the daemon, already warm, writes the spec into the user's tree *as the user*
(:mod:`vq.daemon.owner_submit`): the same job the CLI would have written itself, without
the interpreter start-up of the validation and storage layers.

The same socket answers ``hold``: why the daemon holds one of the user's jobs (another
owner's copy of its id, a quarantine), which the user's ``vq status`` shows
(:func:`vq.client.owner_hold`).

A submit that needs anything from the user's own files or configuration (a SOURCE to
copy, a personal profile, program, lane or pack, a runtime generation, an idempotency
record) is never sent: :func:`served` says no, and the CLI writes the spec itself as
before. The daemon applies the same rule and refuses such a request.
"""

from __future__ import annotations

import os

from vq.config.roots import config_root

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["NOT_SERVED", "SOCKET_NAME", "personal_config", "served", "submit_socket"]

SOCKET_NAME = "submit.sock"

#: Submit params whose meaning comes from the submitter's files or personal configuration.
NOT_SERVED = frozenset(
    {
        "source",
        "source_label",
        "profile",
        "program",
        "expected_sha",
        "scheduler_target",
        "scheduler_pack",
        "runtime_root",
        "runtime_artifact",
        "idempotency_key",
        "submitter",
    }
)


def submit_socket(system_root: str, uid: int) -> str:
    """``<system-root>/users/<uid>/submit.sock``."""
    return os.path.join(system_root, "users", str(uid), SOCKET_NAME)


def personal_config(env: Mapping[str, str]) -> str | None:
    """The personal config file a user's CLI layers over the system config, if any: none
    when ``VQ_CONFIG_DIR`` names the system config's directory."""
    if env.get("VQ_CONFIG_DIR"):
        return None
    return os.path.join(config_root(env), "config.toml")


def served(params: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    """Whether a submit with ``params`` may go to the user's submit socket: it names
    nothing of :data:`NOT_SERVED` and the user has no personal config file (its
    ``[profile]``, ``[submit]`` or ``[daemon]`` settings are the CLI's to apply)."""
    if any(params.get(key) is not None for key in NOT_SERVED):
        return False
    personal = personal_config(env)
    return personal is None or not os.path.lexists(personal)
