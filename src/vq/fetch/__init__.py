"""``vq fetch``: copying a job's workspace, workdir or one artifact out of a queue (§4.6).

- :mod:`vq.fetch.local`: the tree copy out of this queue's state root (disk only);
- :mod:`vq.fetch.snapshot`: what surrounds a copy (sidecars, the fetch manifest, earlier
  fetches, publishing into DEST);
- :mod:`vq.fetch.records`: records of fetches in progress, so a killed one is found;
- :mod:`vq.fetch.stream`: the owning side of ``vq fetch HOST ID`` (a snapshot as a tar
  stream);
- :mod:`vq.fetch.remote`: the client side of ``vq fetch HOST ID`` (a remote snapshot,
  extracted here).

A use case beside :mod:`vq.services` (it builds on :class:`~vq.services.context.ServiceContext`),
above :mod:`vq.remote` and the store.
"""
