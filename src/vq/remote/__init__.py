"""Remote vq daemons over SSH (§2.2): delegation, discovery, fan-out and host health.

A configured ``[hosts.NAME]`` runs its own daemon, which owns its jobs' workspaces, specs
and events; this package only carries verbs there over :mod:`vq.transport` and brings
back what was asked for. It is not an executor, and nothing in ``vq.domain`` imports it.
"""
