"""Campaigns: small pinned DAGs of ordinary vq jobs with verified artifacts.

The whole feature, from its pure core up to its use cases. The package is a client of
the queue: it sits above :mod:`vq.gateway` (like the CLI, it reaches the queue through
the gateway, the daemon or the disk) and below :mod:`vq.cli` and :mod:`vq.web`.

Pure core (no I/O; named in the "Pure layers" import contract): :mod:`~vq.campaign.model`
(``vq.campaign/1`` files), :mod:`~vq.campaign.checks`, :mod:`~vq.campaign.problems`,
:mod:`~vq.campaign.journal` (``vq.campaign-journal/1``), :mod:`~vq.campaign.planner` (the
next step of every node), :mod:`~vq.campaign.layout` and :mod:`~vq.campaign.cleanup_rules`.
Artifact manifests and canonical JSON are shared with runtime generations and live in
:mod:`vq.domain.artifact` and :mod:`vq.domain.canonical`.

Use cases: :mod:`~vq.campaign.controller` (one pass of the run loop),
:mod:`~vq.campaign.run` and :mod:`~vq.campaign.rundir` (the run directory and its lock),
:mod:`~vq.campaign.stage`, :mod:`~vq.campaign.files`, :mod:`~vq.campaign.publish` and
:mod:`~vq.campaign.published` (artifacts), :mod:`~vq.campaign.hosts` and
:mod:`~vq.campaign.remote` (the queues a node runs on), :mod:`~vq.campaign.retry`,
:mod:`~vq.campaign.cleanup`, :mod:`~vq.campaign.view` (what the console shows).
"""
