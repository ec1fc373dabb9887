"""Job executors: the local fork-server launcher, its collector, and process helpers."""
