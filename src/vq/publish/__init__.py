"""Atomic, durable, no-replace publication of files and directories.

* :func:`publish` — build a directory in a hidden stage, commit it at an absent destination.
* :func:`publish_file` — the same for one regular file.
* :class:`Workspace` — private resumable work (checkpoints) ending in one publication;
  :meth:`Workspace.child` for concurrent child results beneath one future destination.
* :class:`Draft` — what a builder fills; :meth:`Draft.link` hard-links a finished file in.
* :func:`copy_tree` — copy a directory into a draft (what ``vq publish --from`` does).
* :class:`Publication` — the committed path and ``cleanup_pending`` (residue to remove by
  hand, never a failed publication).

See docs/packing.md ("Publication") for the guarantees and their limits.
"""

from vq.publish.core import Draft, Publication, copy_tree, publish, publish_file
from vq.publish.workspace import Workspace

__all__ = ["Draft", "Publication", "Workspace", "copy_tree", "publish", "publish_file"]
