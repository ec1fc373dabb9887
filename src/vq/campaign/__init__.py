"""Campaigns: small pinned DAGs of ordinary vq jobs with verified artifacts (pure layer).

This package does no I/O: it parses and checks ``vq.campaign/1`` files, compares artifact
manifests with observed trees, checks ``vq.campaign-journal/1`` journals and plans the
next step of every node. Hashing files, reading the run directory and talking to queues
live in ``vq.services.campaign_*``.
"""
