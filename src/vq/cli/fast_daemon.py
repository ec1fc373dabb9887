"""When a Click-free fast path may ask the local daemon: the rule both share.

The fast paths (:mod:`vq.cli.status_fast`, :mod:`vq.cli.list_fast`) answer only where
the Click command would ask this queue's own daemon and print its answer unchanged.
"""

from __future__ import annotations

import os

from vq.config import multi_user_root, roots

__all__ = ["local_daemon_socket"]


def local_daemon_socket() -> str | None:
    """The local daemon's socket path, or None when the Click command must decide:
    multi-user mode (or a policy file it cannot read: the layout decides which daemon
    answers), configured ``[hosts.NAME]`` (the job may live on another host), or no
    socket at all."""
    try:
        if multi_user_root.multi_user_root(os.environ) is not None:
            return None
    except multi_user_root.UnreadablePolicy:
        return None
    socket_path = roots.daemon_socket(os.environ)
    if not os.path.exists(socket_path):
        return None
    from vq.config.host_names import configured_names
    from vq.errors import VqError

    try:
        if configured_names():
            return None
    except (VqError, OSError, ValueError):
        return None
    return socket_path
