"""Packing's use cases (the layer of the services): they read and write ``pack.json`` and
the plans under the state root, and reach a lane's login host through a runner.

* :mod:`.rosters` — open, seal and show rosters; ``pack.json`` read and updated under its lock.
* :mod:`.plans` — plan a pack and record the plan.
* :mod:`.remote` — the login host of a pack's target and its bounded Slurm commands.
* :mod:`.submit` — validate and submit a plan (intent before ``sbatch``).
* :mod:`.inspection` and :mod:`.resolve` — observe, reconcile, resolve, logs, record.
* :mod:`.array_submit` — ``vq submit LANE --array … --pack NAME``: the configuration check.

The rules they apply are packing's pure core (the other modules of :mod:`vq.packing`),
which never imports them.
"""
