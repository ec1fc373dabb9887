"""The Hypothesis profiles of the suite: reproducible in ``make test``, exploring in ``make soak``.

``vq-test`` (loaded by default, see :func:`load`): every property test draws the same
examples on every run (``derandomize``: the seed is a hash of the test function), with no
example database and no deadline, so whether a tree lands never depends on which examples
were drawn or how loaded the machine was. A failure prints the example and its
``@reproduce_failure`` blob.

``vq-soak`` (``make soak`` passes ``--hypothesis-profile=vq-soak`` and a
``--hypothesis-seed`` it prints): fresh examples on every run, the open-ended exploration;
a failure it finds is kept in the example database (``.hypothesis/``), replayed first by
the next run, and should become an ``@example`` of its test.

``VQ_HYPOTHESIS_PROFILE`` picks another default profile (``--hypothesis-profile`` still
wins over it).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["SOAK", "TEST", "load"]

TEST = "vq-test"
SOAK = "vq-soak"

settings.register_profile(
    TEST,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(SOAK, deadline=None, print_blob=True)


def load() -> None:
    """Make ``VQ_HYPOTHESIS_PROFILE`` (default ``vq-test``) the default settings."""
    settings.load_profile(os.environ.get("VQ_HYPOTHESIS_PROFILE") or TEST)
