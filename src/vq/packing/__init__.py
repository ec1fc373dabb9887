"""Packed Slurm sweeps (pure): profiles, rosters, the planner and the batch script.

Nothing here does I/O. The state files live in :mod:`vq.services.pack`; the CLI is
``vq pack`` (:mod:`vq.cli.pack`). See docs/packing.md.
"""
