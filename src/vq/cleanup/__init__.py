"""``vq cleanup``: archiving or sweeping old terminal jobs, and finishing what a killed
cleanup or fetch left half done (§2.4, §5.3).

- :mod:`vq.cleanup.jobs`: the plan and the archive or sweep of each candidate;
- :mod:`vq.cleanup.files`: the file work (no-follow deletion, writing an archive);
- :mod:`vq.cleanup.recovery`: the repair of an interrupted archive or fetch (the daemon's
  start, ``vq doctor``, ``vq cleanup``).

A use case beside :mod:`vq.services` and :mod:`vq.fetch`, above the executors and the store.
"""
