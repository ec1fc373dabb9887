"""What this queue knows about its configured hosts, below the services and executors.

:mod:`vq.hosts.health` is each host's last observed state (``ok``, ``slow``,
``unreachable``, ``invalid``, ``down``): written by every caller that talks to a host
(the lanes in :mod:`vq.executors`, :mod:`vq.remote`, the CLI's ``vq hosts``), read by the
views. The hosts' settings are a configuration table, :mod:`vq.config.hosts`; reaching a
host is :mod:`vq.remote` over :mod:`vq.transport`. This package imports neither: it
needs only the state layout (:mod:`vq.paths`).
"""
